# A ramp's durations run on the monotonic clock (docs/ramps.md, "Clocks"):
# nginx runs under libfaketime, which steps its wall clock (and only that:
# FAKETIME_DONT_FAKE_MONOTONIC) when the test rewrites a file; two workers,
# keep-alive traffic, ticks of 1 s.
#
#   forward an hour: the 6 s hold of a stage does not end early; the stage
#   ends 6 s after it began, in real time;
#   back an hour: ticks keep closing (the evidence's ticks and lastTick
#   move), the 4 s hold ends 4 s after it began, in real time, and the
#   times shown are on the wall clock as nginx reads it now; and after
#   the step back, 90 on-cohort errors from 62 users roll a guarded ramp
#   back (its ticks close, and its absolute rule stays a backstop).
#
# Before the fix a step back stopped every tick for an hour and held the
# stage, and a step forward ended the hold at the next tick.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;
use IO::Socket::INET;
use HTTP::Date qw(str2time);
use Time::HiRes qw(time sleep);
use Time::Local qw(timegm);

my ($lib) = glob('/usr/lib/*/faketime/libfaketime.so.1');
plan skip_all => 'libfaketime is not installed (Debian package faketime)' unless $lib;
plan skip_all => 'not under valgrind: libfaketime is preloaded' if $FlagsTest::Valgrind;
# libfaketime and the sanitizer runtime both wrap the clocks: nginx hangs at
# its start with both preloaded (seen: the master never forks)
plan skip_all => 'not under the sanitizer run: libfaketime and libasan both wrap the clocks'
    if ($ENV{LD_PRELOAD} // '') =~ /libasan/;

my $dir = prefix_dir('ramp-clock');
my $rc_file = "$dir/faketime.rc";
write_file($rc_file, "+0\n");

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "fwd", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 20, "hold": 6}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "back", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 20, "hold": 4}, {"percentage": 50, "hold": 4},
                       {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "guard", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}}
 ]}
_J_
mkdir "$dir/state";

my $conf = nginx_conf(http => <<"_H_", server => <<'_S_', log_level => 'error');
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_error_log off;
    flags_state_file $dir/state/flags-state.json;
    keepalive_requests 100000;
    flags_context shop user=\$arg_uid;
_H_
        location = /flags { flags_evaluate; }
        location = /guard {
            flags_upstream_errors on;
            if ($flag_guard) {
                return 500 "on\n";
            }
            return 200 "off\n";
        }
        location = /status { flags_status; }
        location /admin/ { flags_admin; allow 127.0.0.1; deny all; }
_S_
# the workers keep libfaketime's settings (nginx empties their environment)
$conf =~ s/^(pid .*\n)/$1 . join('', map { "env $_;\n" }
    qw(FAKETIME_TIMESTAMP_FILE FAKETIME_NO_CACHE FAKETIME_DONT_FAKE_MONOTONIC LD_PRELOAD))/me;
write_file("$dir/conf/nginx.conf", $conf);

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'the configuration is valid') or diag($out);

# a sanitizer runtime preloaded by the suite stays first
my $preload = $ENV{LD_PRELOAD} ? "$ENV{LD_PRELOAD}:$lib" : $lib;
my $master = nginx_start($dir, wrap => "env LD_PRELOAD=$preload FAKETIME_TIMESTAMP_FILE=$rc_file "
                                       . "FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1");

# nginx's wall clock, as its Date header says, minus ours (seconds)
sub skew {
    my (undef, $h) = http_request(GET => '/status');
    return str2time($h->{date} // '') - time;
}
sub step_to {
    my ($offset, $want) = @_;
    write_file($rc_file, "$offset\n");
    # whole seconds in the Date header: within 3 s of what was asked
    return wait_for(sub { abs(skew() - $want) < 3 }, 5);
}

sub ramps {
    my (undef, undef, $b) = http_request(GET => '/status');
    my $j = eval { decode_json($b) } or return {};
    return { map { $_->{name} => $_->{ramp} } @{ $j->{projects}[0]{flags} } };
}

# RFC 3339 with milliseconds -> epoch seconds
sub epoch {
    my ($t) = @_;
    my ($y, $mo, $d, $h, $mi, $s, $ms) = ($t // '') =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)\.(\d+)Z$/
        or return undef;
    return timegm($s, $mi, $h, $d, $mo - 1, $y) + $ms / 1000;
}

# evaluations on one keep-alive connection, so that ticks count both cohorts
my $ka;
my $user = 0;
sub traffic {
    for (1 .. 10) {
        $ka ||= IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $FlagsTest::Port,
                                      Timeout => 10) or die "connect: $!";
        $user++;
        print $ka "GET /flags?userId=u$user HTTP/1.1\r\nHost: localhost\r\n"
                . "Authorization: Bearer tok_shop\r\n\r\n";
        my $head = '';
        while (my $l = <$ka>) { $head .= $l; last if $l eq "\r\n" }
        if ($head eq '') { undef $ka; next }
        my ($len) = $head =~ /Content-Length: (\d+)/i;
        my $body;
        read($ka, $body, $len) if $len;
    }
}

# Samples [our time, the ramps] every ~0.1 s with traffic, for $secs or
# until $until->(ramps) is true.
sub watch {
    my ($secs, $until) = @_;
    my @s;
    my $end = time + $secs;
    while (time < $end) {
        traffic();
        my $r = ramps();
        push @s, [time, $r];
        last if $until && $until->($r);
        sleep 0.1;
    }
    return @s;
}

ok(wait_for(sub { my $r = ramps(); ($r->{fwd} // {})->{state} eq 'running'
                  && ($r->{back} // {})->{state} eq 'running' }, 5), 'both ramps run');
cmp_ok(abs(skew()), '<', 3, "nginx's wall clock is ours to begin with");

# ------------------------------------------------------------- forward
my $fwd_start = epoch(ramps()->{fwd}{startedAt});
ok($fwd_start, 'the forward ramp started at a time');
ok(step_to('+3600', 3600), "nginx's wall clock stepped forward an hour");
my @s = watch($fwd_start + 6 - 0.3 - time);
my @early;
@early = grep { $_->[1]{fwd}{stage} != 0 } @s;
is(scalar @early, 0, 'the 6 s hold did not end early: stage 0 in all ' . scalar(@s) . ' samples')
    or diag(sprintf('stage %d %.1f s after the start', $early[0][1]{fwd}{stage}, $early[0][0] - $fwd_start));
my $r = $s[-1][1]{fwd};
is($r->{state}, 'running', 'the forward ramp runs');
my $next = epoch($r->{nextStageAt});
ok($next && abs($next - ($fwd_start + 6 + 3600)) < 1.5,
   "nextStageAt is 6 s after the start on nginx's clock now ($r->{nextStageAt})");
ok(defined $r->{waitingFor}{holdSeconds} && $r->{waitingFor}{holdSeconds} <= 1,
   "... and so waitingFor says (" . ($r->{waitingFor}{holdSeconds} // 'none') . ' s)');
@s = watch(5, sub { $_[0]{fwd}{stage} == 1 });
is($s[-1][1]{fwd}{stage}, 1, 'the hold ended');
my $took = $s[-1][0] - $fwd_start;
ok($took >= 5.7 && $took < 8.5, sprintf('... 6 s after the start in real time (%.1f s)', $took));

# ---------------------------------------------------------------- back
my ($st) = http_request(PUT => '/admin/ramps/shop/back', body => '{"action":"restart"}',
                        headers => ['Content-Type: application/json']);
my $back_start = time;
is($st, 204, 'restart the other ramp');
$r = ramps()->{back};
is($r->{stage}, 0, 'the other ramp restarted, at stage 0');
my $shown = epoch($r->{stageStartedAt});
ok($shown && abs($shown - ($back_start + 3600)) < 1.5, "... its stage started now on nginx's clock, an hour ahead");
my @all = watch(2);
my $ticks0 = $all[-1][1]{back}{evidence}{ticks};
cmp_ok($ticks0, '>=', 1, "ticks close ($ticks0)");

ok(step_to('+0', 0), "nginx's wall clock stepped back an hour");
@s = watch(3);
push @all, @s;
my $ticks1 = $s[-1][1]{back}{evidence}{ticks};
cmp_ok($ticks1, '>=', $ticks0 + 2, "ticks keep closing after the step back ($ticks0, then $ticks1)");
my $last = $s[-1][1]{back}{lastTick};
cmp_ok($last->{on}{requests} + $last->{off}{requests}, '>', 0, 'the last tick counted evaluations');

push @all, watch($back_start + 8 - time, sub { $_[0]{back}{stage} >= 1 });
@early = grep { $_->[1]{back}{stage} != 0 && $_->[0] < $back_start + 4 - 0.3 } @all;
is(scalar @early, 0, 'the 4 s hold did not end early');
my ($first) = grep { $_->[1]{back}{stage} >= 1 } @all;
ok($first, 'the stage ended after its hold');
$first //= $all[-1];
$took = $first->[0] - $back_start;
ok($took >= 3.7 && $took < 6.5, sprintf('... 4 s after it began in real time (%.1f s)', $took));
$r = $first->[1]{back};
$shown = epoch($r->{stageStartedAt});
ok($shown && abs($shown - $first->[0]) < 1.5,
   "the new stage's start is shown on nginx's clock as it reads now ($r->{stageStartedAt})");
$shown = epoch($r->{startedAt});
ok($shown && abs($shown - $back_start) < 1.5,
   "so is the ramp's start, moved back with the clock ($r->{startedAt})");
@s = watch(6, sub { $_[0]{back}{stage} == 2 });
$took = $s[-1][0] - $back_start;
is($s[-1][1]{back}{state}, 'done', sprintf('the next hold too: done %.1f s after the start', $took));
ok($took >= 7.7 && $took < 10.5, '... 8 s of holds in real time');

# after the step back: an on-cohort failure of 62 users, 90 errors
my (@failing, $errors);
for my $i (1 .. 400) {
    my ($st) = http_request(GET => "/guard?uid=g$i");
    push @failing, "g$i" if $st == 500;
    last if @failing == 62;
}
$errors = @failing;
for my $u (@failing[0 .. 27]) {
    my ($st) = http_request(GET => "/guard?uid=$u");
    $errors++ if $st == 500;
}
my $guard;
ok(wait_for(sub {
    my (undef, undef, $b) = http_request(GET => '/status');
    my $j = eval { decode_json($b) } or return 0;
    ($guard) = grep { $_->{name} eq 'guard' } @{ $j->{projects}[0]{flags} };
    return $guard->{rolledBack};
}, 5), "after the step back, $errors on-cohort errors from " . scalar(@failing) . ' users roll the ramp back');
is($guard->{ramp}{state}, 'rolledBack', '... and the ramp stops');

unlike(read_file("$dir/logs/error.log") // '', qr/\[(alert|crit|emerg)\]/, 'no alert in the log');

close $ka if $ka;
nginx_stop($master);
done_testing();
