# The memo of whole answers (src/ngx_http_flags_memo.c, docs/evaluation.md
# "Counting"): a repeated GET /flags for the same caller is answered from
# the worker's memo, and every such answer is still counted, exactly, by
# its values:
#  - pipelined on one keep-alive connection, flags_status read in the same
#    breath sees every answer (the worker folds before it reads);
#  - over separate connections to two workers, the counts are exact;
#  - HEAD counts, a 304 does not;
#  - an override, a rollback and a reload each change the answer at once;
#  - different callers never share an entry; a query too long for the
#    memo, and more callers than the memo has slots, are still exact;
#  - a reload folds the old workers' answers before they exit.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;

my $dir = prefix_dir('memo');

sub write_flags {
    my ($half_pct) = @_;
    write_file("$dir/conf/shop.json", <<"_J_");
{"flags": [
  {"name": "on", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 2, "rate": 1, "window": 60}},
  {"name": "half", "enabled": true, "rolloutPercentage": $half_pct},
  {"name": "pro", "enabled": true, "rolloutPercentage": 100, "segments": ["pro"]}
 ],
 "segments": {"pro": {"rules": [{"trait": "plan", "op": "eq", "value": "pro"}]}}}
_J_
}
write_flags(50);

my $http = <<"_C_";
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_error_log off;
_C_

my $server = <<'_C_';
        location = /flags { flags_evaluate; }
        location = /status { flags_status; }
        location = /ingest/errors { flags_ingest_errors; }
        location /admin/ { flags_admin; }
        location /ofrep/ { flags_ofrep; }
_C_

write_file("$dir/conf/nginx.conf", nginx_conf(http => $http, server => $server));

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'the configuration is valid') or diag($out);

my $master = nginx_start($dir);
my @AUTH = ('Authorization: Bearer tok_shop');

sub get {
    my ($path, @h) = @_;
    return http_request(GET => $path, headers => [@AUTH, @h]);
}

sub counters {
    my ($name) = @_;
    my (undef, undef, $body) = http_request(GET => '/status');
    my ($f) = grep { $_->{name} eq $name } @{ decode_json($body)->{projects}[0]{flags} };
    return $f->{counters};
}

sub values_of {
    my ($body) = @_;
    return { map { $_->{name} => ($_->{enabled} ? 1 : 0) } @{ decode_json($body)->{flags} } };
}

# Several requests written at once on one keep-alive connection; the
# responses, in order, as [status, \%headers, body].
sub pipelined {
    my (@reqs) = @_;
    my $s = raw_connect();
    my $all = '';
    for my $i (0 .. $#reqs) {
        my ($method, $path, @h) = @{ $reqs[$i] };
        $all .= "$method $path HTTP/1.1\r\nHost: localhost\r\n";
        $all .= "$_\r\n" for @h;
        $all .= "Connection: close\r\n" if $i == $#reqs;
        $all .= "\r\n";
    }
    print $s $all;
    local $/;
    my $resp = <$s> // '';
    close $s;
    my @out;
    for my $i (0 .. $#reqs) {
        $resp =~ s/^(.*?)\r\n\r\n//s or last;
        my ($status_line, @lines) = split /\r\n/, $1;
        my ($st) = $status_line =~ m{^HTTP/1\.\d (\d+)};
        my %h = map { my ($k, $v) = split /:\s*/, $_, 2; (lc $k => $v) } @lines;
        my $len = $reqs[$i][0] eq 'HEAD' || $st == 304 ? 0 : $h{'content-length'} // 0;
        my $body = substr($resp, 0, $len, '');
        push @out, [$st, \%h, $body];
    }
    return @out;
}

# u1's answer decides which values the counts must show
my ($st, $h, $body) = get('/flags?userId=u1&trait_plan=pro');
is($st, 200, 'GET /flags for u1: 200');
my $u1 = values_of($body);
is_deeply([sort keys %$u1], [qw(half on pro)], '... three flags');
my $etag = $h->{etag};
like($etag, qr/^"[0-9a-f]{16}"$/, '... with an ETag');

my $base = { map { $_ => counters($_) } qw(on half pro) };
is($base->{on}{evaluations}, 1, 'one evaluation of "on" so far');

# --- 1. pipelined on one connection, status read in the same write ---------

my @resp = pipelined((map { ['GET', '/flags?userId=u1&trait_plan=pro', @AUTH] } 1 .. 20),
                     ['GET', '/status']);
is(scalar @resp, 21, '21 answers on one connection');
is_deeply([map { $_->[0] } @resp[0 .. 19]], [(200) x 20], '... 20 answers 200');
is_deeply([grep { $_->[2] ne $body } @resp[0 .. 19]], [], '... each the same bytes as the first');
is_deeply([grep { ($_->[1]{etag} // '') ne $etag } @resp[0 .. 19]], [], '... with the same ETag');
my ($f) = grep { $_->{name} eq 'half' } @{ decode_json($resp[20][2])->{projects}[0]{flags} };
is_deeply($f->{counters}, {evaluations => 21, enabledEvaluations => 21 * $u1->{half}, errors => 0},
          'flags_status in the same write counts all 21 answers of "half"');

# --- 2. separate connections, two workers ---------------------------------

for (1 .. 40) {
    ($st) = get('/flags?userId=u1&trait_plan=pro');
    $st == 200 or last;
}
is($st, 200, '40 more answers on separate connections');
for my $name (qw(on half pro)) {
    is_deeply(counters($name),
              {evaluations => 61, enabledEvaluations => 61 * $u1->{$name}, errors => 0},
              "\"$name\": exactly 61 evaluations, by its value");
}

# --- 3. HEAD counts, a 304 does not ---------------------------------------

for (1 .. 5) {
    ($st, $h, my $b) = http_request(HEAD => '/flags?userId=u1&trait_plan=pro', headers => [@AUTH]);
    is("$st $h->{etag} " . length($b), "200 $etag 0", "HEAD $_: 200, the ETag, no body") or last;
}
for (1 .. 5) {
    ($st, $h) = get('/flags?userId=u1&trait_plan=pro', "If-None-Match: $etag");
    is("$st $h->{etag}", "304 $etag", "If-None-Match $_: 304 with the ETag") or last;
}
is(counters('on')->{evaluations}, 66, 'the HEADs count, the 304s do not: 66');

# --- 4. another caller is another entry -------------------------------------

my ($u2st, undef, $u2body) = get('/flags?userId=u2&trait_plan=free');
is($u2st, 200, 'u2 (plan free): 200');
my $u2 = values_of($u2body);
is($u2->{pro}, 0, '... "pro" is off for a free plan');
is($u1->{pro}, 1, '... and on for u1');
for (1 .. 10) { get('/flags?userId=u2&trait_plan=free') }
(undef, undef, $body) = get('/flags?userId=u1&trait_plan=pro');
is_deeply(values_of($body), $u1, 'u1 still gets its own answer');
is_deeply(counters('pro'), {evaluations => 78, enabledEvaluations => 67, errors => 0},
          '"pro": 78 evaluations, 67 of them u1\'s (on), 11 u2\'s (off)');

# --- 5. an override changes the answer at once ------------------------------

my ($ost) = http_request(PUT => '/admin/overrides/shop/on',
                         headers => ['Content-Type: application/json'],
                         body => '{"enabled": false}');
is($ost, 204, 'override "on" to off');
(undef, $h, $body) = get('/flags?userId=u1&trait_plan=pro');
is(values_of($body)->{on}, 0, 'the next answer for u1 has "on" off');
isnt($h->{etag}, $etag, '... under another ETag');
for (1 .. 4) { get('/flags?userId=u1&trait_plan=pro') }
is_deeply(counters('on'), {evaluations => 83, enabledEvaluations => 78, errors => 0},
          '"on": 5 more evaluations, none enabled');
($ost) = http_request(DELETE => '/admin/overrides/shop/on');
is($ost, 204, 'the override is removed');
(undef, $h, $body) = get('/flags?userId=u1&trait_plan=pro');
is(values_of($body)->{on}, 1, '"on" is on again');
is($h->{etag}, $etag, '... and the answer is the first one again, ETag and all');

# --- 6. a rollback changes the answer at once -------------------------------

for my $i (1 .. 2) {
    my ($rst) = http_request(POST => '/ingest/errors',
        headers => [@AUTH, 'Content-Type: application/json'],
        body => qq({"flagName":"on","message":"m","userId":"r$i"}));
    is($rst, 204, "report $i accepted");
}
(undef, undef, $body) = get('/flags?userId=u1&trait_plan=pro');
my ($on) = grep { $_->{name} eq 'on' } @{ decode_json($body)->{flags} };
is_deeply($on, {name => 'on', enabled => JSON::PP::false, rolloutPercentage => 0, segments => []},
          'after the rollback u1 gets "on" off at 0 %');

# --- 7. too long for the memo, and more callers than slots ------------------

my $long = 'userId=' . ('x' x 1000) . '&trait_a=' . ('y' x 1000) . '&trait_b=' . ('z' x 1000);
my $before = counters('half')->{evaluations};
for (1 .. 3) {
    ($st) = get("/flags?$long");
    is($st, 200, "a 3 KB query $_: 200") or last;
}
is(counters('half')->{evaluations}, $before + 3, '... each counted (the memo keeps none over 2 KB)');

$before = counters('half');
my $on_half = 0;
# two connections (nginx closes one after keepalive_requests 1000)
my @bodies = map { $_->[2] }
             (pipelined(map { ['GET', "/flags?userId=many$_", @AUTH] } 1 .. 750),
              pipelined(map { ['GET', "/flags?userId=many$_", @AUTH] } 751 .. 1500, 1));
is(scalar(grep { /^\{"flags":/ } @bodies), 1501, '1501 pipelined answers for 1500 callers');
$on_half += values_of($_)->{half} for @bodies;
is_deeply(counters('half'), {evaluations => $before->{evaluations} + 1501,
                             enabledEvaluations => $before->{enabledEvaluations} + $on_half,
                             errors => 0},
          '... every one counted by its value, whatever the memo kept');

# --- 8. a reload: new definitions answer, old workers' answers are counted --

$before = counters('half')->{evaluations};
@resp = pipelined(map { ['GET', '/flags?userId=u1&trait_plan=pro', @AUTH] } 1 .. 10);
is(scalar @resp, 10, '10 answers just before the reload');
my %old_workers = map { $_ => 1 } worker_pids($master);
write_flags(0);
nginx_signal($master, 'HUP');
my $polls = 0;
ok(wait_for(sub {
    $polls++;
    my (undef, undef, $b) = get('/flags?userId=u1&trait_plan=pro');
    return values_of($b)->{half} == 0;
}, 10), 'after the reload "half" at 0 % is off for u1');
# the old workers fold what they answered when they exit
# two workers, none of them from before the reload (u1 may be off for
# "half" at 50 % too, so its answer alone does not prove the reload)
ok(wait_for(sub { my @w = worker_pids($master);
                  @w == 2 && !grep { $old_workers{$_} } @w }, 10),
   'the old workers are gone, the new ones answer');
is(counters('half')->{evaluations}, $before + 10 + $polls,
   "every answer before and during the reload is counted ($before + 10 + $polls)");

# --- 9. OFREP: single and bulk evaluations from the memo -------------------

my @OJ = (@AUTH, 'Content-Type: application/json');
my $ctx = '{"context":{"targetingKey":"o1","plan":"pro"}}';
$before = counters('pro');
my @single = map { [http_request(POST => '/ofrep/v1/evaluate/flags/pro', headers => \@OJ, body => $ctx)] } 1 .. 10;
is_deeply([map { $_->[0] } @single], [(200) x 10], 'OFREP single, 10 times: 200');
is_deeply([grep { $_->[2] ne $single[0][2] } @single], [], '... the same bytes each time');
is(decode_json($single[0][2])->{value}, JSON::PP::true, '... "pro" is on for plan pro');
is_deeply(counters('pro'), {evaluations => $before->{evaluations} + 10,
                            enabledEvaluations => $before->{enabledEvaluations} + 10, errors => 0},
          '... 10 evaluations of "pro", all enabled');

$before = { map { $_ => counters($_) } qw(on half pro) };
my @bulk = map { [http_request(POST => '/ofrep/v1/evaluate/flags', headers => \@OJ, body => $ctx)] } 1 .. 6;
is_deeply([map { $_->[0] } @bulk], [(200) x 6], 'OFREP bulk, 6 times: 200');
is_deeply([grep { $_->[2] ne $bulk[0][2] || $_->[1]{etag} ne $bulk[0][1]{etag} } @bulk], [],
          '... the same bytes and ETag each time');
my ($nst) = http_request(POST => '/ofrep/v1/evaluate/flags', body => $ctx,
                         headers => [@OJ, "If-None-Match: $bulk[0][1]{etag}"]);
is($nst, 304, '... If-None-Match with its ETag: 304');
my %val = map { $_->{key} => ($_->{value} ? 1 : 0) } @{ decode_json($bulk[0][2])->{flags} };
for my $name (qw(on half pro)) {
    is_deeply(counters($name), {evaluations => $before->{$name}{evaluations} + 6,
                                enabledEvaluations => $before->{$name}{enabledEvaluations} + 6 * $val{$name},
                                errors => $before->{$name}{errors}},
              "... \"$name\": 6 more evaluations by its value, the 304 not counted");
}

($ost) = http_request(PUT => '/admin/overrides/shop/pro',
                      headers => ['Content-Type: application/json'], body => '{"enabled": false}');
is($ost, 204, 'override "pro" to off');
my (undef, undef, $ob) = http_request(POST => '/ofrep/v1/evaluate/flags/pro', headers => \@OJ, body => $ctx);
is_deeply([@{ decode_json($ob) }{qw(value reason)}], [JSON::PP::false, 'DISABLED'],
          'the next OFREP answer has "pro" off, DISABLED');

nginx_stop($master);
done_testing();
