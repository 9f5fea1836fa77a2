# flags_dashboard (docs/dashboard.md), two workers: the page and its files
# with their headers and tags, config.json with and without admin=,
# status.json as flags_status, the ring of recent changes ("events" in
# flags_status, every kind, escaped), the event stream (a change on any
# worker reaches it; the push cap; a peer that vanishes; a client that
# never reads), and flags_admin refusing a browser's call for another site.
# Issue 23: the four security headers on every answer of the location (404,
# 405, 503, and nginx's own 401, 403, 413), and an Origin refused unless
# its host is one of the server's names (server_name, or the address the
# connection arrived at), not merely the Host the client sent.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use FlagsPush;
use JSON::PP;
use MIME::Base64 ();

my $dir = prefix_dir('dashboard');
my $Port = $FlagsTest::Port;

sub flags_file {
    my ($pct) = @_;
    return qq({"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 1, "window": 60}},
  {"name": "steady", "enabled": true, "rolloutPercentage": $pct},
  {"name": "ramped", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 10, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}}
 ]});
}
write_file("$dir/conf/shop.json", flags_file(30));
write_file("$dir/conf/blog.json", qq({"flags": [{"name": "comments", "enabled": true, "rolloutPercentage": 100}]}));
# a user name a browser must show as text (auth_basic: "{PLAIN}" password)
my $hostile = '<img src=x onerror=alert(1)>"';
write_file("$dir/conf/htpasswd", "$hostile:{PLAIN}secret\nalice:{PLAIN}pw\n");

my $http = <<"_C_";
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_project blog token=tok_blog file=$dir/conf/blog.json;
    flags_error_log off;
    flags_push_max_connections 3;
    flags_push_heartbeat 1s;
_C_

my $server = <<"_C_";
        server_name *.example.com .flags.test www.example.* ~^re[0-9]+[.]test\$;
        location /dash/ { flags_dashboard admin=/admin/; }
        location /ro/ { flags_dashboard; }
        location /locked/ {
            flags_dashboard;
            auth_basic "flags";
            auth_basic_user_file $dir/conf/htpasswd;
        }
        location /denied/ { flags_dashboard; deny all; }
        location /small/ { flags_dashboard; client_max_body_size 1; }
        location = /status { flags_status; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags { flags_evaluate; }
        location /admin/ {
            flags_admin;
            auth_basic "flags";
            auth_basic_user_file $dir/conf/htpasswd;
        }
_C_

write_file("$dir/conf/nginx.conf", nginx_conf(http => $http, server => $server, log_level => 'error'));
my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'flags_dashboard admin=/admin/ and a read-only one are valid') or diag($out);

# nginx -t names what is wrong
write_file("$dir/conf/bad.conf", nginx_conf(http => $http, server => "        location /d/ { flags_dashboard admin=flags-admin; }\n"));
my ($brc, $bout) = nginx_test($dir, 'conf/bad.conf');
isnt($brc, 0, 'admin= without slashes is refused');
like($bout, qr/"flags_dashboard" admin=flags-admin: the path of a flags_admin location, starting and ending with "\/" \(such as admin=\/flags-admin\/\) in \S+bad\.conf:\d+/, '... naming the file and line');
write_file("$dir/conf/bad.conf", nginx_conf(http => $http, server => "        location /d/ { flags_dashboard bogus; }\n"));
($brc, $bout) = nginx_test($dir, 'conf/bad.conf');
like($bout, qr/invalid parameter "bogus" of "flags_dashboard": expected admin=PATH/, 'an unknown parameter is refused');

my $master = nginx_start($dir);

my $csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

# ---------------------------------------------------------------- files
my %etag;
for my $case (['/dash/', 'text/html; charset=utf-8'], ['/dash/index.html', 'text/html; charset=utf-8'],
              ['/dash/app.js', 'text/javascript; charset=utf-8'], ['/dash/app.css', 'text/css; charset=utf-8'])
{
    my ($path, $type) = @$case;
    my ($st, $h, $body) = http_request(GET => $path);
    is($st, 200, "$path: 200");
    is($h->{'content-type'}, $type, "... $type");
    is($h->{'content-security-policy'}, $csp, '... the strict Content-Security-Policy');
    is($h->{'x-content-type-options'}, 'nosniff', '... nosniff');
    is($h->{'x-frame-options'}, 'DENY', '... not framed');
    is($h->{'referrer-policy'}, 'no-referrer', '... no referrer');
    like($h->{etag} // '', qr/^"[0-9a-f]{16}"$/, '... a strong tag');
    is($h->{'content-length'}, length $body, '... its whole length');
    $etag{$path} = $h->{etag};
    my ($st2, $h2, $b2) = http_request(GET => $path, headers => ["If-None-Match: $h->{etag}"]);
    is($st2, 304, '... 304 for its tag');
    is($b2, '', '... with no body');
}
is($etag{'/dash/'}, $etag{'/dash/index.html'}, 'the page has one tag at both names');
isnt($etag{'/dash/app.js'}, $etag{'/dash/app.css'}, 'each file its own');
my (undef, undef, $page) = http_request(GET => '/dash/');
is($page, read_file("$FindBin::Bin/../src/dashboard/index.html"), 'the page is src/dashboard/index.html, byte for byte');
unlike($page, qr/<script>|\son\w+=|style=/i, 'the page has no inline script, handler or style');
my (undef, undef, $js) = http_request(GET => '/dash/app.js');
is($js, read_file("$FindBin::Bin/../src/dashboard/app.js"), 'app.js, byte for byte');

my ($st, $h, $body) = http_request(GET => '/dash/config.json');
is($st, 200, 'config.json: 200');
is($body, '{"admin":"/admin/","status":"status.json","events":"events"}', '... the admin path and where the data is');
is($h->{'cache-control'}, 'no-store', '... not cached');
is($h->{'content-security-policy'}, $csp, '... with the policy too');
(undef, undef, $body) = http_request(GET => '/ro/config.json');
is($body, '{"admin":null,"status":"status.json","events":"events"}', 'without admin=: read-only');

# the four headers of every answer of the page's location
sub secure {
    my ($h, $what) = @_;
    is_deeply([@$h{qw(content-security-policy x-content-type-options x-frame-options referrer-policy)}],
              [$csp, 'nosniff', 'DENY', 'no-referrer'], "$what: the page's four security headers");
}

($st, $h, $body) = http_request(GET => '/dash/nope');
is($st, 404, 'another path: 404');
is_deeply(decode_json($body), {error => 'not_found', message => 'the operator\'s page has index.html, app.js, app.css, config.json, status.json and events'}, '... not_found, naming the paths');
secure($h, '404');
($st, $h) = http_request(POST => '/dash/', body => 'x');
is($st, 405, 'POST: 405');
is($h->{allow}, 'GET, HEAD', '... Allow: GET, HEAD');
secure($h, '405');
($st, $h) = http_request(DELETE => '/ro/app.js');
is($st, 405, 'DELETE: 405');
secure($h, '405 without a body');
# nginx's own answers in the page's location
($st, $h) = http_request(GET => '/locked/');
is($st, 401, 'auth_basic without a password: 401');
like($h->{'www-authenticate'} // '', qr/^Basic realm="flags"/, '... asking for one');
secure($h, '401 of auth_basic');
($st, $h) = http_request(GET => '/locked/app.css', headers => ['Authorization: Basic ' . MIME::Base64::encode_base64('alice:pw', '')]);
is($st, 200, '... with it: 200');
secure($h, '200 behind auth_basic');
($st, $h) = http_request(GET => '/denied/');
is($st, 403, 'deny all: 403');
secure($h, '403 of deny');
($st, $h) = http_request(POST => '/small/', body => 'xx');
is($st, 413, 'a body over client_max_body_size: 413');
secure($h, '413');
($st, $h) = http_request(GET => '/dash/app.js', headers => ["If-None-Match: $etag{'/dash/app.js'}"]);
is($st, 304, 'a matching If-None-Match: 304');
secure($h, '304');
($st, $h) = http_request(GET => '/status');
is($h->{'content-security-policy'}, undef, 'another location\'s answer has none of them');
($st, $h, $body) = http_request(HEAD => '/dash/app.js');
is($st, 200, 'HEAD: 200');

# ---------------------------------------------------------------- status.json
sub status_doc {
    my ($path) = @_;
    my (undef, undef, $b) = http_request(GET => $path);
    return decode_json($b);
}
my $doc = status_doc('/dash/status.json');
is_deeply([map { $_->{name} } @{ $doc->{projects} }], ['shop', 'blog'], 'status.json: both projects');
is_deeply([map { $_->{name} } @{ $doc->{projects}[0]{flags} }], ['risky', 'steady', 'ramped'], '... and their flags');
like($doc->{projects}[0]{flags}[0]{definedAt}, qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, '... each with definedAt');
ok(exists $doc->{events}, '... and the events');
my $plain = status_doc('/status');
delete $_->{events} for $doc, $plain;
is(scalar @{ $plain->{projects} }, 2, 'flags_status has the same projects');

# ---------------------------------------------------------------- events
ok(wait_for(sub { @{ status_doc('/status')->{events} } == 1 }, 5), 'the ramp\'s start is the first event');
my $sse = Sse->open('/dash/events');
is($sse->{status}, 200, 'the event stream: 200');
is($sse->{h}{'content-type'}, 'text/event-stream', '... text/event-stream');
is($sse->{h}{'content-security-policy'}, $csp, '... with the policy');
is($sse->event(0.5), undef, 'no event before a change');

sub report { http_request(POST => '/ingest/errors', body => qq({"flagName":"$_[0]","message":"boom"}),
                          headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']) }
report('risky') for 1 .. 3;
my $ev = $sse->event(3);
like($ev // '', qr/^data: \{"type":"changed","seq":\d+\}$/, 'a rollback on some worker reaches the stream');
ok(wait_for(sub { status_doc('/status')->{projects}[0]{flags}[0]{rolledBack} }, 3), 'risky is rolled back');

sub admin {
    my ($m, $path, $b, @h) = @_;
    return http_request($m, "/admin/$path", body => $b // '',
                        headers => ['Authorization: Basic ' . MIME::Base64::encode_base64($h[0] // 'alice:pw', ''),
                                    'Content-Type: application/json', @h[1 .. $#h]]);
}
($st) = admin(DELETE => 'rollbacks/shop/risky');
is($st, 204, 'clear the rollback');
($st) = admin(PUT => 'overrides/shop/steady', '{"rolloutPercentage": 12.5}', "$hostile:secret");
is($st, 204, 'an override by a user with a hostile name');
($st) = admin(DELETE => 'overrides/shop/steady');
is($st, 204, 'remove it');
($st) = admin(PUT => 'ramps/shop/ramped', '{"action":"pause"}');
is($st, 204, 'pause the ramp');
write_file("$dir/conf/shop.json", flags_file(40));
nginx_signal($master, 'HUP');
ok(wait_for(sub { grep { $_->{kind} eq 'definition' } @{ status_doc('/status')->{events} } }, 5), 'a reload with a new definition');

my $events = status_doc('/status')->{events};
my @kinds = map { "$_->{kind}/$_->{flag}/$_->{by}" } @$events;
is_deeply([@kinds[0 .. 6]],
          ['definition/steady/definition', 'ramp/ramped/admin', 'overrideRemoved/steady/admin',
           'override/steady/admin', 'clear/risky/admin', 'rollback/risky/rule', 'stage/ramped/rule'],
          'events, newest first: each kind, who made it') or diag(explain(\@kinds));
my ($ov) = grep { $_->{kind} eq 'override' } @$events;
is($ov->{who}, $hostile, 'the hostile user name is kept as it is (escaped in JSON)');
is($ov->{detail}, 'rolloutPercentage 12.5', '... with the override');
my ($rb) = grep { $_->{kind} eq 'rollback' } @$events;
is($rb->{detail}, '3 errors and 0 enabled evaluations in 60 s from 1 distinct source', 'the rollback\'s counts, "1 distinct source" (issue 24)');
is($rb->{who}, undef, '... no user');
my ($cl) = grep { $_->{kind} eq 'clear' } @$events;
is($cl->{who}, 'alice', 'the clear names alice');
like($cl->{at}, qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, '... and when');
ok($events->[0]{seq} > $events->[1]{seq}, 'sequence numbers fall down the list');
my (undef, undef, $raw) = http_request(GET => '/status');
like($raw, qr/"who":"<img src=x onerror=alert\(1\)>\\""/, 'the name is JSON-escaped in the document');
my $before = $doc->{projects}[0]{flags}[1]{definedAt};
ok(wait_for(sub { status_doc('/status')->{projects}[0]{flags}[1]{definedAt} gt $before }, 5),
   'the new definition has a later definedAt (once the old workers are gone)');

# ---------------------------------------------------------------- streams
# the old stream ended with its worker's generation; a new one
$sse = Sse->open('/dash/events');
is($sse->{status}, 200, 'a new stream after the reload');
my @more = map { Sse->open('/dash/events') } 1 .. 7;
my @refused = grep { $_->{status} == 503 } @more;
cmp_ok(scalar @refused, '>=', 2, 'eight streams past flags_push_max_connections (3 a worker, 2 workers): 503');
is(decode_json($refused[0]{body})->{error}, 'too_many_connections', '... too_many_connections') if @refused;
secure($refused[0]{h}, '503') if @refused;
close $_->{s} for @more;
close $sse->{s};
sleep 1;
my @again = map { Sse->open('/dash/events') } 1 .. 2;
is(scalar(grep { $_->{status} == 200 } @again), 2, 'peers that vanished free their places');

# a client that never reads: changes merge into one waiting event; the
# server stays well
my $lazy = Sse->open('/dash/events');
for my $i (1 .. 100) {
    admin(PUT => 'overrides/shop/steady', qq({"rolloutPercentage": $i}));
}
my ($st100) = admin(DELETE => 'overrides/shop/steady');
is($st100, 204, 'a hundred changes while a client reads nothing');
like($again[0]->event(3) // '', qr/"type":"changed"/, 'a reading client gets its event');
my ($ok200) = http_request(GET => '/dash/config.json');
is($ok200, 200, 'the server answers');
close $_->{s} for @again, $lazy;

# ---------------------------------------------------------------- cross-site
($st, undef, $body) = admin(PUT => 'overrides/shop/steady', '{"enabled": false}', 'alice:pw', 'Origin: http://evil.example');
is($st, 403, 'an admin PUT with another site\'s Origin: 403');
is_deeply(decode_json($body), {error => 'cross_origin', message => 'a browser sent this for another site: flags_admin answers only its own origin'}, '... cross_origin');
($st) = admin(DELETE => 'rollbacks/shop/risky', undef, 'alice:pw', 'Sec-Fetch-Site: cross-site');
is($st, 403, 'Sec-Fetch-Site: cross-site: 403');
($st) = admin(DELETE => 'rollbacks/shop/risky', undef, 'alice:pw', 'Sec-Fetch-Site: same-site');
is($st, 403, 'Sec-Fetch-Site: same-site: 403');
($st) = admin(PUT => 'overrides/shop/steady', '{"enabled": false}', 'alice:pw', 'Origin: null');
is($st, 403, 'an opaque Origin (null): 403');
($st) = admin(PUT => 'overrides/shop/steady', '{"enabled": false}', 'alice:pw', "Origin: http://localhost", 'Sec-Fetch-Site: same-origin');
is($st, 204, 'the page\'s own origin: 204');
is(status_doc('/status')->{projects}[0]{flags}[1]{override}{enabled}, JSON::PP::false, '... applied');
($st) = admin(POST => 'overrides/shop/steady', 'enabled=false', 'alice:pw');
is($st, 405, 'a form\'s POST: 405');

# the Origin must be one of the server's own names, not just the Host the
# client sent: a DNS-rebinding page (evil.example resolving to this server)
# sends its own name as both (issue 23)
sub admin_as {
    my ($host, $origin, $m, $path, $b) = @_;
    my $s = FlagsTest::raw_connect();
    $b //= '';
    print $s "$m /admin/$path HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n"
           . 'Authorization: Basic ' . MIME::Base64::encode_base64('alice:pw', '') . "\r\n"
           . "Origin: $origin\r\nContent-Type: application/json\r\n"
           . 'Content-Length: ' . length($b) . "\r\n\r\n$b";
    local $/;
    my $resp = <$s> // '';
    close $s;
    my ($code) = $resp =~ m{^HTTP/1\.1 (\d+)};
    my ($json) = $resp =~ /\r\n\r\n(.*)\z/s;
    return ($code // 0, $json);
}
my $off = '{"enabled": false}';
($st, $body) = admin_as('evil.example', 'http://evil.example', PUT => 'overrides/shop/steady', $off);
is($st, 403, 'Origin http://evil.example with Host: evil.example: 403');
is(decode_json($body)->{error}, 'cross_origin', '... cross_origin');
($st) = admin_as("evil.example:$Port", "http://evil.example:$Port", DELETE => 'overrides/shop/steady');
is($st, 403, '... with the port too');
($st) = admin_as("localhost:$Port", "http://localhost:$Port", DELETE => 'overrides/shop/steady');
is($st, 204, 'the server_name (localhost), with the port: 204');
($st) = admin_as("127.0.0.1:$Port", "http://127.0.0.1:$Port", PUT => 'overrides/shop/steady', $off);
is($st, 204, 'the address the connection arrived at, as a page at http://127.0.0.1:PORT/ sends it: 204');
($st) = admin_as("127.0.0.1:$Port", 'http://127.0.0.1:1', PUT => 'overrides/shop/steady', $off);
is($st, 403, '... another port of it (another origin): 403');
($st) = admin_as('a.example.com', 'https://a.example.com', PUT => 'overrides/shop/steady', $off);
is($st, 204, 'a name under server_name *.example.com: 204');
($st) = admin_as('example.com', 'https://example.com', PUT => 'overrides/shop/steady', $off);
is($st, 403, '... not example.com itself');
($st) = admin_as('flags.test', 'https://flags.test', PUT => 'overrides/shop/steady', $off);
is($st, 204, 'server_name .flags.test names flags.test: 204');
($st) = admin_as('www.example.org', 'http://www.example.org', PUT => 'overrides/shop/steady', $off);
is($st, 204, 'server_name www.example.*: 204');
($st) = admin_as('re42.test', 'http://re42.test', PUT => 'overrides/shop/steady', $off);
is($st, 204, 'a regular expression server_name: 204');
($st) = admin_as('rex.test', 'http://rex.test', PUT => 'overrides/shop/steady', $off);
is($st, 403, '... a name it does not match: 403');
($st) = admin_as('localhost', 'http://localhost.evil.example', PUT => 'overrides/shop/steady', $off);
is($st, 403, 'an Origin that is not the Host: 403');

# ---------------------------------------------------------------- perSecond
# Issue 24: a page opened after the page-out drew a flat chart, having only
# its own readings; the window's seconds, one by one, are in the document.
# comments (blog, 100 %, the default window of 60 s): two evaluations and an
# error in one second, an error two seconds later; the two workers count
# into the one zone.
use Time::HiRes ();
sub fresh_second { Time::HiRes::sleep(1.05 - (Time::HiRes::time() - int(Time::HiRes::time()))) }
sub blog_report { http_request(POST => '/ingest/errors', body => '{"flagName":"comments","message":"boom"}',
                               headers => ['Authorization: Bearer tok_blog', 'Content-Type: application/json']) }
sub comments_window {
    my (undef, undef, $b) = http_request(GET => '/status');
    return $b =~ /"name":"comments",.*?("window":\{[^}]*\})/ ? $1 : $b;
}
is(comments_window(), '"window":{"seconds":60,"enabledEvaluations":0,"errors":0,"sources":0,"perSecond":[]}',
   'perSecond: an idle window has none');
fresh_second();
for my $u (1, 2) {
    my ($est) = http_request(GET => "/flags?userId=u$u", headers => ['Authorization: Bearer tok_blog']);
    is($est, 200, "evaluate comments for u$u");
}
is((blog_report())[0], 204, 'an error report');
fresh_second();
fresh_second();
is((blog_report())[0], 204, 'another, two seconds later');
is(comments_window(),
   '"window":{"seconds":60,"enabledEvaluations":2,"errors":2,"sources":1,"perSecond":[[0,0,1],[2,2,1]]}',
   'perSecond: [seconds ago, enabled evaluations, errors], newest first, busy seconds only');
my ($sw) = grep { $_->{name} eq 'comments' } @{ status_doc('/dash/status.json')->{projects}[1]{flags} };
is_deeply($sw->{window}{perSecond}, [[0, 0, 1], [2, 2, 1]], '... the same in the page\'s status.json');

nginx_stop($master);
done_testing();
