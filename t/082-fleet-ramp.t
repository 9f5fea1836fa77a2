# Ramps across the fleet (docs/sync.md, "Ramps across the fleet"): three
# nginx hosts (2 workers each) share a real redis-server through
# flags_sync; the ramps' clocks and evidence live in Redis.
#  1. stages advance together: every host shows each stage within an
#     interval of the others, and GET /flags agrees across hosts;
#  2. on-cohort upstream errors spread 4 + 4 + 4 over the hosts prove a
#     regression no host alone could (10 needed): all three roll back,
#     decided by the fleet, with the ramp's decision in flags_status;
#  3. Redis stopped: the stage is frozen past its hold, hosts serve on,
#     the absolute rule guards locally; Redis started again (empty): the
#     ramp resumes from the hosts' copy, no tick counted twice.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use FlagsRedis;
use JSON::PP ();
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);

my $redis_bin = `command -v redis-server 2>/dev/null`;
chomp $redis_bin;
plan skip_all => 'redis-server is not installed' unless $redis_bin;

my $interval = 0.2;
my $rport = unused_port();
my $rdir = prefix_dir('fleet-ramp-redis');
my @port = map { unused_port() } 0 .. 2;
my @dir = map { prefix_dir("fleet-ramp-$_") } 0 .. 2;
my ($redis_pid, @pid);

sub redis_start {
    $redis_pid = redis_server($rport, $rdir);
}

sub redis_stop {
    redis_kill($redis_pid);
    undef $redis_pid;
}

END { local $?; redis_stop() }

redis_start();

# climb: three stages of 2 s; canary: 50 % held long, alpha 0.01 and
# dispersion 1 (10 on-cohort errors at an even split decide); slow: 20 %
# for 5 s; guard: 50 % held long, minErrors 3 for the absolute rule
my $shop = <<'_J_';
{"flags": [
  {"name": "climb", "enabled": true, "rolloutPercentage": 0,
   "rollback": {"minErrors": 1000, "rate": 50, "window": 60},
   "ramp": {"stages": [{"percentage": 10, "hold": 2},
                       {"percentage": 50, "hold": 2},
                       {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "canary", "enabled": true, "rolloutPercentage": 0,
   "rollback": {"minErrors": 1000, "rate": 50, "window": 60},
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1, "alpha": 0.01, "dispersion": 1}}},
  {"name": "slow", "enabled": true, "rolloutPercentage": 0,
   "rollback": {"minErrors": 1000, "rate": 50, "window": 60},
   "ramp": {"stages": [{"percentage": 20, "hold": 5}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "guard", "enabled": true, "rolloutPercentage": 0,
   "rollback": {"minErrors": 3, "rate": 1, "window": 60},
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}}
]}
_J_

for my $i (0 .. 2) {
    local $FlagsTest::Port = $port[$i];
    write_file("$dir[$i]/conf/shop.json", $shop);
    write_file("$dir[$i]/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_context shop user=\$arg_uid;
    flags_sync redis://127.0.0.1:$rport/3 interval=200ms prefix=t082: host=h$i;
_H_
        location = /flags { flags_evaluate; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
        location = /canary {
            flags_upstream_errors on;
            if ($flag_canary) {
                return 500 "on\n";
            }
            return 200 "off\n";
        }
        location = /slow {
            flags_upstream_errors on;
            if ($arg_fail) {
                return 500 "$flag_slow\n";
            }
            return 200 "$flag_slow\n";
        }
        location = /guard {
            flags_upstream_errors on;
            if ($arg_fail) {
                return 500 "$flag_guard\n";
            }
            if ($flag_guard) {
                return 500 "on\n";
            }
            return 200 "off\n";
        }
_S_
}

for my $i (0 .. 2) {
    local $FlagsTest::Port = $port[$i];
    push @pid, nginx_start($dir[$i]);
}

sub req { my ($i, @args) = @_; return host_request($port[$i], @args) }

sub flag_state { host_flag($port[$_[0]], $_[1]) }

sub ramp {
    my ($i, $name) = @_;
    my $f = flag_state($i, $name) or return undef;
    return $f->{ramp};
}

# flag => 0/1 for user $u on host $i
sub answers {
    my ($i, $u) = @_;
    my ($st, undef, $body) = req($i, GET => "/flags?userId=$u",
                                 headers => ['Authorization: Bearer tok_1']);
    return undef unless $st && $st == 200;
    return { map { $_->{name} => ($_->{enabled} ? 1 : 0) }
             @{ JSON::PP::decode_json($body)->{flags} } };
}

sub hit {
    my ($i, $path, $u) = @_;
    my ($st) = req($i, GET => "$path?uid=$u");
    return $st;
}

# --- 1. stages advance together -------------------------------------------

my (%seen, $stage_ok);
my $t0 = time;
$stage_ok = wait_for(sub {
    for my $i (0 .. 2) {
        my $r = ramp($i, 'climb') or next;
        $seen{$i}{ $r->{stage} } //= time if $r->{state} ne 'pending';
        $seen{$i}{done} //= time if $r->{state} eq 'done';
    }
    sleep 0.05;
    return 3 == grep { $seen{$_}{done} } 0 .. 2;
}, 20);
ok($stage_ok, 'climb climbs to its last stage on every host') or diag(explain(\%seen));
for my $stage (0 .. 2) {
    my @at = map { $seen{$_}{$stage} // 1e12 } 0 .. 2;
    my ($min, $max) = (sort { $a <=> $b } @at)[0, 2];
    my $spread = $max - $min;
    # one interval, plus this loop's polling (3 status requests and 50 ms)
    ok($spread <= FlagsTest::slow($interval + 0.35),
       sprintf('stage %d: every host within %.2f s of the first', $stage, $spread));
}
my $r = ramp(0, 'climb');
is($r->{stageChanges}, 2, 'climb: two stage changes in the fleet');
# ticks are closed once for the fleet: about one a second of the ramp's
# life (three hosts closing them would count three times as many)
my $life = time - $t0;
cmp_ok($r->{evidence}{ticks}, '<=', int($life) + 2,
       "climb: $r->{evidence}{ticks} ticks in ${\ sprintf '%.1f', $life} s");

# the hosts agree on every user's answer at the 50 % stages
my $agree = 1;
for my $u (map { "u$_" } 1 .. 30) {
    my @a = map { answers($_, $u) } 0 .. 2;
    for my $i (1, 2) {
        for my $f (qw(canary guard)) {
            $agree = 0 unless $a[$i] && $a[0] && $a[$i]{$f} == $a[0]{$f};
        }
    }
}
ok($agree, 'GET /flags agrees across hosts for 30 users at 50 %');

# --- 2. errors spread over the hosts --------------------------------------

my (@on, @off);
for my $u (map { "c$_" } 1 .. 200) {
    my $a = answers(0, $u) or next;
    push @{ $a->{canary} ? \@on : \@off }, $u;
    last if @on >= 12 && @off >= 12;
}
cmp_ok(scalar @on, '>=', 12, 'canary: users in the on cohort');
cmp_ok(scalar @off, '>=', 12, 'canary: users in the off cohort');

# let the evaluations above close in a tick, then each host's share:
# 4 on-cohort failures among 4 off-cohort successes
sleep 1.5;
for my $i (0 .. 2) {
    for my $k (0 .. 3) {
        is(hit($i, '/canary', $on[$i * 4 + $k]), 500, "host $i: an on-cohort failure");
        is(hit($i, '/canary', $off[$i * 4 + $k]), 200, "host $i: an off-cohort success");
    }
    my $want = 4 * ($i + 1);
    my $got;
    ok(wait_for(sub {
        $got = ramp($i, 'canary');
        return $got && $got->{evidence}{errors}{on} == $want;
    }, 5), "the fleet's evidence counts $want on-cohort errors") or diag(explain($got));
    if ($i < 2) {
        is($got->{state}, 'running', "after host $i: no decision yet");
        ok((flag_state($_, 'canary') || {})->{rolledBack} == 0, "host $_ serves canary")
            for 0 .. 2;
    }
}
my @rb = map { my $i = $_; wait_for(sub { (flag_state($i, 'canary') || {})->{rolledBack} }, 5) ? 1 : 0 } 0 .. 2;
is_deeply(\@rb, [1, 1, 1], 'all three hosts roll canary back');
for my $i (0 .. 2) {
    my $f = flag_state($i, 'canary');
    is($f->{rollback}{decidedBy}, 'fleet', "host $i: decided by the fleet");
    cmp_ok($f->{rollback}{sources}, '>=', 2, "host $i: the record gives the proof's witnesses ($f->{rollback}{sources})");
    is($f->{ramp}{state}, 'rolledBack', "host $i: the ramp is rolled back");
    is($f->{ramp}{decision}{cause}, 'regression', "host $i: by the regression rule");
    is($f->{ramp}{evidence}{errors}{on}, 12, "host $i: on 12 on-cohort errors of the fleet");
    cmp_ok($f->{ramp}{evidence}{ratio}, '>=', 1, "host $i: the evidence reached its bound");
    is(answers($i, $on[0])->{canary}, 0, "host $i: an on-cohort user gets canary off");
}

# --- 3. Redis stopped and started -----------------------------------------

# slow is done by now: an operator restarts it on host 2, and the fleet
# restarts it for every host
my ($st) = req(2, PUT => '/flags-admin/ramps/shop/slow', body => '{"action":"restart"}',
               headers => ['Content-Type: application/json']);
is($st, 204, 'host 2: PUT ramps/shop/slow restart');
my $restarted = time;
ok(wait_for(sub {
    for my $i (0 .. 2) {
        my $s = ramp($i, 'slow') or return 0;
        my $g = ramp($i, 'guard') or return 0;
        return 0 unless $s->{stage} == 0 && $s->{state} eq 'running'
                        && $g->{stageRequests}{off} > 0;
    }
    return 1;
}, 3), 'every host: slow runs its first stage again; guard has an off cohort');

# two failures in each of slow's cohorts, among successes
my (@son, @soff);
for my $u (map { "s$_" } 1 .. 300) {
    my $a = answers(0, $u) or next;
    push @{ $a->{slow} ? \@son : \@soff }, $u;
    last if @son >= 6 && @soff >= 12;
}
for my $k (0 .. 1) {
    is(hit(0, '/slow', "$son[$k]&fail=1"), 500, 'slow: an on-cohort failure');
    is(hit(0, '/slow', "$soff[$k]&fail=1"), 500, 'slow: an off-cohort failure');
    is(hit(0, '/slow', $soff[$k + 2]), 200, 'slow: an off-cohort success');
}
ok(wait_for(sub {
    !grep { my $r = ramp($_, 'slow'); !($r && $r->{evidence}{errors}{on} == 2
                                         && $r->{evidence}{errors}{off} == 2) } 0 .. 2
}, 3), "every host: slow's evidence holds the 2 + 2 errors");

# the site fails for both of guard's cohorts, eight off-cohort failures
# and three on-cohort ones: the absolute rule (minErrors 3) is the ramp's
# backstop and holds, as the off cohort fails alike (docs/ramps.md)
my (@gon, @goff);
for my $u (map { "g$_" } 1 .. 300) {
    my $a = answers(0, $u) or next;
    push @{ $a->{guard} ? \@gon : \@goff }, $u;
    last if @gon >= 6 && @goff >= 8;
}
for my $k (0 .. 8) {
    is(hit(1, '/guard', "$goff[$k % 8]&fail=1"), 500, 'guard: an off-cohort failure on host 1');
    is(hit(1, '/guard', $gon[int($k / 3)]), 500, 'guard: an on-cohort failure on host 1') if $k % 3 == 2;
}
is(flag_state(1, 'guard')->{window}{errors}, 3, 'guard: three on-cohort errors in its window (minErrors 3)');
sleep 0.5;
ok(!flag_state(1, 'guard')->{rolledBack}, 'guard: the backstop holds while both cohorts fail');

redis_stop();
cmp_ok(time - $restarted, '<', 4.5, 'Redis stopped within slow\'s hold');
# the last rounds' answers are in
sleep 0.5;
my %before = map { $_ => ramp($_, 'slow') } 0 .. 2;

# errors counted while Redis is away are this host's, not the fleet's
is(hit(2, '/slow', "$son[$_]&fail=1"), 500, 'slow: an on-cohort failure, Redis away') for 2 .. 3;
is(hit(2, '/slow', "$soff[$_]&fail=1"), 500, 'slow: an off-cohort failure, Redis away') for 4 .. 5;

# past slow's hold (5 s from its restart): frozen at 20 % on every host
sleep 6.5 - (time - $restarted) if time - $restarted < 6.5;
for my $i (0 .. 2) {
    my $s = ramp($i, 'slow');
    is($s->{stage}, 0, "host $i: slow holds its stage with Redis away");
    is($s->{evidence}{ticks}, $before{$i}{evidence}{ticks}, "host $i: no tick closes meanwhile");
}
my @p = map { my $i = $_; scalar grep { (answers($i, "p$_") || {})->{slow} } 1 .. 100 } 0 .. 2;
ok($p[0] == $p[1] && $p[1] == $p[2] && $p[0] > 5 && $p[0] < 40,
   "every host serves slow at its last percentage ($p[0], $p[1], $p[2] of 100 users)");

# the absolute rule guards again, on this host's counts
is(hit(1, '/guard', $gon[3]), 500, 'guard: an on-cohort failure with Redis away');
my $g = flag_state(1, 'guard');
ok($g->{rolledBack}, 'guard: rolled back by the threshold with the ramp frozen');
is($g->{rollback}{decidedBy}, 'rule', '... decided by this host\'s rule');

# Redis restarted empty: the hosts reconnect after their backoff (up to
# 12.8 s here) and the fleet's ramp continues from a host's copy
redis_start();
my %after;
ok(wait_for(sub {
    for my $i (0 .. 2) {
        my $s = ramp($i, 'slow') or return 0;
        return 0 unless $s->{state} eq 'done';
        $after{$i} = $s;
    }
    return 1;
}, 25), 'Redis back: slow resumes and reaches its last stage on every host');
my @t0 = sort { $a <=> $b } map { $before{$_}{evidence}{ticks} } 0 .. 2;
for my $i (0 .. 2) {
    my $t = $after{$i}{evidence}{ticks};
    # the fleet took a host's copy and closed one tick on rejoining
    ok($t >= $t0[0] + 1 && $t <= $t0[2] + 1,
       "host $i: $t ticks, one more than before Redis stopped ($t0[0] .. $t0[2])");
    is_deeply($after{$i}{evidence}{errors}, {on => 2, off => 2},
              "host $i: the errors counted while Redis was away are not the fleet's");
}
ok(wait_for(sub { !grep { !(flag_state($_, 'guard') || {})->{rolledBack} } 0 .. 2 }, 5),
   'guard: host 1\'s rollback reaches the fleet once Redis is back');

nginx_stop($_) for @pid;
done_testing();
