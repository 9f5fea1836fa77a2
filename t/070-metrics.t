# flags_metrics (docs/metrics.md): the Prometheus text format after known
# traffic, with two workers (each answers with the counts of both), HELP
# and TYPE once per family, HEAD and 405; the output passes
# `promtool check metrics`, the alert rules of the README pass
# `promtool check rules`, and a real Prometheus scrapes the module, answers
# a query with the counter's value and fires the rollback alert.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use IPC::Open3;
use JSON::PP;
use POSIX qw(WNOHANG);
use Symbol qw(gensym);
use Time::HiRes qw(sleep time);
use URI::Escape qw(uri_escape);

my $t0 = time;
my $dir = prefix_dir('metrics');
my $rules = "$FindBin::Bin/prometheus/flags-alerts.yml";

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "checkout", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 10, "window": 60}},
  {"name": "dark", "enabled": true, "rolloutPercentage": 0, "rollback": false},
  {"name": "legacy.v1", "enabled": false, "rolloutPercentage": 100}
]}
_J_
write_file("$dir/conf/blog.json",
           '{"flags": [{"name": "comments", "enabled": true, "rolloutPercentage": 33.333}]}');

write_file("$dir/conf/nginx.conf", nginx_conf(workers => 2, http => <<'_H_', server => <<'_S_'));
    flags_project shop token=tok_shop file=shop.json;
    flags_project blog token=tok_blog file=blog.json;
    flags_error_log logs/reports.log;
    flags_max_report_size 1k;
_H_
        add_header X-Worker $pid always;
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /metrics {
            flags_metrics;
            allow 127.0.0.1;
            deny all;
            gzip on;
            gzip_types text/plain;
        }
        location /flags-admin/ { flags_admin; allow 127.0.0.1; deny all; }
_S_

my $master = nginx_start($dir);
my %workers;

sub req {
    my ($method, $path, %o) = @_;
    my ($st, $h, $body) = http_request($method, $path, %o);
    $workers{$h->{'x-worker'}}++ if $h->{'x-worker'};
    return ($st, $h, $body);
}

sub evaluate {
    my ($token) = @_;
    my ($st) = req(GET => '/flags?userId=u1', headers => ["Authorization: Bearer $token"]);
    return $st;
}

sub report {
    my ($flag, %o) = @_;
    my ($st, undef, $body) = req($o{method} // 'POST', '/ingest/errors',
        body => $o{body} // qq({"flagName":"$flag","message":"m"}),
        headers => [exists $o{auth} ? ($o{auth} // ()) : 'Authorization: Bearer tok_shop',
                    'Content-Type: ' . ($o{type} // 'application/json')]);
    return "$st " . ($body =~ /"error":"([a-z_]+)"/ ? $1 : '');
}

# ---- known traffic ------------------------------------------------------

is(evaluate('tok_shop'), 200, "GET /flags $_") for 1..10;
is(evaluate('tok_blog'), 200, 'GET /flags of blog');
is(report('dark'), '204 ', "a report on dark $_") for 1..2;
is(report('checkout'), '204 ', "a report on checkout $_") for 1..3;
is(evaluate('tok_shop'), 200, "GET /flags after the rollback $_") for 1..2;

my ($st) = req(PUT => '/flags-admin/overrides/shop/dark', body => '{"rolloutPercentage": 12.5}');
is($st, 204, 'a percent override on dark');
($st) = req(PUT => '/flags-admin/overrides/shop/legacy.v1', body => '{"enabled": false}');
is($st, 204, 'an off override on legacy.v1');

# refused reports, each reason once, invalid_json twice
is(report('checkout', auth => undef), '401 unauthorized', 'refused: no token');
is(report('checkout', auth => 'Authorization: Basic eDp5'), '401 unauthorized',
   'refused: not Bearer');
is(report('checkout', auth => 'Authorization: Bearer nope'), '401 invalid_token',
   'refused: a token of no project');
is(report('checkout', method => 'PUT'), '405 method_not_allowed', 'refused: PUT');
is(report('checkout', type => 'text/plain'), '415 unsupported_media_type',
   'refused: text/plain');
is(report('checkout', body => '{"flagName":'), '400 invalid_json', 'refused: JSON 1');
is(report('checkout', body => '[1]'), '400 invalid_json', 'refused: JSON 2');
is(report('checkout', body => '{"message":"m"}'), '400 invalid_field', 'refused: field');
is(report('nope'), '404 unknown_flag', 'refused: unknown flag');
is(report('checkout', body => '{"flagName":"checkout","message":"' . ('x' x 2000) . '"}'),
   '413 payload_too_large', 'refused: too large');

# ---- the exposition, from each worker -----------------------------------

my $ct = 'text/plain; version=0.0.4; charset=utf-8';
my %seen;     # worker pid => body
my $tries = 0;
while (keys %seen < 2 && $tries++ < 100) {
    my ($s, $h, $body) = req(GET => '/metrics');
    die "GET /metrics: $s" unless $s == 200;
    is($h->{'content-type'}, $ct, 'Content-Type') unless %seen;
    $seen{$h->{'x-worker'}} //= $body;
}
is(scalar keys %seen, 2, 'both workers answered GET /metrics');

my $family = qr/[a-z_]+/;
my @expect = (
    'flags_evaluations_total{project="shop",flag="checkout",result="on"} 10',
    'flags_evaluations_total{project="shop",flag="checkout",result="off"} 2',
    'flags_evaluations_total{project="shop",flag="dark",result="on"} 0',
    'flags_evaluations_total{project="shop",flag="dark",result="off"} 12',
    'flags_evaluations_total{project="shop",flag="legacy.v1",result="on"} 0',
    'flags_evaluations_total{project="shop",flag="legacy.v1",result="off"} 12',
    'flags_evaluations_total{project="blog",flag="comments",result="on"} 0',
    'flags_evaluations_total{project="blog",flag="comments",result="off"} 1',
    'flags_errors_total{project="shop",flag="checkout",source="report"} 3',
    'flags_errors_total{project="shop",flag="checkout",source="upstream"} 0',
    'flags_errors_total{project="shop",flag="dark",source="report"} 2',
    'flags_errors_total{project="blog",flag="comments",source="report"} 0',
    # every evaluation, by its answer (here the 12 of GET /flags)
    'flags_cohort_requests_total{project="shop",flag="checkout",cohort="on"} 10',
    'flags_cohort_requests_total{project="shop",flag="checkout",cohort="off"} 2',
    # the 3 reports name no one: the on cohort's (issue 17)
    'flags_cohort_errors_total{project="shop",flag="checkout",cohort="on"} 3',
    'flags_cohort_errors_total{project="shop",flag="checkout",cohort="off"} 0',
    'flags_rollbacks_total{project="shop",flag="checkout",by="rule"} 1',
    'flags_rollbacks_total{project="shop",flag="checkout",by="fleet"} 0',
    'flags_rollbacks_total{project="shop",flag="dark",by="rule"} 0',
    'flags_rollbacks_total{project="shop",flag="dark",by="fleet"} 0',
    'flags_rolled_back{project="shop",flag="checkout"} 1',
    'flags_rolled_back{project="shop",flag="dark"} 0',
    'flags_rolled_back{project="blog",flag="comments"} 0',
    'flags_enabled{project="shop",flag="checkout"} 1',
    'flags_enabled{project="shop",flag="legacy.v1"} 0',
    'flags_configured_rollout_ratio{project="shop",flag="checkout"} 1',
    'flags_configured_rollout_ratio{project="shop",flag="dark"} 0',
    'flags_configured_rollout_ratio{project="blog",flag="comments"} 0.33333',
    'flags_rollout_ratio{project="shop",flag="checkout"} 0',
    'flags_rollout_ratio{project="shop",flag="dark"} 0.125',
    'flags_rollout_ratio{project="shop",flag="legacy.v1"} 0',
    'flags_rollout_ratio{project="blog",flag="comments"} 0.33333',
    'flags_override{project="shop",flag="checkout",kind="off"} 0',
    'flags_override{project="shop",flag="checkout",kind="percent"} 0',
    'flags_override{project="shop",flag="dark",kind="off"} 0',
    'flags_override{project="shop",flag="dark",kind="percent"} 1',
    'flags_override{project="shop",flag="legacy.v1",kind="off"} 1',
    'flags_override{project="shop",flag="legacy.v1",kind="percent"} 0',
    'flags_override_rollout_ratio{project="shop",flag="dark"} 0.125',
    'flags_window_enabled_evaluations{project="shop",flag="checkout"} 10',
    'flags_window_errors{project="shop",flag="checkout"} 3',
    'flags_window_errors{project="shop",flag="dark"} 2',
    'flags_zone_uncounted_flags 0',
    'flags_reports_refused_total{reason="unauthorized"} 2',
    'flags_reports_refused_total{reason="invalid_token"} 1',
    'flags_reports_refused_total{reason="method_not_allowed"} 1',
    'flags_reports_refused_total{reason="unsupported_media_type"} 1',
    'flags_reports_refused_total{reason="payload_too_large"} 1',
    'flags_reports_refused_total{reason="invalid_json"} 2',
    'flags_reports_refused_total{reason="invalid_field"} 1',
    'flags_reports_refused_total{reason="unknown_flag"} 1',
    'flags_reports_refused_total{reason="internal_error"} 0',
);

for my $pid (sort keys %seen) {
    my $body = $seen{$pid};
    my %lines = map { $_ => 1 } split /\n/, $body;
    my @missing = grep { !$lines{$_} } @expect;
    is("@missing", '', "worker $pid: every expected line");
    like($body, qr/^flags_rollback_timestamp_seconds\{project="shop",flag="checkout"\} \d{10}\.\d{3}$/m,
         "worker $pid: the rollback's time");
    my $rb = () = $body =~ /^flags_rollback_timestamp_seconds\{/mg;
    is($rb, 1, "worker $pid: a time only for the flag rolled back");
    my $ov = () = $body =~ /^flags_override_rollout_ratio\{/mg;
    is($ov, 1, "worker $pid: an override ratio only for the percent override");
    ok($body !~ /^flags_push_connections/m, "worker $pid: no push connections");

    my ($used) = $body =~ /^flags_zone_bytes\{state="used"\} (\d+)$/m;
    my ($free) = $body =~ /^flags_zone_bytes\{state="free"\} (\d+)$/m;
    ok(defined $used && defined $free && $used > 0 && $free > 0
       && $used % 4096 == 0 && $used + $free <= 8 * 1024 * 1024
       && $used + $free > 7 * 1024 * 1024, "worker $pid: zone bytes ($used + $free)");

    # HELP then TYPE once per family, its samples right after
    my (%help, %type, $current, @bad);
    for my $l (split /\n/, $body) {
        if ($l =~ /^# HELP ($family) \S/) {
            push @bad, "two HELP of $1" if $help{$1}++;
            $current = $1;
        } elsif ($l =~ /^# TYPE ($family) (counter|gauge)$/) {
            push @bad, "TYPE of $1 not after its HELP" if !defined $current || $current ne $1;
            push @bad, "two TYPE of $1" if $type{$1}++;
            push @bad, "counter $1 without _total" if $2 eq 'counter' && $1 !~ /_total$/;
        } elsif ($l =~ /^($family)(?:\{[^}]*\})? [0-9.]+$/) {
            push @bad, "$1 outside its family" unless defined $current && $1 eq $current;
        } else {
            push @bad, "bad line: $l";
        }
    }
    is("@bad", '', "worker $pid: HELP, TYPE and samples in order");
    # 23, the 5 of ramps (written even with no ramped flag) and the 2 of
    # definitions (a file project's version is 1)
    is(scalar keys %type, 30, "worker $pid: 30 families");
    like($body, qr/^flags_definitions_version\{project="shop"\} 1$/m, "worker $pid: shop serves its file, version 1");
    like($body, qr/^flags_definitions_rejected_total\{project="shop",reason="invalid"\} 0$/m, "worker $pid: no version refused");
    ok($body =~ /\n\z/, "worker $pid: ends in a newline");
}

# the two workers answer alike (but the zone's free pages)
my @bodies = map { (my $b = $_) =~ s/^flags_zone_bytes.*$//mg; $b } values %seen;
is($bodies[0], $bodies[1], 'both workers give the same counters');

# docs/metrics.md's example is this output's shape: each of its samples
# has a sample here of its family with the same label names, each TYPE
# is this output's (issue 24: the example had lost the "by" label)
{
    my $doc = read_file("$FindBin::Bin/../docs/metrics.md");
    my ($example) = $doc =~ /^## Example\n.*?^```\n(.*?)^```$/ms;
    ok($example, 'docs/metrics.md has an example');
    my $body = (values %seen)[0];
    my $shape = sub {
        my ($l) = @_;
        my ($name, $labels) = $l =~ /^([a-z_]+)(?:\{([^}]*)\})? \S+$/ or return undef;
        return join ' ', $name, sort map { /^(\w+)=/ } split /,/, $labels // '';
    };
    my %out = map { ($shape->($_) // '') => 1 } split /\n/, $body;
    my %type = map { $_ => 1 } grep { /^# TYPE / } split /\n/, $body;
    my (@wrong, $samples);
    for my $l (split /\n/, $example // '') {
        next if $l eq '...' || $l =~ /^# HELP /;
        if ($l =~ /^# TYPE /) {
            push @wrong, $l unless $type{$l};
            next;
        }
        my $sh = $shape->($l);
        $samples++;
        push @wrong, $l unless defined $sh && $out{$sh};
    }
    cmp_ok($samples // 0, '>', 10, 'the example has samples');
    is(join("\n", @wrong), '', 'every sample and TYPE of the example has its like in the output');
}

# ---- gzip (the README's location), HEAD, 405 -------------------------------

{
    my ($s, $h, $b) = req(GET => '/metrics', headers => ['Accept-Encoding: gzip']);
    is($s, 200, 'gzip: 200');
    is($h->{'content-encoding'}, 'gzip', 'gzip: Content-Encoding');
    is($h->{'transfer-encoding'}, 'chunked', 'gzip: chunked');
    my $raw = '';
    while ($b =~ s/^([0-9a-fA-F]+)\r\n//) {
        my $n = hex $1;
        last if $n == 0;
        $raw .= substr($b, 0, $n, '');
        $b =~ s/^\r\n//;
    }
    require IO::Uncompress::Gunzip;
    IO::Uncompress::Gunzip::gunzip(\$raw => \my $plain);
    (my $want = $seen{$h->{'x-worker'}}) =~ s/^flags_zone_bytes.*$//mg;
    $plain =~ s/^flags_zone_bytes.*$//mg;
    is($plain, $want, 'gzip: the same exposition');
}

my ($hs, $hh, $hb) = req(HEAD => '/metrics');
is($hs, 200, 'HEAD 200');
is($hh->{'content-type'}, $ct, 'HEAD: Content-Type');
ok($hh->{'content-length'} > 1000, 'HEAD: Content-Length');
is($hb, '', 'HEAD: no body');

for my $m (qw(POST PUT DELETE)) {
    my ($s, $h, $b) = req($m => '/metrics', body => 'x');
    is($s, 405, "$m 405");
    is($h->{allow}, 'GET, HEAD', "$m: Allow");
    is($b, '{"error":"method_not_allowed","message":"this method is not allowed here"}',
       "$m: the JSON error");
}

# ---- promtool -------------------------------------------------------------

sub run_cmd {
    my ($input, @cmd) = @_;
    my $err = gensym;
    my $pid = open3(my $in, my $out, $err, @cmd);
    print $in $input if defined $input;
    close $in;
    local $/;
    my $o = <$out> // '';
    my $e = <$err> // '';
    waitpid($pid, 0);
    return ($? >> 8, $o . $e);
}

my ($rc, $out) = run_cmd((values %seen)[0], 'promtool', 'check', 'metrics');
is($rc, 0, 'promtool check metrics: exit 0');
is($out, '', 'promtool check metrics: nothing to say');

($rc, $out) = run_cmd(undef, 'promtool', 'check', 'rules', $rules);
is($rc, 0, 'promtool check rules: exit 0');
like($out, qr/SUCCESS: 3 rules found/, 'promtool check rules: the three rules');

# ---- a real Prometheus ------------------------------------------------------

sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
        or die "listen: $!";
    return $s->sockport;
}

my $pport = free_port();
write_file("$dir/prometheus.yml", <<"_Y_");
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $rules
scrape_configs:
  - job_name: flags
    metrics_path: /metrics
    static_configs:
      - targets: ['127.0.0.1:$FlagsTest::Port']
_Y_

my $prom = fork;
die "fork: $!" unless defined $prom;
if ($prom == 0) {
    open STDOUT, '>', "$dir/prometheus.log" or POSIX::_exit(126);
    open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
    { no warnings 'exec';
      exec 'prometheus', "--config.file=$dir/prometheus.yml",
          "--storage.tsdb.path=$dir/prometheus-data",
          "--web.listen-address=127.0.0.1:$pport"; }
    POSIX::_exit(127);
}

END {
    if ($prom && kill 0, $prom) {
        kill 'TERM', $prom;
        my $until = time + 10;
        sleep 0.1 while waitpid($prom, WNOHANG) != $prom && time < $until;
        if (kill 0, $prom) { kill 'KILL', $prom; waitpid($prom, 0); }
    }
}

sub api { prometheus_api($pport, $_[0]) }

sub query {
    my ($q) = @_;
    my $j = api('/api/v1/query?query=' . uri_escape($q));
    return undef unless $j && $j->{status} eq 'success' && @{ $j->{data}{result} };
    return $j->{data}{result}[0]{value}[1];
}

my $q = 'flags_evaluations_total{project="shop",flag="checkout",result="on"}';
my $v = wait_for(sub { my $x = query($q); defined $x ? $x : 0 }, 30);
is($v, '10', "Prometheus: $q is 10")
    or diag(read_file("$dir/prometheus.log"));
is(query('flags_reports_refused_total{reason="invalid_json"}'), '2',
   'Prometheus: refused invalid_json is 2');
is(query('flags_rollout_ratio{project="shop",flag="dark"}'), '0.125',
   'Prometheus: the ratio of the override');
is(query('up{job="flags"}'), '1', 'Prometheus: the target is up');

# a second rollback while Prometheus watches: the alert of the README fires
($st) = req(DELETE => '/flags-admin/rollbacks/shop/checkout');
is($st, 204, 'the rollback cleared');
wait_for(sub { (query('flags_rolled_back{project="shop",flag="checkout"}') // '') eq '0' }, 10);
is(report('checkout'), '204 ', "a report on checkout again $_") for 1..3;

my $firing = wait_for(sub {
    my $j = api('/api/v1/alerts');
    return 0 unless $j && $j->{status} eq 'success';
    my @a = grep { $_->{labels}{alertname} eq 'FlagRolledBack' && $_->{state} eq 'firing' }
            @{ $j->{data}{alerts} };
    return @a ? $a[0] : 0;
}, 20);
ok($firing, 'Prometheus: FlagRolledBack fires');
is($firing && "$firing->{labels}{project}/$firing->{labels}{flag}", 'shop/checkout',
   'Prometheus: the alert names the flag');
is(query('flags_rollbacks_total{project="shop",flag="checkout",by="rule"}'), '2',
   'Prometheus: two rollbacks');

# ---- a full zone: flags without room are counted as such ---------------------

nginx_stop($master);
my $small = prefix_dir('metrics-small');
write_file("$small/conf/p.json", '{"flags":[' . join(',', map {
    qq({"name":"a$_","enabled":true,"rolloutPercentage":100})
} 1 .. 100) . ']}');
write_file("$small/conf/nginx.conf", nginx_conf(http => <<'_H_', server => <<'_S_'));
    flags_zone small:32k;
    flags_project p token=tok file=p.json;
    flags_error_log off;
_H_
        location = /flags-status { flags_status; }
        location = /metrics { flags_metrics; }
_S_
$master = nginx_start($small);
my (undef, undef, $status) = req(GET => '/flags-status');
my $full = () = $status =~ /"zoneFull":true/g;
ok($full > 0 && $full < 100, "some flags found no room ($full)");
my (undef, undef, $sm) = req(GET => '/metrics');
like($sm, qr/^flags_zone_uncounted_flags $full$/m, 'flags_zone_uncounted_flags');
my ($sfree) = $sm =~ /^flags_zone_bytes\{state="free"\} (\d+)$/m;
ok(defined $sfree && $sfree < 4 * 4096, "a full zone has little free ($sfree)");
my $samples = () = $sm =~ /^flags_rolled_back\{project="p",flag="a\d+"\} 0$/mg;
is($samples, 100, 'every flag is listed, with room or without');
($rc, $out) = run_cmd($sm, 'promtool', 'check', 'metrics');
is("$rc $out", '0 ', 'promtool check metrics: a full zone');
nginx_stop($master);

ok(keys %workers == 2, 'both workers served the test');
# nginx under valgrind is ten times slower: only the plain run is timed
ok($FlagsTest::Valgrind || time - $t0 < 60, sprintf('the whole test took %.1f s', time - $t0));

my $errlog = (read_file("$dir/logs/error.log") // '') . (read_file("$small/logs/error.log") // '');
unlike($errlog, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log');

done_testing();
