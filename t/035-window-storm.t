# Changing the rollback window at reload under load loses no count: every
# acknowledged report is in the lifetime counter and in the window, while
# old workers keep counting during each reload.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(sleep time);

my $dir = prefix_dir('window-storm');
my $log = sub { read_file("$dir/logs/error.log") // '' };

write_file("$dir/conf/shop.json",
           '{"flags":[{"name":"w","enabled":true,"rolloutPercentage":100}]}');

sub conf {
    my ($window) = @_;
    write_file("$dir/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_rollback min_errors=100000000 rate=100% window=${window}s;
    flags_error_log off;
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
_S_
}

# One client: reports on a keep-alive connection for $secs seconds; a
# connection closed by a worker that shuts down is reopened.  Prints the
# number of 204 answers.
sub client {
    my ($secs, $out) = @_;
    my $body = '{"flagName":"w","message":"m"}';
    my $req = "POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\n"
            . "Authorization: Bearer tok_1\r\nContent-Type: application/json\r\n"
            . "Content-Length: " . length($body) . "\r\n\r\n$body";
    my ($acked, $s) = (0, undef);
    my $until = time + $secs;
    while (time < $until) {
        $s //= IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $FlagsTest::Port,
                                     Timeout => 5);
        next unless $s;
        print $s $req;
        my $head = '';
        while ($head !~ /\r\n\r\n/) {
            my $n = sysread($s, $head, 4096, length $head);
            last unless $n;
        }
        if ($head =~ m{^HTTP/1\.1 204 }) {
            $acked++;
        }
        if ($head !~ /\r\n\r\n/ || $head =~ /^Connection: close/mi) {
            close $s;
            undef $s;
        }
    }
    write_file($out, $acked);
    POSIX::_exit(0);        # not exit: END blocks would stop the nginx
}

conf(60);
my $master = nginx_start($dir);

my @kids;
for my $c (1 .. 4) {
    my $pid = fork // die "fork: $!";
    client(4, "$dir/acked.$c") if $pid == 0;
    push @kids, $pid;
}

my $reloads = 0;
my $t0 = time;
while (time - $t0 < 3.5) {
    conf($reloads % 2 ? 60 : 61);
    nginx_signal($master, 'HUP');
    $reloads++;
    sleep 0.4;
}
waitpid($_, 0) for @kids;

my $acked = 0;
$acked += read_file("$dir/acked.$_") // 0 for 1 .. 4;
ok($acked > 100, "reports were acknowledged under the storm ($acked, $reloads reloads)");

# the old workers are gone once only two workers are left
ok(wait_for(sub { worker_pids($master) == 2 }, 15), 'the old workers have exited');
conf($reloads % 2 ? 60 : 61);
nginx_signal($master, 'HUP');     # merges the retired windows
ok(wait_for(sub { worker_pids($master) == 2 && (() = $log->() =~ /reconfiguring/g) >= 2 * ($reloads + 1) }, 15),
   'one more reload');
sleep 0.5;

my (undef, undef, $status) = http_request(GET => '/flags-status');
my ($errors) = $status =~ /"counters":\{"evaluations":\d+,"enabledEvaluations":\d+,"errors":(\d+)\}/;
my ($window) = $status =~ /"window":\{"seconds":\d+,"enabledEvaluations":\d+,"errors":(\d+),"sources":\d+,"perSecond":\[[][0-9,]*\]\}/;
is($errors, $acked, 'every acknowledged report is in the lifetime counter');
is($window, $acked, 'and in the window');

unlike($log->(), qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg');
nginx_stop($master);
done_testing();
