# flags_sdk: the DeployRamp SDK API (docs/sdk.md).  POST {loc}flags answers
# the flags array the Go SDK v0.1.6 evaluates, resolved for the body's user;
# POST {loc}report is POST /ingest/errors.  Two workers; every request of a
# "request eval" list is a connection of its own.
use Test::Nginx::Socket 'no_plan';
use JSON::PP ();

repeat_each(1);
master_on();
workers(2);
no_shuffle();
no_long_string();

our $Flags = <<'_J_';
{"flags": [
  {"name": "plain", "enabled": true, "rolloutPercentage": 30},
  {"name": "all", "enabled": true, "rolloutPercentage": 100},
  {"name": "killed", "enabled": false, "rolloutPercentage": 100},
  {"name": "pro-de", "enabled": true, "rolloutPercentage": 100, "segments": ["pro-de", "staff"]},
  {"name": "paid", "enabled": true, "rolloutPercentage": 30, "segments": ["paid"]},
  {"name": "ios", "enabled": true, "rolloutPercentage": 100, "segments": ["ios"]},
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 2, "rate": 50, "window": 60}},
  {"name": "acct", "enabled": true, "rolloutPercentage": 50, "stickiness": "accountId"}
],
"segments": {
  "pro-de": {"rules": [{"trait": "plan", "op": "eq", "value": "pro"},
                       {"trait": "country", "op": "eq", "value": "de"}]},
  "staff": {"rules": [{"trait": "role", "op": "eq", "value": "staff"}]},
  "paid": {"rules": [{"trait": "plan", "op": "in", "values": ["pro", "enterprise"]}]},
  "ios": {"rules": [{"trait": "platform", "op": "regex", "value": "^(ios|ipados)$", "ignoreCase": true}]}
}}
_J_

our $HttpConfig = <<"_EOC_";
    flags_project shop token=pub_shop_1 file=../html/sdk.json;
    flags_project blog token=pub_blog_1 file=$ENV{TEST_NGINX_FLAGS_DIR}/blog.json;
    flags_rollback min_errors=50 rate=50% window=60s;
    flags_error_log html/reports.log;
_EOC_

our $Config = <<'_EOC_';
    location /api/sdk/ { flags_sdk; }
    location = /flags { flags_evaluate; }
    location = /ingest/errors { flags_ingest_errors; }
    location = /flags-status { flags_status; }
    location /flags-admin/ { flags_admin; }
    location = /reports.log { root html; default_type text/plain; }
_EOC_

our $Auth = "Authorization: Bearer pub_shop_1";
our $Json = "Authorization: Bearer pub_shop_1\nContent-Type: application/json";

# The SDK's JSON, written out: every assertion below is on exact bytes.
our $T = '{"type":"and","conditions":[]}';
our $F = '{"type":"or","conditions":[]}';
sub M { qq({"type":"match","traitKey":"$_[0]","traitValue":"$_[1]"}) }
sub AND { '{"type":"and","conditions":[' . join(',', @_) . ']}' }
sub OR { '{"type":"or","conditions":[' . join(',', @_) . ']}' }
sub seg { qq({"segmentId":"$_[0]","condition":$_[1],"rolloutPercentage":$_[2],"sticky":false}) }
sub flag {
    my ($name, $enabled, $pct, @segs) = @_;
    return qq({"name":"$name","enabled":$enabled,"rolloutPercentage":$pct,"value":null,"segments":[)
           . join(',', @segs) . '],"stickyAssignments":[]}';
}
sub flags { '{"flags":[' . join(',', @_) . ']}' }
sub sdk_flags { "POST /api/sdk/flags\n$_[0]" }
sub report { "POST $_[0]\n{\"flagName\":\"$_[1]\",\"message\":\"m\"}" }

# The eq-only segments and the resolved one, for a user whose percentages
# resolve to $p (pro-de is at 100 %) and $q (paid).
sub segmented {
    my ($q, $ios) = @_;
    return (flag('pro-de', 'true', 0, seg('pro-de', AND(M('plan', 'pro'), M('country', 'de')), 100),
                 seg('staff', M('role', 'staff'), 100)),
            flag('paid', 'true', 0, seg('paid', OR(M('plan', 'enterprise'), M('plan', 'pro')), $q)),
            flag('ios', 'true', 0, seg('ios', $ios ? $T : $F, 100)));
}

# ---- the Go SDK's Flag(), over our answer ---------------------------------

# hashKey: the JS string hash over the code points, as int32, |h| % 100
sub sdk_hash {
    my $h = 0;
    for my $c (unpack 'U*', $_[0]) {
        $h = ($h * 31 + $c) % 4294967296;
    }
    $h -= 4294967296 if $h >= 2147483648;
    $h = -$h if $h < 0;
    return $h % 100;
}

sub sdk_match {
    my ($c, $traits) = @_;
    if ($c->{type} eq 'match') {
        return (($traits->{$c->{traitKey}} // '') eq $c->{traitValue}) ? 1 : 0;
    }
    my @r = map { sdk_match($_, $traits) } @{ $c->{conditions} || [] };
    return $c->{type} eq 'and' ? ((grep { !$_ } @r) ? 0 : 1)
         : $c->{type} eq 'or' ? ((grep { $_ } @r) ? 1 : 0) : 0;
}

sub sdk_flag {
    my ($f, $user, $traits) = @_;
    return 0 unless $f->{enabled};
    for my $s (@{ $f->{segments} || [] }) {
        next unless sdk_match($s->{condition}, $traits);
        return 1 if $s->{sticky} && grep { $_ eq $s->{segmentId} } @{ $f->{stickyAssignments} || [] };
        return sdk_hash("$f->{name}:$user:$s->{segmentId}") < $s->{rolloutPercentage} ? 1 : 0;
    }
    return 1 if $f->{rolloutPercentage} >= 100;
    return 0 if $f->{rolloutPercentage} <= 0;
    return sdk_hash("$f->{name}:$user") < $f->{rolloutPercentage} ? 1 : 0;
}

# The users of TEST 4: what the SDK sends, and what it adds when it asks.
sub user_traits {
    my ($k) = @_;
    my %t;
    $t{plan} = (qw(pro enterprise free pro))[$k % 4] if $k % 5;
    $t{country} = $k % 3 ? 'de' : 'fr';
    $t{platform} = (qw(iOS android))[$k % 2] if $k % 7;
    $t{role} = 'staff' if $k % 11 == 0;
    $t{accountId} = "a-$k" if $k % 2;
    return \%t;
}
sub call_traits { $_[0] % 2 ? { plan => 'pro', country => 'de' } : { plan => 'free' } }
sub query {
    my ($user, $t) = @_;
    return "GET /flags?userId=$user" . join('', map { "&trait_$_=$t->{$_}" } sort keys %$t);
}
our $Users = 200;
our @Same = map {
    my $t = user_traits($_);
    my $merged = { %$t, %{ call_traits($_) } };
    (query("user-$_", $t), sdk_flags(JSON::PP->new->canonical->encode({ userId => "user-$_", traits => $t })),
     query("user-$_", $merged))
} 1 .. $Users;

# TEST 4 compares each POST answer, read by the SDK, with the GET answers
# before (the traits sent) and after it (with the SDK's call-time traits).
our (%Get, %On, $Checked);
add_response_body_check(sub {
    my ($block, $body, $idx) = @_;
    return unless $block->name =~ /same answer/;
    my $k = int($idx / 3) + 1;
    my $data = eval { JSON::PP::decode_json($body) } or return;
    if ($idx % 3 != 1) {
        $Get{$idx % 3}{$k} = { map { $_->{name} => ($_->{enabled} ? 1 : 0) } @{ $data->{flags} } };
        return unless $idx % 3 == 2;
        my $post = $Get{post}{$k};
        my $t = user_traits($k);
        my $merged = { %$t, %{ call_traits($k) } };
        my @diff;
        for my $f (@{ $post->{flags} }) {
            my $sdk = sdk_flag($f, "user-$k", $t);
            my $sdk2 = sdk_flag($f, "user-$k", $merged);
            push @diff, "$f->{name}: sdk $sdk, GET $Get{0}{$k}{$f->{name}}" if $sdk != $Get{0}{$k}{$f->{name}};
            push @diff, "$f->{name} with call-time traits: sdk $sdk2, GET $Get{2}{$k}{$f->{name}}"
                if $sdk2 != $Get{2}{$k}{$f->{name}};
        }
        Test::More::is(join('; ', @diff), '', "user-$k: the SDK's answers are GET /flags's");
        $On{$_} += $Get{0}{$k}{$_} for keys %{ $Get{0}{$k} };
        Test::More::is(scalar @{ $post->{flags} }, 8, "user-$k: every flag");
        $Checked++;
        return;
    }
    $Get{post}{$k} = $data;
});

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value("http_config", $HttpConfig) unless defined $block->http_config;
    $block->set_value("config", $Config) unless defined $block->config;
    $block->set_value("user_files", ">>> sdk.json\n$Flags") unless defined $block->user_files;
    $block->set_value("no_error_log", "[error]\n[alert]\n[crit]\n[emerg]\n")
        unless defined $block->no_error_log || defined $block->error_log;
});

run_tests();

# the comparison really ran, for every user
Test::More::is($Checked, $Users, "TEST 4 compared $Users users");
# and both answers were common: the comparison could tell them apart
for my $f (qw(plain pro-de paid ios acct)) {
    Test::More::ok($On{$f} > 20 && $On{$f} < $Users - 20, "TEST 4: $f on for $On{$f} of $Users users");
}

__DATA__

=== TEST 1: a user with traits: percentages resolved to 100/0, eq rules as conditions, a regex decided
--- request eval
main::sdk_flags('{"userId":"user-2","traits":{"plan":"pro","country":"de","platform":"IOS","accountId":"a-1"}}')
--- more_headers eval
$::Json
--- error_code: 200
--- response_headers
Content-Type: application/json
Cache-Control: no-store
--- response_body eval
main::flags(main::flag('plain', 'true', 100), main::flag('all', 'true', 100),
            main::flag('killed', 'false', 0),
            main::segmented(0, 1),
            main::flag('risky', 'true', 100), main::flag('acct', 'true', 100))



=== TEST 2: another user, no traits; no user at all; an empty userId; null fields
--- request eval
[main::sdk_flags('{"userId":"user-1"}'), main::sdk_flags('{}'), main::sdk_flags('{"userId":"","traits":{}}'),
 main::sdk_flags('{"userId":null,"traits":null,"unknown":[1,{"x":2}]}')]
--- more_headers eval
[($::Json) x 4]
--- error_code eval
[200, 200, 200, 200]
--- response_body eval
[main::flags(main::flag('plain', 'true', 0), main::flag('all', 'true', 100), main::flag('killed', 'false', 0),
             main::segmented(0, 0), main::flag('risky', 'true', 100), main::flag('acct', 'true', 0)),
 (main::flags(main::flag('plain', 'true', 0), main::flag('all', 'true', 100), main::flag('killed', 'false', 0),
             main::segmented(0, 0), main::flag('risky', 'true', 100), main::flag('acct', 'true', 0))) x 3]



=== TEST 3: trait values: numbers as their text, booleans as words, null as not sent; the stickiness trait keys the rollout
--- request eval
[main::sdk_flags('{"userId":"user-2","traits":{"plan":"enterprise","accountId":"a-2","platform":"ipados","n":1.50,"b":true}}'),
 main::sdk_flags('{"userId":"user-2","traits":{"plan":"enterprise","accountId":null,"platform":"ios","platform":null}}')]
--- more_headers eval
[($::Json) x 2]
--- error_code eval
[200, 200]
--- response_body eval
[main::flags(main::flag('plain', 'true', 100), main::flag('all', 'true', 100), main::flag('killed', 'false', 0),
             main::segmented(0, 1), main::flag('risky', 'true', 100), main::flag('acct', 'true', 100)),
 main::flags(main::flag('plain', 'true', 100), main::flag('all', 'true', 100), main::flag('killed', 'false', 0),
             main::segmented(0, 0), main::flag('risky', 'true', 100), main::flag('acct', 'true', 0))]



=== TEST 4: same answer as GET /flags for 200 users, with and without the SDK's call-time traits
--- request eval
[@::Same]
--- more_headers eval
[map { ($::Auth, $::Json, $::Auth) } 1 .. $::Users]
--- error_code eval
[(200) x (3 * $::Users)]
--- response_body_like eval
[('^\{"flags":\[\{"name":"plain",') x (3 * $::Users)]



=== TEST 5: a POST counts one evaluation a flag, with the answer GET /flags would count
--- request eval
[(main::sdk_flags('{"userId":"user-2","traits":{"plan":"pro","country":"de"}}')) x 3,
 main::sdk_flags('{"userId":"user-1"}'), "GET /flags?userId=user-1", "GET /flags-status"]
--- more_headers eval
[($::Json) x 4, $::Auth, ""]
--- error_code eval
[200, 200, 200, 200, 200, 200]
--- response_body_like eval
[('^\{"flags":') x 5,
 '^\{"projects":\[\{"name":"shop","flags":\[\{"name":"plain",.*"counters":\{"evaluations":5,"enabledEvaluations":3,"errors":0\},"window":\{"seconds":60,"enabledEvaluations":3,"errors":0,"sources":0,"perSecond":\[(?:\[\d+,\d+,\d+\],?)*\]\},.*\{"name":"killed",.*"counters":\{"evaluations":5,"enabledEvaluations":0,"errors":0\},.*\{"name":"pro-de",.*"counters":\{"evaluations":5,"enabledEvaluations":3,"errors":0\},.*\{"name":"paid",.*"counters":\{"evaluations":5,"enabledEvaluations":0,"errors":0\},.*\{"name":"ios",.*"counters":\{"evaluations":5,"enabledEvaluations":0,"errors":0\},.*\{"name":"acct",.*"counters":\{"evaluations":5,"enabledEvaluations":0,"errors":0\},.*\{"name":"blog","flags":\[\{"name":"comments",.*"counters":\{"evaluations":0,']



=== TEST 6: reports through the SDK route roll a flag back: off for everyone, back on when cleared
--- request eval
[main::sdk_flags('{"userId":"user-2"}'), main::report('/api/sdk/report', 'risky'), main::report('/api/sdk/report', 'risky'),
 main::sdk_flags('{"userId":"user-2"}'), main::sdk_flags('{}'), "GET /flags?userId=user-2",
 "DELETE /flags-admin/rollbacks/shop/risky", main::sdk_flags('{"userId":"user-2"}')]
--- more_headers eval
[($::Json) x 5, $::Auth, "", $::Json]
--- error_code eval
[200, 204, 204, 200, 200, 200, 204, 200]
--- response_body_like eval
['"name":"risky","enabled":true,"rolloutPercentage":100,', '^$', '^$',
 '"name":"risky","enabled":false,"rolloutPercentage":0,"value":null,"segments":\[\],"stickyAssignments":\[\]\}',
 '"name":"risky","enabled":false,"rolloutPercentage":0,"value":null,"segments":\[\],"stickyAssignments":\[\]\}',
 '"name":"risky","enabled":false,"rolloutPercentage":0,',
 '^$',
 '"name":"risky","enabled":true,"rolloutPercentage":100,']
--- no_error_log
[alert]
[crit]
[emerg]



=== TEST 7: admin overrides: killed is off for everyone, 0 % too, a percentage is resolved per user
--- request eval
["PUT /flags-admin/overrides/shop/pro-de\n{\"enabled\": false}",
 main::sdk_flags('{"userId":"user-2","traits":{"plan":"pro","country":"de"}}'),
 "PUT /flags-admin/overrides/shop/all\n{\"rolloutPercentage\": 0}",
 main::sdk_flags('{"userId":"user-2"}'),
 "PUT /flags-admin/overrides/shop/all\n{\"rolloutPercentage\": 30}",
 main::sdk_flags('{"userId":"user-2"}'), main::sdk_flags('{"userId":"user-1"}'),
 "DELETE /flags-admin/overrides/shop/pro-de",
 main::sdk_flags('{"userId":"user-2","traits":{"plan":"pro","country":"de"}}')]
--- more_headers eval
["", $::Json, "", $::Json, "", $::Json, $::Json, "", $::Json]
--- error_code eval
[204, 200, 204, 200, 204, 200, 200, 204, 200]
--- response_body_like eval
['^$',
 '"name":"pro-de","enabled":false,"rolloutPercentage":0,"value":null,"segments":\[\{"segmentId":"pro-de","condition":\{"type":"and","conditions":\[\{"type":"match","traitKey":"plan","traitValue":"pro"\},\{"type":"match","traitKey":"country","traitValue":"de"\}\]\},"rolloutPercentage":0,"sticky":false\},\{"segmentId":"staff","condition":\{"type":"match","traitKey":"role","traitValue":"staff"\},"rolloutPercentage":0,"sticky":false\}\],"stickyAssignments":\[\]\}',
 '^$',
 '"name":"all","enabled":false,"rolloutPercentage":0,',
 '^$',
 '"name":"all","enabled":true,"rolloutPercentage":0,',
 '"name":"all","enabled":true,"rolloutPercentage":100,',
 '^$',
 '"name":"pro-de","enabled":true,"rolloutPercentage":0,"value":null,"segments":\[\{"segmentId":"pro-de","condition":\{"type":"and","conditions":\[\{"type":"match","traitKey":"plan","traitValue":"pro"\},\{"type":"match","traitKey":"country","traitValue":"de"\}\]\},"rolloutPercentage":100,']
--- no_error_log
[alert]
[crit]
[emerg]



=== TEST 8: the report route is /ingest/errors: 204, the same log line, counted in its cohort (u-1, plan pro, is off for paid at 30 %: 2 errors, not in the window; the third, with no one, on)
--- request eval
["POST /ingest/errors\n" . '{"flagName":"paid","message":"TypeError: x","stack":"at a.go:1\nat b.go:2","userId":"u-1","traits":{"plan":"pro","n":2}}',
 "POST /api/sdk/report\n" . '{"flagName":"paid","message":"TypeError: x","stack":"at a.go:1\nat b.go:2","userId":"u-1","traits":{"plan":"pro","n":2}}',
 "POST /api/sdk/report\n" . '{"flagName":"paid","message":"boom"}',
 "GET /reports.log", "GET /flags-status"]
--- more_headers eval
[($::Json) x 3, "", ""]
--- error_code eval
[204, 204, 204, 200, 200]
--- response_headers eval
["!Content-Type\n!Content-Length", "!Content-Type\n!Content-Length", "", "", ""]
--- response_body_like eval
['^$', '^$', '^$',
 '^\{"time":"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d\d\dZ","project":"shop","flagName":"paid","message":"TypeError: x","stack":"at a\.go:1\\\\nat b\.go:2","userId":"u-1","traits":\{"plan":"pro","n":2\}\}\n\{"time":"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d\d\dZ","project":"shop","flagName":"paid","message":"TypeError: x","stack":"at a\.go:1\\\\nat b\.go:2","userId":"u-1","traits":\{"plan":"pro","n":2\}\}\n\{"time":"[^"]+","project":"shop","flagName":"paid","message":"boom"\}\n$',
 '\{"name":"paid",.*"counters":\{"evaluations":0,"enabledEvaluations":0,"errors":1\},"window":\{"seconds":60,"enabledEvaluations":0,"errors":1,"sources":1,"perSecond":\[(?:\[\d+,\d+,\d+\],?)*\]\},.*"cohorts":\{"on":\{"evaluations":0,"errors":1,"errorPercentage":null\},"off":\{"evaluations":0,"errors":2,"errorPercentage":null\}\}']



=== TEST 9: bad reports: the same statuses and bodies as /ingest/errors
--- request eval
[map { ("POST /ingest/errors\n$_", "POST /api/sdk/report\n$_") }
 '', 'not json', '[1]', '{"flagName":1,"message":"m"}', '{"message":"m"}', '{"flagName":"paid"}',
 '{"flagName":"nope","message":"m"}', '{"flagName":"paid","message":"m","traits":{"o":{}}}',
 "{\"flagName\":\"paid\",\"message\":\"\xc0\x80\"}", '{"flagName":"paid","message":"' . ("x" x 70000) . '"}']
--- more_headers eval
[($::Json) x 20]
--- error_code eval
[map { ($_, $_) } 400, 400, 400, 400, 400, 400, 404, 400, 400, 413]
--- response_body eval
[map { ($_, $_) }
 '{"error":"invalid_json","message":"request body is empty"}',
 '{"error":"invalid_json","message":"request body is not valid JSON: lexical error: invalid string in json text. (near byte 1)"}',
 '{"error":"invalid_json","message":"request body must be a JSON object"}',
 '{"error":"invalid_field","message":"flagName must be a string"}',
 '{"error":"invalid_field","message":"flagName is required"}',
 '{"error":"invalid_field","message":"message is required"}',
 '{"error":"unknown_flag","message":"project \"shop\" has no flag \"nope\""}',
 '{"error":"invalid_field","message":"traits.o must be a string, number, boolean or null"}',
 '{"error":"invalid_json","message":"request body is not valid UTF-8 (byte 30)"}',
 '{"error":"payload_too_large","message":"the report is larger than 65536 bytes"}']



=== TEST 10: the token first (401 on any path), then the route (404), then the method (405)
--- request eval
[main::sdk_flags('{}'), main::sdk_flags('{}'), main::report('/api/sdk/report', 'paid'), "GET /api/sdk/nope",
 "GET /api/sdk/nope", "POST /api/sdk/\n{}", "POST /api/sdk/flags/\n{}", "POST /api/sdk/flagsx\n{}", "POST /api/sdk/Flags\n{}",
 "GET /api/sdk/flags", "PUT /api/sdk/flags\n{}", "GET /api/sdk/report", "DELETE /api/sdk/report"]
--- more_headers eval
["Content-Type: application/json", "Authorization: Bearer nope\nContent-Type: application/json",
 "Authorization: Basic eDp5\nContent-Type: application/json", "", ($::Json) x 9]
--- error_code eval
[401, 401, 401, 401, 404, 404, 404, 404, 404, 405, 405, 405, 405]
--- response_headers eval
["WWW-Authenticate: Bearer", 'WWW-Authenticate: Bearer error="invalid_token"', "WWW-Authenticate: Bearer",
 "WWW-Authenticate: Bearer", ("Content-Type: application/json") x 5, ("Allow: POST") x 4]
--- response_body eval
['{"error":"unauthorized","message":"an \"Authorization: Bearer <token>\" header is required"}',
 '{"error":"invalid_token","message":"the token does not belong to any project"}',
 '{"error":"unauthorized","message":"the Authorization scheme must be Bearer"}',
 '{"error":"unauthorized","message":"an \"Authorization: Bearer <token>\" header is required"}',
 ('{"error":"not_found","message":"expected /api/sdk/flags or /api/sdk/report"}') x 5,
 ('{"error":"method_not_allowed","message":"this method is not allowed here"}') x 4]



=== TEST 11: the token picks the project; a location without the slash; exact locations; access control comes first (403)
--- config
    location /api/sdk { flags_sdk; }
    location /denied/ { deny all; flags_sdk; }
    location = /one/flags { flags_sdk; }
    location = /one/report { flags_max_report_size 10; flags_sdk; }
    location = /one/other { flags_sdk; }
--- request eval
[main::sdk_flags('{"userId":"u"}'), "POST /api/sdk/report\n{\"flagName\":\"paid\",\"message\":\"m\"}",
 "POST /api/sdkflags\n{}", "POST /denied/flags\n{}",
 "POST /one/flags\n{}", "POST /one/report\n{\"flagName\":\"paid\",\"message\":\"m\"}", "POST /one/other\n{}"]
--- more_headers eval
["Authorization: Bearer pub_blog_1\nContent-Type: application/json",
 "Authorization: Bearer pub_blog_1\nContent-Type: application/json", ($::Json) x 5]
--- error_code eval
[200, 404, 404, 403, 200, 413, 404]
--- response_body_like eval
['^\{"flags":\[\{"name":"comments","enabled":true,"rolloutPercentage":100,"value":null,"segments":\[\],"stickyAssignments":\[\]\}\]\}$',
 '^\{"error":"unknown_flag","message":"project \\\\"blog\\\\" has no flag \\\\"paid\\\\""\}$',
 '^\{"error":"not_found","message":"expected /api/sdk/flags or /api/sdk/report"\}$',
 '403 Forbidden',
 '^\{"flags":\[\{"name":"plain",',
 '^\{"error":"payload_too_large","message":"the report is larger than 10 bytes"\}$',
 '^\{"error":"not_found","message":"expected /one/flags or /one/report"\}$']
--- no_error_log
[alert]
[crit]
[emerg]



=== TEST 12: POST /flags needs application/json and a body within flags_max_report_size
--- config
    location /api/sdk/ { flags_max_report_size 256; flags_sdk; }
--- request eval
[main::sdk_flags('{}'), main::sdk_flags('{"userId":"' . ("u" x 300) . '"}'), main::sdk_flags('{}')]
--- more_headers eval
["Authorization: Bearer pub_shop_1\nContent-Type: text/plain", $::Json,
 "Authorization: Bearer pub_shop_1\nContent-Type: Application/JSON; charset=utf-8"]
--- error_code eval
[415, 413, 200]
--- response_body_like eval
['^\{"error":"unsupported_media_type","message":"Content-Type must be application/json"\}$',
 '^\{"error":"payload_too_large","message":"the request body is larger than 256 bytes"\}$',
 '^\{"flags":']



=== TEST 13: a chunked body over the limit is 413 too
--- config
    location /api/sdk/ { flags_max_report_size 256; flags_sdk; }
--- raw_request eval
"POST /api/sdk/flags HTTP/1.1\r
Host: localhost\r
Authorization: Bearer pub_shop_1\r
Content-Type: application/json\r
Transfer-Encoding: chunked\r
Connection: close\r
\r
100\r
{\"userId\":\"" . ("u" x 243) . "\"}\r
1\r
 \r
0\r
\r
"
--- error_code: 413
--- response_body chomp
{"error":"payload_too_large","message":"the request body is larger than 256 bytes"}



=== TEST 14: hostile bodies get a clear JSON error
--- config
    location /api/sdk/ { flags_max_traits 2; flags_sdk; }
--- request eval
[map { main::sdk_flags($_) } '', '   ', 'not json', '[1]', '{"userId":', '{} {}',
 ('{"a":' x 65) . '1' . ('}' x 65), "{\"userId\":\"\xc0\x80\"}", '{"userId":"\ud800"}',
 '{"userId":5}', '{"userId":"' . ("u" x 1025) . '"}', '{"userId":"a\u0000"}',
 '{"traits":[1]}', '{"traits":"plan=pro"}', '{"traits":{"a":{"b":1}}}', '{"traits":{"a":[]}}',
 '{"traits":{"a":"1","b":"2","c":"3"}}', '{"traits":{"":"v"}}', '{"traits":{"' . ("t" x 129) . '":"v"}}',
 '{"traits":{"t":"' . ("v" x 1025) . '"}}', '{"traits":{' . CORE::join(',', map { "\"t$_\":$_" } 1 .. 5000) . '}}']
--- more_headers eval
[($::Json) x 21]
--- error_code eval
[(400) x 21]
--- response_body eval
['{"error":"invalid_json","message":"request body is empty"}',
 '{"error":"invalid_json","message":"request body is empty"}',
 '{"error":"invalid_json","message":"request body is not valid JSON: lexical error: invalid string in json text. (near byte 1)"}',
 '{"error":"invalid_json","message":"request body must be a JSON object"}',
 '{"error":"invalid_json","message":"request body is not valid JSON: parse error: premature EOF (near byte 10)"}',
 '{"error":"invalid_json","message":"request body is not valid JSON: parse error: trailing garbage (near byte 4)"}',
 '{"error":"invalid_json","message":"JSON nesting is deeper than 64 levels"}',
 '{"error":"invalid_json","message":"request body is not valid UTF-8 (byte 11)"}',
 '{"error":"invalid_json","message":"request body has a lone surrogate escape \\\\ud800 (byte 11)"}',
 '{"error":"invalid_field","message":"userId must be a string"}',
 '{"error":"invalid_field","message":"userId is longer than 1024 bytes"}',
 '{"error":"invalid_field","message":"userId holds a NUL byte"}',
 '{"error":"invalid_field","message":"traits must be an object"}',
 '{"error":"invalid_field","message":"traits must be an object"}',
 '{"error":"invalid_field","message":"traits.a must be a string, number, boolean or null"}',
 '{"error":"invalid_field","message":"traits.a must be a string, number, boolean or null"}',
 '{"error":"invalid_field","message":"more than 2 traits"}',
 '{"error":"invalid_field","message":"a trait name is empty"}',
 '{"error":"invalid_field","message":"a trait name is longer than 128 bytes"}',
 '{"error":"invalid_field","message":"traits.t is longer than 1024 bytes"}',
 '{"error":"invalid_field","message":"more than 2 traits"}']



=== TEST 15: keep-alive: answers, errors and a report on one connection, the refused bodies drained
--- pipelined_requests eval
[main::sdk_flags('{"userId":"user-2"}'), main::sdk_flags('{"userId":'), "GET /api/sdk/flags\n{\"a body\":\"to drain\"}",
 "POST /api/sdk/nope\n{\"x\":1}", main::sdk_flags('{"userId":"user-1"}'), main::report('/api/sdk/report', 'paid')]
--- more_headers
Authorization: Bearer pub_shop_1
Content-Type: application/json
--- error_code eval
[200, 400, 405, 404, 200, 204]
--- response_body_like eval
['^\{"flags":\[\{"name":"plain","enabled":true,"rolloutPercentage":100,', '^\{"error":"invalid_json"',
 '^\{"error":"method_not_allowed"', '^\{"error":"not_found"',
 '^\{"flags":\[\{"name":"plain","enabled":true,"rolloutPercentage":0,', '^$']
