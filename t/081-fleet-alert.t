# The README's FlagRolledBack alert pages for a fleet rollback (issue 15,
# item 4): three nginx hosts share a real redis-server through flags_sync;
# errors spread 2 + 2 + 2 over them roll the flag back on all three though
# no host saw enough alone; a real Prometheus scraping the three with the
# README's rules file (t/prometheus/flags-alerts.yml) and 1 s intervals
# fires FlagRolledBack once per host, labelled by="fleet", within
# scrape_interval + evaluation_interval (+ slack) of the rollback.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use JSON::PP ();
use Time::HiRes qw(sleep time);

skip_without(qw(redis-server prometheus));


my $rules = "$FindBin::Bin/prometheus/flags-alerts.yml";
my $rport = unused_port();
my $pport = unused_port();
my @port = map { unused_port() } 0 .. 2;
my @dir = map { prefix_dir("fleet-alert-$_") } 0 .. 2;
my $pdir = prefix_dir('fleet-alert-prom');
my (@pid, $redis, $prom);

END { local $?; reap($prom); reap($redis); }

$redis = spawn("$pdir/redis.log", 'redis-server', '--port', $rport, '--bind', '127.0.0.1',
               '--save', '', '--appendonly', 'no', '--dir', $pdir);
ok(wait_port($rport), 'redis-server listens');

write_file("$dir[$_]/conf/shop.json", <<'_J_') for 0 .. 2;
{"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 6, "rate": 1, "window": 60}},
  {"name": "calm", "enabled": true, "rolloutPercentage": 100}
]}
_J_

for my $i (0 .. 2) {
    local $FlagsTest::Port = $port[$i];
    write_file("$dir[$i]/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_sync redis://127.0.0.1:$rport/5 interval=200ms prefix=t081: host=h$i;
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /metrics { flags_metrics; }
_S_
    push @pid, nginx_start($dir[$i]);
}

sub req { my ($i, @args) = @_; return host_request($port[$i], @args) }

sub enabled {
    my ($i) = @_;
    my ($st, undef, $body) = req($i, GET => '/flags?userId=u1',
                                 headers => ['Authorization: Bearer tok_1']);
    return undef unless $st == 200;
    return $body =~ /"name":"risky","enabled":true/ ? 1 : 0;
}

my $targets = join ', ', map { "'127.0.0.1:$_'" } @port;
write_file("$pdir/prometheus.yml", <<"_Y_");
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $rules
scrape_configs:
  - job_name: nginx-flags
    metrics_path: /metrics
    static_configs:
      - targets: [$targets]
_Y_
$prom = spawn("$pdir/prometheus.log", 'prometheus', "--config.file=$pdir/prometheus.yml",
              "--storage.tsdb.path=$pdir/data", "--web.listen-address=127.0.0.1:$pport");

sub api { prometheus_api($pport, $_[0]) }

sub query_count {
    my ($q) = @_;
    (my $e = $q) =~ s/([^A-Za-z0-9_.~-])/sprintf '%%%02X', ord $1/ge;
    my $j = api("/api/v1/query?query=$e");
    return 0 unless $j && $j->{status} eq 'success';
    return scalar @{ $j->{data}{result} };
}

# every host's by="fleet" series scraped at 0 at least twice: the rollback
# is then an increase (the README's note on increase())
ok(wait_for(sub {
    query_count('count_over_time(flags_rollbacks_total{flag="risky",by="fleet"}[1m]) >= 2') == 3
}, 40), 'Prometheus scrapes the three hosts, by="fleet" 0 twice')
    or diag(read_file("$pdir/prometheus.log"));

# 2 + 2 + 2 errors: no host alone reaches minErrors 6
for my $i (0 .. 2) {
    for (1 .. 2) {
        my ($st) = req($i, POST => '/ingest/errors',
                       body => '{"flagName":"risky","message":"boom"}',
                       headers => ['Authorization: Bearer tok_1',
                                   'Content-Type: application/json']);
        is($st, 204, "host $i: an error report");
    }
}
ok(wait_for(sub { !grep { (enabled($_) // 1) != 0 } 0 .. 2 }, 5),
   'the fleet rolls risky back on all three hosts');
my $t_rb = time;

my %fired;
my $firing = wait_for(sub {
    my $j = api('/api/v1/alerts') or return 0;
    for my $a (@{ $j->{data}{alerts} || [] }) {
        next unless $a->{labels}{alertname} eq 'FlagRolledBack' && $a->{state} eq 'firing';
        $fired{ $a->{labels}{instance} } //= [time, $a->{labels}{by}, $a->{labels}{flag}];
    }
    return keys(%fired) == 3;
}, 30);
ok($firing, 'FlagRolledBack fires for every host') or diag(explain(\%fired));
for my $i (0 .. 2) {
    my $f = $fired{"127.0.0.1:$port[$i]"} || [0, '', ''];
    is("$f->[2] $f->[1]", 'risky fleet', "host $i: the alert names risky, decided by the fleet");
}
my ($last) = sort { $b <=> $a } map { $_->[0] } values %fired;
my $took = ($last // $t_rb + 99) - $t_rb;
# README: within scrape_interval + evaluation_interval (2 s here); the
# slack covers this machine's noise and the 0.1 s polling
my $bound = FlagsTest::slow(2 + 2);
ok($took <= $bound, sprintf 'the last host pages %.1f s after the rollback (<= %.1f s)', $took, $bound);
diag(sprintf 'FlagRolledBack: the last of three hosts fired %.2f s after the rollback', $took);

nginx_stop($_) for @pid;
done_testing();
