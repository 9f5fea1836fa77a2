# Upstream errors roll back (docs/variables.md): a canary chosen by
# map $flag_new_checkout between two upstream server blocks, the new one
# answering 500.  The on cohort's 500s roll the flag back and its traffic
# goes to the old backend on its own; the off cohort's errors count only in
# its cohort; the status range; flags_status shows sources and cohorts.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use JSON::PP;

my $dir = prefix_dir('upstream-errors');

sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                  Listen => 1, ReuseAddr => 1) or die "port: $!";
    my $p = $s->sockport;
    close $s;
    return $p;
}
my %used = ($FlagsTest::Port => 1);
my ($Old, $New);
do { $Old = free_port() } while $used{$Old}++;
do { $New = free_port() } while $used{$New}++;

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "new-checkout", "enabled": true, "rolloutPercentage": 50},
  {"name": "steady", "enabled": true, "rolloutPercentage": 100, "rollback": false}
 ]}
_J_

my $http = <<"_C_";
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_error_log off;
    flags_rollback min_errors=5 rate=10% window=60s;
    flags_context shop user=\$arg_uid;

    map \$flag_new_checkout \$checkout_upstream {
        1        checkout_new;
        default  checkout_old;
    }

    upstream checkout_old { server 127.0.0.1:$Old; }
    upstream checkout_new { server 127.0.0.1:$New; }

    server {
        listen 127.0.0.1:$Old;
        location / {
            if (\$arg_fail) {
                return 502 "old failed\\n";
            }
            return 200 "old\\n";
        }
    }

    server {
        listen 127.0.0.1:$New;
        location / { return 500 "new\\n"; }
    }
_C_

my $server = <<'_C_';
        location = /flags { flags_evaluate; }
        location = /status { flags_status; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /checkout {
            flags_upstream_errors on;
            proxy_pass http://$checkout_upstream;
        }
        location = /checkout-502 {
            flags_upstream_errors on status=502;
            proxy_pass http://$checkout_upstream;
        }
        location = /checkout-off {
            flags_upstream_errors off;
            proxy_pass http://$checkout_upstream;
        }
        location = /no-read {
            flags_upstream_errors on;
            return 500;
        }
        location = /steady {
            flags_upstream_errors on;
            return 503 "$flag_steady\n";
        }
_C_

write_file("$dir/conf/nginx.conf", nginx_conf(http => $http, server => $server));

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'the canary configuration is valid') or diag($out);

my $master = nginx_start($dir);

sub get {
    my ($path, @h) = @_;
    my ($st, undef, $body) = http_request(GET => $path, headers => \@h);
    return ($st, $body);
}

sub flag_status {
    my ($name) = @_;
    my (undef, $body) = get('/status');
    my ($obj) = $body =~ /(\{"name":"\Q$name\E",.*?"zoneFull":(?:true|false)\})/;
    return $obj // '';
}

sub flag_json { decode_json(flag_status($_[0])) }

# a cohort as flags_status writes it: errorPercentage truncated to 3 decimals
sub cohort {
    my ($evaluations, $errors) = @_;
    my $milli = $errors >= $evaluations ? 100000 : int($errors * 100000 / $evaluations);
    my $pct = sprintf('%d.%03d', int($milli / 1000), $milli % 1000);
    $pct =~ s/\.?0+$// if $pct =~ /\./;
    return {evaluations => $evaluations, errors => $errors, errorPercentage => $pct + 0};
}
sub cohort_text {
    my ($c) = @_;
    return sprintf('{"evaluations":%d,"errors":%d,"errorPercentage":%s}',
                   $c->{evaluations}, $c->{errors}, $c->{errorPercentage});
}

# the cohorts, as GET /flags decides them
my (@on, @off);
for my $i (1 .. 200) {
    my (undef, $b) = get("/flags?userId=c$i", 'Authorization: Bearer tok_shop');
    if ($b =~ /"name":"new-checkout","enabled":true/) { push @on, "c$i" } else { push @off, "c$i" }
    last if @on >= 12 && @off >= 12;
}
cmp_ok(scalar @on, '>=', 12, 'users in the on cohort');
cmp_ok(scalar @off, '>=', 12, 'users in the off cohort');
# GET /flags counted evaluations, and so the cohorts, too: the base of
# what follows
my $basef = decode_json(flag_status('new-checkout'));
my $base = $basef->{counters};
is($base->{enabledEvaluations}, scalar @on, 'GET /flags counted the on users as enabled evaluations');
my $E = $base->{evaluations};
my $EN = $base->{enabledEvaluations};
is_deeply($basef->{cohorts}, {on => cohort($EN, 0), off => cohort($E - $EN, 0)},
          '... and every one of its evaluations in the cohort of its answer');
my $OFF = $E - $EN;

# --- the off cohort: its errors are its own ----------------------------------

for my $u (@off[0 .. 5]) {
    my ($st, $b) = get("/checkout?uid=$u&fail=1");
    is("$st $b", "502 old failed\n", "off cohort $u: the old backend fails (502)") or last;
}
my $f = flag_json('new-checkout');
is($f->{counters}{errors}, 0, 'six off-cohort 502s are not errors of the flag');
is_deeply($f->{errorsBySource}, {reports => 0, upstream => 0}, '... not in errorsBySource');
is_deeply($f->{cohorts}{off}, cohort($OFF + 6, 6),
          '... the off cohort: 6 more evaluations, 6 errors');
is($f->{rolledBack}, JSON::PP::false, '... no rollback');

# off the range (status=502 only) and off entirely: nothing counted
for my $u (@on[0 .. 1]) {
    my ($st, $b) = get("/checkout-502?uid=$u");
    is("$st $b", "500 new\n", "on cohort $u at /checkout-502: the canary answers 500");
}
my ($st, $b) = get("/checkout-off?uid=$on[2]");
is("$st $b", "500 new\n", 'flags_upstream_errors off: the canary answers 500');
$f = flag_json('new-checkout');
is($f->{counters}{errors}, 0, '500 outside status=502, and with the directive off: no error');
is_deeply($f->{cohorts}{on}, cohort($EN + 3, 0),
          '... the on cohort counts their evaluations only');

# a 500 of a request that read no flag counts nothing
($st) = get('/no-read');
is($st, 500, '/no-read: 500 without a flag read');

# --- the on cohort: 500s roll the canary back --------------------------------

# window: $EN + 3 enabled evaluations so far, 0 errors; min_errors=5,
# rate=10%: the 5th on-cohort 500 trips (5 errors >= 10% of $EN + 8)
my @seq;
for my $u (@on[3 .. 9]) {
    my ($s, $body) = get("/checkout?uid=$u");
    push @seq, "$s $body";
}
is_deeply(\@seq, [("500 new\n") x 5, ("200 old\n") x 2],
          'five 500s of the canary, then its users go to the old backend on their own');

$f = flag_json('new-checkout');
is($f->{rolledBack}, JSON::PP::true, 'the flag is rolled back');
is($f->{effectiveRolloutPercentage}, 0, '... effective percentage 0');
is_deeply($f->{counters}, {evaluations => $E + 16, enabledEvaluations => $EN + 8, errors => 5},
          '... counters: 16 more evaluations (6 off + 3 + 5 on + 2 after), 8 more enabled, 5 errors');
is_deeply($f->{errorsBySource}, {reports => 0, upstream => 5}, '... all 5 errors from upstream');
is_deeply($f->{cohorts}, {on => cohort($EN + 8, 5), off => cohort($OFF + 8, 6)},
          '... cohorts side by side: on 5 errors in 8 more, off 6 in 8 more');
is($f->{rollback}{errors}, 5, '... the rollback record: 5 errors');
is($f->{rollback}{enabledEvaluations}, $EN + 8, '... against the window\'s enabled evaluations');

like(flag_status('new-checkout'),
     qr/"window":\{"seconds":60,"enabledEvaluations":${\($EN + 8)},"errors":5,"sources":5,"perSecond":\[(?:\[\d+,\d+,\d+\],)*\[\d+,\d+,\d+\]\]\},"rollbackRule":\{"enabled":true,"minErrors":5,"rate":10,"window":60,"minSources":1,"waitingFor":null\},"errorsBySource":\{"reports":0,"upstream":5\},"cohorts":\{"on":\Q${\cohort_text(cohort($EN + 8, 5))}\E,"off":\Q${\cohort_text(cohort($OFF + 8, 6))}\E\},"rollback":\{"at":"20\d\d-/,
     'flags_status: the exact members after "window"');

like(read_file("$dir/logs/error.log"),
     qr/flags: rolled back flag "new-checkout" of project "shop": 5 errors and ${\($EN + 8)} enabled evaluations in 60 s from 5 distinct sources \(min_errors=5 rate=10% min_sources=1; decided by this host\x27s rule\)/,
     'the rollback is logged as one a report trips');

# every user, on cohort or not, is served by the old backend now
my @after = map { my ($s, $body) = get("/checkout?uid=$_"); "$s $body" } @on[10 .. 11], @off[6 .. 7];
is_deeply(\@after, [("200 old\n") x 4], 'after the rollback everyone gets the old backend');

# --- a report adds to the reports' source -------------------------------------

my ($rst) = http_request(POST => '/ingest/errors',
    headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json'],
    body => '{"flagName":"new-checkout","message":"m"}');
is($rst, 204, 'a report is accepted');
is_deeply(flag_json('new-checkout')->{errorsBySource}, {reports => 1, upstream => 5},
          'errorsBySource: 1 report, 5 upstream');

# --- "rollback": false: errors are counted, never roll back ------------------

for my $i (1 .. 8) {
    my ($s, $body) = get("/steady?uid=s$i");
    is("$s $body", "503 1\n", "steady $i: 503 with the flag on") or last;
}
$f = flag_json('steady');
is($f->{rolledBack}, JSON::PP::false, 'a flag with "rollback": false is not rolled back');
is_deeply($f->{errorsBySource}, {reports => 0, upstream => 8}, '... its 8 upstream errors are counted');
# steady is at 100 %: each of the $E GET /flags above counted it on too
is_deeply($f->{cohorts}{on}, cohort($E + 8, 8), '... on cohort: its 8 errors in $E + 8 evaluations');

nginx_stop($master);

# --- the status range ----------------------------------------------------------

my @ranges = (
    ['on', 1], ['off', 1], ['on status=500-599', 1], ['on status=502', 1],
    ['on status=400-599', 1], ['on status=100-599', 1],
    ['maybe', 0, qr/invalid value "maybe" in flags_upstream_errors, expected "on" or "off"/],
    ['on status=600', 0, qr/invalid parameter "status=600" in flags_upstream_errors, expected status=N-M with 100 <= N <= M <= 599/],
    ['on status=599-500', 0, qr/invalid parameter "status=599-500"/],
    ['on status=99-200', 0, qr/invalid parameter "status=99-200"/],
    ['on status=5xx', 0, qr/invalid parameter "status=5xx"/],
    ['on status=', 0, qr/invalid parameter "status="/],
    ['on status=500-', 0, qr/invalid parameter "status=500-"/],
    ['on range=500-599', 0, qr/invalid parameter "range=500-599"/],
    ['on status=500 x', 0, qr/invalid parameter "x" in flags_upstream_errors, expected status=N-M with 100 <= N <= M <= 599 or flags=NAME\[,NAME\.\.\.\], each once/],
    ['on status=500 flags=new-checkout x', 0, qr/invalid number of arguments in "flags_upstream_errors"/],
    ['on status=500 status=502', 0, qr/invalid parameter "status=502"/],
    ['on flags=new-checkout flags=steady', 0, qr/invalid parameter "flags=steady"/],
    ['on flags=', 0, qr/invalid parameter "flags="/],
    ['on flags=new-checkout,,steady', 0, qr/invalid parameter "flags=new-checkout,,steady" in flags_upstream_errors: an empty flag name/],
    ['on flags=new-checkout,', 0, qr/an empty flag name/],
    ['on flags=new-checkout,nope', 0, qr/flags_upstream_errors names flag "nope", which no flags_project has, in \S+nginx\.conf:17/],
    ['on flags=new-checkout,steady status=502', 1],
);

for my $r (@ranges) {
    my ($args, $ok, $re) = @$r;
    write_file("$dir/conf/nginx.conf", nginx_conf(
        http => "    flags_project shop token=t file=$dir/conf/shop.json;\n    flags_error_log off;\n",
        server => "        location / { flags_upstream_errors $args; return 200; }\n"));
    my ($rc, $out) = nginx_test($dir);
    if ($ok) {
        is($rc, 0, "flags_upstream_errors $args: accepted") or diag($out);
    } else {
        isnt($rc, 0, "flags_upstream_errors $args: refused");
        like($out, $re, '... with the reason') or diag($out);
    }
}

# only in a location
write_file("$dir/conf/nginx.conf", nginx_conf(
    http => "    flags_project shop token=t file=$dir/conf/shop.json;\n    flags_error_log off;\n    flags_upstream_errors on;\n",
    server => ''));
($rc, $out) = nginx_test($dir);
isnt($rc, 0, 'flags_upstream_errors at the http level is refused');
like($out, qr/"flags_upstream_errors" directive is not allowed here/, '... not allowed here');

done_testing();
