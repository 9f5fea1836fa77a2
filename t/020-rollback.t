# Shared counters, automatic rollback, flags_status and flags_admin, with two
# workers: every request below is its own connection, so both workers serve.
use Test::Nginx::Socket 'no_plan';

repeat_each(1);
master_on();
workers(2);
no_shuffle();
no_long_string();

our $HttpConfig = <<"_EOC_";
    flags_project shop token=pub_shop_1 file=$ENV{TEST_NGINX_FLAGS_DIR}/rollback.json;
    flags_project blog token=pub_blog_1 file=$ENV{TEST_NGINX_FLAGS_DIR}/blog.json;
    flags_rollback min_errors=5 rate=10% window=60s;
    flags_error_log off;
_EOC_

our $Config = <<'_EOC_';
    location = /flags { flags_evaluate; }
    location = /ingest/errors { flags_ingest_errors; }
    location = /flags-status { flags_status; allow 127.0.0.1; deny all; }
    location /flags-admin/ { flags_admin; allow 127.0.0.1; deny all; }
_EOC_

our $Eval = "GET /flags?userId=user-1&trait_plan=pro";
our $Auth = "Authorization: Bearer pub_shop_1";
our $Json = "Authorization: Bearer pub_shop_1\nContent-Type: application/json";
# A report with neither userId, traits nor "enabled" is of the on cohort
# (issue 17): it shows in cohorts.on.errors as well as in the window.
sub report { "POST /ingest/errors\n{\"flagName\":\"$_[0]\",\"message\":\"m\"}" }

our $AllOn = '{"flags":[{"name":"risky","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"safe","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"plain","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"half","enabled":true,"rolloutPercentage":50,"segments":["beta"]}]}';
our $RiskyOff = '{"flags":[{"name":"risky","enabled":false,"rolloutPercentage":0,"segments":[]},{"name":"safe","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"plain","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"half","enabled":true,"rolloutPercentage":50,"segments":["beta"]}]}';

add_block_preprocessor(sub {
    my $block = shift;
    $block->set_value("http_config", $HttpConfig) unless defined $block->http_config;
    $block->set_value("config", $Config) unless defined $block->config;
    $block->set_value("no_error_log", "[error]\n[alert]\n[crit]\n[emerg]\n")
        unless defined $block->no_error_log;
});

run_tests();

__DATA__

=== TEST 1: counters are exact across workers (30 separate connections)
--- request eval
[($::Eval) x 30, "GET /flags-status"]
--- more_headers eval
[($::Auth) x 30, ""]
--- error_code eval
[(200) x 31]
--- response_body_like eval
[('^\{"flags":') x 30,
 '^\{"projects":\[\{"name":"shop","flags":\[\{"name":"risky","enabled":true,"rolloutPercentage":100,"segments":\[\],"effectiveRolloutPercentage":100,"rolledBack":false,"override":null,"counters":\{"evaluations":30,"enabledEvaluations":30,"errors":0\},"window":\{"seconds":60,"enabledEvaluations":30,"errors":0,"sources":0,"perSecond":\[(?:\[\d+,\d+,\d+\],)*(?:\[\d+,\d+,\d+\])?\]\},"rollbackRule":\{"enabled":true,"minErrors":3,"rate":50,"window":60,"minSources":1,"waitingFor":\{"errors":3,"rateErrors":15,"sources":1\}\},"errorsBySource":\{"reports":0,"upstream":0\},"cohorts":\{"on":\{"evaluations":30,"errors":0,"errorPercentage":0\},"off":\{"evaluations":0,"errors":0,"errorPercentage":null\}\},"rollback":null,"definedAt":"[^"]+","zoneFull":false\},.*\{"name":"half","enabled":true,"rolloutPercentage":50,"segments":\["beta"\],"effectiveRolloutPercentage":50,"rolledBack":false,"override":null,"counters":\{"evaluations":30,"enabledEvaluations":30,"errors":0\},"window":\{"seconds":60,"enabledEvaluations":30,"errors":0,"sources":0,"perSecond":\[(?:\[\d+,\d+,\d+\],)*(?:\[\d+,\d+,\d+\])?\]\},"rollbackRule":\{"enabled":true,"minErrors":5,"rate":10,"window":60,"minSources":1,"waitingFor":\{"errors":5,"rateErrors":3,"sources":1\}\},"errorsBySource":\{"reports":0,"upstream":0\},"cohorts":\{"on":\{"evaluations":30,"errors":0,"errorPercentage":0\},"off":\{"evaluations":0,"errors":0,"errorPercentage":null\}\},"rollback":null,"definedAt":"[^"]+","zoneFull":false\}\],"definitions":\{"source":"file","version":1,"at":"[^"]+"\}\},\{"name":"blog","flags":\[\{"name":"comments",']



=== TEST 2: the rollback trips at the threshold and every worker sees it at once
--- request eval
[($::Eval) x 4, map({ main::report("risky") } 1..3), ($::Eval) x 12, "GET /flags-status"]
--- more_headers eval
[($::Auth) x 4, ($::Json) x 3, ($::Auth) x 12, ""]
--- error_code eval
[(200) x 4, (204) x 3, (200) x 13]
--- response_body_like eval
[("^\Q$::AllOn\E\$") x 4, ("^\$") x 3, ("^\Q$::RiskyOff\E\$") x 12,
 '^\{"projects":\[\{"name":"shop","flags":\[\{"name":"risky","enabled":true,"rolloutPercentage":100,"segments":\[\],"effectiveRolloutPercentage":0,"rolledBack":true,"override":null,"counters":\{"evaluations":16,"enabledEvaluations":4,"errors":3\},"window":\{"seconds":60,"enabledEvaluations":4,"errors":3,"sources":1,"perSecond":\[(?:\[\d+,\d+,\d+\],)*(?:\[\d+,\d+,\d+\])?\]\},"rollbackRule":\{"enabled":true,"minErrors":3,"rate":50,"window":60,"minSources":1,"waitingFor":null\},"errorsBySource":\{"reports":3,"upstream":0\},"cohorts":\{"on":\{"evaluations":4,"errors":3,"errorPercentage":75\},"off":\{"evaluations":12,"errors":0,"errorPercentage":0\}\},"rollback":\{"at":"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d\d\dZ","errors":3,"enabledEvaluations":4,"sources":1,"decidedBy":"rule"\},"definedAt":"[^"]+","zoneFull":false\}']
--- no_error_log
[alert]
[crit]
[emerg]



=== TEST 3: below the rate it does not trip: 3 errors against 7 enabled evaluations at 50%
--- request eval
[($::Eval) x 7, map({ main::report("risky") } 1..3), $::Eval]
--- more_headers eval
[($::Auth) x 7, ($::Json) x 3, $::Auth]
--- error_code eval
[(200) x 7, (204) x 3, 200]
--- response_body_like eval
[("^\Q$::AllOn\E\$") x 7, ("^\$") x 3, "^\Q$::AllOn\E\$"]
--- no_error_log
rolled back
[error]



=== TEST 4: the http-level policy applies to a flag without its own; "rollback": false never trips
--- request eval
[map({ main::report("plain") } 1..4), $::Eval, main::report("plain"), map({ main::report("safe") } 1..30), $::Eval]
--- more_headers eval
[($::Json) x 4, $::Auth, $::Json, ($::Json) x 30, $::Auth]
--- error_code eval
[(204) x 4, 200, 204, (204) x 30, 200]
--- response_body_like eval
[("^\$") x 4, '"name":"plain","enabled":true,"rolloutPercentage":100', "^\$", ("^\$") x 30,
 '^\{"flags":\[\{"name":"risky","enabled":true,"rolloutPercentage":100,"segments":\[\]\},\{"name":"safe","enabled":true,"rolloutPercentage":100,"segments":\[\]\},\{"name":"plain","enabled":false,"rolloutPercentage":0,']
--- no_error_log
[alert]
[crit]
[emerg]



=== TEST 5: clearing a rollback through flags_admin: back on, window emptied, lifetime kept
--- request eval
[$::Eval, map({ main::report("risky") } 1..3), $::Eval,
 "DELETE /flags-admin/rollbacks/shop/risky", $::Eval, "GET /flags-status"]
--- more_headers eval
[$::Auth, ($::Json) x 3, $::Auth, "", $::Auth, ""]
--- error_code eval
[200, 204, 204, 204, 200, 204, 200, 200]
--- response_body_like eval
["^\Q$::AllOn\E\$", "^\$", "^\$", "^\$", "^\Q$::RiskyOff\E\$", "^\$", "^\Q$::AllOn\E\$",
 '^\{"projects":\[\{"name":"shop","flags":\[\{"name":"risky","enabled":true,"rolloutPercentage":100,"segments":\[\],"effectiveRolloutPercentage":100,"rolledBack":false,"override":null,"counters":\{"evaluations":3,"enabledEvaluations":2,"errors":3\},"window":\{"seconds":60,"enabledEvaluations":1,"errors":0,"sources":0,"perSecond":\[(?:\[\d+,\d+,\d+\],)*(?:\[\d+,\d+,\d+\])?\]\},"rollbackRule":\{"enabled":true,"minErrors":3,"rate":50,"window":60,"minSources":1,"waitingFor":\{"errors":3,"rateErrors":1,"sources":1\}\},"errorsBySource":\{"reports":3,"upstream":0\},"cohorts":\{"on":\{"evaluations":2,"errors":3,"errorPercentage":100\},"off":\{"evaluations":1,"errors":0,"errorPercentage":0\}\},"rollback":null,"definedAt":"[^"]+","zoneFull":false\}']
--- no_error_log
[alert]
[crit]
[emerg]



=== TEST 6: overrides: kill, percentage, removal; shown in flags_status
--- request eval
["PUT /flags-admin/overrides/shop/half\n{\"enabled\": false}", $::Eval,
 "PUT /flags-admin/overrides/shop/half\n{\"rolloutPercentage\": 25.856}", $::Eval, "GET /flags-status",
 "PUT /flags-admin/overrides/shop/half\n{\"rolloutPercentage\": 25.855}", $::Eval,
 "DELETE /flags-admin/overrides/shop/half", $::Eval]
--- more_headers eval
["", $::Auth, "", $::Auth, "", "", $::Auth, "", $::Auth]
--- error_code eval
[204, 200, 204, 200, 200, 204, 200, 204, 200]
--- response_body_like eval
["^\$", '"name":"half","enabled":false,"rolloutPercentage":0,"segments":\["beta"\]\}\]\}$',
 "^\$", '"name":"half","enabled":true,"rolloutPercentage":25.856,"segments":\["beta"\]\}\]\}$',
 '"name":"half","enabled":true,"rolloutPercentage":50,"segments":\["beta"\],"effectiveRolloutPercentage":25.856,"rolledBack":false,"override":\{"rolloutPercentage":25.856\},',
 "^\$", '"name":"half","enabled":false,"rolloutPercentage":25.855,"segments":\["beta"\]\}\]\}$',
 "^\$", '"name":"half","enabled":true,"rolloutPercentage":50,"segments":\["beta"\]\}\]\}$']
--- no_error_log
[alert]
[crit]
[emerg]



=== TEST 7: a rollback takes precedence over an override
--- request eval
["PUT /flags-admin/overrides/shop/risky\n{\"rolloutPercentage\": 100}",
 map({ main::report("risky") } 1..3), $::Eval]
--- more_headers eval
["", ($::Json) x 3, $::Auth]
--- error_code eval
[204, 204, 204, 204, 200]
--- response_body_like eval
["^\$", "^\$", "^\$", "^\$", '^\{"flags":\[\{"name":"risky","enabled":false,"rolloutPercentage":0,']
--- no_error_log
[alert]
[crit]
[emerg]



=== TEST 8: admin errors: unknown project or flag, bad bodies, wrong methods, wrong paths
--- request eval
["DELETE /flags-admin/rollbacks/nope/risky", "DELETE /flags-admin/rollbacks/shop/nope",
 "PUT /flags-admin/overrides/shop/half\n{\"enabled\":", "PUT /flags-admin/overrides/shop/half\n{\"enabled\": true}",
 "PUT /flags-admin/overrides/shop/half\n{\"rolloutPercentage\": 101}", "PUT /flags-admin/overrides/shop/half\n{}",
 "GET /flags-admin/rollbacks/shop/risky", "POST /flags-admin/overrides/shop/half\n{}",
 "DELETE /flags-admin/other/shop/risky", "POST /flags-status\n{}"]
--- error_code eval
[404, 404, 400, 400, 400, 400, 405, 405, 404, 405]
--- response_headers eval
["", "", "", "", "", "", "Allow: DELETE", "Allow: PUT, DELETE", "", "Allow: GET, HEAD"]
--- response_body_like eval
['^\{"error":"unknown_project","message":"there is no project \\\\"nope\\\\""\}$', '^\{"error":"unknown_flag","message":"project \\\\"shop\\\\" has no flag \\\\"nope\\\\""\}$',
 '^\{"error":"invalid_json","message":"[^"]+"\}$', '^\{"error":"invalid_field","message":"[^"]*enabled[^"]*"\}$',
 '^\{"error":"invalid_field","message":"[^"]*rolloutPercentage[^"]*"\}$', '^\{"error":"invalid_field","message":"expected \{\\\\"enabled\\\\": false\} or \{\\\\"rolloutPercentage\\\\": N\}"\}$',
 '^\{"error":"method_not_allowed"', '^\{"error":"method_not_allowed"', '^\{"error":"not_found","message":"expected /flags-admin/rollbacks/<project>/<flag>, /flags-admin/overrides/<project>/<flag> or /flags-admin/ramps/<project>/<flag>"\}$', '^\{"error":"method_not_allowed"']



=== TEST 9: a report for a flag of another project never counts against this one
--- request eval
["POST /ingest/errors\n{\"flagName\":\"risky\",\"message\":\"m\"}", "GET /flags-status"]
--- more_headers eval
["Authorization: Bearer pub_blog_1\nContent-Type: application/json", ""]
--- error_code eval
[404, 200]
--- response_body_like eval
['^\{"error":"unknown_flag"', '"name":"risky".*"counters":\{"evaluations":0,"enabledEvaluations":0,"errors":0\}']



=== TEST 10: operator endpoints compose with allow/deny
--- config
    location = /flags-status { deny all; flags_status; }
    location /flags-admin/ { deny all; flags_admin; }
--- request eval
["GET /flags-status", "DELETE /flags-admin/rollbacks/shop/risky"]
--- error_code eval
[403, 403]
--- no_error_log
[alert]
[crit]
[emerg]



=== TEST 11: flags_log_level takes only nginx's level names
--- http_config eval
$::HttpConfig . "    flags_log_level debug;\n"
--- config
    location = /flags { flags_evaluate; }
--- must_die
--- error_log eval
qr/\[emerg\] .*invalid value "debug" \(expected info, notice, warn or error\) in .*nginx\.conf:\d+/
--- no_error_log
[alert]
[crit]
