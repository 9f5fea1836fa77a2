# The bad input catalogue: each bad request gets its exact answer, and the
# good request sent after it in the same block is answered normally.
use Test::Nginx::Socket 'no_plan';

repeat_each(1);
master_on();
workers(2);
no_shuffle();
no_long_string();

our $HttpConfig = <<"_EOC_";
    flags_project shop token=pub_shop_1 file=$ENV{TEST_NGINX_FLAGS_DIR}/shop.json;
    flags_error_log off;
    # long queries reach the module instead of nginx's own 414
    large_client_header_buffers 4 2m;
_EOC_

our $Config = <<'_EOC_';
    location = /flags { flags_evaluate; }
    location = /ingest/errors { flags_ingest_errors; }
_EOC_

our $Good = "GET /flags?userId=user-2&trait_plan=pro&trait_country=de";
our $GoodBody = '{"flags":[{"name":"new-checkout","enabled":true,"rolloutPercentage":25,"segments":["beta"]},{"name":"dark-mode","enabled":true,"rolloutPercentage":60,"segments":[]},{"name":"always-on","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"killed","enabled":false,"rolloutPercentage":100,"segments":[]},{"name":"by-account","enabled":false,"rolloutPercentage":50,"segments":[]}]}';
our $Auth = "Authorization: Bearer pub_shop_1";
our $Json = "Authorization: Bearer pub_shop_1\nContent-Type: application/json";

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value("http_config", $HttpConfig) unless defined $block->http_config;
    $block->set_value("config", $Config) unless defined $block->config;
    $block->set_value("no_error_log", "[alert]\n[crit]\n[emerg]\nsignal\n")
        unless defined $block->no_error_log;
});

run_tests();

__DATA__

=== TEST 1: reports: truncated, 10,000 levels deep, invalid UTF-8, NUL inside, lone surrogate escape
--- request eval
["POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"tru",
 "POST /ingest/errors\n" . ('{"a":' x 10000) . '1' . ('}' x 10000),
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"\xc3\x28\"}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"a\x00b\"}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"\\ud800\"}",
 $::Good]
--- more_headers eval
[($::Json) x 5, $::Auth]
--- error_code eval
[400, 400, 400, 400, 400, 200]
--- response_body eval
['{"error":"invalid_json","message":"request body is not valid JSON: parse error: premature EOF (near byte 35)"}',
 '{"error":"invalid_json","message":"JSON nesting is deeper than 64 levels"}',
 '{"error":"invalid_json","message":"request body is not valid UTF-8 (byte 32)"}',
 '{"error":"invalid_json","message":"request body is not valid JSON: lexical error: invalid character inside string. (near byte 33)"}',
 '{"error":"invalid_json","message":"request body has a lone surrogate escape \\\\ud800 (byte 32)"}',
 $::GoodBody]



=== TEST 2: reports: huge (over the limit) and big (under it)
--- request eval
["POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"" . ("x" x 70000) . "\"}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"" . ("\\u00e9" x 6000) . "\",\"traits\":{" . CORE::join(",", map { "\"t$_\":$_" } 1..2000) . "}}",
 $::Good]
--- more_headers eval
[$::Json, $::Json, $::Auth]
--- error_code eval
[413, 204, 200]
--- response_body eval
['{"error":"payload_too_large","message":"the report is larger than 65536 bytes"}', '', $::GoodBody]



=== TEST 3: query: NUL bytes and percent-encoded garbage
--- request eval
["GET /flags?userId=a%00b", "GET /flags?trait_%00=x", "GET /flags?userId=%G1", "GET /flags?userId=%%",
 "GET /flags?userId=%e9%ff%fe&trait_plan=%C0%AF", "GET /flags?&&&=&==&trait_plan==pro", $::Good]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[400, 400, 400, 400, 200, 200, 200]
--- response_body_like eval
['^\{"error":"invalid_query","message":"a NUL byte \(%00\) in the query"\}$',
 '^\{"error":"invalid_query","message":"a NUL byte \(%00\) in the query"\}$',
 '^\{"error":"invalid_query","message":"malformed percent-encoding in the query"\}$',
 '^\{"error":"invalid_query","message":"malformed percent-encoding in the query"\}$',
 '^\{"flags":\[\{"name":"new-checkout","enabled":false,',
 '^\{"flags":\[\{"name":"new-checkout","enabled":false,',
 "^\Q$::GoodBody\E\$"]



=== TEST 4: query: 10,000 traits, a 1 MB userId, a 1 MB trait value
--- request eval
["GET /flags?" . CORE::join("&", map { "trait_t$_=v" } 1..10000),
 "GET /flags?userId=" . ("u" x (1024 * 1024)),
 "GET /flags?userId=x&trait_plan=" . ("p" x (1024 * 1024)),
 $::Good]
--- more_headers
Authorization: Bearer pub_shop_1
--- error_code eval
[400, 400, 400, 200]
--- response_body eval
['{"error":"invalid_query","message":"more than 64 traits"}',
 '{"error":"invalid_query","message":"userId is longer than 1024 bytes"}',
 '{"error":"invalid_query","message":"trait \"plan\" is longer than 1024 bytes"}',
 $::GoodBody]



=== TEST 5: every wrong Authorization shape
--- request eval
[("GET /flags") x 9, $::Good]
--- more_headers eval
["Authorization: Token pub_shop_1", "Authorization: Bearerx pub_shop_1", "Authorization: ",
 "Authorization: Bearer pub_shop_1,pub_shop_2", "Authorization: Bearer \"pub_shop_1\"",
 "Authorization: Basic", "Authorization: Bearer pub_shop_1 x", "Authorization: Bearer PUB_SHOP_1",
 "Authorization: Bearer " . ("x" x 5000), $::Auth]
--- error_code eval
[401, 401, 401, 401, 401, 401, 401, 401, 401, 200]
--- response_body eval
['{"error":"unauthorized","message":"the Authorization scheme must be Bearer"}',
 '{"error":"unauthorized","message":"the Authorization scheme must be Bearer"}',
 '{"error":"unauthorized","message":"the Authorization scheme must be Bearer"}',
 '{"error":"invalid_token","message":"the token does not belong to any project"}',
 '{"error":"invalid_token","message":"the token does not belong to any project"}',
 '{"error":"unauthorized","message":"the Authorization scheme must be Bearer"}',
 '{"error":"unauthorized","message":"the Authorization header must carry exactly one token"}',
 '{"error":"invalid_token","message":"the token does not belong to any project"}',
 '{"error":"invalid_token","message":"the token does not belong to any project"}',
 $::GoodBody]



=== TEST 6: tabs and several spaces around the token are fine
--- request eval
["GET /flags?userId=user-2&trait_plan=pro&trait_country=de", "GET /flags?userId=user-2&trait_plan=pro&trait_country=de"]
--- more_headers eval
["Authorization: Bearer\tpub_shop_1", "Authorization: BEARER    pub_shop_1"]
--- error_code eval
[200, 200]
--- response_body eval
[$::GoodBody, $::GoodBody]




=== TEST 7: reports: what yajl lets through is not UTF-8 either; a good report still goes through, and only it is logged
--- http_config eval
$::HttpConfig =~ s{flags_error_log off;}{flags_error_log html/reports-utf8.log;}r
--- config eval
$::Config . "    location = /reports-utf8.log { root html; default_type text/plain; }\n"
--- request eval
[map({ "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"$_\"}" }
     "\xc0\x80", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
     "\\ud800", "\\udc00", "\\ud800\\u0041", "ok \\ud83d\\ude00 \xf0\x9f\x98\x80"),
 "GET /reports-utf8.log"]
--- more_headers eval
[($::Json) x 9, ""]
--- error_code eval
[(400) x 8, 204, 200]
--- response_body_like eval
[(map { '^' . quotemeta($_) . '$' }
  '{"error":"invalid_json","message":"request body is not valid UTF-8 (byte 32)"}',
  '{"error":"invalid_json","message":"request body is not valid UTF-8 (byte 32)"}',
  '{"error":"invalid_json","message":"request body is not valid UTF-8 (byte 32)"}',
  '{"error":"invalid_json","message":"request body is not valid UTF-8 (byte 32)"}',
  '{"error":"invalid_json","message":"request body is not valid UTF-8 (byte 32)"}',
  '{"error":"invalid_json","message":"request body has a lone surrogate escape \\\\ud800 (byte 32)"}',
  '{"error":"invalid_json","message":"request body has a lone surrogate escape \\\\udc00 (byte 32)"}',
  '{"error":"invalid_json","message":"request body has a lone surrogate escape \\\\ud800 (byte 32)"}'),
 '^$',
 '^\{"time":"[^"]+","project":"shop","flagName":"killed","message":"ok \xf0\x9f\x98\x80 \xf0\x9f\x98\x80"\}\n$']
