# With error_log at debug (an nginx built --with-debug, as Debian's is),
# the module's background work says what it did (issue 16): the report
# batch's write, the state file's write, the push tick telling a changed
# project's clients, and the sync round sent to Redis.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);

my $bin = $ENV{TEST_NGINX_BINARY} || 'nginx';
plan skip_all => 'nginx is not built --with-debug' unless `$bin -V 2>&1` =~ /--with-debug/;
my $redis_bin = `command -v redis-server 2>/dev/null`;
chomp $redis_bin;
plan skip_all => 'redis-server is not installed' unless $redis_bin;

my $dir = prefix_dir('debug-log');
my $rport = unused_port();
my $redis = fork // die "fork: $!";
if (!$redis) {
    open STDOUT, '>', "$dir/redis.log";
    open STDERR, '>&', \*STDOUT;
    { no warnings 'exec';
      exec $redis_bin, '--port', $rport, '--bind', '127.0.0.1', '--save', '',
           '--appendonly', 'no', '--dir', $dir; }
    POSIX::_exit(127);
}
END { local $?; if ($redis) { kill 'KILL', $redis; waitpid $redis, 0 } }
ok(wait_port($rport), 'redis-server listens');

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": 100},
  {"name": "calm", "enabled": true, "rolloutPercentage": 100}
]}
_J_

my $conf = nginx_conf(workers => 1, log_level => 'debug', http => <<"_H_", server => <<'_S_');
    flags_project shop token=tok_1 file=$dir/conf/shop.json;
    flags_error_log $dir/logs/reports.log;
    flags_state_file $dir/state.json;
    flags_sync redis://127.0.0.1:$rport/7 interval=200ms prefix=t037: host=d0;
_H_
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags { flags_evaluate; }
        location /ofrep/ { flags_ofrep; }
        location /flags-admin/ { allow 127.0.0.1; deny all; flags_admin; }
_S_
write_file("$dir/conf/nginx.conf", $conf);
my $master = nginx_start($dir);

my $log = sub { read_file("$dir/logs/error.log") };

# the first sync round: connected, nothing to send yet (what was counted
# before the first round is not sent, docs/sync.md)
ok(wait_for(sub { $log->() =~ /\[debug\] \d+#\d+: flags: sync: round of project "shop": 0 of 2 flags sent, \d+ bytes$/m }, FlagsTest::slow(5)),
   'debug: a quiet sync round sends no flag');

# a report: the batch is written
my ($st) = http_request(POST => '/ingest/errors',
                        body => '{"flagName":"risky","message":"boom"}',
                        headers => ['Authorization: Bearer tok_1',
                                    'Content-Type: application/json']);
is($st, 204, 'a report');
ok(wait_for(sub { $log->() =~ /\[debug\] \d+#\d+: flags: report batch of 1 lines, \d+ bytes: written$/m }, 5),
   'debug: the report batch and its write');

# the sync rounds, one per interval: the report's delta goes out alone
# (the override below waits for it)
ok(wait_for(sub { $log->() =~ /\[debug\] \d+#\d+: flags: sync: round of project "shop": 1 of 2 flags sent, \d+ bytes$/m }, FlagsTest::slow(5)),
   'debug: a sync round that sends the one flag with an error delta');
# the first answer carries the project's control hash (no epoch known yet),
# and each round says when it is done
like($log->(), qr/\[debug\] \d+#\d+: flags: sync: project "shop" read at version \d+: \d+ fields used, \d+ ignored$/m,
     'debug: the first answer, its control hash read');
like($log->(), qr/\[debug\] \d+#\d+: flags: sync: round done in \d+ ms$/m,
     'debug: a sync round done');

# an SSE client of the project, then an admin change: the push tick
my $sse = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $FlagsTest::Port,
                                Timeout => 5) or die "connect: $!";
print $sse "GET /ofrep/v1/events?token=tok_1 HTTP/1.1\r\nHost: localhost\r\n"
         . "Accept: text/event-stream\r\n\r\n";
my $head = '';
while ($head !~ /\r\n\r\n/) {
    my $n = sysread($sse, my $chunk, 4096);
    last unless $n;
    $head .= $chunk;
}
like($head, qr{^HTTP/1\.1 200 }, 'an SSE stream is open');

($st) = http_request(PUT => '/flags-admin/overrides/shop/calm',
                     body => '{"enabled": false}',
                     headers => ['Content-Type: application/json']);
is($st, 204, 'an override: the project changes');
ok(wait_for(sub { $log->() =~ /\[debug\] \d+#\d+: flags: push: project "shop" changed \(answer version \d+\): telling its clients$/m }, 5),
   'debug: the push tick tells the changed project\'s clients');
like($log->(), qr/\[debug\] \d+#\d+: \*\d+ flags: project "shop" answers changed \(answer version \d+\)/m,
     'debug: the control change bumped the answer version');

# the same caller three times: the third answer comes from the memo, and
# is counted when the cycle ends
for my $i (1 .. 3) {
    ($st) = http_request(GET => '/flags?userId=m1', headers => ['Authorization: Bearer tok_1']);
    is($st, 200, "GET /flags for m1, $i");
}
ok(wait_for(sub { $log->() =~ /\[debug\] \d+#\d+: flags: memo fold: 1 answers of project "shop" counted$/m }, 5),
   'debug: an answer from the memo, counted by the fold');
ok(wait_for(sub { $log->() =~ /\[debug\] \d+#\d+: flags: state snapshot \d+ written to "\Q$dir\E\/state\.json", \d+ bytes$/m }, 5),
   'debug: the state file write, with its snapshot, path and size');


close $sse;
unlike($log->(), qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log');
nginx_stop($master);
done_testing();
