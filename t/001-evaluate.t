# GET /flags: evaluation, bucketing, segments, stickiness and the query.
use Test::Nginx::Socket 'no_plan';

repeat_each(1);
master_on();
workers(2);
no_shuffle();
no_long_string();

our $HttpConfig = <<"_EOC_";
    flags_project shop token=pub_shop_1 token=pub_shop_2
                  file=$ENV{TEST_NGINX_FLAGS_DIR}/shop.json;
    flags_project blog token=pub_blog_1 file=$ENV{TEST_NGINX_FLAGS_DIR}/blog.json;
    flags_error_log off;
_EOC_

our $Config = <<'_EOC_';
    location = /flags {
        flags_evaluate;
    }
_EOC_

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value("http_config", $HttpConfig) unless defined $block->http_config;
    $block->set_value("config", $Config) unless defined $block->config;
    $block->set_value("no_error_log", "[error]\n[alert]\n[crit]\n[emerg]\n")
        unless defined $block->no_error_log || defined $block->error_log;
});

run_tests();

__DATA__

=== TEST 1: a user in the beta segment and inside 25% sees new-checkout
--- request
GET /flags?userId=user-2&trait_plan=pro&trait_country=DE
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code: 200
--- response_headers
Content-Type: application/json
Cache-Control: no-store
--- response_body chomp
{"flags":[{"name":"new-checkout","enabled":true,"rolloutPercentage":25,"segments":["beta"]},{"name":"dark-mode","enabled":true,"rolloutPercentage":60,"segments":[]},{"name":"always-on","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"killed","enabled":false,"rolloutPercentage":100,"segments":[]},{"name":"by-account","enabled":false,"rolloutPercentage":50,"segments":[]}]}



=== TEST 2: bucket 40631 is outside 25%; alice (89895) is outside 60%
--- request eval
["GET /flags?userId=user-1&trait_plan=pro&trait_country=de",
 "GET /flags?userId=alice"]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[200, 200]
--- response_body eval
['{"flags":[{"name":"new-checkout","enabled":false,"rolloutPercentage":25,"segments":["beta"]},{"name":"dark-mode","enabled":true,"rolloutPercentage":60,"segments":[]},{"name":"always-on","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"killed","enabled":false,"rolloutPercentage":100,"segments":[]},{"name":"by-account","enabled":false,"rolloutPercentage":50,"segments":[]}]}',
 '{"flags":[{"name":"new-checkout","enabled":false,"rolloutPercentage":25,"segments":["beta"]},{"name":"dark-mode","enabled":false,"rolloutPercentage":60,"segments":[]},{"name":"always-on","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"killed","enabled":false,"rolloutPercentage":100,"segments":[]},{"name":"by-account","enabled":false,"rolloutPercentage":50,"segments":[]}]}']



=== TEST 3: anonymous callers see only fully rolled-out flags (empty userId is no userId)
--- request eval
["GET /flags", "GET /flags?userId=&trait_plan=pro&trait_country=de"]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[200, 200]
--- response_body eval
['{"flags":[{"name":"new-checkout","enabled":false,"rolloutPercentage":25,"segments":["beta"]},{"name":"dark-mode","enabled":false,"rolloutPercentage":60,"segments":[]},{"name":"always-on","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"killed","enabled":false,"rolloutPercentage":100,"segments":[]},{"name":"by-account","enabled":false,"rolloutPercentage":50,"segments":[]}]}',
 '{"flags":[{"name":"new-checkout","enabled":false,"rolloutPercentage":25,"segments":["beta"]},{"name":"dark-mode","enabled":false,"rolloutPercentage":60,"segments":[]},{"name":"always-on","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"killed","enabled":false,"rolloutPercentage":100,"segments":[]},{"name":"by-account","enabled":false,"rolloutPercentage":50,"segments":[]}]}']



=== TEST 4: outside the segment (plan=free, or no country) the flag is off for user-2
--- request eval
["GET /flags?userId=user-2&trait_plan=free&trait_country=de",
 "GET /flags?userId=user-2&trait_plan=enterprise"]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[200, 200]
--- response_body_like eval
['^\{"flags":\[\{"name":"new-checkout","enabled":false,',
 '^\{"flags":\[\{"name":"new-checkout","enabled":false,']



=== TEST 5: stickiness by trait: accountId acme (20242) is in 50%, globex (56381) is not
--- request eval
["GET /flags?trait_accountId=acme", "GET /flags?userId=user-2&trait_accountId=globex"]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[200, 200]
--- response_body_like eval
['\{"name":"by-account","enabled":true,"rolloutPercentage":50,"segments":\[\]\}\]\}$',
 '\{"name":"by-account","enabled":false,"rolloutPercentage":50,"segments":\[\]\}\]\}$']



=== TEST 6: names and values are percent- and plus-decoded; the last repeated parameter wins
--- request eval
["GET /flags?user%49d=user%2D2&trait_pl%61n=pr%6F&trait_country=%44E",
 "GET /flags?userId=user-1&userId=user-2&trait_plan=free&trait_plan=pro&trait_country=de",
 "GET /flags?userId=user-2&trait_plan=pro+&trait_country=de"]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[200, 200, 200]
--- response_body_like eval
['^\{"flags":\[\{"name":"new-checkout","enabled":true,',
 '^\{"flags":\[\{"name":"new-checkout","enabled":true,',
 '^\{"flags":\[\{"name":"new-checkout","enabled":false,']



=== TEST 7: the token picks the project; every token of a project works
--- request eval
["GET /flags?userId=user-2", "GET /flags?userId=user-2"]
--- more_headers eval
["Authorization: Bearer pub_blog_1", "Authorization: Bearer pub_shop_2"]
--- error_code eval
[200, 200]
--- response_body_like eval
['^\{"flags":\[\{"name":"comments","enabled":true,"rolloutPercentage":100,"segments":\[\]\}\]\}$',
 '^\{"flags":\[\{"name":"new-checkout",']



=== TEST 8: the auth scheme is case-insensitive
--- request
GET /flags?userId=user-2
--- more_headers
Authorization: bEARER pub_blog_1
--- error_code: 200
--- response_body chomp
{"flags":[{"name":"comments","enabled":true,"rolloutPercentage":100,"segments":[]}]}



=== TEST 9: no Authorization header
--- request
GET /flags
--- error_code: 401
--- response_headers
WWW-Authenticate: Bearer
Content-Type: application/json
--- response_body chomp
{"error":"unauthorized","message":"an \"Authorization: Bearer <token>\" header is required"}



=== TEST 10: another scheme, Bearer without a token, two tokens
--- request eval
["GET /flags", "GET /flags", "GET /flags", "GET /flags"]
--- more_headers eval
["Authorization: Basic cHViX3Nob3BfMTp4", "Authorization: Bearer", "Authorization: Bearer   ", "Authorization: Bearer pub_shop_1 pub_shop_2"]
--- error_code eval
[401, 401, 401, 401]
--- response_headers eval
["WWW-Authenticate: Bearer", "WWW-Authenticate: Bearer", "WWW-Authenticate: Bearer", "WWW-Authenticate: Bearer"]
--- response_body eval
['{"error":"unauthorized","message":"the Authorization scheme must be Bearer"}',
 '{"error":"unauthorized","message":"the Authorization header must carry exactly one token"}',
 '{"error":"unauthorized","message":"the Authorization header must carry exactly one token"}',
 '{"error":"unauthorized","message":"the Authorization header must carry exactly one token"}']



=== TEST 11: a token no project has; a prefix of a real token is not a token, nor is a real token with bytes after it (one, or 300: past the longest token), nor one with its last byte changed
--- request eval
["GET /flags", "GET /flags", "GET /flags", "GET /flags", "GET /flags"]
--- more_headers eval
["Authorization: Bearer pub_nope", "Authorization: Bearer pub_shop_",
 "Authorization: Bearer pub_shop_1x", "Authorization: Bearer pub_shop_1" . ("x" x 300),
 "Authorization: Bearer pub_shop_9"]
--- error_code eval
[401, 401, 401, 401, 401]
--- response_headers eval
[('WWW-Authenticate: Bearer error="invalid_token"') x 5]
--- response_body eval
[('{"error":"invalid_token","message":"the token does not belong to any project"}') x 5]



=== TEST 12: POST is 405 with Allow; a bad token is 401 before the method is looked at
--- request eval
["POST /flags\n{}", "POST /flags\n{}"]
--- more_headers eval
["Authorization: Bearer pub_shop_1", "Authorization: Bearer wrong"]
--- error_code eval
[405, 401]
--- response_headers eval
["Allow: GET, HEAD\nContent-Type: application/json", "!Allow"]
--- response_body eval
['{"error":"method_not_allowed","message":"this method is not allowed here"}',
 '{"error":"invalid_token","message":"the token does not belong to any project"}']



=== TEST 13: HEAD evaluates like GET and sends no body
--- request
HEAD /flags?userId=user-2
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code: 200
--- response_headers
Content-Type: application/json
--- response_body



=== TEST 14: malformed percent-encoding is invalid_query
--- request eval
["GET /flags?userId=%zz", "GET /flags?trait_a=%", "GET /flags?trait_a=%4"]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[400, 400, 400]
--- response_body_like eval
['^\{"error":"invalid_query","message":"[^"]+"\}$',
 '^\{"error":"invalid_query","message":"[^"]+"\}$',
 '^\{"error":"invalid_query","message":"[^"]+"\}$']



=== TEST 15: more traits than flags_max_traits; a repeated trait counts once
--- config
    location = /flags {
        flags_max_traits 2;
        flags_evaluate;
    }
--- request eval
["GET /flags?trait_a=1&trait_b=2&trait_c=3", "GET /flags?trait_a=1&trait_b=2&trait_a=3&userId=x"]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[400, 200]
--- response_body_like eval
['^\{"error":"invalid_query","message":"more than 2 traits"\}$', '^\{"flags":']



=== TEST 16: a userId over 1024 bytes and a trait name over 128 bytes are refused; 1024 is fine
--- request eval
["GET /flags?userId=" . ("u" x 1025), "GET /flags?trait_" . ("n" x 129) . "=1",
 "GET /flags?userId=" . ("u" x 1024) . "&trait_" . ("n" x 128) . "=" . ("v" x 1024)]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[400, 400, 200]
--- response_body_like eval
['^\{"error":"invalid_query","message":"userId is longer than 1024 bytes"\}$',
 '^\{"error":"invalid_query","message":"[^"]*128 bytes[^"]*"\}$', '^\{"flags":']



=== TEST 17: keep-alive: pipelined answers, errors included, and a GET body is discarded
--- pipelined_requests eval
["GET /flags?userId=user-2&trait_plan=pro&trait_country=de",
 "GET /flags?userId=%zz",
 "POST /flags\n{\"x\":1}",
 "GET /flags\nsome body the handler must discard",
 "GET /flags?userId=user-1"]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[200, 400, 405, 200, 200]
--- response_body_like eval
['^\{"flags":\[\{"name":"new-checkout","enabled":true,',
 '^\{"error":"invalid_query"',
 '^\{"error":"method_not_allowed"',
 '^\{"flags":\[\{"name":"new-checkout","enabled":false,',
 '^\{"flags":\[\{"name":"new-checkout","enabled":false,.*"name":"dark-mode","enabled":true,']



=== TEST 18: the answer is the same on every worker: 20 separate connections
--- request eval
[("GET /flags?userId=user-2&trait_plan=pro&trait_country=de") x 20]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[(200) x 20]
--- response_body eval
[('{"flags":[{"name":"new-checkout","enabled":true,"rolloutPercentage":25,"segments":["beta"]},{"name":"dark-mode","enabled":true,"rolloutPercentage":60,"segments":[]},{"name":"always-on","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"killed","enabled":false,"rolloutPercentage":100,"segments":[]},{"name":"by-account","enabled":false,"rolloutPercentage":50,"segments":[]}]}') x 20]



=== TEST 19: optional whitespace (RFC 7230 OWS) before the value: a tab, which nginx keeps
--- raw_request eval
"GET /flags?userId=user-2 HTTP/1.1\r
Host: localhost\r
Authorization:\tBearer pub_blog_1\r
Connection: close\r
\r
"
--- error_code: 200
--- response_body chomp
{"flags":[{"name":"comments","enabled":true,"rolloutPercentage":100,"segments":[]}]}



=== TEST 20: optional whitespace on both sides: tab and space before, space and tab after
--- raw_request eval
"GET /flags?userId=user-2 HTTP/1.1\r
Host: localhost\r
Authorization: \t Bearer pub_blog_1 \t\r
Connection: close\r
\r
"
--- error_code: 200
--- response_body chomp
{"flags":[{"name":"comments","enabled":true,"rolloutPercentage":100,"segments":[]}]}



=== TEST 21: behind auth_request the challenge of our 401 reaches the client
--- config
    location = /flags-auth {
        internal;
        flags_evaluate;
    }
    location = /protected.txt {
        auth_request /flags-auth;
        root html;
    }
--- user_files
>>> protected.txt
the protected page
--- request eval
["GET /protected.txt", "GET /protected.txt", "GET /protected.txt"]
--- more_headers eval
["", "Authorization: Bearer pub_nope", "Authorization: Bearer pub_shop_1"]
--- error_code eval
[401, 401, 200]
--- response_headers eval
["WWW-Authenticate: Bearer", 'WWW-Authenticate: Bearer error="invalid_token"', "!WWW-Authenticate"]
--- response_body_like eval
["401 Authorization Required", "401 Authorization Required", "^the protected page\n\$"]



=== TEST 22: the scheme in any case is Bearer; a word that differs in one letter, is one letter short, or runs into the token is not
--- request eval
[("GET /flags?userId=user-2") x 7]
--- more_headers eval
["Authorization: bearer pub_shop_1", "Authorization: bEaReR pub_shop_1",
 "Authorization: Bearex pub_shop_1", "Authorization: Beare pub_shop_1",
 "Authorization: Bearerpub_shop_1", "Authorization: Bea\@er pub_shop_1",
 "Authorization: Bear"]
--- error_code eval
[200, 200, 401, 401, 401, 401, 401]
--- response_headers eval
["Content-Type: application/json", "Content-Type: application/json",
 ("WWW-Authenticate: Bearer") x 5]
--- response_body_like eval
['^\{"flags":\[\{"name":"new-checkout",', '^\{"flags":\[\{"name":"new-checkout",',
 ('^\{"error":"unauthorized","message":"the Authorization scheme must be Bearer"\}$') x 5]
