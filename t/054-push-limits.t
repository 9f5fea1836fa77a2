# Live push and the rest of the worker (docs/push.md, issue 15):
#   - the per-worker cap keeps half of worker_connections for everything
#     else: by default min(1024, worker_connections / 2); a value set above
#     that half is lowered to it and "nginx -t" warns, naming the place;
#   - no error log line of a push request shows its token (the request
#     line nginx appends has "token=***");
#   - the access log recipe of docs/guide.md and docs/push.md masks the token.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use FlagsPush;
use Socket qw(SOL_SOCKET SO_RCVBUF SO_LINGER);
use Time::HiRes qw(sleep time);

$SIG{PIPE} = 'IGNORE';

my $TOKEN = 'pub_secret_54';
my $WRONG = 'pub_wrong_54';
my $dir = prefix_dir('push-limits');
write_file("$dir/conf/shop.json", read_file("$ENV{TEST_NGINX_FLAGS_DIR}/rollback.json"));
{
    my @flags = map { qq({"name":"flag-number-$_-with-a-rather-long-name","enabled":true,"rolloutPercentage":100}) } 1 .. 400;
    write_file("$dir/conf/big.json", '{"flags":[' . join(',', @flags) . ']}');
}

# the line of the configuration that matches $re (1-based)
sub line_of {
    my ($text, $re) = @_;
    my @l = split /\n/, $text;
    for my $i (0 .. $#l) { return $i + 1 if $l[$i] =~ $re }
    die "no line matches $re";
}

# ---- nginx -t: the cap against worker_connections ---------------------------

{
    my $t = sub {
        my ($conf) = @_;
        write_file("$dir/conf/nginx.conf", $conf);
        my ($rc, $out) = nginx_test($dir);
        my @warn = grep { /\[warn\]/ } split /\n/, $out;
        return ($rc, join("\n", @warn), $conf);
    };
    my $http = "    flags_project shop token=$TOKEN file=shop.json;\n    flags_error_log off;\n";

    my ($rc, $warn, $conf) = $t->(nginx_conf(http => $http . "    flags_push_max_connections 200;\n", server => ''));
    my $line = line_of($conf, qr/flags_push_max_connections/);
    is($rc, 0, 'nginx -t: a cap above half of worker_connections is accepted');
    is($warn, "nginx: [warn] flags_push_max_connections 200 is more than half of worker_connections 256: "
              . "a worker holds at most 128 push connections in $dir/conf/nginx.conf:$line",
       '... with a warning naming the value, worker_connections, the cap in force and the place');

    ($rc, $warn) = $t->(nginx_conf(http => $http . "    flags_push_max_connections 128;\n", server => ''));
    is("$rc [$warn]", '0 []', 'nginx -t: a cap of exactly half: no warning');

    ($rc, $warn) = $t->(nginx_conf(http => $http . "    flags_push_max_connections 0;\n", server => ''));
    is("$rc [$warn]", '0 []', 'nginx -t: push off (0): no warning');

    # Debian's nginx.conf: worker_connections 768; the default cap is 384
    (my $debian = nginx_conf(http => $http, server => '')) =~ s/worker_connections 256;/worker_connections 768;/ or die;
    ($rc, $warn) = $t->($debian);
    is("$rc [$warn]", '0 []', 'nginx -t: the default cap with worker_connections 768: no warning (it is 384)');

    # the events block after the http block: worker_connections is known
    # only once the whole file is read
    (my $late = nginx_conf(http => $http . "    flags_push_max_connections 1024;\n", server => ''))
        =~ s/^(events \{[^\n]*\}\n)(.*)\z/$2$1/ms or die;
    $late =~ s/worker_connections 256;/worker_connections 768;/ or die;
    ($rc, $warn, $conf) = $t->($late);
    $line = line_of($conf, qr/flags_push_max_connections/);
    ok(line_of($conf, qr/^events/) > $line, 'the events block comes after the http block');
    is($rc, 0, 'nginx -t: 1024 with worker_connections 768 is accepted');
    is($warn, "nginx: [warn] flags_push_max_connections 1024 is more than half of worker_connections 768: "
              . "a worker holds at most 384 push connections in $dir/conf/nginx.conf:$line",
       '... with the warning, whatever the order of the blocks');
}

# ---- the running server: one worker, worker_connections 256, default cap ----

# the access log recipe, the very text of docs/guide.md (and docs/push.md)
sub recipe {
    my ($file) = @_;
    my $text = read_file($file) // die "no $file";
    my ($block) = $text =~ /\n```nginx\n(# push URLs carry the token[^`]*?)```\n/
        or die "no access log recipe in $file";
    return $block;
}
my $recipe = recipe("$FindBin::Bin/../docs/guide.md");
is(recipe("$FindBin::Bin/../docs/push.md"), $recipe, 'docs/push.md has the same recipe as docs/guide.md');
my ($recipe_http, $recipe_log) = $recipe =~ /\A(.*?)^(access_log [^\n]*\n)\z/ms
    or die 'the recipe ends with its access_log line';
$recipe_log =~ s{/var/log/nginx/access\.log}{$dir/logs/access.log} or die;
$recipe_http =~ s/^/    /mg;

# a listener with a small send buffer: an event stream that is not read
# blocks within seconds
my $slow_port = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)->sockport;

my $conf = nginx_conf(workers => 1, log_level => 'info', http => <<"_H_", server => <<'_S_');
    flags_project shop token=$TOKEN file=shop.json;
    flags_project big token=pub_big_54 file=big.json;
    flags_error_log off;
$recipe_http
    $recipe_log
    server {
        listen 127.0.0.1:$FlagsTest::Port;
        server_name other.example;
        location / { return 200 "other\\n"; }
    }
    server {
        listen 127.0.0.1:$slow_port sndbuf=1k;
        server_name localhost;
        location /ofrep/ { flags_ofrep; flags_push_heartbeat 100ms; send_timeout 1s; }
    }
_H_
        location /ofrep/ { flags_ofrep; }
        location /flags-admin/ { flags_admin; }
        location = /ws { flags_websocket; }
        location = /ws-fast { flags_websocket; flags_push_heartbeat 300ms; }
        location = /ws-slow { flags_websocket; send_timeout 1s; }
        location = /plain { return 200 "plain\n"; }
_S_
$conf =~ s/^    access_log off;\n//m or die;
write_file("$dir/conf/nginx.conf", $conf);
my $master = nginx_start($dir);
is(scalar(my @w = worker_pids($master)), 1, 'one worker');

# the clients (Sse, Ws) and read_until: t/helper/FlagsPush.pm

sub error_log { read_file("$dir/logs/error.log") // '' }

# ---- the cap: 128 push connections from one client, then 503 -----------------

{
    # alternately event streams and WebSockets, up to more than the
    # worker's 256 connections, until one is not answered 200 or 101
    my (@open, $e);
    for my $i (1 .. 300) {
        my $c = $i % 2 ? Sse->open("/ofrep/v1/events?token=$TOKEN") : Ws->open("/ws?token=$TOKEN");
        if ($c->{status} != 200 && $c->{status} != 101) { $e = $c; last }
        push @open, $c;
    }
    my %st;
    $st{$_->{status}}++ for @open;
    is(join(' ', map { "$_:$st{$_}" } sort keys %st), '101:64 200:64',
       'one client opens 64 event streams and 64 WebSockets ...');
    is($e->{status}, 503, '... and the 129th (an event stream) is refused: 503');
    is($e->{body}, '{"errorCode":"GENERAL","errorDetails":"this worker holds flags_push_max_connections streams already"}',
       '... with the OFREP error body');
    my $x = Ws->open("/ws?token=$TOKEN");
    is($x->{status}, 503, 'a WebSocket too: 503');
    is($x->{body}, '{"error":"too_many_connections","message":"this worker holds flags_push_max_connections push connections already"}',
       '... too_many_connections');
    close $_->{s} for $e, $x;

    my ($st, undef, $body) = http_request(GET => '/plain');
    is("$st $body", "200 plain\n", 'the same worker still answers a plain location');
    my $o = raw_connect();
    print $o "GET / HTTP/1.0\r\nHost: other.example\r\n\r\n";
    my $a = '';
    read_until($o, \$a, sub { 0 }, 2);
    like($a, qr{^HTTP/1\.1 200 OK\r\n.*\r\n\r\nother\n\z}s, '... and another virtual host');

    like(error_log(), qr/\[warn\] \d+#\d+: \*\d+ flags: push: 128 connections in this worker, flags_push_max_connections is 128, client: 127\.0\.0\.1, server: localhost, request: "GET \/ofrep\/v1\/events\?token=\*\*\* HTTP\/1\.1", host: "localhost"\n/,
         'the refusal is logged (event stream), the token masked');
    like(error_log(), qr/\[warn\] \d+#\d+: \*\d+ flags: push: 128 connections in this worker, flags_push_max_connections is 128, client: 127\.0\.0\.1, server: localhost, request: "GET \/ws\?token=\*\*\* HTTP\/1\.1", host: "localhost"\n/,
         '... (WebSocket)');

    # an event stream whose client goes away: nginx's own line
    close $open[0]{s};
    sleep 0.3;
    close $_->{s} for @open[1 .. $#open];
    sleep 0.5;
    is(Sse->open("/ofrep/v1/events?token=$TOKEN")->{status}, 200, 'closed connections free their places');
    like(error_log(), qr/\[info\] \d+#\d+: \*\d+ client prematurely closed connection, client: 127\.0\.0\.1, server: localhost, request: "GET \/ofrep\/v1\/events\?token=\*\*\* HTTP\/1\.1", host: "localhost"\n/,
         "nginx's own line for a stream that went away: the token masked");
}

# ---- every line of the push paths hides the token ----------------------------

{
    # how the end of a line must read, for each URL with its tokens masked
    my ($r_twice, $r_ws, $r_fast, $r_slow, $r_sse)
        = map { 'request: "GET ' . quotemeta($_) . ' HTTP\/1\.1", host: "localhost"\n' }
        ('/ws?a=1&TOKEN=***&token=***', '/ws?token=***', '/ws-fast?token=***',
         '/ws-slow?token=***', '/ofrep/v1/events?token=***');

    # the token twice, in another case too: both masked
    my $c = Ws->open("/ws?a=1&TOKEN=$TOKEN&token=$TOKEN");
    is($c->{status}, 101, 'WS with the token twice: 101');
    $c->send(2, "\x00\x01");
    ok($c->closed(3), 'a binary message: closed');
    like(error_log(), qr/flags: push: closing WebSocket with 1003: a binary message, client: 127\.0\.0\.1, server: localhost, $r_twice/,
         'closing with 1003: logged, every token parameter masked');

    $c = Ws->open("/ws?token=$TOKEN");
    $c->send(9, 'x' x 126);
    ok($c->closed(3), 'a ping over 125 bytes: closed');
    like(error_log(), qr/flags: push: WebSocket client sent a malformed frame, client: 127\.0\.0\.1, server: localhost, $r_ws/,
         'a malformed frame: logged, masked');

    $c = Ws->open("/ws?token=$TOKEN");
    read_until($c->{s}, \$c->{buf}, sub { length $c->{buf} > 2 }, 2);
    close $c->{s};
    sleep 0.3;
    like(error_log(), qr/flags: push: WebSocket client closed the connection, client: 127\.0\.0\.1, server: localhost, $r_ws/,
         'a client that closes: logged, masked');

    $c = Ws->open("/ws-fast?token=$TOKEN");
    ok($c->closed(4), 'a client that answers no ping: closed');
    like(error_log(), qr/flags: push: closing WebSocket with 1001: the client sent nothing, not even a pong, for two heartbeats, client: 127\.0\.0\.1, server: localhost, $r_fast/,
         'no pong: logged, masked');

    # a WebSocket client that reads nothing (30 KB a message)
    $c = Ws->open('/ws-slow?token=pub_big_54');
    setsockopt($c->{s}, SOL_SOCKET, SO_RCVBUF, 4096);
    print { $c->{s} } join '', map {
        Ws::frame_bytes(1, qq({"type":"evaluation_batch","evaluations":[{"type":"evaluation","flagName":"x","result":true,"userId":"u$_","traits":{}}]}))
    } 1 .. 400;
    ok(wait_for(sub { error_log() =~ /flags: push: (?:dropping WebSocket client: it does not read what is sent|WebSocket client timed out), client: 127\.0\.0\.1, server: localhost, $r_slow/ }, 5),
       'a WebSocket client that reads nothing: dropped, logged, masked');
    close $c->{s};

    # an event stream client that reads nothing: heartbeats and events
    # fill the buffers, then send_timeout (1s)
    $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $slow_port, Timeout => 5)
        or die "connect: $!";
    setsockopt($c, SOL_SOCKET, SO_RCVBUF, 1024);
    print $c "GET /ofrep/v1/events?token=$TOKEN HTTP/1.1\r\nHost: localhost\r\n\r\n";
    my $i = 0;
    my $t0 = time;
    ok(wait_for(sub {
           my ($method, $body) = $i++ % 2 ? ('DELETE') : ('PUT', '{"rolloutPercentage":10}');
           http_request($method => '/flags-admin/overrides/shop/plain', body => $body,
                        headers => [defined $body ? 'Content-Type: application/json' : ()]);
           sleep 0.1;
           error_log() =~ /\[info\] \d+#\d+: \*\d+ flags: push: event stream client timed out \(110: Connection timed out\), client: 127\.0\.0\.1, server: localhost, $r_sse/
       }, 30),
       "an event stream client that reads nothing: timed out, logged, masked (${\ sprintf '%.1f', time - $t0} s)");
    close $c;

    # a token no project has: refused (nothing logged), masked in the access log
    $c = Ws->open("/ws?token=$WRONG");
    is($c->{status}, 401, 'an unknown token: 401');
    close $c->{s};
}

my $log = error_log();
unlike($log, qr/\Q$TOKEN\E|pub_big_54|\Q$WRONG\E/, 'no token anywhere in the error log');
unlike($log, qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg');

# ---- the access log recipe ------------------------------------------------------

nginx_signal($master, 'HUP');         # a reload ends the stream still open
sleep 1;
my $access = read_file("$dir/logs/access.log") // '';
my $n = () = $access =~ /\n/g;
ok($n >= 140, "the access log has a line for each request ($n)");
unlike($access, qr/\Q$TOKEN\E|pub_big_54|\Q$WRONG\E/, 'no token anywhere in the access log');
like($access, qr{^127\.0\.0\.1 - - \[[^\]]+\] "GET /ofrep/v1/events\?token=\*\*\* HTTP/1\.1" 200 \d+ "-" "-"$}m,
     'an event stream: "GET /ofrep/v1/events?token=*** HTTP/1.1" 200');
like($access, qr{^127\.0\.0\.1 - - \[[^\]]+\] "GET /ofrep/v1/events\?token=\*\*\* HTTP/1\.1" 503 \d+ "-" "-"$}m,
     '... refused: 503');
like($access, qr{^127\.0\.0\.1 - - \[[^\]]+\] "GET /ws\?token=\*\*\* HTTP/1\.1" 101 \d+ "-" "-"$}m,
     'a WebSocket: 101');
like($access, qr{^127\.0\.0\.1 - - \[[^\]]+\] "GET /ws\?a=1&TOKEN=\*\*\* HTTP/1\.1" 101 \d+ "-" "-"$}m,
     'the token twice: all after the first token= is masked');
like($access, qr{^127\.0\.0\.1 - - \[[^\]]+\] "GET /ws\?token=\*\*\* HTTP/1\.1" 401 \d+ "-" "-"$}m,
     'an unknown token: masked too');
like($access, qr{^127\.0\.0\.1 - - \[[^\]]+\] "GET /plain HTTP/1\.1" 200 6 "-" "-"$}m,
     'a request without a token is logged as nginx logs it');

nginx_stop($master);

done_testing();
