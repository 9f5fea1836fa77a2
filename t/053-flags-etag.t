# GET /flags ETag and If-None-Match (docs/http-api.md, docs/decisions.md):
# a strong tag over the answer's inputs, the same on both workers, changed
# by the caller, a rollback, an override and its removal, and a 304 that
# builds no body and counts nothing.  Two workers; every http_request() is
# a connection of its own.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;

my $dir = prefix_dir('etag');

write_file("$dir/conf/etag.json", <<'_J_');
{"flags": [
  {"name": "on", "enabled": true, "rolloutPercentage": 100},
  {"name": "half", "enabled": true, "rolloutPercentage": 50},
  {"name": "pro-only", "enabled": true, "rolloutPercentage": 100, "segments": ["pro"]},
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 1, "window": 60}}
],
 "segments": {"pro": {"rules": [{"trait": "plan", "op": "eq", "value": "pro"}]}}}
_J_

write_file("$dir/conf/nginx.conf", nginx_conf(http => <<'_H_', server => <<'_S_'));
    flags_project shop token=pub_shop_1 file=etag.json;
    flags_error_log logs/reports.log;
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_

my $master = nginx_start($dir);
is(scalar(worker_pids($master)), 2, 'two workers');

my $json = JSON::PP->new;
my $AUTH = 'Authorization: Bearer pub_shop_1';
my $ETAG = qr/^"[0-9a-f]{16}"$/;

sub get {
    my ($query, @headers) = @_;
    return http_request(GET => "/flags?$query", headers => [$AUTH, @headers]);
}

sub evaluations {
    my (undef, undef, $body) = http_request(GET => '/flags-status');
    my %n = map { $_->{name} => $_->{counters}{evaluations} }
            @{ $json->decode($body)->{projects}[0]{flags} };
    return \%n;
}

my $alice = 'userId=alice&trait_plan=pro';

my ($st, $h, $body) = get($alice);
is($st, 200, 'GET /flags: 200');
like($h->{etag}, $ETAG, 'a strong ETag: 16 hex digits in quotes');
my $tag = $h->{etag};
my $full = $body;
is($h->{'cache-control'}, 'no-store', 'Cache-Control: no-store');

my %seen;
for (1 .. 8) {
    my (undef, $h2, $b2) = get($alice);
    $seen{ $h2->{etag} }++;
    is($b2, $body, 'the same answer') if $_ == 1;
}
is_deeply(\%seen, { $tag => 8 }, 'the same tag on every request, whichever worker answers');

(undef, $h) = get('trait_plan=pro&userId=alice&unknown=1');
is($h->{etag}, $tag, 'the normalised caller: parameter order and unknown parameters change nothing');
(undef, $h) = get('userId=alice&trait_plan=pro&trait_plan=pro');
is($h->{etag}, $tag, '... nor a repeated trait');
(undef, $h) = get('userId=bob&trait_plan=pro');
isnt($h->{etag}, $tag, 'another user: another tag');
(undef, $h) = get('userId=alice&trait_plan=free');
isnt($h->{etag}, $tag, 'another trait value: another tag');
(undef, $h) = get('userId=alice');
isnt($h->{etag}, $tag, 'a trait fewer: another tag');

# no query at all (an anonymous caller): remembered and revalidated too
{
    my ($s1, $h1) = http_request(GET => '/flags', headers => [$AUTH]);
    is($s1, 200, 'no query: 200');
    my %st;
    $st{ (http_request(GET => '/flags', headers => [$AUTH, "If-None-Match: $h1->{etag}"]))[0] }++ for 1 .. 6;
    is_deeply(\%st, { 304 => 6 }, 'no query: revalidated with 304 on both workers');
}

# ---- If-None-Match

my $before = evaluations();
for my $inm ($tag, "\"0000000000000000\", $tag", "W/$tag", '*') {
    my ($st3, $h3, $b3) = get($alice, "If-None-Match: $inm");
    is($st3, 304, "If-None-Match: $inm: 304");
    is($b3, '', '... no body');
    is($h3->{etag}, $tag, '... with the tag');
    is($h3->{'cache-control'}, 'no-store', '... and Cache-Control: no-store');
    ok(!defined $h3->{'content-length'}, '... no Content-Length');
}
is_deeply(evaluations(), $before, 'a 304 counts no evaluation');

($st, $h, $body) = http_request(HEAD => "/flags?$alice", headers => [$AUTH, "If-None-Match: $tag"]);
is($st, 304, 'HEAD with a matching tag: 304');

($st, $h, $body) = get($alice, 'If-None-Match: "0000000000000000"');
is($st, 200, 'another tag: 200');
is($body, $full, '... the full answer');
is_deeply(evaluations(), { map { $_ => $before->{$_} + 1 } keys %$before },
          'a 200 counts every flag once');

# ---- state changes

sub admin {
    my ($method, $path, $body) = @_;
    my ($s) = http_request($method => "/flags-admin/$path",
                           $body ? (body => $body, headers => ['Content-Type: application/json']) : ());
    return $s;
}

# both workers have answered (and remembered) alice's tag
my %st304;
$st304{ (get($alice, "If-None-Match: $tag"))[0] }++ for 1 .. 12;
is_deeply(\%st304, { 304 => 12 }, 'twelve revalidations, on both workers: 304');
is_deeply(evaluations(), { map { $_ => $before->{$_} + 1 } keys %$before }, '... none counted');

is(admin(PUT => 'overrides/shop/half', '{"rolloutPercentage":10}'), 204, 'an override');
%st304 = ();
$st304{ (get($alice, "If-None-Match: $tag"))[0] }++ for 1 .. 12;
is_deeply(\%st304, { 200 => 12 }, 'after the override the old tag is answered in full on every worker');
(undef, $h) = get($alice);
my $tag_override = $h->{etag};
isnt($tag_override, $tag, 'an override changes the tag');
($st) = get($alice, "If-None-Match: $tag");
is($st, 200, '... and the old tag is answered in full');
is(admin(DELETE => 'overrides/shop/half'), 204, 'the override removed');
(undef, $h) = get($alice);
is($h->{etag}, $tag, 'the tag comes back with the state');

get($alice);                                    # an enabled evaluation of risky
for (1 .. 3) {
    my ($s) = http_request(POST => '/ingest/errors', headers => [$AUTH, 'Content-Type: application/json'],
                           body => '{"flagName":"risky","message":"boom"}');
    is($s, 204, "report $_");
}
($st, $h, $body) = get($alice);
like($body, qr/"name":"risky","enabled":false,"rolloutPercentage":0/, 'risky rolled back');
my $tag_rb = $h->{etag};
isnt($tag_rb, $tag, 'a rollback changes the tag');
($st) = get($alice, "If-None-Match: $tag");
is($st, 200, '... the tag from before the rollback gets the new answer');
is(admin(DELETE => 'rollbacks/shop/risky'), 204, 'the rollback cleared');
(undef, $h) = get($alice);
is($h->{etag}, $tag, 'the tag comes back once cleared');

nginx_stop($master);
unlike(read_file("$dir/logs/error.log"), qr/\[(alert|crit|emerg)\]/, 'no alert in the error log');
done_testing();
