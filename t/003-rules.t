# Rule operators over HTTP: regex (PCRE, ignoreCase), semver, numbers,
# not_exists, string operators, several rules in a segment and several
# segments on a flag.
use Test::Nginx::Socket 'no_plan';

repeat_each(1);
master_on();
workers(2);
no_shuffle();
no_long_string();

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value("http_config", <<"_EOC_") unless defined $block->http_config;
    flags_project rules token=pub_rules file=$ENV{TEST_NGINX_FLAGS_DIR}/rules.json;
    flags_error_log off;
_EOC_
    $block->set_value("config", "location = /flags { flags_evaluate; }\n")
        unless defined $block->config;
    $block->set_value("more_headers", "Authorization: Bearer pub_rules\n")
        unless defined $block->more_headers;
    $block->set_value("no_error_log", "[error]\n[alert]\n[crit]\n[emerg]\n")
        unless defined $block->no_error_log;
});

run_tests();

__DATA__

=== TEST 1: every rule true
--- request
GET /flags?trait_platform=IOS&trait_appVersion=v2.10.0&trait_cart=100.0&trait_email=Bob%40Example.COM
--- error_code: 200
--- response_body chomp
{"flags":[{"name":"ios-only","enabled":true,"rolloutPercentage":100,"segments":["ios"]},{"name":"new-app","enabled":true,"rolloutPercentage":100,"segments":["app-after-2.3"]},{"name":"big-cart","enabled":true,"rolloutPercentage":100,"segments":["big"]},{"name":"no-email","enabled":false,"rolloutPercentage":100,"segments":["anonymous"]},{"name":"corp","enabled":true,"rolloutPercentage":100,"segments":["corp-mail","ios"]}]}



=== TEST 2: near misses: the regex is anchored, 99.99 < 100, no email; 2.3.1-rc.1 is still after 2.3.0
--- request
GET /flags?trait_platform=iosx&trait_appVersion=2.3.1-rc.1&trait_cart=99.99e0
--- error_code: 200
--- response_body chomp
{"flags":[{"name":"ios-only","enabled":false,"rolloutPercentage":100,"segments":["ios"]},{"name":"new-app","enabled":true,"rolloutPercentage":100,"segments":["app-after-2.3"]},{"name":"big-cart","enabled":false,"rolloutPercentage":100,"segments":["big"]},{"name":"no-email","enabled":true,"rolloutPercentage":100,"segments":["anonymous"]},{"name":"corp","enabled":false,"rolloutPercentage":100,"segments":["corp-mail","ios"]}]}



=== TEST 3: values that do not parse make numeric and semver rules false; one segment of two is enough
--- request
GET /flags?trait_platform=iPadOS&trait_appVersion=banana&trait_cart=01&trait_email=x%40other.org
--- error_code: 200
--- response_body chomp
{"flags":[{"name":"ios-only","enabled":true,"rolloutPercentage":100,"segments":["ios"]},{"name":"new-app","enabled":false,"rolloutPercentage":100,"segments":["app-after-2.3"]},{"name":"big-cart","enabled":false,"rolloutPercentage":100,"segments":["big"]},{"name":"no-email","enabled":false,"rolloutPercentage":100,"segments":["anonymous"]},{"name":"corp","enabled":true,"rolloutPercentage":100,"segments":["corp-mail","ios"]}]}
