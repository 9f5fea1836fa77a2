# OFREP's SSE stream over HTTP/2 (issue 16): a listener with http2
# (cleartext, prior knowledge, as curl's --http2-prior-knowledge speaks
# it) serves the event stream on one HTTP/2 stream with the same headers
# as over HTTP/1.1 (no Transfer-Encoding: HTTP/2 frames the body), a
# change of the project reaches it as the same refetchEvaluation event,
# heartbeats follow, and other HTTP/2 requests are answered while the
# stream stays open.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);

plan skip_all => 'curl has no HTTP/2' unless `env -u LD_PRELOAD curl -V 2>&1` =~ /\bHTTP2\b/;

my $dir = prefix_dir('push-http2');
my $h2 = unused_port();
write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": 100},
  {"name": "calm", "enabled": true, "rolloutPercentage": 100}
]}
_J_

write_file("$dir/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=pub_shop_1 file=$dir/conf/shop.json;
    flags_error_log off;
    server {
        listen 127.0.0.1:$h2 http2;
        server_name localhost;
        location /ofrep/ { flags_ofrep; flags_push_heartbeat 1s; }
        location = /plain { return 200 "plain\\n"; }
    }
_H_
        location /flags-admin/ { allow 127.0.0.1; deny all; flags_admin; }
_S_

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'a listener with http2 and flags_ofrep') or diag($out);
my $master = nginx_start($dir);

# curl holds the stream open 4 s and writes headers and body apart
my $curl = fork // die "fork: $!";
if (!$curl) {
    { no warnings 'exec';
      exec 'env', '-u', 'LD_PRELOAD', 'curl', '-s', '-N', '--http2-prior-knowledge',
           '--max-time', '4', '-D', "$dir/sse.head", '-o', "$dir/sse.body",
           "http://127.0.0.1:$h2/ofrep/v1/events?token=pub_shop_1"; }
    POSIX::_exit(127);
}
ok(wait_for(sub { -s "$dir/sse.head" }, 3), 'the event stream answered over HTTP/2');
my $head = read_file("$dir/sse.head");
like($head, qr{^HTTP/2 200 ?\r\n}, 'HTTP/2 200');
like($head, qr{\r\ncontent-type: text/event-stream\r\n}i, 'content-type: text/event-stream');
like($head, qr{\r\ncache-control: no-store\r\n}i, 'cache-control: no-store');
unlike($head, qr{transfer-encoding}i, 'no transfer-encoding (HTTP/2 frames the body)');

# another stream on another connection while the event stream is open
my $plain = `env -u LD_PRELOAD curl -s --http2-prior-knowledge -w ' %{http_version} %{http_code}' http://127.0.0.1:$h2/plain`;
is($plain, "plain\n 2 200", 'another HTTP/2 request is answered meanwhile');

my ($st) = http_request(PUT => '/flags-admin/overrides/shop/calm',
                        body => '{"enabled": false}',
                        headers => ['Content-Type: application/json']);
is($st, 204, 'an override changes the project');

my $t0 = time;
ok(wait_for(sub { (read_file("$dir/sse.body") // '') =~ /refetchEvaluation/ }, 3),
   'the change reaches the HTTP/2 event stream');
my $body = read_file("$dir/sse.body");
like($body, qr/^data: \{"type":"refetchEvaluation","etag":"1"\}\n\n/m,
     'as the same event as over HTTP/1.1');

waitpid $curl, 0;
like(read_file("$dir/sse.body"), qr/^: heartbeat\n\n/m, 'the heartbeat comment arrives too (1 s)')
    or diag(read_file("$dir/sse.body"));
is($? >> 8, 28, 'curl ended at its own --max-time: the stream stayed open');

unlike(read_file("$dir/logs/error.log"), qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log');
nginx_stop($master);
done_testing();
