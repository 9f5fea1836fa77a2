# Live push (docs/push.md): OFREP's SSE stream and the DeployRamp WebSocket
# learn every change of their project's answers within a tick; hostile
# WebSocket clients are closed with the right code; an exiting worker ends
# its connections so that clients reconnect to the new workers.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use FlagsPush;
use Time::HiRes qw(sleep time);

$SIG{PIPE} = 'IGNORE';

my $dir = prefix_dir('push');
write_file("$dir/conf/shop.json", read_file("$ENV{TEST_NGINX_FLAGS_DIR}/rollback.json"));
write_file("$dir/conf/blog.json", read_file("$ENV{TEST_NGINX_FLAGS_DIR}/blog.json"));

sub conf {
    my ($extra) = @_;
    return nginx_conf(log_level => $ENV{PUSH_LOG} // 'info', http => <<"_H_", server => <<'_S_');
    flags_project shop token=pub_shop_1 file=shop.json;
    flags_project blog token=pub_blog_1 file=blog.json;
    flags_error_log off;
    server_tokens off;
    $extra
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location /flags-admin/ { flags_admin; }
        location /ofrep/ { flags_ofrep; }
        location /ofrep-fast/ { flags_ofrep; flags_push_heartbeat 300ms; }
        location /ofrep-off/ { flags_ofrep; flags_ofrep_events off; }
        location = /ws { flags_websocket; }
        location = /ws-fast { flags_websocket; flags_push_heartbeat 300ms; }
        location = /ws-small { flags_websocket; flags_max_report_size 1k; }
        location /api/sdk/ { flags_sdk; }
        location = /flags-status { flags_status; }
_S_
}

write_file("$dir/conf/nginx.conf", conf(''));

my $master = nginx_start($dir);
is(scalar(my @w = worker_pids($master)), 2, 'two workers');

# ---- helpers ---------------------------------------------------------------

sub flags_get {
    my ($token, $query) = @_;
    my (undef, undef, $body) = http_request(GET => "/flags?$query",
                                            headers => ["Authorization: Bearer $token"]);
    return $body;
}

sub report {
    my ($token, $flag) = @_;
    my ($st) = http_request(POST => '/ingest/errors', body => qq({"flagName":"$flag","message":"m"}),
                            headers => ["Authorization: Bearer $token", 'Content-Type: application/json']);
    return $st;
}

sub admin {
    my ($method, $path, $body) = @_;
    my ($st) = http_request($method => "/flags-admin/$path", body => $body,
                            headers => [defined $body ? ('Content-Type: application/json') : ()]);
    return $st;
}

# the SSE and WebSocket clients (Sse, Ws) and read_until: t/helper/FlagsPush.pm

my $Ev = sub { qq(data: {"type":"refetchEvaluation","etag":"$_[0]"}) };

# ---- SSE: refusals ----------------------------------------------------------

{
    my $s = Sse->open('/ofrep/v1/events');
    is($s->{status}, 401, 'SSE without a token: 401');
    like($s->{head}, qr/\r\nWWW-Authenticate: Bearer(?:\r\n|$)/, '... with the Bearer challenge');
    like($s->{head}, qr/\r\nContent-Length: 0\r\n/i, '... and no body');

    $s = Sse->open('/ofrep/v1/events?token=nope');
    is($s->{status}, 401, 'SSE with an unknown token: 401');
    like($s->{head}, qr/\r\nWWW-Authenticate: Bearer error="invalid_token"(?:\r\n|$)/, '... invalid_token');

    my ($st, $h, $body) = http_request(POST => '/ofrep/v1/events?token=pub_shop_1');
    is($st, 405, 'SSE by POST: 405');
    is($h->{allow}, 'GET', '... Allow: GET');
    is($body, '{"errorCode":"GENERAL","errorDetails":"the event stream is GET"}', '... OFREP body');

    ($st, undef, $body) = http_request(GET => '/ofrep-off/v1/events?token=pub_shop_1');
    is($st, 404, 'flags_ofrep_events off: 404');
    is($body, '{"errorCode":"GENERAL","errorDetails":"no event stream here"}', '... OFREP body');

    ($st, $h, $body) = http_request(POST => '/ofrep-off/v1/evaluate/flags',
                                    headers => ['Authorization: Bearer pub_blog_1',
                                                'Content-Type: application/json'], body => '{}');
    is($body, '{"flags":[{"key":"comments","value":true,"reason":"STATIC","variant":"on","metadata":{"rolloutPercentage":100,"rolledBack":false}}]}',
       'flags_ofrep_events off: eventStreams is not listed');
    ($st, $h, $body) = http_request(POST => '/ofrep/v1/evaluate/flags',
                                    headers => ['Authorization: Bearer pub_blog_1',
                                                'Content-Type: application/json'], body => '{}');
    like($body, qr{,"eventStreams":\[\{"type":"sse","endpoint":\{"requestUri":"/ofrep/v1/events\?token=pub_blog_1"\},"inactivityDelaySec":120\}\]\}$},
       'with push: eventStreams is listed');
}

# ---- SSE: the stream and its events ------------------------------------------

my $sse = Sse->open('/ofrep/v1/events?token=pub_shop_1');
is($sse->{status}, 200, 'SSE: 200');
is($sse->{h}{'content-type'}, 'text/event-stream', 'SSE: Content-Type');
is($sse->{h}{'cache-control'}, 'no-store', 'SSE: Cache-Control');
is($sse->{h}{'x-accel-buffering'}, 'no', 'SSE: X-Accel-Buffering');
is($sse->{h}{'transfer-encoding'}, 'chunked', 'SSE: chunked');
my $blog = Sse->open('/ofrep/v1/events?token=pub_blog_1');     # another project
my $hdr = Sse->open('/ofrep/v1/events', headers => "Authorization: Bearer pub_shop_1\r\n");
is($hdr->{status}, 200, 'SSE with a Bearer header instead of the query: 200');

is($sse->event(0.5), undef, 'no event before a change');

# 1. a rollback trips (4 evaluations, then 3 reports: min_errors=3, rate 50%)
flags_get('pub_shop_1', "userId=u$_") for 1 .. 4;
is(report('pub_shop_1', 'risky'), 204, 'report 1') for 1 .. 2;
my $t0 = time;
is(report('pub_shop_1', 'risky'), 204, 'report 3 trips the rollback');
my $ev = $sse->event(2);
my $lat = time - $t0;
is($ev, $Ev->(1), 'SSE: refetchEvaluation after the rollback');
ok($lat <= 0.25, "SSE: within 250 ms of the report (${\ sprintf '%.0f', $lat * 1000} ms)");
is($hdr->event(1), $Ev->(1), 'SSE (header token): the same event');
is($blog->event(0.3), undef, 'SSE of another project: nothing');

# 2. the rollback is cleared
$t0 = time;
is(admin(DELETE => 'rollbacks/shop/risky'), 204, 'rollback cleared');
is($sse->event(2), $Ev->(2), 'SSE: event after the clear');
$lat = time - $t0;
ok($lat <= 0.25, "... within 250 ms (${\ sprintf '%.0f', $lat * 1000} ms)");

# 3. an override set, then removed
$t0 = time;
is(admin(PUT => 'overrides/shop/plain', '{"rolloutPercentage":10}'), 204, 'override set');
is($sse->event(2), $Ev->(3), 'SSE: event after the override');
$lat = time - $t0;
ok($lat <= 0.25, "... within 250 ms (${\ sprintf '%.0f', $lat * 1000} ms)");
is(admin(DELETE => 'overrides/shop/plain'), 204, 'override removed');
is($sse->event(2), $Ev->(4), 'SSE: event after the removal');
is($blog->event(0.3), undef, 'SSE of blog: still nothing');

# 4. blog's own change reaches blog only
is(admin(PUT => 'overrides/blog/comments', '{"enabled":false}'), 204, 'blog override');
is($blog->event(2), $Ev->(1), 'SSE of blog: its own event (its own version)');
is($sse->event(0.3), undef, 'SSE of shop: nothing for blog');
is(admin(DELETE => 'overrides/blog/comments'), 204, 'blog override removed');
is($blog->event(2), $Ev->(2), 'SSE of blog: event');

# heartbeat comments
{
    my $fast = Sse->open('/ofrep-fast/v1/events?token=pub_shop_1');
    is($fast->event(1.2), undef, 'fast heartbeat: no event');
    ok(($fast->{comments} // 0) >= 2, "fast heartbeat: comments every 300 ms ($fast->{comments})");
    like($fast->{text} . ": heartbeat\n\n", qr/^(: heartbeat\n\n)*$/, 'heartbeats are SSE comments');
}

sub sdk_flags {
    my ($body) = @_;
    my (undef, undef, $b) = http_request(POST => '/api/sdk/flags', body => $body,
        headers => ['Authorization: Bearer pub_shop_1', 'Content-Type: application/json']);
    return $b;
}

# what flags_refreshed must carry for a user: POST {loc}flags's answer
sub refreshed { my $b = sdk_flags($_[0]); $b =~ s/^\{/{"type":"flags_refreshed",/; $b }

sub eval_batch {
    my ($user, $traits) = @_;
    my $t = join ',', map { qq("$_":"$traits->{$_}") } sort keys %{ $traits || {} };
    return qq({"type":"evaluation_batch","evaluations":[{"type":"evaluation","flagName":"half","result":true,)
         . qq("traits":{$t},"userId":"$user","timestamp":1700000000000}]});
}

# ---- WebSocket: refusals -----------------------------------------------------------

{
    my $ws = Ws->open('/ws');
    is($ws->{status}, 401, 'WS without a token: 401');
    is($ws->{body}, '{"error":"unauthorized","message":"an \"Authorization: Bearer <token>\" header is required"}',
       '... the JSON of GET /flags');
    $ws = Ws->open('/ws?token=nope');
    is($ws->{status}, 401, 'WS with an unknown token: 401');
    is($ws->{body}, '{"error":"invalid_token","message":"the token does not belong to any project"}', '... invalid_token');
    like($ws->{head}, qr/\r\nWWW-Authenticate: Bearer error="invalid_token"(?:\r\n|$)/, '... challenge');

    my ($st, $h, $body) = http_request(POST => '/ws?token=pub_shop_1');
    is($st, 405, 'WS by POST: 405');
    is($h->{allow}, 'GET', '... Allow: GET');

    ($st, undef, $body) = http_request(GET => '/ws?token=pub_shop_1');
    is($st, 400, 'a plain GET: 400');
    is($body, '{"error":"bad_handshake","message":"expected \"Upgrade: websocket\" and \"Connection: Upgrade\""}',
       '... bad_handshake');

    $ws = Ws->open('/ws?token=pub_shop_1', request => "GET /ws?token=pub_shop_1 HTTP/1.1\r\nHost: x\r\n"
        . "Upgrade: websocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        . "Sec-WebSocket-Version: 8\r\n\r\n");
    is($ws->{status}, 426, 'another WebSocket version: 426');
    like($ws->{head}, qr/\r\nSec-WebSocket-Version: 13(?:\r\n|$)/, '... naming 13');
    is($ws->{body}, '{"error":"bad_handshake","message":"Sec-WebSocket-Version must be 13"}', '... body');

    $ws = Ws->open('/ws?token=pub_shop_1', key => 'c2hvcnQ=');
    is($ws->{status}, 400, 'a key that is not 16 bytes: 400');
    is($ws->{body}, '{"error":"bad_handshake","message":"Sec-WebSocket-Key must be 16 bytes in base64"}', '... body');
}

# ---- WebSocket: handshake, first message, user, pushes ----------------------------------

my $anon = '{"type":"flags_refreshed","flags":[{"name":"risky","enabled":true,"rolloutPercentage":100,"value":null,"segments":[],"stickyAssignments":[]},{"name":"safe","enabled":true,"rolloutPercentage":100,"value":null,"segments":[],"stickyAssignments":[]},{"name":"plain","enabled":true,"rolloutPercentage":100,"value":null,"segments":[],"stickyAssignments":[]},{"name":"half","enabled":true,"rolloutPercentage":0,"value":null,"segments":[{"segmentId":"beta","condition":{"type":"match","traitKey":"plan","traitValue":"pro"},"rolloutPercentage":0,"sticky":false}],"stickyAssignments":[]}]}';

my $ws = Ws->open('/ws?token=pub_shop_1', key => 'dGhlIHNhbXBsZSBub25jZQ==');
(my $head = $ws->{head}) =~ s/\r\nDate: [^\r]+/\r\nDate: D/;
is($head, "HTTP/1.1 101 Switching Protocols\r\nServer: nginx\r\nDate: D\r\nConnection: upgrade\r\n"
        . "Upgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
   'WS: the handshake answer, byte for byte (RFC 6455 sample key)');
my $m = $ws->message(2);
is_deeply($m, [1, $anon], 'WS: first message: flags_refreshed for no user, exact');
is($m->[1], refreshed('{}'), '... the flags POST {loc}flags gives no user');

# a user in "half": in the beta segment and in its 50 %
my ($in) = grep { flags_get('pub_shop_1', "userId=$_&trait_plan=pro") =~ /"name":"half","enabled":true/ } map { "user-$_" } 1 .. 50;
ok($in, "a user in half's rollout ($in)");
$ws->text(eval_batch($in, { plan => 'pro' }));
$m = $ws->message(2);
is_deeply($m, [1, refreshed(qq({"userId":"$in","traits":{"plan":"pro"}}))],
          'WS: evaluation_batch sets the user: flags_refreshed for that user');
like($m->[1], qr/"name":"half","enabled":true,"rolloutPercentage":0,"value":null,"segments":\[\{"segmentId":"beta","condition":\{"type":"match","traitKey":"plan","traitValue":"pro"\},"rolloutPercentage":100,/,
     '... where half is in');
$ws->text(eval_batch($in, { plan => 'pro' }));
is($ws->message(0.4), undef, 'WS: the same user again: nothing sent');

# the batches' evaluations count like GET /flags (docs/push.md)
{
    my $counters = sub {
        my (undef, undef, $b) = http_request(GET => '/flags-status');
        my ($c, $w) = $b =~ /"name":"half",.*?"counters":(\{[^}]*\}),"window":(\{[^}]*\}),"rollbackRule"/;
        $w =~ s/,"perSecond":\[[^}]*\]//;     # its seconds: t/091-dashboard.t
        return "$c $w";
    };
    my $before = $counters->();
    my ($e, $en) = $before =~ /"evaluations":(\d+),"enabledEvaluations":(\d+)/;
    my ($we) = $before =~ /\} \{"seconds":\d+,"enabledEvaluations":(\d+)/;
    $ws->text(qq({"type":"evaluation_batch","evaluations":[)
        . qq({"type":"evaluation","flagName":"half","result":true,"userId":"$in","traits":{"plan":"pro"}},)
        . qq({"type":"evaluation","flagName":"half","result":false,"userId":"$in","traits":{"plan":"pro"}},)
        . qq({"type":"evaluation","flagName":"nope","result":true,"userId":"$in","traits":{"plan":"pro"}},)
        . qq({"type":"evaluation","flagName":"half","result":"yes","userId":"$in","traits":{"plan":"pro"}},)
        . qq(7,{"type":"evaluation","flagName":"half","result":true,"userId":"$in","traits":{"plan":"pro"}}]}));
    is($ws->message(0.4), undef, 'WS: a batch of the same user: nothing sent');
    my $after = $counters->();
    is($after, sprintf('{"evaluations":%d,"enabledEvaluations":%d,"errors":0} {"seconds":60,"enabledEvaluations":%d,"errors":0,"sources":0}',
                       $e + 3, $en + 2, $we + 2),
       'WS: 3 evaluations of half counted, 2 enabled; unknown flags and bad elements count nothing');
}
$ws->text(qq({"type":"performance_batch","performanceEvents":[{"type":"performance","flagName":"half","durationMs":1.5,"branch":"enabled","traits":{},"userId":"$in","timestamp":1}]}));
is_deeply($ws->message(2), [1, refreshed(qq({"userId":"$in"}))], 'WS: performance_batch with other traits: a new flags_refreshed');
$ws->text(eval_batch($in, { plan => 'pro' }));
$m = $ws->message(2);
$ws->text('{"type":"hello"}');
is($ws->message(0.4), undef, 'WS: a message of another type: ignored');

my $blog_ws = Ws->open('/ws?token=pub_blog_1');
is_deeply($blog_ws->message(2), [1, '{"type":"flags_refreshed","flags":[{"name":"comments","enabled":true,"rolloutPercentage":100,"value":null,"segments":[],"stickyAssignments":[]}]}'],
          'WS of blog: its flags');

# a change pushes flags_refreshed for the connection's user
$t0 = time;
is(admin(PUT => 'overrides/shop/plain', '{"enabled":false}'), 204, 'override: plain off');
$m = $ws->message(2);
$lat = time - $t0;
is_deeply($m, [1, refreshed(qq({"userId":"$in","traits":{"plan":"pro"}}))], 'WS: flags_refreshed after the override');
like($m->[1], qr/"name":"plain","enabled":false,/, '... plain is off');
ok($lat <= 0.25, "WS: within 250 ms (${\ sprintf '%.0f', $lat * 1000} ms)");
is($blog_ws->message(0.3), undef, 'WS of blog: nothing');
is($sse->event(1), $Ev->(5), 'SSE: the same change');
is(admin(DELETE => 'overrides/shop/plain'), 204, 'override removed');
like($ws->message(2)->[1], qr/"name":"plain","enabled":true,/, 'WS: plain is on again');

# a rollback (the DELETE empties risky's window, without a change to push)
is(admin(DELETE => 'rollbacks/shop/risky'), 204, 'window emptied');
is($ws->message(0.3), undef, 'WS: nothing pushed for that');
flags_get('pub_shop_1', "userId=u$_") for 1 .. 4;
report('pub_shop_1', 'risky') for 1 .. 2;
$t0 = time;
report('pub_shop_1', 'risky');
$m = $ws->message(2);
$lat = time - $t0;
like($m->[1], qr/^\{"type":"flags_refreshed","flags":\[\{"name":"risky","enabled":false,/, 'WS: after a rollback, risky is off');
ok($lat <= 0.25, "WS: within 250 ms of the report (${\ sprintf '%.0f', $lat * 1000} ms)");
is(admin(DELETE => 'rollbacks/shop/risky'), 204, 'rollback cleared');
like($ws->message(2)->[1], qr/"name":"risky","enabled":true,/, 'WS: risky is on again');

# bad messages: an error message, the connection goes on
$ws->text('{"type":');
is_deeply($ws->message(2), [1, '{"type":"error","error":"invalid_json","message":"message is not valid JSON: parse error: premature EOF (near byte 8)"}'],
          'WS: a message that is not JSON: an error message');
$ws->text('{"type":"evaluation_batch","evaluations":[{"userId":5}]}');
is_deeply($ws->message(2), [1, '{"type":"error","error":"invalid_field","message":"evaluations[0].userId must be a string"}'],
          'WS: a batch with a bad field: an error message');
$ws->send(9, 'abc');
is($ws->message(0.5), undef, 'WS: a ping ...');
is_deeply($ws->{pong_data}, ['abc'], '... is answered with its payload');

# fragments: one message in three frames, a ping between them
$ws->send(1, substr(eval_batch('frag', {}), 0, 10), fin => 0);
$ws->send(9, 'p');
$ws->send(0, substr(eval_batch('frag', {}), 10, 20), fin => 0);
$ws->send(0, substr(eval_batch('frag', {}), 30), fin => 1);
is_deeply($ws->message(2), [1, refreshed('{"userId":"frag"}')], 'WS: a fragmented message is one message');

# the close handshake
$ws->send(8, pack('n', 1000) . 'bye');
is($ws->close_code(2), 1000, 'WS: the close is answered with 1000');
ok($ws->closed(2), '... and the server closes the connection');

# ---- WebSocket: hostile clients ---------------------------------------------------

sub fresh_ws {
    my ($path, %o) = @_;
    my $c = Ws->open($path // '/ws?token=pub_shop_1', %o);
    $c->message(2);                                 # the first flags_refreshed
    return $c;
}

{
    my $c = fresh_ws();
    $c->send(1, '{"type":"x"}', mask => 0);
    is($c->close_code, 1002, 'an unmasked frame: close 1002');
    ok($c->closed(3), '... and the connection is closed');

    $c = fresh_ws('/ws-small?token=pub_shop_1');
    $c->text('{"type":"hello","pad":"' . ('x' x 2000) . '"}');
    is($c->close_code, 1009, 'a message over flags_max_report_size (1k): close 1009');
    ok($c->closed(3), '... closed');

    $c = fresh_ws('/ws-small?token=pub_shop_1');
    $c->send(1, 'x' x 600, fin => 0);
    $c->send(0, 'x' x 600, fin => 1);
    is($c->close_code, 1009, 'fragments that add up to more than 1k: close 1009');

    $c = fresh_ws();
    $c->send(1, '{"type":', fin => 0);
    $c->send(1, '"x"}', fin => 1);
    is($c->close_code, 1002, 'a new text frame inside a fragmented message: close 1002');

    $c = fresh_ws();
    $c->send(2, "\x00\x01");
    is($c->close_code, 1003, 'a binary message: close 1003');

    $c = fresh_ws();
    $c->send(1, "{\"type\":\"\xff\"}");
    is($c->close_code, 1007, 'a text message that is not UTF-8: close 1007');

    $c = fresh_ws();
    $c->send(9, 'x' x 126);
    is($c->close_code, 'empty', 'a ping longer than 125 bytes: a close frame without a code');
    ok($c->closed(3), '... closed');

    $c = fresh_ws();
    my $s = $c->{s};
    print $s join '', map { Ws::frame_bytes(9, 'f') } 1 .. 1200;
    is($c->close_code(5), 1008, 'a flood of 1200 pings in a second: close 1008');
    ok(($c->{pongs} // 0) <= 1000, "... with the pongs of the first 1000 at most (${\ ($c->{pongs} // 0)})");
    ok($c->closed(3), '... closed');

    $c = fresh_ws();
    # 3 MB at once: more than 1 MiB falls in one second even when a slow
    # (sanitized) worker takes two seconds to read them
    print $s join '', map { Ws::frame_bytes(1, '{"type":"x","p":"' . ('y' x 2000) . '"}') } 1 .. 1500
        for $s = $c->{s};
    is($c->close_code(5), 1008, 'more than 1 MiB in a second: close 1008');

    # a peer that vanishes without a FIN: the heartbeat finds it
    $c = fresh_ws('/ws-fast?token=pub_shop_1');
    my $t = time;
    my $m = $c->message(3, pong => 0);
    my $gone = time - $t;
    is_deeply($m, [8, pack('n', 1001)], 'a client that answers no ping: close 1001 after two heartbeats');
    ok($gone >= 0.55 && $gone <= 1.5, "... after ${\ sprintf '%.2f', $gone} s (heartbeat 300ms)");
    ok($c->{pings} >= 1, "... having been pinged ($c->{pings})");

    my $alive = fresh_ws('/ws-fast?token=pub_shop_1');
    is($alive->message(1.5), undef, 'a client that answers pings stays open');
    ok($alive->{pings} >= 3, "... pinged every 300 ms ($alive->{pings})");

    # a client that just goes away: the worker lets go (and still serves)
    for (1 .. 5) { my $g = fresh_ws(); close $g->{s} }
    $c = fresh_ws();
    $c->send(9, 'still');
    is($c->message(0.5), undef, 'after clients vanished ...');
    is_deeply($c->{pong_data}, ['still'], '... the others are served');
}

# frames sent with the handshake, in the same packet
{
    my $c = Ws->open('/ws?token=pub_shop_1', after => Ws::frame_bytes(1, eval_batch('early', {})));
    is($c->{status}, 101, 'a frame right behind the handshake: 101');
    is_deeply($c->message(2), [1, $anon], '... the first flags_refreshed');
    is_deeply($c->message(2), [1, refreshed('{"userId":"early"}')], '... then the one for the early batch');
}

# keep-alive: an ordinary request, then the handshake on the same connection
{
    my $s = raw_connect();
    print $s "GET /flags?userId=u HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer pub_blog_1\r\n\r\n";
    my $buf = '';
    read_until($s, \$buf, sub { $buf =~ /\r\n\r\n.*"segments":\[\]\}\]\}/s }, 3);
    like($buf, qr{^HTTP/1\.1 200 .*Connection: keep-alive}s, 'keep-alive: GET /flags first');
    print $s "GET /ws?token=pub_blog_1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           . "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    my $c = Ws->from($s);
    is($c->{status}, 101, 'keep-alive: then the handshake: 101');
    like($c->message(2)->[1], qr/^\{"type":"flags_refreshed","flags":\[\{"name":"comments"/, '... and the channel works');

    $s = raw_connect();
    print $s "GET /flags?userId=u HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer pub_blog_1\r\n\r\n";
    $buf = '';
    read_until($s, \$buf, sub { $buf =~ /\r\n\r\n.*"segments":\[\]\}\]\}/s }, 3);
    print $s "GET /ofrep/v1/events?token=pub_blog_1 HTTP/1.1\r\nHost: x\r\n\r\n";
    my $e = bless { s => $s, buf => '', text => '', eof => 0 }, 'Sse';
    read_until($s, \$e->{buf}, sub { $e->{buf} =~ /\r\n\r\n.*\r\n\r\n/s }, 3);
    like($e->{buf}, qr{^HTTP/1\.1 200 OK\r\n.*Content-Type: text/event-stream}s, 'keep-alive: an event stream after GET /flags');
    $e->{buf} =~ s/^.*?\r\n\r\n//s;
    is(admin(PUT => 'overrides/blog/comments', '{"rolloutPercentage":5}'), 204, 'blog changes');
    is($e->event(2), $Ev->(3), '... the kept-alive stream has its event');
    is(admin(DELETE => 'overrides/blog/comments'), 204, 'blog back');
    is($e->event(2), $Ev->(4), '... and the next');
}

# a slow client: it reads nothing while the server has megabytes for it
{
    my @flags = map { qq({"name":"flag-number-$_-with-a-rather-long-name","enabled":true,"rolloutPercentage":100}) } 1 .. 400;
    write_file("$dir/conf/big.json", '{"flags":[' . join(',', @flags) . ']}');
}

# ---- reload with connections open ---------------------------------------------------

sub is_exiting {
    my ($pid) = @_;
    my $t = read_file("/proc/$pid/cmdline") // '';
    return $t =~ /shutting down/;
}

{
    my @old = worker_pids($master);
    my $s1 = Sse->open('/ofrep/v1/events?token=pub_shop_1');
    my $s2 = Sse->open('/ofrep/v1/events?token=pub_blog_1');
    my @w1 = map { fresh_ws() } 1 .. 3;
    is($s1->{status}, 200, 'before the reload: streams open');

    # plain goes to 50 %: shop's definitions change, blog's do not
    (my $shop = read_file("$dir/conf/shop.json")) =~ s/"name": "plain", "enabled": true, "rolloutPercentage": 100/"name": "plain", "enabled": true, "rolloutPercentage": 50/
        or die 'no plain';
    write_file("$dir/conf/shop.json", $shop);
    my $t = time;
    nginx_signal($master, 'HUP');

    is($s1->event(5), $Ev->(9), 'reload: the shop stream gets a last event (new definitions)');
    ok($s1->ended(3), '... and then ends, so the client reconnects');
    is($s2->event(3), undef, 'reload: the blog stream ends without an event');
    ok($s2->{done} || $s2->{eof}, '... it ended');
    for my $i (0 .. $#w1) {
        is($w1[$i]->close_code(5), 1001, "reload: WebSocket $i closed with 1001");
    }
    ok(wait_for(sub { my %now = map { $_ => 1 } worker_pids($master); !grep { $now{$_} } @old }, 10),
       'the old workers exit');
    ok(time - $t < 3, "... promptly (${\ sprintf '%.1f', time - $t} s)");
    my @new = worker_pids($master);
    is(scalar @new, 2, 'two new workers');

    my $c = Ws->open('/ws?token=pub_shop_1');
    like($c->message(2)->[1], qr/"name":"plain","enabled":true,"rolloutPercentage":0,/,
         'reconnected: the new definition (plain at 50 %, out for no user)');
    my $e = Sse->open('/ofrep/v1/events?token=pub_shop_1');
    $c->text(eval_batch($in, { plan => 'pro' }));
    $c->message(2);
    is(admin(PUT => 'overrides/shop/plain', '{"enabled":false}'), 204, 'a change after the reload');
    like($c->message(2)->[1], qr/"name":"plain","enabled":false,/, '... pushed by the new workers (WS)');
    is($e->event(2), $Ev->(10), '... and (SSE)');
    is(admin(DELETE => 'overrides/shop/plain'), 204, 'override removed');
    $c->message(2);
    $e->event(2);
}

nginx_stop($master);

# ---- the per-worker cap, one worker ---------------------------------------------------

write_file("$dir/conf/nginx.conf", nginx_conf(workers => 1, http => <<'_H_', server => <<'_S_'));
    flags_project shop token=pub_shop_1 file=shop.json;
    flags_project big token=pub_big_1 file=big.json;
    flags_error_log off;
    flags_push_max_connections 3;
_H_
        location /ofrep/ { flags_ofrep; }
        location = /ws { flags_websocket; }
        location = /ws-slow { flags_websocket; send_timeout 1s; }
        location /flags-admin/ { flags_admin; }
_S_
$master = nginx_start($dir);
my ($worker) = worker_pids($master);

# ---- SSE: hostile clients (one worker, cap 3) ----------------------------------------
{
    my @e = map { Sse->open('/ofrep/v1/events?token=pub_shop_1') } 1 .. 3;
    is_deeply([map { $_->{status} } @e], [200, 200, 200], 'SSE: three streams');
    is(Sse->open('/ofrep/v1/events?token=pub_shop_1')->{status}, 503, 'SSE: a fourth over the cap: 503');

    # two peers vanish: one resets the connection, one just closes it
    setsockopt($e[0]{s}, Socket::SOL_SOCKET(), Socket::SO_LINGER(), pack('ii', 1, 0));
    close $e[0]{s};
    close $e[1]{s};
    is(admin(PUT => 'overrides/shop/plain', '{"rolloutPercentage":10}'), 204, 'a change after two peers vanished');
    is($e[2]->event(2), $Ev->(1), 'SSE: the remaining stream still gets its event');
    sleep 0.3;
    my @n = map { Sse->open('/ofrep/v1/events?token=pub_shop_1') } 1 .. 2;
    is_deeply([map { $_->{status} } @n], [200, 200], 'SSE: the vanished peers freed their places');

    # a client that floods its stream with bytes the server never asked for
    my $s = $n[0]{s};
    my $junk = 'x' x 65536;
    my $sent = 0;
    local $SIG{PIPE} = 'IGNORE';
    for (1 .. 64) {
        my $w = syswrite($s, $junk);
        last unless defined $w && $w > 0;
        $sent += $w;
    }
    ok($sent > 0, "SSE flood: the client wrote $sent bytes after its request");
    is(admin(DELETE => 'overrides/shop/plain'), 204, 'a change during the flood');
    is($e[2]->event(2), $Ev->(2), 'SSE: the other stream gets the event');
    is($n[1]->event(2), $Ev->(2), 'SSE: and the new one');
    is_deeply([worker_pids($master)], [$worker], 'SSE flood: the worker is the same process');
    close $_->{s} for $e[2], @n;
    sleep 0.3;
}
{
    my @c = map { fresh_ws() } 1 .. 2;
    my $e = Sse->open('/ofrep/v1/events?token=pub_shop_1');
    is($e->{status}, 200, 'cap 3: third connection (SSE) accepted');
    my $x = Ws->open('/ws?token=pub_shop_1');
    is($x->{status}, 503, 'cap 3: the fourth (WS) is refused with 503');
    is($x->{body}, '{"error":"too_many_connections","message":"this worker holds flags_push_max_connections push connections already"}',
       '... too_many_connections');
    my $y = Sse->open('/ofrep/v1/events?token=pub_shop_1');
    is($y->{status}, 503, 'cap 3: an SSE stream too');
    close $c[0]{s};
    sleep 0.2;
    $x = Ws->open('/ws?token=pub_shop_1');
    is($x->{status}, 101, 'a closed connection frees its place');

    # the slow client: alternating users make a 30 KB flags_refreshed each
    close $_->{s} for @c, $x, $e;
    sleep 0.2;
    my $slow = Ws->open('/ws-slow?token=pub_big_1');
    is($slow->{status}, 101, 'slow client: connected');
    setsockopt($slow->{s}, Socket::SOL_SOCKET(), Socket::SO_RCVBUF(), 4096);
    my $s = $slow->{s};
    print $s join '', map { Ws::frame_bytes(1, eval_batch("u$_", {})) } 1 .. 400;
    sleep 2.5;
    my ($n, $close) = (0, 0);
    while (my $f = $slow->frame(2)) { $n++; $close = 1 if $f->[1] == 8 }
    ok($slow->{eof}, 'slow client: the server drops the connection');
    ok($n < 400, "... before it has all 400 answers ($n)");
    is($close, 0, '... without a close frame (it would not be read)');
    like(read_file("$dir/logs/error.log"), qr/flags: push: (dropping WebSocket client: it does not read what is sent|WebSocket client timed out)/,
         '... and says why in the error log');
}

unlike(read_file("$dir/logs/error.log"), qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg in the error log');

done_testing();
