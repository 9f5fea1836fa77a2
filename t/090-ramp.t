# Ramps (docs/ramps.md), two workers, keep-alive clients: a ramp climbs
# 1 -> 5 -> 25 -> 100 % under healthy traffic and the users who are on
# stay on; a canary that fails only for the on cohort (behind $flag_) is
# rolled back by the regression rule, with its evidence in flags_status;
# both backends failing alike roll back nothing, though the absolute rule
# would have; pause, resume, advance and restart by flags_admin; reload and
# restart keep the stage; a changed definition restarts the ramp.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;
use IO::Socket::INET;
use FlagsPush;

my $dir = prefix_dir('ramp');
my $Port = $FlagsTest::Port;
my $Old = unused_port();
my $New = unused_port();

sub flags_file {
    my ($manual_hold) = @_;
    return <<"_J_";
{"flags": [
  {"name": "climb", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 1, "hold": 3}, {"percentage": 5, "hold": 3},
                       {"percentage": 25, "hold": 3}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "canary", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1, "alpha": 0.01, "dispersion": 2}}},
  {"name": "both", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "manual", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 10, "hold": $manual_hold}, {"percentage": 50, "hold": 3600},
                       {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "plain", "enabled": true, "rolloutPercentage": 30}
 ]}
_J_
}
write_file("$dir/conf/shop.json", flags_file(3600));
mkdir "$dir/state";

my $http = <<"_C_";
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_error_log off;
    flags_state_file $dir/state/flags-state.json;
    flags_rollback min_errors=5 rate=10% window=60s;
    flags_context shop user=\$arg_uid;

    map \$flag_canary \$canary_upstream {
        1        b_fail;
        default  b_ok;
    }

    upstream b_ok { server 127.0.0.1:$Old; }
    upstream b_fail { server 127.0.0.1:$New; }

    server {
        listen 127.0.0.1:$Old;
        location / { return 200 "ok\\n"; }
        location /fail { return 500 "failed\\n"; }
    }
    server {
        listen 127.0.0.1:$New;
        location / { return 500 "new\\n"; }
    }
_C_

my $server = <<'_C_';
        location = /flags { flags_evaluate; }
        location = /status { flags_status; }
        location /ofrep/ { flags_ofrep; }
        location = /ws { flags_websocket; }
        location = /metrics { flags_metrics; }
        location /admin/ { flags_admin; allow 127.0.0.1; deny all; }
        location = /canary {
            flags_upstream_errors on;
            proxy_pass http://$canary_upstream;
        }
        location = /both {
            # both cohorts fail alike: the flag is read, so it is blamed
            flags_upstream_errors on flags=both;
            set $x $flag_both;
            proxy_pass http://b_ok/fail;
        }
_C_

write_file("$dir/conf/nginx.conf",
           nginx_conf(http => $http, server => $server, log_level => 'notice'));
my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'a flags file with ramps is valid') or diag($out);
my $master = nginx_start($dir);

# one keep-alive connection for the clients' requests
my $ka;
sub ka_get {
    my ($path, @h) = @_;
    for my $try (1, 2) {
        $ka ||= IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port, Timeout => 10);
        my $req = "GET $path HTTP/1.1\r\nHost: localhost\r\n";
        $req .= "$_\r\n" for @h;
        print $ka "$req\r\n";
        my $head = '';
        while (my $l = <$ka>) { $head .= $l; last if $l eq "\r\n" }
        if ($head eq '') { undef $ka; next }
        my ($st) = $head =~ m{^HTTP/1\.1 (\d+)};
        my ($len) = $head =~ /Content-Length: (\d+)/i;
        my $body = '';
        read($ka, $body, $len) if $len;
        my %h = map { lc($_->[0]) => $_->[1] } map { [split /:\s*/, $_, 2] } grep { /:/ } split /\r\n/, $head;
        return ($st, $body, \%h);
    }
    return (0, '', {});
}

sub status {
    my (undef, undef, $b) = http_request(GET => '/status');
    my $j = eval { decode_json($b) } or return {};
    return { map { $_->{name} => $_ } @{ $j->{projects}[0]{flags} } };
}
sub ramp { status()->{$_[0]}{ramp} }

sub admin {
    my ($flag, $body, $method) = @_;
    my ($st, undef, $b) = http_request($method // 'PUT', "/admin/ramps/shop/$flag",
                                       body => $body, headers => ['Content-Type: application/json']);
    return ($st, $b);
}

sub on_users {
    my ($flag, $n) = @_;
    my %on;
    for my $i (1 .. $n) {
        my ($st, $b) = ka_get("/flags?userId=u$i", 'Authorization: Bearer tok_shop');
        $on{"u$i"} = 1 if $b =~ /"name":"\Q$flag\E","enabled":true/;
    }
    return \%on;
}

# ---------------------------------------------------------------- climb
ok(wait_for(sub { (ramp('climb') // {})->{state} eq 'running' }, 5), 'the ramp starts at its commit');
my $r = ramp('climb');
is($r->{stage}, 0, 'stage 0');
is($r->{percentage}, 1, '... at 1 %');
is($r->{stages}, 4, 'four stages');
is($r->{startAt}, undef, 'no startAt: it started when committed');
like($r->{startedAt}, qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'startedAt is a time');
is(status()->{climb}{effectiveRolloutPercentage}, 1, 'the flag serves the stage');

# the users on at each stage, scanned while the stage holds
my %seen;
my $prev = {};
my @etags;
for my $want (0, 1, 2, 3) {
    ok(wait_for(sub { (ramp('climb') // {})->{stage} == $want }, 10), "stage $want reached");
    my $pct = ramp('climb')->{percentage};
    my (undef, undef, $h) = ka_get('/flags?userId=etag-probe', 'Authorization: Bearer tok_shop');
    push @etags, $h->{etag};
    my $on = on_users('climb', 300);
    is(ramp('climb')->{stage}, $want, "... and held while 300 users were asked") or next;
    my @lost = grep { !$on->{$_} } keys %$prev;
    is(scalar @lost, 0, "every user on at the stage before is still on at $pct %");
    $seen{$want} = scalar keys %$on;
    $prev = $on;
}
cmp_ok($seen{0}, '<', $seen{1}, "more users on at 5 % ($seen{1}) than at 1 % ($seen{0})");
cmp_ok($seen{1}, '<', $seen{2}, "more at 25 % ($seen{2})");
is($seen{3}, 300, 'everyone at 100 %');
is(scalar(keys %{{ map { $_ => 1 } @etags }}), 4, 'each stage changed the answers\' ETag');
$r = ramp('climb');
is($r->{state}, 'done', 'the last stage is the end: done');
is($r->{stageChanges}, 3, 'three stage changes');
is($r->{nextStageAt}, undef, 'nothing next');
my (undef, undef, $metrics) = http_request(GET => '/metrics');
like($metrics, qr/^flags_ramp_stage\{project="shop",flag="climb"\} 3$/m, 'metrics: the stage');
like($metrics, qr/^flags_ramp_rollout_ratio\{project="shop",flag="climb"\} 1$/m, 'metrics: its percentage');
like($metrics, qr/^flags_ramp_state\{project="shop",flag="climb",state="done"\} 1$/m, 'metrics: the state done');
like($metrics, qr/^flags_ramp_state\{project="shop",flag="climb",state="running"\} 0$/m, '... and not running');
like($metrics, qr/^flags_ramp_stage_changes_total\{project="shop",flag="climb"\} 3$/m, 'metrics: three stage changes');
unlike($metrics, qr/^flags_ramp_stage\{project="shop",flag="plain"\}/m, 'no ramp samples for a flag without a ramp');
my $log = read_file("$dir/logs/error.log");
# a ramp's steps are routine: at notice, below Debian's error (t/094)
like($log, qr/\[notice\] \d+#\d+: flags: ramp of flag "climb" of project "shop" started at stage 0 of 4 \(1%\)/, 'the start is logged at notice');
like($log, qr/\[notice\] \d+#\d+: flags: ramp of flag "climb" of project "shop" advanced to stage 1 of 4 \(5%\)/, 'an advance is logged');
like($log, qr/\[notice\] \d+#\d+: flags: ramp of flag "climb" of project "shop" is done at stage 3 of 4 \(100%\)/, 'the end is logged');

# ---------------------------------------------------------------- canary
# paced, about 25 requests a second: the rule decides at tick ends (1 s)
my ($fails, $oks) = (0, 0);
for my $i (1 .. 600) {
    my ($st) = ka_get("/canary?uid=c$i");
    $st == 500 ? $fails++ : $oks++;
    if ($i % 5 == 0) {
        last if status()->{canary}{rolledBack};
        select(undef, undef, undef, 0.2);
    }
}
ok(wait_for(sub { status()->{canary}{rolledBack} }, 5), "the canary failing only for the on cohort is rolled back ($fails 500s, $oks 200s)");
my $c = status()->{canary};
is($c->{ramp}{state}, 'rolledBack', 'the ramp says rolledBack');
is($c->{ramp}{decision}{cause}, 'regression', '... decided by the regression rule');
cmp_ok($c->{ramp}{evidence}{ratio}, '>=', 1, 'the evidence reached its bound (ratio >= 1)');
is($c->{ramp}{evidence}{bound}, 100, 'the bound is 1/alpha = 100');
cmp_ok($c->{ramp}{evidence}{errors}{on}, '>', 0, 'on-cohort errors in the evidence');
is($c->{ramp}{evidence}{errors}{off}, 0, 'no off-cohort error');
cmp_ok($c->{ramp}{decision}{tick}, '>=', 1, 'the deciding tick is named');
cmp_ok($c->{ramp}{decision}{on}{errors}, '>', 0, "... with its on cohort's errors");
is($c->{rollback}{decidedBy}, 'rule', 'decidedBy rule');
is($c->{effectiveRolloutPercentage}, 0, 'the canary serves 0 %');
# docs/regression.md: 20 errors at 50 % when all land on the on cohort,
# plus what arrives while the deciding tick is still open (up to 1.5 s)
cmp_ok($fails, '<=', 60, "it took $fails errors (docs: 20 at 50 %, plus the open tick's)");
like(read_file("$dir/logs/error.log"),
     qr/\[error\] \d+#\d+: flags: rolled back flag "canary" of project "shop": its ramp's regression rule at stage 0 found the on cohort failing more than the off cohort \(evidence [\d.]+ times its bound 1\/alpha = 100 after \d+ ticks/,
     'the rollback line gives the evidence');
(undef, undef, $metrics) = http_request(GET => '/metrics');
like($metrics, qr/^flags_ramp_state\{project="shop",flag="canary",state="rolledBack"\} 1$/m, 'metrics: rolledBack');
my ($ratio) = $metrics =~ /^flags_ramp_evidence_ratio\{project="shop",flag="canary"\} (\S+)$/m;
cmp_ok($ratio // 0, '>=', 1, "metrics: the evidence ratio reached 1 ($ratio)");
like($metrics, qr/^flags_rollbacks_total\{project="shop",flag="canary",by="rule"\} 1$/m, 'metrics: the rollback counted by rule');
my ($st) = ka_get('/canary?uid=c1');
is($st, 200, 'after the rollback everyone gets the old backend');

# ---------------------------------------------------------------- both fail
for my $i (1 .. 120) {
    my ($s) = ka_get("/both?uid=b$i");
    select(undef, undef, undef, 0.01) if $i % 10 == 0;
}
sleep 2;
my $b = status()->{both};
my $both_errors = $b->{cohorts}{on}{errors} + $b->{cohorts}{off}{errors};
is($both_errors, 120, 'both cohorts failed alike: 120 errors');
is($b->{rolledBack}, JSON::PP::false, '... and nothing is rolled back: a broken site is not a broken feature');
is($b->{ramp}{state}, 'running', 'the ramp runs on');
cmp_ok($b->{ramp}{evidence}{ratio}, '<', 1, "the evidence stays below its bound ($b->{ramp}{evidence}{ratio})");
cmp_ok($b->{ramp}{evidence}{errors}{off}, '>', 0, 'the off cohort failed too');

# ---------------------------------------------------------------- admin
my ($s, $body) = admin('manual', '{"action":"pause"}');
is($s, 204, 'pause: 204');
is(ramp('manual')->{state}, 'paused', '... paused');
is(ramp('manual')->{waitingFor}{resume}, JSON::PP::true, '... waiting for resume');
($s) = admin('manual', '{"action":"pause"}');
is($s, 204, 'pause again: 204, nothing changes');
($s) = admin('manual', '{"action":"advance"}');
is($s, 204, 'advance: 204');
$r = ramp('manual');
is($r->{stage}, 1, '... stage 1');
is($r->{percentage}, 50, '... 50 %');
is($r->{state}, 'paused', '... still paused');
is(status()->{manual}{effectiveRolloutPercentage}, 50, 'the flag serves 50 %');
($s) = admin('manual', '{"action":"resume"}');
is($s, 204, 'resume: 204');
is(ramp('manual')->{state}, 'running', '... running');
($s, $body) = admin('manual', '{"action":"jump"}');
is($s, 400, 'an unknown action: 400');
is_deeply(decode_json($body), {error => 'invalid_field',
          message => 'action must be "pause", "resume", "advance" or "restart"'}, '... invalid_field');
($s, $body) = admin('manual', 'nope');
is($s, 400, 'not JSON: 400');
is(decode_json($body)->{error}, 'invalid_json', '... invalid_json');
($s, $body) = admin('plain', '{"action":"pause"}');
is($s, 404, 'a flag without a ramp: 404');
is_deeply(decode_json($body), {error => 'no_ramp', message => 'the flag has no ramp'}, '... no_ramp');
($s) = admin('nosuch', '{"action":"pause"}');
is($s, 404, 'an unknown flag: 404');
($s) = admin('manual', '', 'GET');
is($s, 405, 'GET: 405');
($s) = admin('manual', '', 'DELETE');
is($s, 405, 'DELETE: 405');
like(read_file("$dir/logs/error.log"),
     qr/\[notice\] \d+#\d+: \*\d+ flags: ramp of flag "manual" of project "shop" paused at stage 0 of 3 \(10%\)/,
     'the pause is logged, at notice');

# restart of a rolled-back ramp clears the rollback
($s, $body) = admin('canary', '{"action":"resume"}');
is($s, 409, 'resume of a rolled-back ramp: 409');
is(decode_json($body)->{error}, 'ramp_conflict', '... ramp_conflict');
($s) = admin('canary', '{"action":"restart"}');
is($s, 204, 'restart: 204');
$c = status()->{canary};
is($c->{rolledBack}, JSON::PP::false, '... cleared the rollback');
is($c->{ramp}{state}, 'running', '... running again');
is($c->{ramp}{stage}, 0, '... from stage 0');
is($c->{ramp}{evidence}{ticks} <= 2 ? 1 : 0, 1, '... with fresh evidence');
is($c->{ramp}{decision}, undef, '... and no decision');

# ---------------------------------------------------------------- reload
$r = ramp('manual');
nginx_signal($master, 'HUP');
sleep 2;
my $r2 = ramp('manual');
is($r2->{stage}, $r->{stage}, 'a reload keeps the stage');
is($r2->{stageStartedAt}, $r->{stageStartedAt}, '... and its start');
is($r2->{startedAt}, $r->{startedAt}, '... and the ramp\'s');

# ---------------------------------------------------------------- restart
nginx_stop($master);
$master = nginx_start($dir);
ok(wait_for(sub { my $x = ramp('manual'); $x && $x->{state} eq 'running' }, 5), 'after a restart');
$r2 = ramp('manual');
is($r2->{stage}, 1, 'a restart keeps the stage (from the state file)');
is($r2->{stageStartedAt}, $r->{stageStartedAt}, '... and its start');
is(ramp('climb')->{state}, 'done', 'a done ramp stays done');
is(status()->{manual}{effectiveRolloutPercentage}, 50, '... and serves the stage');

# ---------------------------------------------------------------- new definition
write_file("$dir/conf/shop.json", flags_file(1800));
nginx_signal($master, 'HUP');
ok(wait_for(sub { my $x = ramp('manual'); $x && $x->{stage} == 0 && $x->{startedAt} ne $r->{startedAt} }, 5),
   'a changed definition restarts its ramp');
is(ramp('climb')->{state}, 'done', 'an unchanged one keeps its state');

# ---------------------------------------------------------------- pushed
my $sse = Sse->open('/ofrep/v1/events?token=tok_shop');
is($sse->{status}, 200, 'an OFREP event stream');
my $ws = Ws->open('/ws?token=tok_shop');
is($ws->{status}, 101, 'an SDK WebSocket');
my $first = $ws->message(2);
like($first->[1], qr/^\{"type":"flags_refreshed"/, '... with its first flags_refreshed');
is($sse->event(0.3), undef, 'no event before a change');
($s) = admin('manual', '{"action":"advance"}');
is($s, 204, 'advance to 50 %');
like($sse->event(3) // '', qr/^data: \{"type":"refetchEvaluation","etag":"/, 'the stage change is pushed to the event stream');
($s) = admin('manual', '{"action":"advance"}');
is($s, 204, 'advance to 100 %: done');
like($sse->event(3) // '', qr/refetchEvaluation/, '... pushed again');
my $m;
for (1 .. 3) {
    $m = $ws->message(3) or last;
    last if $m->[1] =~ /"name":"manual","enabled":true,"rolloutPercentage":100,/;
}
like($m->[1] // '', qr/"name":"manual","enabled":true,"rolloutPercentage":100,/,
     'the WebSocket client gets flags_refreshed with the flag at 100 %');

nginx_stop($master);
done_testing();
