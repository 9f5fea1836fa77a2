# staleSeconds runs on the monotonic clock (docs/sync.md, "Staleness"):
# nginx runs under libfaketime, which steps its wall clock (and only that:
# FAKETIME_DONT_FAKE_MONOTONIC) when the test rewrites a file; two workers,
# interval=1s, a real redis-server.
#
#   forward an hour with Redis answering: staleSeconds stays within an
#   interval in every read (the host is not stale);
#   Redis killed, then back an hour: staleSeconds keeps growing a second a
#   second (the host is stale), while lagMs, the same age on the wall
#   clock, reads 0; the metric says what flags_status says.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP ();
use HTTP::Date qw(str2time);
use Time::HiRes qw(sleep time);

my ($lib) = glob('/usr/lib/*/faketime/libfaketime.so.1');
plan skip_all => 'libfaketime is not installed (Debian package faketime)' unless $lib;
plan skip_all => 'not under valgrind: libfaketime is preloaded' if $FlagsTest::Valgrind;
# libfaketime and the sanitizer runtime both wrap the clocks (t/092-ramp-clock.t)
plan skip_all => 'not under the sanitizer run: libfaketime and libasan both wrap the clocks'
    if ($ENV{LD_PRELOAD} // '') =~ /libasan/;
my $redis_bin = `command -v redis-server 2>/dev/null`;
plan skip_all => 'redis-server is not installed' unless $redis_bin;

my $rport = unused_port();
my $dir = prefix_dir('sync-stale-clock');
my $rc_file = "$dir/faketime.rc";
write_file($rc_file, "+0\n");
my ($redis, $master);

END { local $?; redis_stop(); }

# a crash: SIGKILL to its PID
sub redis_stop {
    return unless $redis;
    kill 'KILL', $redis;
    waitpid $redis, 0;
    undef $redis;
}

$redis = spawn("$dir/logs/redis.log", 'redis-server', '--port', $rport, '--bind', '127.0.0.1',
               '--save', '', '--appendonly', 'no', '--dir', $dir);
ok(wait_port($rport), 'redis-server listens');

write_file("$dir/conf/shop.json",
           '{"flags": [{"name": "calm", "enabled": true, "rolloutPercentage": 100}]}');
my $conf = nginx_conf(workers => 2, http => <<"_H_", server => <<'_S_');
    flags_project shop token=tok_1 file=shop.json;
    flags_sync redis://127.0.0.1:$rport interval=1s prefix=t088c: host=h0;
_H_
        location = /flags-status { flags_status; }
        location = /metrics { flags_metrics; }
_S_
# the workers keep libfaketime's settings (nginx empties their environment)
$conf =~ s/^(pid .*\n)/$1 . join('', map { "env $_;\n" }
    qw(FAKETIME_TIMESTAMP_FILE FAKETIME_NO_CACHE FAKETIME_DONT_FAKE_MONOTONIC LD_PRELOAD))/me;
write_file("$dir/conf/nginx.conf", $conf);

my $preload = $ENV{LD_PRELOAD} ? "$ENV{LD_PRELOAD}:$lib" : $lib;
$master = nginx_start($dir, wrap => "env LD_PRELOAD=$preload FAKETIME_TIMESTAMP_FILE=$rc_file "
                                  . "FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1");

sub status {
    my ($st, undef, $body) = http_request(GET => '/flags-status');
    return undef unless $st == 200;
    return JSON::PP::decode_json($body)->{sync};
}

# nginx's wall clock, as its Date header says, minus ours (seconds)
sub skew {
    my (undef, $h) = http_request(GET => '/flags-status');
    return str2time($h->{date} // '') - time;
}

sub step_to {
    my ($offset, $want) = @_;
    write_file($rc_file, "$offset\n");
    # whole seconds in the Date header: within 3 s of what was asked
    return wait_for(sub { abs(skew() - $want) < 3 }, 5);
}

ok(wait_for(sub { my $s = status(); $s && $s->{connected} }, 5), 'connected');
cmp_ok(abs(skew()), '<', 3, "nginx's wall clock is ours to begin with");

# ---- forward an hour, Redis answering ------------------------------------------

ok(step_to('+3600', 3600), "nginx's wall clock stepped forward an hour");
{
    my @stale;
    for (1 .. 15) {
        push @stale, status()->{staleSeconds};
        sleep 0.2;
    }
    my ($max) = sort { $b <=> $a } @stale;
    cmp_ok($max, '<', 1.5, "staleSeconds stays within an interval in 15 reads over 3 s (max $max)");
}

# ---- Redis killed, back an hour ----------------------------------------------------

redis_stop();
ok(wait_for(sub { (status()->{staleSeconds} // 0) > 2 }, 5), 'Redis killed: staleSeconds past 2');
ok(step_to('+0', 0), "nginx's wall clock stepped back an hour");
{
    my $s1 = status();
    sleep 1;
    my $s2 = status();
    my $d = $s2->{staleSeconds} - $s1->{staleSeconds};
    ok($d >= 0.95 && $d <= 1.5, sprintf 'staleSeconds still grows a second a second (%.3f)', $d);
    cmp_ok($s2->{staleSeconds}, '>', 3, "... past 3 ($s2->{staleSeconds})");
    is($s2->{lagMs}, 0, 'lagMs, on the wall clock, reads 0: the last success is an hour ahead of it');
    is($s2->{connected}, JSON::PP::false, 'not connected');

    my $before = status()->{staleSeconds};
    my (undef, undef, $m) = http_request(GET => '/metrics');
    ($m) = $m =~ /^flags_sync_stale_seconds (\S+)$/m;
    my $after = status()->{staleSeconds};
    ok(defined $m && $m >= $before - 0.02 && $m <= $after + 0.02,
       'flags_sync_stale_seconds ' . ($m // 'none') . " between staleSeconds $before and $after");
}

nginx_stop($master);
unlike(read_file("$dir/logs/error.log"), qr/\[(?:alert|crit|emerg)\]/, 'no alert, crit or emerg');

done_testing();
