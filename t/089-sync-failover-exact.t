# What a failover loses (docs/sync.md, issue 28 part D): a store that
# lost its last writes loses, doubles and resurrects nothing.  Two nginx
# hosts of two workers share a real redis-server, without Sentinel:
#  - a store that went back: rounds run, SAVE, more rounds (errors on
#    both hosts, an override set, a rollback tripped and one cleared),
#    then redis-server is killed (-9) and started again from the
#    snapshot: it lost acknowledged writes.  The fleet's window sums are
#    exact again, the rollback tripped after the snapshot holds on both
#    hosts, the one cleared stays cleared, the override holds, each
#    rollback counted once a host;
#  - a reply lost after the script ran (DEBUG SLEEP longer than the
#    round's timeout): the counts are applied once;
#  - the fleet's rollback then comes at exactly minErrors.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use FlagsRedis;
use File::Copy qw(copy);
use JSON::PP ();
use Time::HiRes qw(sleep time);

skip_without(qw(redis-server redis-cli));

my $rport = unused_port();
my $iport = unused_port();
my @port = map { unused_port() } 0 .. 1;
my @dir = map { prefix_dir("failover-exact-$_") } 0 .. 1;
my $rdir = prefix_dir('failover-exact-redis');
my $idir = prefix_dir('failover-exact-inspect');
my (@pid, $redis, $inspect, $sleeper);

END { local $?; reap($_) for $sleeper, $inspect, $redis; }

sub redis_start {
    $redis = redis_server($rport, $rdir, '--dbfilename', 'dump.rdb',
                          '--enable-debug-command', 'local');
    return 1;
}

sub cli { redis_cli($rport, @_) }

# the fleet's sums of a flag's window hash: errors and enabled evaluations
sub sums {
    my ($p, $flag) = @_;
    my ($key) = grep { /:\Q$flag\E$/ } redis_cli($p, 'KEYS', 't089:{shop}:w:*');
    return (0, 0) unless $key;
    my %h = redis_cli($p, 'HGETALL', $key);
    my ($e, $n) = (0, 0);
    for my $k (keys %h) {
        $e += $h{$k} if $k =~ /:e$/;
        $n += $h{$k} if $k =~ /:n$/;
    }
    return ($e, $n);
}

sub ctl {
    my ($p) = @_;
    my %h = redis_cli($p, 'HGETALL', 't089:{shop}:ctl');
    return \%h;
}

sub ctl_has {
    my ($p, $kind, $flag) = @_;
    my ($f) = grep { /^\Q$kind\E:[0-9a-f]{16}:\Q$flag\E$/ } keys %{ ctl($p) };
    return $f ? ctl($p)->{$f} : undef;
}

ok(redis_start(), 'redis-server listens');

write_file("$dir[$_]/conf/shop.json", <<'_J_') for 0 .. 1;
{"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 8, "rate": 0.001, "window": 60}},
  {"name": "burst", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 2, "rate": 0.001, "window": 60}},
  {"name": "early", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 2, "rate": 0.001, "window": 60}},
  {"name": "calm", "enabled": true, "rolloutPercentage": 100}
]}
_J_

for my $i (0 .. 1) {
    local $FlagsTest::Port = $port[$i];
    write_file("$dir[$i]/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_sync redis://127.0.0.1:$rport interval=200ms prefix=t089: host=h$i;
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
        location = /metrics { flags_metrics; }
        location /flags-admin/ { flags_admin; }
_S_
    push @pid, nginx_start($dir[$i]);
}

sub req { my ($i, @args) = @_; return host_request($port[$i], @args) }

sub state_of { host_flag($port[$_[0]], $_[1]) }

sub rolled {
    my $f = state_of(@_) or return -1;
    return $f->{rolledBack} ? 1 : 0;
}

sub report {
    my ($i, $flag) = @_;
    my ($st) = req($i, POST => '/ingest/errors',
        body => qq({"flagName":"$flag","message":"boom"}),
        headers => ['Authorization: Bearer tok_1',
                    'Content-Type: application/json']);
    return $st;
}

# one evaluation of every flag (enabled: one enabled evaluation each)
sub evaluate {
    my ($i) = @_;
    my ($st) = req($i, GET => '/flags?userId=u1',
                   headers => ['Authorization: Bearer tok_1']);
    return $st;
}

sub metric {
    my ($i, $flag, $by) = @_;
    my ($st, undef, $body) = req($i, GET => '/metrics');
    return -1 unless $st == 200;
    return $body =~ /^flags_rollbacks_total\{project="shop",flag="\Q$flag\E",by="\Q$by\E"\} (\d+)$/m
        ? $1 : -1;
}

sub log_lines {
    my ($i, $re) = @_;
    return grep { /$re/ } split /\n/, read_file("$dir[$i]/logs/error.log") // '';
}

sub sums_are {
    my ($e, $n, $timeout) = @_;
    return wait_for(sub { my @s = sums($rport, 'risky'); $s[0] == $e && $s[1] == $n },
                    $timeout // 5);
}

for my $i (0 .. 1) {
    ok(wait_for(sub { my $s = host_status($port[$i]); $s && $s->{sync}{connected} }, 5),
       "host $i: connected to redis");
}

# --- before the snapshot: what the store keeps -------------------------
is(report(0, 'risky'), 204, 'host 0: an error of risky');
is(report(1, 'risky'), 204, 'host 1: an error of risky');
is(evaluate(0), 200, 'host 0: an evaluation') for 1 .. 2;
is(evaluate(1), 200, 'host 1: an evaluation');
is(report($_, 'early'), 204, "host $_: an error of early") for 0 .. 1;
for my $i (0 .. 1) {
    ok(wait_for(sub { rolled($i, 'early') == 1 }, 5),
       "host $i: the fleet rolled early back (2 errors, one a host)");
}
ok(sums_are(2, 3), 'the fleet holds 2 errors and 3 enabled evaluations of risky')
    or diag(join ' ', sums($rport, 'risky'));
sleep 0.5;      # a round or two more: nothing is pending
is((cli('SAVE'))[0], 'OK', 'SAVE: the snapshot');
copy("$rdir/dump.rdb", "$idir/dump.rdb") or die "copy: $!";
my $saved_ver = ctl($rport)->{ver};

# --- after the snapshot: what the store will lose ------------------------
is(report(0, 'risky'), 204, 'host 0: an error of risky') for 1 .. 2;
is(report(1, 'risky'), 204, 'host 1: an error of risky');
is(evaluate(0), 200, 'host 0: an evaluation');
is(evaluate(1), 200, 'host 1: an evaluation') for 1 .. 2;
is(report($_, 'burst'), 204, "host $_: an error of burst") for 0 .. 1;
for my $i (0 .. 1) {
    ok(wait_for(sub { rolled($i, 'burst') == 1 }, 5),
       "host $i: the fleet rolled burst back");
}
{
    my ($st) = req(0, DELETE => '/flags-admin/rollbacks/shop/early');
    is($st, 204, 'host 0: the rollback of early cleared');
    ($st) = req(1, PUT => '/flags-admin/overrides/shop/calm',
                body => '{"rolloutPercentage": 25}',
                headers => ['Content-Type: application/json']);
    is($st, 204, 'host 1: an override of calm set (25%)');
}
for my $i (0 .. 1) {
    ok(wait_for(sub { rolled($i, 'early') == 0 }, 5), "host $i: early cleared");
    ok(wait_for(sub {
        my $f = state_of($i, 'calm');
        $f && $f->{override} && ($f->{override}{rolloutPercentage} // -1) == 25
    }, 5), "host $i: the override of calm holds");
}
ok(sums_are(5, 6), 'the fleet holds 5 errors and 6 enabled evaluations of risky')
    or diag(join ' ', sums($rport, 'risky'));
ok(!defined ctl_has($rport, 'rb', 'early') && defined ctl_has($rport, 'rb', 'burst')
   && (ctl_has($rport, 'ov', 'calm') // '') eq '25000',
   'redis holds burst rolled back, early cleared, the override of calm');
sleep 0.5;      # every host reads the last version
my $last_ver = ctl($rport)->{ver};
ok($last_ver > $saved_ver, "the control hash moved past the snapshot ($saved_ver -> $last_ver)");
for my $i (0 .. 1) {
    is(metric($i, 'burst', 'fleet'), 1, "host $i: burst's rollback counted once (by=fleet)");
    is(metric($i, 'early', 'fleet'), 1, "host $i: early's rollback counted once (by=fleet)");
}

# --- the store goes back: kill -9, started from the snapshot -------------
redis_kill($redis);
undef $redis;

# what the snapshot holds, seen in a redis of its own (the hosts repair
# the real one within a round or two)
$inspect = redis_server($iport, $idir, '--dbfilename', 'dump.rdb');
ok($inspect, 'a redis-server of the snapshot listens');
is_deeply([sums($iport, 'risky')], [2, 3], 'the snapshot: 2 errors, 3 enabled evaluations of risky');
is(ctl($iport)->{ver}, $saved_ver, "the snapshot: the control hash at version $saved_ver");
ok(defined ctl_has($iport, 'rb', 'early'), 'the snapshot: early rolled back');
ok(!defined ctl_has($iport, 'rb', 'burst'), 'the snapshot: burst not rolled back');
ok(!defined ctl_has($iport, 'ov', 'calm'), 'the snapshot: no override of calm');
reap($inspect);
undef $inspect;

ok(redis_start(), 'redis-server started again from the snapshot');
for my $i (0 .. 1) {
    ok(wait_for(sub {
        scalar log_lines($i, qr/\[notice\] \d+#\d+: flags: sync: project "shop": redis lost fleet changes this host had read \(version \d+, redis now at \d+: a failover or a restart from a snapshot\): this host publishes its rollbacks, clears and overrides at the next round$/)
    }, 10), "host $i: says redis lost what it had read");
}

# repaired: sums exact, nothing lost, doubled or resurrected
ok(sums_are(5, 6, 5), 'the fleet holds 5 errors and 6 enabled evaluations of risky again')
    or diag(join ' ', sums($rport, 'risky'));
ok(wait_for(sub {
    defined ctl_has($rport, 'rb', 'burst') && !defined ctl_has($rport, 'rb', 'early')
    && (ctl_has($rport, 'ov', 'calm') // '') eq '25000'
}, 5), 'redis holds burst rolled back, early cleared and the override again')
    or diag(explain(ctl($rport)));
sleep 1;        # five rounds more: nothing moves
is_deeply([sums($rport, 'risky')], [5, 6], 'still 5 and 6: nothing added twice');
ok(ctl($rport)->{ver} > $last_ver, 'the version is past every one the hosts read');
for my $i (0 .. 1) {
    is(rolled($i, 'burst'), 1, "host $i: burst still rolled back");
    is(rolled($i, 'early'), 0, "host $i: early still cleared");
    is(rolled($i, 'risky'), 0, "host $i: risky not rolled back (5 of 8 errors)");
    my $f = state_of($i, 'calm');
    is($f && $f->{override} ? $f->{override}{rolloutPercentage} : undef, 25,
       "host $i: the override of calm holds");
    is(metric($i, 'burst', 'fleet'), 1, "host $i: burst's rollback still counted once");
    is(metric($i, 'early', 'fleet'), 1, "host $i: early's rollback still counted once");
    is(scalar(log_lines($i, qr/flags: rollback of flag "burst" of project "shop" cleared by the fleet/)),
       0, "host $i: burst was never lifted");
    is(scalar(log_lines($i, qr/flags: flag "early" of project "shop" rolled back by the fleet/)),
       1, "host $i: early was rolled back once, never again");
    is(scalar(log_lines($i, qr/override of flag "calm" of project "shop" removed by the fleet/)),
       0, "host $i: the override was never removed");
}

# --- a reply lost after the script ran -----------------------------------
# DEBUG SLEEP 3 holds redis longer than a round's timeout (2 s at 200ms):
# the round sent meanwhile times out and its connection is closed, then
# redis wakes, runs it, and its answer is lost.  Every command redis runs
# is watched (MONITOR, read here): the sleep starts just after a call of
# the host, so its next call, carrying the error reported meanwhile, is
# the one whose answer is lost.
my $mon = eval { redis_monitor($rport) };
ok($mon, 'MONITOR: every command redis runs is seen (+OK)') or diag($@);

# the next call of host $i that redis runs, or undef
sub next_call {
    my ($i, $timeout) = @_;
    return $mon->next_call(qr/"t089:\{shop\}:h:h$i:[0-9a-f]{16}"/, $timeout);
}

my $expect = 5;
for my $i (0 .. 1) {
    my $sent = $i == 0 ? 4 : 3;     # host i's cumulative errors of risky
    my $timeouts = log_lines($i, qr/flags: sync: redis at 127\.0\.0\.1:\d+: timed out/);
    ok(next_call($i, 5), "host $i: a call just ran");
    $sleeper = spawn("$rdir/sleep.log", 'redis-cli', '-p', $rport, 'DEBUG', 'SLEEP', '3');
    sleep 0.03;
    is(report($i, 'risky'), 204, "host $i: an error of risky while redis sleeps");
    $expect++;
    ok(wait_for(sub { log_lines($i, qr/flags: sync: redis at 127\.0\.0\.1:\d+: timed out/) > $timeouts }, 5),
       "host $i: its round timed out");
    waitpid $sleeper, 0;
    undef $sleeper;
    ok(wait_for(sub { my $s = host_status($port[$i]); $s && $s->{sync}{connected} }, 5),
       "host $i: connected again");
    # the calls redis ran since: the lost one and the next carry the
    # same cumulative count
    my ($n, $until) = (0, time + 1.5);
    while (time < $until) {
        my $l = next_call($i, $until - time) // last;
        $n++ if $l =~ /"risky" "[0-9a-f]{16}" "[^"]*" "[^"]*" "[^"]*" "[^"]*" "$sent" /;
    }
    is($n, 2, "host $i: its cumulative $sent errors reached the script twice");
    ok(sums_are($expect, 6, 5), "the fleet holds $expect errors of risky")
        or diag(join ' ', sums($rport, 'risky'));
}
$mon->close;
sleep 1;
is_deeply([sums($rport, 'risky')], [7, 6], 'still 7 errors: no lost answer counted twice');
for my $i (0 .. 1) {
    is(rolled($i, 'risky'), 0, "host $i: risky not rolled back (7 of 8)");
}

# --- the rollback at exactly minErrors -----------------------------------
is(report(1, 'risky'), 204, 'host 1: the eighth error of risky');
for my $i (0 .. 1) {
    ok(wait_for(sub { rolled($i, 'risky') == 1 }, 5),
       "host $i: the fleet rolled risky back at 8 errors");
}
like(ctl_has($rport, 'rb', 'risky') // '', qr/^\d{13} 8 6 h1 1$/,
     "redis's record: 8 errors, 6 enabled evaluations, decided on host h1");
for my $i (0 .. 1) {
    is(state_of($i, 'risky')->{rollback}{errors}, 8, "host $i: flags_status says 8 errors");
    is(metric($i, 'risky', 'fleet'), 1, "host $i: risky's rollback counted once");
    is(scalar(log_lines($i, qr/\[(?:alert|crit|emerg)\]/)), 0, "host $i: no alert, crit or emerg");
}

# --- a store written by hand: the rounds go on ----------------------------
# a range of lost versions not below the version (the script never writes
# one), and garbage in host h0's hash: no host takes itself for behind,
# none fails a round, the counts stay exact
{
    my ($hk) = grep { /:h:h0:[0-9a-f]{16}$/ } cli('KEYS', 't089:{shop}:h:*');
    ok($hk, "host h0's hash: $hk");
    my @lost = map { scalar log_lines($_, qr/redis lost fleet changes/) } 0 .. 1;
    my @fail = map { host_status($port[$_])->{sync}{failures} } 0 .. 1;
    is((cli('HSET', 't089:{shop}:ctl', 'lost', '0 999999999 ' . int(time * 1000)))[0], 0,
       'a range of lost versions written by hand');
    is((cli('HSET', $hk, 'e:risky', 'abc', 'n:risky', '-', 'q', 'zz', 'at', 'x'))[0], 0,
       "garbage in host h0's hash");
    my ($st) = req(0, DELETE => '/flags-admin/rollbacks/shop/risky');
    is($st, 204, 'host 0: the rollback of risky cleared');
    for my $i (0 .. 1) {
        ok(wait_for(sub { rolled($i, 'risky') == 0 }, 5), "host $i: risky cleared (the fleet's answer applied)");
    }
    is(evaluate(0), 200, 'host 0: an evaluation');
    ok(sums_are(0, 1), 'the cleared window holds that one evaluation only')
        or diag(join ' ', sums($rport, 'risky'));
    sleep 1;
    is_deeply([sums($rport, 'risky')], [0, 1], 'and still');
    for my $i (0 .. 1) {
        is(host_status($port[$i])->{sync}{failures}, $fail[$i], "host $i: no round failed");
        is(scalar(log_lines($i, qr/redis lost fleet changes/)), $lost[$i],
           "host $i: does not take itself for behind");
    }
}

nginx_stop($_) for @pid;
done_testing();
