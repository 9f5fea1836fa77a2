# POST /ingest/errors: validation order, every error answer, the report log.
use Test::Nginx::Socket 'no_plan';

repeat_each(1);
master_on();
workers(2);
no_shuffle();
no_long_string();

our $HttpConfig = <<"_EOC_";
    flags_project shop token=pub_shop_1 file=$ENV{TEST_NGINX_FLAGS_DIR}/shop.json;
    flags_project blog token=pub_blog_1 file=$ENV{TEST_NGINX_FLAGS_DIR}/blog.json;
    flags_rollback off;
    flags_error_log html/reports.log;
_EOC_

our $Config = <<'_EOC_';
    location = /ingest/errors {
        flags_max_report_size 1k;
        flags_ingest_errors;
    }
    location = /reports.log {
        root html;
        default_type text/plain;
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

=== TEST 1: an accepted report is 204 and is in the log, field by field
--- request eval
["POST /ingest/errors\n" . '{"flagName":"new-checkout","message":"boom \"quoted\"","stack":"at a.js:1\nat b.js:2\ttab\u0001","userId":"u-1","traits":{"plan":"pro","n":1.5,"ok":true,"none":null},"extra":{"ignored":[1,2]}}',
 "GET /reports.log"]
--- more_headers eval
["Authorization: Bearer pub_shop_1\nContent-Type: application/json", ""]
--- error_code eval
[204, 200]
--- response_headers eval
["!Content-Type\n!Content-Length", ""]
--- response_body_like eval
['^$',
 '^\{"time":"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d\d\dZ","project":"shop","flagName":"new-checkout","message":"boom \\\\"quoted\\\\"","stack":"at a\.js:1\\\\nat b\.js:2\\\\ttab\\\\u0001","userId":"u-1","traits":\{"plan":"pro","n":1\.5,"ok":true,"none":null\}\}\n$']



=== TEST 2: optional fields are omitted when absent or null; non-ASCII is kept
--- http_config eval
$::HttpConfig =~ s{html/reports\.log}{html/reports2.log}r
--- config
    location = /ingest/errors {
        flags_ingest_errors;
    }
    location = /reports2.log {
        root html;
        default_type text/plain;
    }
--- request eval
["POST /ingest/errors\n" . '{"flagName":"always-on","message":"caf\u00e9 \u2603 ok","stack":null,"userId":null,"traits":null}',
 "GET /reports2.log"]
--- more_headers eval
["Authorization: Bearer pub_shop_1\nContent-Type: application/json", ""]
--- error_code eval
[204, 200]
--- response_body_like eval
['^$', "^\\{\"time\":\"[^\"]+\",\"project\":\"shop\",\"flagName\":\"always-on\",\"message\":\"caf\x{c3}\x{a9} \x{e2}\x{98}\x{83} ok\"\\}\\n\$"]



=== TEST 3: token first, then method, then media type, then size
--- request eval
["POST /ingest/errors\n{}", "GET /ingest/errors", "POST /ingest/errors\n{}", "POST /ingest/errors\n" . ("x" x 2000)]
--- more_headers eval
["Content-Type: text/plain",
 "Authorization: Bearer pub_shop_1",
 "Authorization: Bearer pub_shop_1\nContent-Type: text/plain",
 "Authorization: Bearer pub_shop_1\nContent-Type: text/plain"]
--- error_code eval
[401, 405, 415, 415]
--- response_headers eval
["WWW-Authenticate: Bearer\nContent-Type: application/json", "Allow: POST", "Content-Type: application/json", ""]
--- response_body eval
['{"error":"unauthorized","message":"an \"Authorization: Bearer <token>\" header is required"}',
 '{"error":"method_not_allowed","message":"this method is not allowed here"}',
 '{"error":"unsupported_media_type","message":"Content-Type must be application/json"}',
 '{"error":"unsupported_media_type","message":"Content-Type must be application/json"}']



=== TEST 4: media type matching: case, parameters and spaces are fine, look-alikes are not
--- request eval
["POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"m\"}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"m\"}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"m\"}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"m\"}"]
--- more_headers eval
["Authorization: Bearer pub_shop_1\nContent-Type: Application/JSON ; charset=utf-8",
 "Authorization: Bearer pub_shop_1\nContent-Type: application/json;charset=UTF-8",
 "Authorization: Bearer pub_shop_1\nContent-Type: application/jsonx",
 "Authorization: Bearer pub_shop_1\nContent-Type: application/json-patch+json"]
--- error_code eval
[204, 204, 415, 415]



=== TEST 5: a declared length over flags_max_report_size is 413 before the body is read
--- request eval
"POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"" . ("x" x 1100) . "\"}"
--- more_headers
Authorization: Bearer pub_shop_1
Content-Type: application/json
--- error_code: 413
--- response_body chomp
{"error":"payload_too_large","message":"the report is larger than 1024 bytes"}



=== TEST 6: a chunked body over the limit is 413 too
--- raw_request eval
"POST /ingest/errors HTTP/1.1\r
Host: localhost\r
Authorization: Bearer pub_shop_1\r
Content-Type: application/json\r
Transfer-Encoding: chunked\r
Connection: close\r
\r
400\r
" . ("x" x 1024) . "\r
10\r
" . ("y" x 16) . "\r
0\r
\r
"
--- error_code: 413
--- response_body chomp
{"error":"payload_too_large","message":"the report is larger than 1024 bytes"}



=== TEST 7: a chunked body within the limit is accepted, the JSON split across chunks
--- raw_request eval
"POST /ingest/errors HTTP/1.1\r
Host: localhost\r
Authorization: Bearer pub_shop_1\r
Content-Type: application/json\r
Transfer-Encoding: chunked\r
Connection: close\r
\r
d\r
{\"flagName\":\"\r
1c\r
killed\",\"message\":\"chunked\"}\r
0\r
\r
"
--- error_code: 204



=== TEST 8: invalid JSON: empty, not JSON, not an object, truncated, invalid UTF-8, too deep
--- request eval
["POST /ingest/errors\n", "POST /ingest/errors\nnope", "POST /ingest/errors\n[1]",
 "POST /ingest/errors\n{\"flagName\":\"x\"", "POST /ingest/errors\n{\"flagName\":\"\xff\",\"message\":\"m\"}",
 "POST /ingest/errors\n" . ("[" x 500)]
--- more_headers
Authorization: Bearer pub_shop_1
Content-Type: application/json
--- error_code eval
[400, 400, 400, 400, 400, 400]
--- response_body eval
['{"error":"invalid_json","message":"request body is empty"}',
 '{"error":"invalid_json","message":"request body is not valid JSON: lexical error: invalid string in json text. (near byte 1)"}',
 '{"error":"invalid_json","message":"request body must be a JSON object"}',
 '{"error":"invalid_json","message":"request body is not valid JSON: parse error: premature EOF (near byte 15)"}',
 '{"error":"invalid_json","message":"request body is not valid UTF-8 (byte 13)"}',
 '{"error":"invalid_json","message":"JSON nesting is deeper than 64 levels"}']



=== TEST 9: invalid fields are named
--- request eval
["POST /ingest/errors\n{\"message\":\"m\"}",
 "POST /ingest/errors\n{\"flagName\":null,\"message\":\"m\"}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":3}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"m\",\"stack\":[]}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"m\",\"userId\":5}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"m\",\"traits\":[1]}",
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"m\",\"traits\":{\"a\":{\"b\":1}}}"]
--- more_headers
Authorization: Bearer pub_shop_1
Content-Type: application/json
--- error_code eval
[400, 400, 400, 400, 400, 400, 400]
--- response_body eval
['{"error":"invalid_field","message":"flagName is required"}',
 '{"error":"invalid_field","message":"flagName is required"}',
 '{"error":"invalid_field","message":"message must be a string"}',
 '{"error":"invalid_field","message":"stack must be a string"}',
 '{"error":"invalid_field","message":"userId must be a string"}',
 '{"error":"invalid_field","message":"traits must be an object"}',
 '{"error":"invalid_field","message":"traits.a must be a string, number, boolean or null"}']



=== TEST 10: a syntax error wins over an earlier field error
--- request eval
"POST /ingest/errors\n{\"flagName\":3,\"message\":\"m\""
--- more_headers
Authorization: Bearer pub_shop_1
Content-Type: application/json
--- error_code: 400
--- response_body chomp
{"error":"invalid_json","message":"request body is not valid JSON: parse error: premature EOF (near byte 27)"}



=== TEST 11: a flag of another project is unknown to this token
--- request eval
["POST /ingest/errors\n{\"flagName\":\"new-checkout\",\"message\":\"m\"}",
 "POST /ingest/errors\n{\"flagName\":\"comments\",\"message\":\"m\"}"]
--- more_headers
Authorization: Bearer pub_blog_1
Content-Type: application/json
--- error_code eval
[404, 204]
--- response_body eval
['{"error":"unknown_flag","message":"project \"blog\" has no flag \"new-checkout\""}', '']



=== TEST 12: a body spooled to a temporary file is read from it
--- config
    location = /ingest/errors {
        client_body_in_file_only clean;
        flags_ingest_errors;
    }
    location = /reports.log {
        root html;
        default_type text/plain;
    }
--- http_config eval
$::HttpConfig =~ s{html/reports\.log}{html/spooled.log}r
--- request eval
["POST /ingest/errors\n{\"flagName\":\"dark-mode\",\"message\":\"" . ("m" x 20000) . "\"}",
 "GET /spooled.log"]
--- more_headers eval
["Authorization: Bearer pub_shop_1\nContent-Type: application/json", ""]
--- error_code eval
[204, 200]
--- response_body_like eval
['^$', '^\{"time":"[^"]+","project":"shop","flagName":"dark-mode","message":"m{20000}"\}\n$']



=== TEST 13: keep-alive: error answers drain their bodies; the connection goes on to a 204
--- pipelined_requests eval
["POST /ingest/errors\n{\"flagName\":\"nope\",\"message\":\"two\"}",
 "POST /ingest/errors\nnot json at all",
 "GET /ingest/errors\n{\"a body\":\"to drain\"}",
 "POST /ingest/errors\n" . ("z" x 2000),
 "POST /ingest/errors\n{\"flagName\":\"killed\",\"message\":\"three\"}"]
--- more_headers
Authorization: Bearer pub_shop_1
Content-Type: application/json
--- error_code eval
[404, 400, 405, 413, 204]
--- response_body_like eval
['^\{"error":"unknown_flag"', '^\{"error":"invalid_json"', '^\{"error":"method_not_allowed"', '^\{"error":"payload_too_large"', '^$']



=== TEST 14: an unknown flag's name is echoed up to 128 bytes, never cutting a UTF-8 character
--- request eval
"POST /ingest/errors\n{\"flagName\":\"" . ("a" x 127) . "\\u00e9tail\",\"message\":\"m\"}"
--- more_headers
Authorization: Bearer pub_shop_1
Content-Type: application/json
--- error_code: 404
--- response_body eval
'{"error":"unknown_flag","message":"project \"shop\" has no flag \"' . ("a" x 127) . '\""}'



=== TEST 15: an unknown flag's name with a NUL (\u0000) is echoed whole, closing quote included
--- request eval
["POST /ingest/errors\n{\"flagName\":\"a\\u0000b\",\"message\":\"m\"}",
 "POST /ingest/errors\n{\"flagName\":\"\\u0000\",\"message\":\"m\"}"]
--- more_headers eval
[("Authorization: Bearer pub_shop_1\nContent-Type: application/json") x 2]
--- error_code eval
[404, 404]
--- response_body eval
['{"error":"unknown_flag","message":"project \"shop\" has no flag \"a\\u0000b\\""}',
 '{"error":"unknown_flag","message":"project \"shop\" has no flag \"\\u0000\\""}']
