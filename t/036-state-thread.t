# The state file is written off the event loop: in a thread of
# flags_state_thread_pool.  An admin answer still waits until the file holds
# its change; while the write is held up (here: the test holds the file's
# fcntl lock) the same worker keeps answering other requests; changes made
# meanwhile are written together, in order, by the next write.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use Config;
use Fcntl qw(F_SETLKW F_SETLK F_WRLCK F_UNLCK SEEK_SET O_RDWR O_CREAT);
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(sleep time);

my $dir = prefix_dir('state-thread');
my $log = sub { read_file("$dir/logs/error.log") // '' };
my $state = "$dir/conf/state.json";

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "tuned", "enabled": true, "rolloutPercentage": 100},
  {"name": "other", "enabled": true, "rolloutPercentage": 100}
]}
_J_

sub conf {
    my (%o) = @_;
    my $conf = nginx_conf(workers => $o{workers} // 1, http => <<"_H_", server => <<'_S_');
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_state_file $state;
    ${\($o{pool} ? "flags_state_thread_pool $o{pool};" : '')}
_H_
        location = /flags { flags_evaluate; }
        location /flags-admin/ { flags_admin; }
_S_
    $conf =~ s/^(pid .*)$/$1\n$o{main}/m if $o{main};
    write_file("$dir/conf/nginx.conf", $conf);
}

# a request sent now, its answer read later
sub send_request {
    my ($method, $path, $body) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $FlagsTest::Port,
                                  Timeout => 10) or die "connect: $!";
    $body //= '';
    print $s "$method $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
           . "Content-Length: " . length($body) . "\r\n\r\n$body";
    return $s;
}

sub answered_within {
    my ($s, $secs) = @_;
    return IO::Select->new($s)->can_read($secs) ? 1 : 0;
}

sub status_of {
    my ($s) = @_;
    local $/;
    my $resp = <$s> // '';
    close $s;
    return $resp =~ m{^HTTP/1\.\d (\d+)} ? $1 : 0;
}

# --- a pool that does not exist fails nginx -t ---------------------------------
{
    conf(pool => 'nope');
    my ($rc, $out) = nginx_test($dir);
    isnt($rc, 0, 'flags_state_thread_pool naming no thread_pool fails nginx -t');
    like($out, qr/unknown thread pool "nope"/, 'nginx says which pool');
}

# --- a pool of its own; the answer waits for the write -------------------------
{
    conf(pool => 'flagsio', main => 'thread_pool flagsio threads=1;');
    my ($rc, $out) = nginx_test($dir);
    is($rc, 0, 'a thread_pool of its own passes nginx -t') or diag $out;
    my $master = nginx_start($dir);
    my ($worker) = worker_pids($master);
    my @tasks = glob("/proc/$worker/task/*");
    SKIP: {
        # valgrind runs the guest's threads in its own way
        skip 'not under valgrind', 1 if $FlagsTest::Valgrind;
        ok(@tasks >= 2, 'the worker runs the pool\'s thread') or diag "tasks: @tasks";
    }

    for my $pct (1 .. 20) {
        my ($st) = http_request(PUT => '/flags-admin/overrides/shop/tuned',
                                body => qq({"rolloutPercentage": $pct}));
        my $file = read_file($state) // '';
        if ($st != 204 || $file !~ /"flag":"tuned".*"rolloutPercentage":$pct\b/s) {
            fail("override $pct: answered $st, file: $file");
            last;
        }
    }
    pass('each of 20 changes is in the file by the time 204 arrives');
    nginx_stop($master);
}

# --- a held-up write does not hold up the event loop ---------------------------
SKIP: {
    skip 'struct flock layout known for 64-bit Linux only', 9
        unless $^O eq 'linux' && $Config{ptrsize} == 8;

    unlink $state;
    conf();                                  # the "default" pool, implicitly
    my $master = nginx_start($dir);

    # take the fcntl lock of <file>.lock as another writer would
    sysopen(my $lk, "$state.lock", O_RDWR|O_CREAT, 0600) or die "$state.lock: $!";
    my $flock = pack('s s x4 q q i x4', F_WRLCK, SEEK_SET, 0, 0, 0);
    fcntl($lk, F_SETLKW, $flock) or die "fcntl: $!";

    my $first = send_request(PUT => '/flags-admin/overrides/shop/tuned', '{"enabled": false}');
    ok(!answered_within($first, 0.5), 'the admin answer waits while the write cannot proceed');

    my $t0 = time;
    my ($st, undef, $body) = http_request(GET => '/flags?userId=u', headers => ['Authorization: Bearer tok_1']);
    is($st, 200, 'meanwhile the same worker answers an evaluation');
    ok(time - $t0 < 0.5, 'at once: the event loop is not blocked');
    like($body, qr/"name":"tuned","enabled":false/, 'the change is in effect already');

    # a second change while the first write is in flight
    my $second = send_request(PUT => '/flags-admin/overrides/shop/other', '{"rolloutPercentage": 7}');
    ok(!answered_within($second, 0.3), 'a change made meanwhile waits too');

    my $unlock = pack('s s x4 q q i x4', F_UNLCK, SEEK_SET, 0, 0, 0);
    fcntl($lk, F_SETLK, $unlock) or die "fcntl: $!";
    close $lk;

    ok(answered_within($first, 5) && answered_within($second, 5), 'both are answered once the lock is free');
    is(status_of($first), 204, 'the first with 204');
    is(status_of($second), 204, 'the second with 204');
    my $file = read_file($state) // '';
    ok($file =~ /"flag":"tuned".*"override":\{"enabled":false\}/ && $file =~ /"flag":"other".*"rolloutPercentage":7\b/,
       'the file holds both changes') or diag $file;
    nginx_stop($master);
}

# --- two workers, many changes at once: the file ends with the last ------------
{
    unlink $state;
    conf(workers => 2);
    my $master = nginx_start($dir);
    my @s;
    for my $pct (1 .. 30) {
        push @s, send_request(PUT => '/flags-admin/overrides/shop/' . ($pct % 2 ? 'tuned' : 'other'),
                              qq({"rolloutPercentage": $pct}));
    }
    my @st = map { status_of($_) } @s;
    is(scalar(grep { $_ == 204 } @st), 30, '30 concurrent changes on 2 workers are all answered 204');
    # the zone holds the last change each flag got; the file must hold it too
    my (undef, undef, $flags) = http_request(GET => '/flags?userId=u', headers => ['Authorization: Bearer tok_1']);
    my %zone = $flags =~ /"name":"(tuned|other)","enabled":(?:true|false),"rolloutPercentage":([\d.]+)/g;
    my $file = read_file($state) // '';
    my %disk = $file =~ /"flag":"(tuned|other)".*?"rolloutPercentage":([\d.]+)/g;
    is_deeply(\%disk, \%zone, 'the file describes the zone after the last answer') or diag "$flags\n$file";
    nginx_stop($master);
}

unlike($log->(), qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg');

done_testing();
