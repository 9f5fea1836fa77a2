# A segment rule on the caller's id (issue 26, the first part):
# {"trait": "$userId", ...} tests the userId parameter of GET /flags,
# OFREP's targetingKey, the SDK's userId and flags_context's user=, and
# never a trait that calls itself "$userId".  Two workers, keep-alive.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;

my $dir = prefix_dir('user-id-rule');

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "staff-only", "enabled": true, "rolloutPercentage": 100, "segments": ["staff"]},
  {"name": "not-u1", "enabled": true, "rolloutPercentage": 100, "segments": ["everyone-but-u1"]}
 ],
 "segments": {
  "staff": {"rules": [{"trait": "$userId", "op": "in", "values": ["u1", "u7"]}]},
  "everyone-but-u1": {"rules": [{"trait": "$userId", "op": "not_in", "values": ["u1"]}]}
 }}
_J_

write_file("$dir/conf/nginx.conf", nginx_conf(http => <<'_H_', server => <<'_S_'));
    flags_project shop token=tok_shop file=shop.json;
_H_
        keepalive_requests 100000;
        location = /flags { add_header X-Worker $pid; flags_evaluate; }
        location /ofrep/ { flags_ofrep; }
        location /api/sdk/ { flags_sdk; }
        location = /var {
            add_header X-Worker $pid;
            flags_context shop user=$arg_u;
            return 200 "staff=$flag_staff_only not-u1=$flag_not_u1";
        }
_S_

my $master = nginx_start($dir);
my $ka = worker_connections('/flags?userId=u0');
is(scalar keys %$ka, 2, 'a keep-alive connection on each worker');

sub flags_of {
    my ($s, $query) = @_;
    my ($st, $body) = worker_request($s, GET => "/flags?$query");
    return "status $st" unless $st == 200;
    return join ' ', map { "$_->{name}=" . ($_->{enabled} ? 1 : 0) } @{ decode_json($body)->{flags} };
}

for my $w (sort keys %$ka) {
    my $s = $ka->{$w};
    is(flags_of($s, 'userId=u1'), 'staff-only=1 not-u1=0', "worker $w: GET /flags, u1 is staff");
    is(flags_of($s, 'userId=u7'), 'staff-only=1 not-u1=1', "worker $w: u7 is staff");
    is(flags_of($s, 'userId=u2'), 'staff-only=0 not-u1=1', "worker $w: u2 is not");
    is(flags_of($s, ''), 'staff-only=0 not-u1=1', "worker $w: no user: not staff, not u1");
    is(flags_of($s, 'userId=u2&trait_%24userId=u1'), 'staff-only=0 not-u1=1',
       "worker $w: a trait named \$userId is not the caller's id");
    is(flags_of($s, 'trait_userId=u1'), 'staff-only=0 not-u1=1', "worker $w: nor is trait_userId");
}

# OFREP: the context's targetingKey
my ($st, undef, $b) = http_request(POST => '/ofrep/v1/evaluate/flags/staff-only',
    body => '{"context":{"targetingKey":"u7"}}',
    headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
is($st, 200, 'OFREP, targetingKey u7: 200');
is(decode_json($b)->{value}, JSON::PP::true, '... staff-only is on');
($st, undef, $b) = http_request(POST => '/ofrep/v1/evaluate/flags/staff-only',
    body => '{"context":{"targetingKey":"u2","$userId":"u1"}}',
    headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
is(decode_json($b)->{value}, JSON::PP::false, 'OFREP, targetingKey u2 (a "$userId" attribute u1): off');

# the DeployRamp SDK: its userId; the rule is decided here, for that user
($st, undef, $b) = http_request(POST => '/api/sdk/flags', body => '{"userId":"u1","traits":{}}',
    headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
is($st, 200, 'SDK, userId u1: 200');
my ($f) = grep { $_->{name} eq 'staff-only' } @{ decode_json($b)->{flags} };
# always true: an "and" of nothing; always false: an "or" of nothing
is_deeply([map { $_->{condition} } @{ $f->{segments} }], [{ type => 'and', conditions => [] }],
          '... the staff segment resolved to always true for u1');
($st, undef, $b) = http_request(POST => '/api/sdk/flags', body => '{"userId":"u2","traits":{}}',
    headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
($f) = grep { $_->{name} eq 'staff-only' } @{ decode_json($b)->{flags} };
is_deeply([map { $_->{condition} } @{ $f->{segments} }], [{ type => 'or', conditions => [] }],
          '... and to always false for u2');

# flags_context's user=
for my $w (sort keys %$ka) {
    my ($vs, $vb) = worker_request($ka->{$w}, GET => '/var?u=u1');
    is("$vs $vb", '200 staff=1 not-u1=0', "worker $w: flags_context user=u1");
    ($vs, $vb) = worker_request($ka->{$w}, GET => '/var?u=u9');
    is("$vs $vb", '200 staff=0 not-u1=1', "worker $w: flags_context user=u9");
}

nginx_stop($master);
done_testing();
