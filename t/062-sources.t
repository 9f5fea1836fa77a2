# Who may roll a flag back (docs/rollback.md, "Sources" and "Which flags an
# upstream error blames"):
#  - a location's upstream errors blame the flags it names (flags=) or the
#    flags the request read by their own $flag_NAME; reading $flags_enabled
#    to pass the list on blames nobody;
#  - min_sources: a rollback waits until the window's errors came from N
#    distinct sources (the report's userId, else the client address; for
#    upstream errors flags_context's user=), on every path that counts
#    errors: POST /ingest/errors, flags_sdk's report route, upstream errors;
#  - flags_status says what a flag still waits for, flags_metrics the rule
#    in force.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;

my $dir = prefix_dir('sources');

my $Broken = unused_port();

# new-checkout is the canary; dark-mode and wide are on for everyone and
# must never be blamed for the canary's 500s
write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "new-checkout", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 1, "window": 60}},
  {"name": "dark-mode", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 1, "window": 60}},
  {"name": "listed", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 1, "window": 60}},
  {"name": "popular", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 5, "rate": 1, "window": 60, "minSources": 3}},
  {"name": "plain", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 4, "rate": 1, "window": 60}},
  {"name": "proxied", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 4, "rate": 1, "window": 60, "minSources": 2}},
  {"name": "sdk-flag", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 1, "window": 60, "minSources": 2}}
 ]}
_J_

my $http = <<"_C_";
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_error_log off;
    flags_rollback min_sources=2;
    flags_context shop user=\$arg_uid;

    upstream broken { server 127.0.0.1:$Broken; }

    server {
        listen 127.0.0.1:$Broken;
        location / { return 500 "broken\\n"; }
    }
_C_

my $server = <<'_C_';
        location = /flags { flags_evaluate; }
        location = /status { flags_status; }
        location = /metrics { flags_metrics; }
        location = /ingest/errors { flags_ingest_errors; }
        location /api/sdk/ { flags_sdk; }

        # the README's old recipe: the list is passed on, nothing named
        location = /pass-list {
            flags_upstream_errors on;
            proxy_set_header X-Flags $flags_enabled;
            proxy_pass http://broken;
        }
        # the flag read by name (the canary's map reads it so)
        location = /named {
            flags_upstream_errors on;
            proxy_set_header X-Flags $flags_enabled;
            proxy_set_header X-Canary $flag_new_checkout;
            proxy_pass http://broken;
        }
        # the flags the location names, whatever it reads
        location = /listed {
            flags_upstream_errors on flags=listed;
            proxy_set_header X-Flags $flags_enabled;
            proxy_set_header X-Dark $flag_dark_mode;
            proxy_pass http://broken;
        }
        location = /proxied {
            flags_upstream_errors on status=500 flags=new-checkout,proxied;
            proxy_set_header X-Flags $flags_enabled;
            proxy_pass http://broken;
        }
_C_

write_file("$dir/conf/nginx.conf", nginx_conf(http => $http, server => $server));

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'the configuration is valid') or diag($out);

my $master = nginx_start($dir);

sub get {
    my ($path, @h) = @_;
    my ($st, undef, $body) = http_request(GET => $path, headers => \@h);
    return ($st, $body);
}

sub flag_json {
    my ($name) = @_;
    my (undef, $body) = get('/status');
    my $j = decode_json($body);
    my ($f) = grep { $_->{name} eq $name } @{ $j->{projects}[0]{flags} };
    return $f;
}

sub report {
    my ($flag, $user, $path) = @_;
    my $body = encode_json({flagName => $flag, message => 'boom',
                            defined $user ? (userId => $user) : ()});
    my ($st) = http_request(POST => $path // '/ingest/errors',
                            headers => ['Authorization: Bearer tok_shop',
                                        'Content-Type: application/json'],
                            body => $body);
    return $st;
}

my $F = JSON::PP::false;
my $T = JSON::PP::true;

# --- 1. which flags an upstream error blames ----------------------------------

for my $i (1 .. 6) {
    my ($st) = get("/pass-list?uid=p$i");
    is($st, 500, "pass-list $i: the broken backend answers 500");
}
for my $name (qw(new-checkout dark-mode listed)) {
    my $f = flag_json($name);
    is_deeply($f->{errorsBySource}, {reports => 0, upstream => 0},
              "reading \$flags_enabled alone blames nothing: $name has no upstream error");
    is($f->{rolledBack}, $F, "... $name is not rolled back");
}

for my $i (1 .. 3) {
    my ($st) = get("/named?uid=n$i");
    is($st, 500, "named $i: 500");
}
my $nc = flag_json('new-checkout');
is_deeply($nc->{errorsBySource}, {reports => 0, upstream => 3},
          'the flag read by $flag_new_checkout carries the 3 errors');
is($nc->{rolledBack}, $T, '... and rolls back (minErrors 3 from 3 users)');
is_deeply([@{ $nc->{rollback} }{qw(errors sources decidedBy)}], [3, 3, 'rule'],
          '... its record: 3 errors, 3 sources, decided by this host\'s rule');
is_deeply(flag_json('dark-mode')->{errorsBySource}, {reports => 0, upstream => 0},
          'dark-mode, passed on in the same requests, is not blamed');

for my $i (1 .. 3) {
    my ($st) = get("/listed?uid=l$i");
    is($st, 500, "listed $i: 500");
}
my $l = flag_json('listed');
is_deeply($l->{errorsBySource}, {reports => 0, upstream => 3}, 'flags=listed: listed is blamed');
is($l->{rolledBack}, $T, '... and rolled back');
is_deeply(flag_json('dark-mode')->{errorsBySource}, {reports => 0, upstream => 0},
          'flags= wins over a $flag_dark_mode read in the same location');
is(flag_json('dark-mode')->{cohorts}{on}{evaluations}, 12,
   '... dark-mode still counts every request that read it as its on cohort (12)');

# --- 2. min_sources ------------------------------------------------------------

# twenty reports from one client, no userId: one source
for my $i (1 .. 20) {
    is(report('popular'), 204, "popular: anonymous report $i from one address") or last;
}
my $p = flag_json('popular');
is($p->{rolledBack}, $F, '20 reports from one address do not roll back a flag with minSources 3');
# (its seconds one by one, "perSecond", are t/091-dashboard.t's)
is_deeply({ %{ $p->{window} }, perSecond => undef },
          {seconds => 60, enabledEvaluations => 12, errors => 20, sources => 1, perSecond => undef},
          '... the window: 20 errors from 1 source (12 enabled: the proxied requests read it)');
is_deeply($p->{rollbackRule},
          {enabled => $T, minErrors => 5, rate => 1, window => 60, minSources => 3,
           waitingFor => {errors => 0, rateErrors => 0, sources => 2}},
          '... flags_status: the rule in force, waiting for 2 more sources');

is(report('popular', 'u-1'), 204, 'a report of user u-1');
is(report('popular', 'u-1'), 204, 'u-1 again');
is(flag_json('popular')->{rolledBack}, $F, '... 2 sources: still waiting');
is(flag_json('popular')->{rollbackRule}{waitingFor}{sources}, 1, '... for one more');
is(report('popular', 'u-2'), 204, 'a report of user u-2');
$p = flag_json('popular');
is($p->{rolledBack}, $T, 'the third source rolls the flag back');
is_deeply([@{ $p->{rollback} }{qw(errors sources decidedBy)}], [23, 3, 'rule'],
          '... its record: 23 errors from 3 sources, this host\'s rule');
is($p->{rollbackRule}{waitingFor}, undef, '... and nothing is waited for any more');

# plain inherits flags_rollback min_sources=2
for my $i (1 .. 6) {
    is(report('plain', 'same-user'), 204, "plain: report $i of one user") or last;
}
is(flag_json('plain')->{rollbackRule}{minSources}, 2, 'plain inherits min_sources=2 from flags_rollback');
is(flag_json('plain')->{rolledBack}, $F, '... 6 reports of one user: no rollback');
is(report('plain'), 204, 'an anonymous report: the address is a second source');
is(flag_json('plain')->{rolledBack}, $T, '... rolled back');

# flags_sdk's report route counts sources the same way
for my $i (1 .. 4) {
    is(report('sdk-flag', 'sdk-user', '/api/sdk/report'), 204, "sdk report $i of one user") or last;
}
is(flag_json('sdk-flag')->{rolledBack}, $F, 'SDK reports of one user: no rollback (minSources 2)');
is(report('sdk-flag', 'sdk-other', '/api/sdk/report'), 204, 'an SDK report of another user');
is(flag_json('sdk-flag')->{rolledBack}, $T, '... rolled back');

# upstream errors: the source is flags_context's user=
for my $i (1 .. 5) {
    my ($st) = get('/proxied?uid=one');
    is($st, 500, "proxied as user one, $i: 500");
}
my $px = flag_json('proxied');
is_deeply([$px->{window}{errors}, $px->{window}{sources}, $px->{rolledBack}], [5, 1, $F],
          'proxied: 5 upstream errors of one user are 1 source, no rollback (minSources 2)');
my ($st) = get('/proxied?uid=two');
is($st, 500, 'user two: 500');
is(flag_json('proxied')->{rolledBack}, $T, '... the second user rolls proxied back');

# --- metrics: the rule in force and the sources --------------------------------

my (undef, $m) = get('/metrics');
for my $line ('flags_rollback_min_sources{project="shop",flag="popular"} 3',
              'flags_rollback_min_sources{project="shop",flag="dark-mode"} 2',
              'flags_rollback_min_errors{project="shop",flag="popular"} 5',
              'flags_rollback_rate_ratio{project="shop",flag="popular"} 0.01',
              'flags_rollback_window_seconds{project="shop",flag="popular"} 60',
              'flags_rollback_rule_enabled{project="shop",flag="popular"} 1',
              'flags_window_sources{project="shop",flag="popular"} 3',
              'flags_rollbacks_total{project="shop",flag="popular",by="rule"} 1',
              'flags_rollbacks_total{project="shop",flag="popular",by="fleet"} 0',
              'flags_rollbacks_total{project="shop",flag="dark-mode",by="rule"} 0') {
    like($m, qr/^\Q$line\E$/m, "metrics: $line");
}

like(read_file("$dir/logs/error.log"),
     qr/flags: rolled back flag "popular" of project "shop": 23 errors and 12 enabled evaluations in 60 s from 3 distinct sources \(min_errors=5 rate=1% min_sources=3; decided by this host's rule\)/,
     'the rollback line says the sources and who decided');

# --- a restart keeps the record's sources and who decided -----------------------

nginx_stop($master);
write_file("$dir/conf/nginx.conf", nginx_conf(
    http => $http . "    flags_state_file $dir/state.json;\n", server => $server));
$master = nginx_start($dir);
for my $u (qw(r-1 r-2 r-3 r-1 r-2)) {
    is(report('popular', $u), 204, "popular after a restart: a report of $u");
}
is(flag_json('popular')->{rolledBack}, $T, 'popular rolled back again (5 errors, 3 sources)');
nginx_stop($master);
$master = nginx_start($dir);
$p = flag_json('popular');
is_deeply([$p->{rolledBack}, @{ $p->{rollback} }{qw(errors sources decidedBy)}], [$T, 5, 3, 'rule'],
          'after a restart the record still says 3 sources, decided by the rule');

# --- nginx -t --------------------------------------------------------------

for my $case (['flags_rollback min_sources=0;', qr/invalid min_sources "min_sources=0": expected 1 to 32/],
              ['flags_rollback min_sources=33;', qr/invalid min_sources "min_sources=33": expected 1 to 32/],
              ['flags_rollback min_sources=x;', qr/invalid min_sources "min_sources=x"/]) {
    my ($line, $re) = @$case;
    my $bad = prefix_dir('sources-bad');
    write_file("$bad/conf/shop.json", '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":1}]}');
    write_file("$bad/conf/nginx.conf", nginx_conf(
        http => "    flags_project shop token=t file=$bad/conf/shop.json;\n    $line\n", server => ''));
    my ($brc, $bout) = nginx_test($bad);
    isnt($brc, 0, "nginx -t refuses $line");
    like($bout, $re, '... with the reason') or diag($bout);
}
{
    my $bad = prefix_dir('sources-file');
    write_file("$bad/conf/shop.json",
               '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":1,"rollback":{"minSources":40}}]}');
    write_file("$bad/conf/nginx.conf", nginx_conf(
        http => "    flags_project shop token=t file=$bad/conf/shop.json;\n", server => ''));
    my ($brc, $bout) = nginx_test($bad);
    isnt($brc, 0, 'nginx -t refuses "minSources": 40');
    like($bout, qr/rollback: "minSources" must be an integer between 1 and 32/, '... with the reason')
        or diag($bout);
}

my $errlog = read_file("$dir/logs/error.log");
unlike($errlog, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log');
nginx_stop($master);

done_testing();
