# A report belongs to a cohort (issue 17, docs/http-api.md): its
# "enabled" says which, else the flag's answer now for its userId and
# traits, else on.  An on report counts as before (lifetime errors, the
# window, the on cohort) and may roll the flag back; an off report counts
# in the lifetime errors and the off cohort only, so any number of them
# never rolls back.  Two workers; the reports go over keep-alive
# connections, and flags_sdk's report route reads the same body.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use JSON::PP;

my $dir = prefix_dir('report-cohort');

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "half", "enabled": true, "rolloutPercentage": 50,
   "rollback": {"minErrors": 5, "rate": 1, "window": 60}},
  {"name": "pro-only", "enabled": true, "rolloutPercentage": 100,
   "segments": ["pro"], "rollback": {"minErrors": 3, "rate": 1, "window": 60}}
 ],
 "segments": {"pro": {"rules": [{"trait": "plan", "op": "eq", "value": "pro"}]}}}
_J_

write_file("$dir/conf/nginx.conf", nginx_conf(workers => 2, http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_error_log logs/reports.log;
    flags_max_traits 2;
    keepalive_requests 1000;
_H_
        location = /flags { flags_evaluate; }
        location = /status {
            flags_status;
            add_header X-Worker $pid always;
        }
        location = /ingest/errors { flags_ingest_errors; }
        location /api/sdk/ { flags_sdk; }
_S_

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'the configuration is valid') or diag($out);
my $master = nginx_start($dir);

# --- keep-alive clients -------------------------------------------------------


my %by_worker = %{ worker_connections('/status', 40) };
my @conns = values %by_worker;
is(scalar @conns, 2, 'a keep-alive connection on each worker');

my $next = 0;
sub report {
    my ($body, $path) = @_;
    my ($st, $b) = worker_request($conns[$next++ % @conns], 'POST',
                              $path // '/ingest/errors', $body);
    return $st == 204 ? $st : "$st $b";
}

# a report's body, members given as JSON text
sub body {
    my ($flag, %m) = @_;
    return qq({"flagName":"$flag","message":"m")
           . join('', map { qq(,"$_":$m{$_}) } sort keys %m) . '}';
}

sub flag_json {
    my ($name) = @_;
    my (undef, undef, $body) = http_request(GET => '/status');
    my ($obj) = $body =~ /(\{"name":"\Q$name\E",.*?"zoneFull":(?:true|false)\})/;
    return decode_json($obj // '{}');
}

# the lifetime and window errors and the cohorts' errors of a flag
sub errors {
    my ($f) = @_;
    return {errors => $f->{counters}{errors}, window => $f->{window}{errors},
            on => $f->{cohorts}{on}{errors}, off => $f->{cohorts}{off}{errors}};
}

# --- who is on: the evaluate endpoint says ------------------------------------

my (@on, @off);
for my $i (1 .. 300) {
    my (undef, undef, $b) = http_request(GET => "/flags?userId=u$i",
                                         headers => ['Authorization: Bearer tok_shop']);
    if ($b =~ /"name":"half","enabled":true/) { push @on, "u$i" } else { push @off, "u$i" }
    last if @on >= 8 && @off >= 8;
}
cmp_ok(scalar @on, '>=', 8, 'users on at 50 %');
cmp_ok(scalar @off, '>=', 8, 'users off at 50 %');
my $base = flag_json('half');
my $evals = $base->{counters}{evaluations};
is_deeply(errors($base), {errors => 0, window => 0, on => 0, off => 0}, 'no error yet');

# --- off reports never roll back ----------------------------------------------

# six off users by userId alone (6 >= minErrors 5), then "enabled": false
# from an on user and from no one, and one through flags_sdk's route
is(report(body('half', userId => qq("$_"))), 204, "report of off user $_") for @off[0 .. 5];
is(report(body('half', userId => qq("$on[0]"), enabled => 'false')), 204,
   'an on user who says "enabled": false');
is(report(body('half', enabled => 'false')), 204, 'no one, "enabled": false');
is(report(body('half', userId => qq("$off[6]")), '/api/sdk/report'), 204,
   "flags_sdk's report route, off user $off[6]");
my $f = flag_json('half');
is_deeply(errors($f), {errors => 0, window => 0, on => 0, off => 9},
          'nine off reports: the off cohort only, not the flag\'s errors nor the window');
is($f->{rolledBack}, JSON::PP::false, '... no rollback');
is($f->{window}{sources}, 0, '... no source in the window');
is_deeply($f->{errorsBySource}, {reports => 0, upstream => 0}, '... none of the flag\'s errors');
is($f->{counters}{evaluations}, $evals, '... finding the cohort is not an evaluation');

# --- the same number of on reports does -----------------------------------------

is(report(body('half', userId => qq("$on[1]"))), 204, "report of on user $on[1]");
is(report(body('half', userId => qq("$on[2]")), '/api/sdk/report'), 204,
   "flags_sdk's report route, on user $on[2]");
is(report(body('half', userId => qq("$off[7]"), enabled => 'true')), 204,
   'an off user who says "enabled": true');
is(report(body('half', enabled => 'null', traits => '{"a":1,"b":2,"c":3}')), 204,
   'traits over flags_max_traits and no userId: as if neither, on');
$f = flag_json('half');
is_deeply(errors($f), {errors => 4, window => 4, on => 4, off => 9},
          'four on reports: the window and the on cohort');
is($f->{rolledBack}, JSON::PP::false, '... not yet rolled back (minErrors 5)');
is(report(body('half')), 204, 'a report with neither: on, as before');
$f = flag_json('half');
is($f->{rolledBack}, JSON::PP::true, 'the fifth on report rolls the flag back');
is_deeply(errors($f), {errors => 5, window => 5, on => 5, off => 9}, '... its counts');
is($f->{rollback}{errors}, 5, '... the record: the 5 on errors');
is($f->{window}{sources}, 4, '... from 4 sources (three users, and the address of the two without one)');
is($f->{counters}{evaluations}, $evals, '... and no evaluation counted');

# rolled back, the flag is off for everyone: a report naming a user is off
is(report(body('half', userId => qq("$on[3]"), traits => '{"a":1,"b":2,"c":3}')), 204,
   'after the rollback, an on user (traits over the limit left out)');
is_deeply(errors(flag_json('half')), {errors => 5, window => 5, on => 5, off => 10},
          '... counted off: the flag is off for them now');

# --- traits alone: a segment rule ---------------------------------------------

is(report(body('pro-only', traits => qq({"plan":"free"}))), 204, "plan free $_") for 1 .. 4;
$f = flag_json('pro-only');
is_deeply(errors($f), {errors => 0, window => 0, on => 0, off => 4},
          'pro-only: four reports of plan free are off (4 >= minErrors 3)');
is($f->{rolledBack}, JSON::PP::false, '... no rollback');
is(report(body('pro-only', traits => qq({"plan":"pro","n":2}))), 204, "plan pro $_") for 1 .. 3;
$f = flag_json('pro-only');
is_deeply(errors($f), {errors => 3, window => 3, on => 3, off => 4},
          'three reports of plan pro are on');
is($f->{rolledBack}, JSON::PP::true, '... and roll it back');

# --- "enabled" must be a boolean; the log echoes it -------------------------------

for my $v ('1', '"true"', '[]', '{}') {
    is(report(body('half', enabled => $v)),
       '400 {"error":"invalid_field","message":"enabled must be a boolean"}',
       "\"enabled\": $v is refused");
    is(report(body('half', enabled => $v), '/api/sdk/report'),
       '400 {"error":"invalid_field","message":"enabled must be a boolean"}',
       "\"enabled\": $v is refused by the SDK route too");
}
is_deeply(errors(flag_json('half')), {errors => 5, window => 5, on => 5, off => 10},
          'refused reports count nothing');

my @lines = split /\n/, read_file("$dir/logs/reports.log");
is(scalar @lines, 22, 'every accepted report has its line');
like($lines[6], qr/^\{"time":"[^"]+","project":"shop","flagName":"half","message":"m","userId":"\Q$on[0]\E","enabled":false\}$/,
     'the log line ends with "enabled":false');
like($lines[11], qr/"userId":"\Q$off[7]\E","enabled":true\}$/, '... and "enabled":true');
like($lines[12], qr/"traits":\{"a":1,"b":2,"c":3\}\}$/, '... and nothing for null');

close $_ for @conns;

unlike(read_file("$dir/logs/error.log"), qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg');
nginx_stop($master);
done_testing();
