# A ramp's cohort counts across a failover (docs/sync.md, "What a failover
# loses", "Counts: cumulative, applied once"): the on and off cohorts'
# evaluations a fleet's ramp reads are counted once, like a flag's errors.
# Two nginx hosts of two workers share a real redis-server (debug
# commands on), and a ramp at 50 % whose tick (an hour) never comes, so
# Redis's accumulators a1 (on) and a0 (off) hold every evaluation made
# since the ramp began:
#  - evaluations on both hosts: a1 and a0 are what the answers said;
#  - a reply lost after the script ran (DEBUG SLEEP longer than a round's
#    timeout): the evaluations made meanwhile are added once;
#  - SAVE, more evaluations, redis-server killed (-9) and started from the
#    snapshot: the store lost counts it had acknowledged; the hosts' next
#    rounds add them again, once, and nothing else;
#  - an outage (redis stopped for a second): what was counted meanwhile is
#    each host's own, never the fleet's (a ramp's ticks are Redis's); what
#    comes after counts, once.
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
my @dir = map { prefix_dir("cohort-exact-$_") } 0 .. 1;
my $rdir = prefix_dir('cohort-exact-redis');
my $idir = prefix_dir('cohort-exact-inspect');
my (@pid, $redis, $inspect, $sleeper);

END { local $?; reap($_) for $sleeper, $inspect, $redis; }

sub redis_start {
    $redis = redis_server($rport, $rdir, '--dbfilename', 'dump.rdb',
                          '--enable-debug-command', 'local');
    return 1;
}

sub redis_gone {
    redis_kill($redis);
    undef $redis;
}

sub cli { redis_cli($rport, @_) }

# the fleet's ramp of canary: its hash
sub ramp_hash {
    my ($p) = @_;
    my ($key) = grep { /:r:[0-9a-f]{16}:canary$/ } redis_cli($p, 'KEYS', 't089c:{shop}:r:*');
    return {} unless $key;
    my %h = redis_cli($p, 'HGETALL', $key);
    return \%h;
}

# on and off evaluations the fleet's ramp holds since it began
sub cohorts {
    my ($p) = @_;
    my $h = ramp_hash($p);
    return ($h->{a1} // -1, $h->{a0} // -1);
}

ok(redis_start(), 'redis-server listens');

write_file("$dir[$_]/conf/shop.json", <<'_J_') for 0 .. 1;
{"flags": [
  {"name": "canary", "enabled": true, "rolloutPercentage": 0,
   "rollback": {"minErrors": 1000, "rate": 50, "window": 60},
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 3600}}}
]}
_J_

for my $i (0 .. 1) {
    local $FlagsTest::Port = $port[$i];
    write_file("$dir[$i]/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_sync redis://127.0.0.1:$rport interval=200ms prefix=t089c: host=h$i;
_H_
        location = /flags { flags_evaluate; }
        location = /flags-status { flags_status; }
_S_
    push @pid, nginx_start($dir[$i]);
}

sub req { my ($i, @args) = @_; return host_request($port[$i], @args) }

sub log_lines {
    my ($i, $re) = @_;
    return grep { /$re/ } split /\n/, read_file("$dir[$i]/logs/error.log") // '';
}

# what the module counts: every answer's canary, on or off
my ($on, $off) = (0, 0);
my $user = 0;

# one evaluation on host $i of a new user; 1 when it was on
sub evaluate {
    my ($i) = @_;
    $user++;
    my ($st, undef, $body) = req($i, GET => "/flags?userId=c-$user",
                                 headers => ['Authorization: Bearer tok_1']);
    die "GET /flags: $st\n" unless $st == 200;
    my ($f) = grep { $_->{name} eq 'canary' } @{ JSON::PP::decode_json($body)->{flags} };
    if ($f->{enabled}) { $on++ } else { $off++ }
    return $f->{enabled} ? 1 : 0;
}

sub evaluations {
    my ($i, $n) = @_;
    evaluate($i) for 1 .. $n;
}

# a1, a0 are the base plus what was counted since
my ($base1, $base0);

sub cohorts_are {
    my ($p, $timeout) = @_;
    return wait_for(sub {
        my ($a1, $a0) = cohorts($p);
        $a1 == $base1 + $on && $a0 == $base0 + $off
    }, $timeout // 5);
}

sub cohorts_now { join ' ', cohorts($rport) }
sub want { sprintf '%d %d', $base1 + $on, $base0 + $off }

for my $i (0 .. 1) {
    ok(wait_for(sub { my $s = host_status($port[$i]); $s && $s->{sync}{connected} }, 5),
       "host $i: connected to redis");
}

# the fleet's ramp runs, at its first stage, on both hosts
ok(wait_for(sub { (ramp_hash($rport)->{state} // '') eq '1' }, 5),
   "redis: canary's ramp is running");
for my $i (0 .. 1) {
    ok(wait_for(sub {
        my $f = host_flag($port[$i], 'canary');
        $f && $f->{ramp} && $f->{ramp}{state} eq 'running' && $f->{ramp}{stage} == 0
    }, 5), "host $i: the ramp runs at 50 %");
}
sleep 0.6;      # three rounds: whatever was counted before is in
($base1, $base0) = cohorts($rport);
ok($base1 >= 0 && $base0 >= 0, "the ramp's accumulators before: $base1 on, $base0 off");

# --- evaluations on both hosts --------------------------------------------
evaluations(0, 20);
evaluations(1, 20);
ok($on > 0 && $off > 0, "40 evaluations: $on on, $off off");
ok(cohorts_are($rport), 'the fleet holds them: ' . want())
    or diag(cohorts_now());

# --- a reply lost after the script ran ------------------------------------
# DEBUG SLEEP 3 holds redis longer than a round's timeout (2 s at 200ms).
# Every command redis runs is watched (MONITOR): the sleep starts just
# after a call of the host, the evaluations follow at once, so the host's
# next call carries them all; that call times out, its connection is
# closed, then redis wakes and runs it: applied, its answer lost.  The
# next rounds send the same cumulative counts: the script adds nothing.
my $mon = redis_monitor($rport);
for my $i (0 .. 1) {
    my $timeouts = log_lines($i, qr/flags: sync: redis at 127\.0\.0\.1:\d+: timed out/);
    ok($mon->next_call(qr/"t089c:\{shop\}:h:h$i:[0-9a-f]{16}"/, 5), "host $i: a call just ran");
    $sleeper = spawn("$rdir/sleep.log", 'redis-cli', '-p', $rport, 'DEBUG', 'SLEEP', '3');
    sleep 0.02;
    evaluations($i, 10);
    ok(wait_for(sub { log_lines($i, qr/flags: sync: redis at 127\.0\.0\.1:\d+: timed out/) > $timeouts }, 5),
       "host $i: its round timed out while redis slept");
    waitpid $sleeper, 0;
    undef $sleeper;
    ok(wait_for(sub { my $s = host_status($port[$i]); $s && $s->{sync}{connected} }, 5),
       "host $i: connected again");
    ok(cohorts_are($rport), "host $i: its 10 evaluations counted once: " . want())
        or diag(cohorts_now());
    1 while defined $mon->line(0.05);
}
$mon->close;
sleep 1;        # five rounds more: nothing is added twice
is(cohorts_now(), want(), 'still ' . want() . ' a second later');

# --- a store that went back ------------------------------------------------
is((cli('SAVE'))[0], 'OK', 'SAVE: the snapshot');
copy("$rdir/dump.rdb", "$idir/dump.rdb") or die "copy: $!";
my $saved = want();
evaluations(0, 15);
evaluations(1, 15);
ok(cohorts_are($rport), 'after the snapshot, 30 more: ' . want())
    or diag(cohorts_now());
sleep 0.5;      # acknowledged by every host
my $acked = want();
redis_gone();

$inspect = redis_server($iport, $idir, '--dbfilename', 'dump.rdb');
ok($inspect, 'a redis-server of the snapshot listens');
is(join(' ', cohorts($iport)), $saved, "the snapshot holds $saved: it lost 30 evaluations");
reap($inspect);
undef $inspect;

ok(redis_start(), 'redis-server started again from the snapshot');
ok(cohorts_are($rport, 10), "the hosts added what it lost, once: $acked")
    or diag(cohorts_now());
sleep 1;
is(cohorts_now(), $acked, "still $acked a second later");

# --- an outage ---------------------------------------------------------------
# redis stopped for about a second: a ramp's ticks are Redis's, so the
# evaluations made meanwhile are each host's own, never the fleet's
# (docs/sync.md, "Rejoining"); what was acknowledged before still counts
# once, and what comes after counts again
cli('SAVE');
my $before_outage = want();
redis_gone();
my ($on0, $off0) = ($on, $off);
evaluations(0, 5);
evaluations(1, 5);
($base1, $base0) = ($base1 - ($on - $on0), $base0 - ($off - $off0));
ok(redis_start(), 'redis-server started again (its own snapshot, taken just before)');
for my $i (0 .. 1) {
    ok(wait_for(sub { my $s = host_status($port[$i]); $s && $s->{sync}{connected} }, 15),
       "host $i: connected again");
}
sleep 1;        # five rounds: nothing of the outage arrives
is(cohorts_now(), $before_outage, "the 10 evaluations made while it was away are not the fleet's: $before_outage");
evaluations(0, 4);
evaluations(1, 4);
ok(cohorts_are($rport), 'the 8 made after it are: ' . want())
    or diag(cohorts_now());
sleep 1;
is(cohorts_now(), want(), 'and once: still ' . want());

for my $i (0 .. 1) {
    my $f = host_flag($port[$i], 'canary');
    is($f->{ramp}{state}, 'running', "host $i: the ramp still runs");
    is(scalar(log_lines($i, qr/\[(?:alert|crit|emerg)\]/)), 0, "host $i: no alert, crit or emerg");
}

nginx_stop($_) for @pid;
done_testing();
