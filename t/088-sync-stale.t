# Staleness you can see (issue 28, docs/sync.md): flags_status's
# "sync"."staleSeconds" and the metric flags_sync_stale_seconds, with the
# guide's FlagsFleetStale alert fired by a real Prometheus.  One nginx (two
# workers, interval=1s) and a real redis-server:
#  - nginx starts before Redis: staleSeconds is null (no round yet) while
#    the metric counts from the start, small at first, growing;
#  - Redis started: connected, staleSeconds stays within an interval;
#  - Redis killed (by PID): staleSeconds grows past 3 intervals, a second
#    a second, the metric says the same (within the two reads), and
#    Prometheus, scraping every second with the rules file whose for: 1m
#    is cut to 5 s in a copy, fires FlagsFleetStale no sooner than 3
#    intervals + 5 s after the last round and within its bound;
#  - Redis restarted: the host reconnects, staleSeconds drops back within
#    an interval and the alert ends.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP ();
use Time::HiRes qw(sleep time);

skip_without(qw(redis-server prometheus));

my $rules_src = "$FindBin::Bin/prometheus/flags-alerts.yml";
my $rport = unused_port();
my $pport = unused_port();
my $dir = prefix_dir('sync-stale');
my $pdir = prefix_dir('sync-stale-prom');
my ($redis, $prom, $master);
my $runs = 0;

END { local $?; reap($prom); redis_stop(); }

sub redis_start {
    $runs++;
    $redis = spawn("$pdir/redis-$runs.log", 'redis-server', '--port', $rport,
                   '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', $pdir);
    return wait_port($rport);
}

# a crash: SIGKILL to its PID, nothing said to the clients
sub redis_stop {
    return unless $redis;
    kill 'KILL', $redis;
    waitpid $redis, 0;
    undef $redis;
}

# ---- the rules: the tested file, its for: 1m cut to 5 s in a copy ------------

my $rules = read_file($rules_src);
my $cut = $rules =~ s/(- alert: FlagsFleetStale\n(?:[^\n]*\n)*?\s+for: )1m\n/${1}5s\n/g;
is($cut, 1, 'the copy of the rules cuts FlagsFleetStale\'s for: 1m to 5s, once');
write_file("$pdir/flags-alerts.yml", $rules);

# ---- Prometheus first, so that it sees the host from its start ---------------

write_file("$pdir/prometheus.yml", <<"_Y_");
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $pdir/flags-alerts.yml
scrape_configs:
  - job_name: nginx-flags
    metrics_path: /metrics
    static_configs:
      - targets: ['127.0.0.1:$FlagsTest::Port']
_Y_
$prom = spawn("$pdir/prometheus.log", 'prometheus', "--config.file=$pdir/prometheus.yml",
              "--storage.tsdb.path=$pdir/data", "--web.listen-address=127.0.0.1:$pport");

sub api { prometheus_api($pport, $_[0]) }

sub query {
    my ($q) = @_;
    (my $e = $q) =~ s/([^A-Za-z0-9_.~-])/sprintf '%%%02X', ord $1/ge;
    my $j = api("/api/v1/query?query=$e");
    return [] unless $j && $j->{status} eq 'success';
    return $j->{data}{result};
}

# FlagsFleetStale's alerts now: state by instance
sub stale_alerts {
    my $j = api('/api/v1/alerts') or return undef;
    my %a;
    for my $x (@{ $j->{data}{alerts} || [] }) {
        next unless $x->{labels}{alertname} eq 'FlagsFleetStale';
        $a{ $x->{labels}{instance} } = $x;
    }
    return \%a;
}

# ---- nginx, Redis not there yet -------------------------------------------------

write_file("$dir/conf/shop.json",
           '{"flags": [{"name": "calm", "enabled": true, "rolloutPercentage": 100}]}');
write_file("$dir/conf/nginx.conf", nginx_conf(workers => 2, http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_sync redis://127.0.0.1:$rport interval=1s prefix=t088: host=h0;
_H_
        location = /flags-status { flags_status; }
        location = /metrics { flags_metrics; }
_S_
# the sync begins when the workers start, before nginx_start() returns
my $t_start = time;
$master = nginx_start($dir);

sub status {
    my ($st, undef, $body) = http_request(GET => '/flags-status');
    return undef unless $st == 200;
    return JSON::PP::decode_json($body)->{sync};
}

sub metric {
    my ($name) = @_;
    my ($st, undef, $body) = http_request(GET => '/metrics');
    return undef unless $st == 200;
    my ($v) = $body =~ /^\Q$name\E (\S+)$/m;
    return $v;
}

{
    my $s = status();
    is_deeply([$s->{connected}, $s->{lastSuccess}, $s->{staleSeconds}],
              [JSON::PP::false, undef, undef],
              'before the first round: not connected, lastSuccess and staleSeconds null');
    my $m = metric('flags_sync_stale_seconds');
    like($m, qr/^\d+\.\d{3}$/, "flags_sync_stale_seconds is there before the first round ($m)");
    cmp_ok($m, '<=', time - $t_start + 0.05, '... counted from the start: the host is not stale yet');
    is(metric('flags_sync_interval_seconds'), '1.000', 'flags_sync_interval_seconds 1.000');
}
sleep 1.5;
{
    my $s = status();
    is($s->{staleSeconds}, undef, 'still no round: staleSeconds null');
    my $m = metric('flags_sync_stale_seconds');
    cmp_ok($m, '>=', 1.4, "the metric grows meanwhile ($m after 1.5 s)");
    cmp_ok($m, '<=', time - $t_start + 0.05, '... no more than the time since the start');
}

# ---- Redis there: a round every interval -------------------------------------

ok(redis_start(), 'redis-server listens');
ok(wait_for(sub { my $s = status(); $s && $s->{connected} }, 12), 'the host connects (after its backoff)');
{
    my (@stale, @raw);
    for (1 .. 15) {
        my (undef, undef, $body) = http_request(GET => '/flags-status');
        push @raw, $body =~ /"staleSeconds":([^,}]*)/ ? $1 : '?';
        push @stale, JSON::PP::decode_json($body)->{sync}{staleSeconds};
        sleep 0.2;
    }
    my ($max) = sort { $b <=> $a } @stale;
    like("@raw", qr/^\d+\.\d{3}(?: \d+\.\d{3}){14}$/,
         'staleSeconds: seconds with milliseconds, 15 reads over 3 s');
    cmp_ok($max, '<', 1.5, "connected: staleSeconds stays within an interval (max $max)");
}

# Prometheus has scraped the host connected, and never held the alert
ok(wait_for(sub {
    my $r = query('count_over_time(flags_sync_stale_seconds[1m]) >= 3');
    @$r == 1;
}, 30), 'Prometheus scrapes flags_sync_stale_seconds') or diag(read_file("$pdir/prometheus.log"));
{
    my $r = query('flags_sync_interval_seconds');
    is(@$r ? $r->[0]{value}[1] : undef, '1', 'Prometheus reads flags_sync_interval_seconds 1');
    $r = query('count_over_time(ALERTS{alertname="FlagsFleetStale"}[5m])');
    is(scalar @$r, 0, 'FlagsFleetStale was never pending nor firing (a host just started is not stale)');
}

# ---- Redis killed ---------------------------------------------------------------

my $last_ok = status()->{lastSuccess};
redis_stop();
my $t_kill = time;
ok(wait_for(sub { my $s = status(); $s && !$s->{connected} }, 5), 'Redis killed: not connected');
ok(wait_for(sub { (status()->{staleSeconds} // 0) > 3 }, 6),
   'staleSeconds grows past 3 intervals');
{
    my $s1 = status();
    sleep 1;
    my $s2 = status();
    is($s2->{lastSuccess}, $s1->{lastSuccess}, 'no round meanwhile');
    my $d = $s2->{staleSeconds} - $s1->{staleSeconds};
    ok($d >= 0.95 && $d <= 1.5, sprintf 'staleSeconds grows a second a second while Redis is away (%.3f)', $d);

    # the metric says what flags_status says, between two reads of it
    my $before = status()->{staleSeconds};
    my $m = metric('flags_sync_stale_seconds');
    my $after = status()->{staleSeconds};
    ok($m >= $before - 0.02 && $m <= $after + 0.02,
       "flags_sync_stale_seconds $m between staleSeconds $before and $after");
    like(metric('flags_sync_lag_seconds'), qr/^\d+\.\d{3}$/, 'flags_sync_lag_seconds is still there');
}

my $fired = wait_for(sub {
    my $all = stale_alerts() or return 0;
    my $x = $all->{"127.0.0.1:$FlagsTest::Port"} or return 0;
    return $x->{state} eq 'firing' ? [time, $x] : 0;
}, 25);
ok($fired, 'Prometheus fires FlagsFleetStale');
{
    my ($t, $x) = @{ $fired || [$t_kill + 99, {}] };
    my $took = $t - $t_kill;
    # no sooner than staleness > 3 s (the last round was at most an
    # interval before the kill) and the 5 s of the copy's for:; within
    # scrape + evaluation + for + evaluation (+ slack) of crossing it
    cmp_ok($took, '>=', 2 + 5 - 0.5, sprintf 'not before 3 intervals + for: (%.1f s after the kill)', $took);
    cmp_ok($took, '<=', FlagsTest::slow(3 + 1 + 1 + 5 + 1 + 3), '... nor much later');
    is($x->{labels}{severity}, 'ticket', 'severity ticket');
    like($x->{annotations}{summary} // '', qr/^nginx 127\.0\.0\.1:\d+ has not completed a sync round for \S/,
         'the summary names the host and the time');
    diag(sprintf 'FlagsFleetStale fired %.1f s after Redis was killed', $took);
}

# ---- Redis back -----------------------------------------------------------------

ok(redis_start(), 'redis-server restarted');
my $t_back = time;
ok(wait_for(sub { my $s = status(); $s && $s->{connected} }, 35), 'the host reconnects');
diag(sprintf 'reconnected %.1f s after Redis was back (jittered backoff)', time - $t_back);
{
    my $s = status();
    isnt($s->{lastSuccess}, $last_ok, 'a new round completed');
    my @stale;
    for (1 .. 10) {
        push @stale, status()->{staleSeconds};
        sleep 0.2;
    }
    my ($max) = sort { $b <=> $a } @stale;
    cmp_ok($max, '<', 1.5, "staleSeconds drops back within an interval (max $max)");
    my $m = metric('flags_sync_stale_seconds');
    cmp_ok($m, '<', 1.5, "so does flags_sync_stale_seconds ($m)");
}
ok(wait_for(sub { my $all = stale_alerts(); $all && !%$all }, 10), 'FlagsFleetStale ends');

# ---- the log: each loss once, at error; each return at notice -------------------

nginx_stop($master);
my $log = read_file("$dir/logs/error.log");
my @lost = $log =~ /\[error\] [^\n]*flags: sync: redis at 127\.0\.0\.1:$rport: [^;\n]+; hosts decide alone until it is back\n/g;
is(scalar @lost, 2, 'two losses (absent at start, killed), each logged once at error');
my @back = $log =~ /\[notice\] [^\n]*flags: sync: redis at 127\.0\.0\.1:$rport is back\n/g;
is(scalar @back, 2, 'two returns, logged at notice');
unlike($log, qr/\[(?:alert|crit|emerg)\]/, 'no alert, crit or emerg');

done_testing();
