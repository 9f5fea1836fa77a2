# Ramps across the fleet when Redis misbehaves (docs/sync.md, "Ramps
# across the fleet"): three nginx hosts (2 workers each) and a real
# redis-server, the hosts' rounds ordered by stopping hosts (SIGSTOP).
#  d. a hand-written ramp hash the fleet's control disagrees with (done
#     before its last stage) is refused by every host, with a log line;
#     (at the end) a hash the script cannot step (a stage out of range)
#     no longer fails the project's rounds: the fleet starts over;
#  c. a rollback record that reached Redis before the ramp's next step:
#     an operator's "advance" in the same call does not move the fleet's
#     stage of the rolled-back flag;
#  b. a host started while Redis is away serves no more than the ramp's
#     first stage (not the file's higher rolloutPercentage); a host
#     restarted meanwhile serves its state file's stage;
#  a. Redis restarted empty, the new host's round first: its copy, which
#     never started, does not win over the hosts that were at stage 1;
#     the fleet stays at stage 1 on all three, and the two old hosts never
#     drop to stage 0.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use FlagsRedis;
use JSON::PP ();
use Time::HiRes qw(sleep time);

my $redis_bin = `command -v redis-server 2>/dev/null`;
my $cli_bin = `command -v redis-cli 2>/dev/null`;
chomp($redis_bin, $cli_bin);
plan skip_all => 'redis-server or redis-cli is not installed'
    unless $redis_bin && $cli_bin;

my $rport = unused_port();
my $rdir = prefix_dir('fleet-reseed-redis');
my @port = map { unused_port() } 0 .. 2;
my @dir = map { prefix_dir("fleet-reseed-$_") } 0 .. 2;
my (@pid, $redis, %stopped);

sub redis_start {
    $redis = redis_server($rport, $rdir, '--daemonize', 'no');
}

sub redis_stop { reap($redis); undef $redis; }

# every process of host $i (master and workers), stopped or resumed
sub host_signal {
    my ($i, $sig) = @_;
    my @p = ($pid[$i], worker_pids($pid[$i]));
    kill $sig, @p;
    if ($sig eq 'STOP') { $stopped{$i} = 1 } else { delete $stopped{$i} }
}

END {
    local $?;
    host_signal($_, 'CONT') for keys %stopped;
    redis_stop();
}

# redis-cli in the test's database; the answer, trimmed
sub cli {
    my (@args) = @_;
    open my $fh, '-|', $cli_bin, '-p', $rport, '-n', 3, @args or die "redis-cli: $!";
    local $/;
    my $out = <$fh> // '';
    close $fh;
    $out =~ s/\s+\z//;
    return $out;
}

sub ramp_key {
    my ($name) = @_;
    my $k = '';
    wait_for(sub { $k = cli('--scan', '--pattern', "t083:{shop}:r:*:$name"); $k ne '' }, 5);
    return $k;
}

redis_start();

# four ramps held long at their first stage; wide's file percentage (30)
# is above its first stage (10)
my $stages = '"stages": [{"percentage": 20, "hold": 3600}, {"percentage": 80, "hold": 3600},'
           . ' {"percentage": 100}], "regression": {"tick": 1}';
my $shop = <<"_J_";
{"flags": [
  {"name": "wide", "enabled": true, "rolloutPercentage": 30,
   "ramp": {"stages": [{"percentage": 10, "hold": 3600},
                       {"percentage": 60, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "hold", "enabled": true, "rolloutPercentage": 0, "ramp": {$stages}},
  {"name": "forge", "enabled": true, "rolloutPercentage": 0, "ramp": {$stages}},
  {"name": "broken", "enabled": true, "rolloutPercentage": 0, "ramp": {$stages}}
]}
_J_

for my $i (0 .. 2) {
    local $FlagsTest::Port = $port[$i];
    write_file("$dir[$i]/conf/shop.json", $shop);
    write_file("$dir[$i]/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_state_file $dir[$i]/state.json;
    flags_sync redis://127.0.0.1:$rport/3 interval=200ms prefix=t083: host=h$i;
_H_
        location = /flags { flags_evaluate; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_
}

sub start_host {
    my ($i) = @_;
    local $FlagsTest::Port = $port[$i];
    $pid[$i] = nginx_start($dir[$i]);
}

sub req { my ($i, @args) = @_; return host_request($port[$i], @args) }

sub status { host_status($port[$_[0]]) }

sub flag_state { host_flag($port[$_[0]], $_[1]) }

sub ramp {
    my ($i, $name) = @_;
    my $f = flag_state($i, $name) or return undef;
    return $f->{ramp};
}

sub act {
    my ($i, $name, $action) = @_;
    my ($st) = req($i, PUT => "/flags-admin/ramps/shop/$name", body => qq({"action":"$action"}),
                   headers => ['Content-Type: application/json']);
    return $st;
}

start_host($_) for 0, 1;

ok(wait_for(sub {
    for my $i (0, 1) {
        for my $f (qw(wide hold forge broken)) {
            my $r = ramp($i, $f) or return 0;
            return 0 unless $r->{state} eq 'running' && $r->{stage} == 0;
        }
    }
    return 1;
}, 10), 'hosts 0 and 1: the four ramps run their first stage');

# --- d. items the fleet's control disagrees with --------------------------

my $forge = ramp_key('forge');
like($forge, qr/^t083:\{shop\}:r:[0-9a-f]{16}:forge$/, "forge's hash: $forge");
# done, at stage 0 of 3: the script steps a done ramp no more, so the
# hosts are answered this as it is
is(cli('HSET', $forge, 'state', 4), '0', 'forge: written done at stage 0 of 3');
my $done = 0;
my $t = time;
while (time - $t < 2) {
    for my $i (0, 1) {
        my $r = ramp($i, 'forge') or next;
        $done++ if $r->{state} ne 'running' || $r->{stage} != 0;
    }
    sleep 0.1;
}
is($done, 0, 'forge: both hosts keep it running at stage 0 for 2 s');
is((flag_state(0, 'forge') || {})->{effectiveRolloutPercentage}, 20, 'forge: host 0 serves 20 %');
like(read_file("$dir[0]/logs/error.log"),
     qr/\[warn\] .*flags: sync: project "shop": the fleet's ramp of flag "forge" is refused: done before its last stage/,
     'host 0 logs the refusal, with why');

# --- c. a rollback record before the ramp's next step ---------------------

# host 1 stopped: only host 0's rounds step the fleet's ramps
host_signal(1, 'STOP');
my $hold = ramp_key('hold');
(my $hdef = $hold) =~ s/^.*:r:([0-9a-f]{16}):hold$/$1/;
my $ctl = 't083:{shop}:ctl';
my $rounds = status(0)->{sync}{rounds};
ok(wait_for(sub { status(0)->{sync}{rounds} > $rounds }, 3), 'host 0: a round');
# just after host 0's round, 200 ms before its next: the record another
# host's round would write, then the operator's advance on host 0
my $now_ms = int(time * 1000);
cli('HSET', $ctl, "rb:$hdef:hold", "$now_ms 5 10 h9 1");
cli('HINCRBY', $ctl, 'ver', 1);
is(act(0, 'hold', 'advance'), 204, 'host 0: PUT advance of hold (its copy has not heard of the rollback)');
ok(wait_for(sub { cli('HGET', $hold, 'state') eq '5' }, 3), 'hold: the fleet marks it rolled back');
is(cli('HGET', $hold, 'stage'), '0', 'hold: the fleet did not advance the rolled-back ramp');
my $h;
ok(wait_for(sub {
    $h = flag_state(0, 'hold');
    $h && $h->{rolledBack} && $h->{ramp}{state} eq 'rolledBack' && $h->{ramp}{stage} == 0;
}, 3), 'host 0: hold rolled back at stage 0') or diag(explain($h));
is($h->{effectiveRolloutPercentage}, 0, 'host 0: hold serves 0 %');
host_signal(1, 'CONT');
ok(wait_for(sub {
    my $f = flag_state(1, 'hold');
    $f && $f->{rolledBack} && $f->{ramp}{state} eq 'rolledBack' && $f->{ramp}{stage} == 0;
}, 5), 'host 1: hold rolled back at stage 0 too');

# --- b. hosts started while Redis is away ---------------------------------

is(act(0, 'wide', 'advance'), 204, 'host 0: PUT advance of wide');
ok(wait_for(sub {
    for my $i (0, 1) {
        my $f = flag_state($i, 'wide') or return 0;
        return 0 unless $f->{ramp}{stage} == 1 && $f->{effectiveRolloutPercentage} == 60;
    }
    return 1;
}, 3), 'wide: stage 1 (60 %) on hosts 0 and 1');
# the state files hold it
ok(wait_for(sub { (read_file("$dir[0]/state.json") // '') =~ /"wide"/ }, 3), 'host 0: the state file keeps wide');
sleep 0.5;

redis_stop();
start_host(2);
my $c = flag_state(2, 'wide');
is($c->{ramp}{state}, 'holding', 'host 2 (new, Redis away): wide has not started here');
is($c->{effectiveRolloutPercentage}, 10,
   'host 2: serves the first stage (10 %), not the file\'s 30 %');
my $on = 0;
for my $u (1 .. 200) {
    my ($st, undef, $body) = req(2, GET => "/flags?userId=w$u",
                                 headers => ['Authorization: Bearer tok_1']);
    next unless $st && $st == 200;
    $on++ if grep { $_->{name} eq 'wide' && $_->{enabled} }
                  @{ JSON::PP::decode_json($body)->{flags} };
}
ok($on > 5 && $on < 40, "host 2: $on of 200 users get wide (10 %, not 30 %)");

# host 0 restarted with Redis away: its state file's stage
nginx_stop($pid[0]);
start_host(0);
my $a = flag_state(0, 'wide');
is($a->{ramp}{stage}, 1, 'host 0 restarted: wide at stage 1, from its state file');
is($a->{effectiveRolloutPercentage}, 60, 'host 0 restarted: serves 60 %');

# --- a. Redis back empty, the new host first ------------------------------

host_signal($_, 'STOP') for 0, 1;
redis_start();
my $wide = ramp_key('wide');
ok(wait_for(sub { cli('HGET', $wide, 'state') eq '1' }, 20),
   'host 2 seeded the empty Redis first: wide runs there');
is(cli('HGET', $wide, 'stage'), '0', '... from its copy, at stage 0');
ok(wait_for(sub { my $r = ramp(2, 'wide'); $r && $r->{state} eq 'running' }, 3),
   'host 2 runs wide');
host_signal($_, 'CONT') for 0, 1;

my (%low, %fin);
ok(wait_for(sub {
    for my $i (0 .. 2) {
        my $f = flag_state($i, 'wide') or return 0;
        $low{$i}++ if $i < 2 && $f->{ramp}{stage} != 1;
        $fin{$i} = $f;
    }
    sleep 0.05;
    return 3 == grep { $fin{$_}{ramp}{stage} == 1 && $fin{$_}{ramp}{state} eq 'running'
                       && $fin{$_}{effectiveRolloutPercentage} == 60 } 0 .. 2;
}, 40), 'wide: stage 1 (60 %) on all three hosts') or diag(explain(\%fin));
is(cli('HGET', $wide, 'stage'), '1', 'the fleet\'s hash: stage 1');
is_deeply(\%low, {}, 'hosts 0 and 1 never left stage 1');

# --- d. (last: before the fix, it failed every round of the project) ----

# a stage past the definition, its tick due: the script cannot step it
my $broken = ramp_key('broken');
my @fail = map { status($_)->{sync}{failures} } 0 .. 2;
is(cli('HSET', $broken, 'stage', 9, 'next', 1), '0', 'broken: written at stage 9 of 3');
ok(wait_for(sub { cli('HGET', $broken, 'stage') eq '0' && cli('HGET', $broken, 'state') eq '1' }, 3),
   'broken: the fleet starts it over at stage 0');
sleep 1;
is(status($_)->{sync}{failures}, $fail[$_], "host $_: no round failed") for 0 .. 2;
ok(wait_for(sub { my $r = ramp(1, 'broken'); $r && $r->{state} eq 'running' && $r->{stage} == 0 }, 3),
   'broken: host 1 runs it at stage 0');

nginx_stop($_) for @pid;
done_testing();
