# Targeting that people use (issue 26; docs/flags-file.md, docs/evaluation.md,
# docs/ofrep.md, docs/sdk.md): rules with their own rollout, named users
# (targets) and a ramp's stage as the fallthrough, over HTTP with two
# workers and keep-alive connections.  What it proves, each with exact
# values:
#  1. "staff plus 10 %": staff (a segment on $userId and one on a trait)
#     are on; of 2,000 other users exactly those whose bucket is below
#     10,000 are on, on both workers.  The buckets come from a murmur3
#     written here, checked against docs/evaluation.md's vectors.
#  2. the first rule that matches decides (both orders).
#  3. widening a rule and the fallthrough (by a reload, read while the old
#     workers drain, and by a runtime definitions PUT) turns nobody off.
#  4. targets: named users win over rules and the fallthrough, by their
#     userId (never the stickiness trait); enabled false, a rollback and
#     the overrides win over named users.
#  5. OFREP reasons and metadata (single and bulk), the SDK's POST
#     {loc}flags shape of a flag with rules and of a named user, and the
#     same flags in the WebSocket's flags_refreshed (live refresh).
#  6. a rule on "$userId" inside "rules" through flags_context user=.
#  7. nginx -t names the file and the flag for every error text of the
#     design, and the runtime definitions PUT refuses the same definitions
#     with 400 invalid_definitions; the limits themselves are accepted.
#  8. a ramp's stage is the fallthrough; the rules keep their percentage.
#  9. flags_status's "rules" and "targets" (counts), GET /flags's
#     "segments" (every segment the rules name, in order, no repeats).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;
use IO::Socket::INET;
use FlagsPush;

# ---------------------------------------------------------------- buckets
# murmur3_x86_32, written from the algorithm; 32-bit products in two
# halves so no intermediate leaves Perl's integers.
sub mul32 { my ($a, $b) = @_; ((($a & 0xffff) * $b) + (((($a >> 16) * $b) & 0xffff) << 16)) & 0xffffffff }
sub rotl32 { my ($x, $r) = @_; (($x << $r) | ($x >> (32 - $r))) & 0xffffffff }
sub murmur3_32 {
    my ($data, $seed) = @_;
    my ($c1, $c2) = (0xcc9e2d51, 0x1b873593);
    my ($h, $len) = ($seed, length $data);
    my $n = int($len / 4);
    for my $i (0 .. $n - 1) {
        my $k = unpack 'V', substr($data, 4 * $i, 4);
        $k = mul32(rotl32(mul32($k, $c1), 15), $c2);
        $h = rotl32($h ^ $k, 13);
        $h = (mul32($h, 5) + 0xe6546b64) & 0xffffffff;
    }
    my @t = unpack 'C*', substr($data, 4 * $n);
    my $k = 0;
    $k ^= $t[2] << 16 if @t >= 3;
    $k ^= $t[1] << 8 if @t >= 2;
    if (@t) { $k ^= $t[0]; $h ^= mul32(rotl32(mul32($k, $c1), 15), $c2) }
    $h ^= $len;
    $h ^= $h >> 16; $h = mul32($h, 0x85ebca6b);
    $h ^= $h >> 13; $h = mul32($h, 0xc2b2ae35);
    return $h ^ ($h >> 16);
}
sub bucket { murmur3_32("$_[0]:$_[1]", 0) % 100000 }
# on at a percentage (thousandths: 12.5 % is bucket < 12500); no key: only 100
sub in_rollout {
    my ($flag, $user, $pct) = @_;
    return $pct >= 100 ? 1 : 0 unless defined $user && length $user;
    return bucket($flag, $user) < $pct * 1000 ? 1 : 0;
}

is(sprintf('%08x', murmur3_32('hello', 0)), '248bfa47', 'murmur3("hello", 0), docs/evaluation.md');
is(bucket('new-checkout', 'user-1'), 40631, 'bucket(new-checkout, user-1) = 40631');
is(bucket('new-checkout', 'user-2'), 10789, 'bucket(new-checkout, user-2) = 10789');
is(bucket('dark-mode', 'alice'), 89895, 'bucket(dark-mode, alice) = 89895');

# ---------------------------------------------------------------- files
my $Segments = <<'_J_';
 "segments": {
  "staff": {"rules": [{"trait": "$userId", "op": "in", "values": ["s1", "s2", "s3"]}]},
  "staff-role": {"rules": [{"trait": "role", "op": "eq", "value": "staff"}]},
  "beta": {"rules": [{"trait": "plan", "op": "eq", "value": "beta"}]}
 }}
_J_

sub shop_file {
    my ($widen_rule, $widen_fall) = @_;
    return <<"_J_" . $Segments;
{"flags": [
  {"name": "staff-plus-10", "enabled": true, "rolloutPercentage": 10,
   "rules": [{"segments": ["staff", "staff-role"], "rolloutPercentage": 100}]},
  {"name": "first-wins", "enabled": true, "rolloutPercentage": 100,
   "rules": [{"segments": ["staff"], "rolloutPercentage": 0},
             {"segments": ["staff-role"], "rolloutPercentage": 100}]},
  {"name": "first-wins-rev", "enabled": true, "rolloutPercentage": 0,
   "rules": [{"segments": ["staff-role"], "rolloutPercentage": 100},
             {"segments": ["staff"], "rolloutPercentage": 0}]},
  {"name": "widen", "enabled": true, "rolloutPercentage": $widen_fall,
   "rules": [{"segments": ["beta"], "rolloutPercentage": $widen_rule}]},
  {"name": "named", "enabled": true, "rolloutPercentage": 0,
   "rules": [{"segments": ["beta"], "rolloutPercentage": 0}],
   "targets": {"on": ["t-on1", "t-on2", "t-on1"], "off": ["t-off1"]}},
  {"name": "named-hi", "enabled": true, "rolloutPercentage": 100,
   "rules": [{"segments": ["beta"], "rolloutPercentage": 100}],
   "targets": {"off": ["t-off1", "t-off2"]}},
  {"name": "named-killed", "enabled": false, "rolloutPercentage": 100,
   "rules": [{"segments": [], "rolloutPercentage": 100}],
   "targets": {"on": ["t-on1"]}},
  {"name": "named-rb", "enabled": true, "rolloutPercentage": 0,
   "targets": {"on": ["t-on1"]},
   "rollback": {"minErrors": 1, "rate": 1, "window": 60}},
  {"name": "named-sticky", "enabled": true, "rolloutPercentage": 0, "stickiness": "accountId",
   "targets": {"on": ["t-on1", "acc-1"]}},
  {"name": "split-rule", "enabled": true, "rolloutPercentage": 100,
   "rules": [{"segments": ["beta"], "rolloutPercentage": 50}]},
  {"name": "mixed", "enabled": true, "rolloutPercentage": 0,
   "rules": [{"segments": ["staff", "beta"], "rolloutPercentage": 100},
             {"segments": ["beta", "staff-role"], "rolloutPercentage": 0},
             {"segments": [], "rolloutPercentage": 30}]},
  {"name": "ramped", "enabled": true, "rolloutPercentage": 0,
   "rules": [{"segments": ["staff"], "rolloutPercentage": 100}],
   "ramp": {"stages": [{"percentage": 5, "hold": 3600}, {"percentage": 100}]}},
  {"name": "plain", "enabled": true, "rolloutPercentage": 30, "segments": ["beta"]}
 ],
_J_
}

my $dir = prefix_dir('targeting');
my $log = sub { read_file("$dir/logs/error.log") // '' };
mkdir "$dir/conf/state";
write_file("$dir/conf/shop.json", shop_file(20, 5));
write_file("$dir/conf/live.json", <<'_J_' . $Segments);
{"flags": [
  {"name": "widen-live", "enabled": true, "rolloutPercentage": 5,
   "rules": [{"segments": ["beta"], "rolloutPercentage": 20}]}
 ],
_J_

write_file("$dir/conf/nginx.conf", nginx_conf(log_level => 'notice', http => <<'_H_', server => <<'_S_'));
    flags_project shop token=tok_shop file=shop.json;
    flags_project live token=tok_live file=live.json definitions=runtime;
    flags_state_file state/flags-state.json;
_H_
        keepalive_requests 100000;
        location = /flags { add_header X-Worker $pid; flags_evaluate; }
        location = /flags-status { flags_status; }
        location = /ingest/errors { flags_ingest_errors; }
        location /flags-admin/ { flags_admin; allow 127.0.0.1; deny all; }
        location /ofrep/ { add_header X-Worker $pid; flags_ofrep; }
        location /api/sdk/ { add_header X-Worker $pid; flags_sdk; }
        location = /ws { flags_websocket; }
        location = /var {
            add_header X-Worker $pid;
            flags_context shop user=$arg_u;
            return 200 "spt=$flag_staff_plus_10 mixed=$flag_mixed";
        }
_S_

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'nginx -t: the flags files with rules and targets are valid') or diag $out;
unlike($out, qr/\[warn\]/, '... without a warning');
my $master = nginx_start($dir);
is(scalar(worker_pids($master)), 2, 'two workers');

# ---------------------------------------------------------------- clients
# One request on the keep-alive connection $s with a project's token:
# (status, body, the X-Worker pid).
sub kreq {
    my ($s, $method, $path, $token, $body) = @_;
    return worker_request($s, $method, $path, $body, $token);
}

# GET /flags on $s: { name => "on|off pct [segments]" }, or undef
sub flags_of {
    my ($s, $token, $query) = @_;
    my ($st, $body) = kreq($s, GET => "/flags?$query", $token);
    return undef unless $st == 200;
    return { map { $_->{name} => ($_->{enabled} ? 'on' : 'off') } @{ decode_json($body)->{flags} } };
}
sub raw_flags {
    my ($s, $token, $query) = @_;
    my ($st, $body) = kreq($s, GET => "/flags?$query", $token);
    return $st == 200 ? { map { $_->{name} => $_ } @{ decode_json($body)->{flags} } } : {};
}

# the answer of one flag, the same on both workers (else "workers differ")
my $ka;
sub both {
    my ($flag, $query, $token) = @_;
    my @a = map { (flags_of($ka->{$_}, $token // 'tok_shop', $query) // {})->{$flag} // 'absent' } sort keys %$ka;
    return $a[0] eq $a[1] ? $a[0] : "workers differ: @a";
}

sub admin {
    my ($method, $path, $body) = @_;
    my ($st, $h, $b) = http_request($method, "/flags-admin/$path", body => $body // '',
                                    headers => ['Content-Type: application/json']);
    return ($st, $b, $h);
}

sub status_flags {
    my ($project) = @_;
    my (undef, undef, $b) = http_request(GET => '/flags-status');
    my ($p) = grep { $_->{name} eq $project } @{ decode_json($b)->{projects} };
    return { map { $_->{name} => $_ } @{ $p->{flags} } };
}

$ka = worker_connections('/flags?userId=u0');
is(scalar keys %$ka, 2, 'a keep-alive connection on each worker');

# ------------------------------------------------- 1. staff plus 10 %
# the staff users chosen so that the fallthrough alone would leave them off
my @staff = ('s1', 's2', 's3');
for my $u (@staff, 'r2') {
    cmp_ok(bucket('staff-plus-10', $u), '>=', 10000, "staff user $u is above the 10 % bucket");
}
for my $w (sort keys %$ka) {
    for my $u (@staff) {
        is(flags_of($ka->{$w}, 'tok_shop', "userId=$u")->{'staff-plus-10'}, 'on',
           "worker $w: $u (staff by \$userId) is on");
    }
    is(flags_of($ka->{$w}, 'tok_shop', 'userId=r2&trait_role=staff')->{'staff-plus-10'}, 'on',
       "worker $w: r2 with role=staff (staff by a trait) is on");
    is(flags_of($ka->{$w}, 'tok_shop', 'userId=r2')->{'staff-plus-10'}, 'off',
       "worker $w: r2 without the role is off (the fallthrough)");
    is(flags_of($ka->{$w}, 'tok_shop', 'trait_role=staff')->{'staff-plus-10'}, 'on',
       "worker $w: a staff trait without a user id: the rule at 100 % is on");
    is(flags_of($ka->{$w}, 'tok_shop', '')->{'staff-plus-10'}, 'off',
       "worker $w: no user, no trait: the fallthrough at 10 % is off");
}

{
    my %want = map { ("user-$_" => bucket('staff-plus-10', "user-$_") < 10000 ? 'on' : 'off') } 1 .. 2000;
    my $n_on = grep { $_ eq 'on' } values %want;
    cmp_ok($n_on, '>', 150, "the buckets put $n_on of 2,000 users under 10 %");
    cmp_ok($n_on, '<', 250, '... which is about 10 %');
    for my $w (sort keys %$ka) {
        my (@wrong, %got);
        for my $i (1 .. 2000) {
            my $a = flags_of($ka->{$w}, 'tok_shop', "userId=user-$i");
            $got{"user-$i"} = $a ? $a->{'staff-plus-10'} : 'error';
            push @wrong, "user-$i: $got{\"user-$i\"}" if $got{"user-$i"} ne $want{"user-$i"};
        }
        is(scalar @wrong, 0, "worker $w: of 2,000 non-staff users exactly the $n_on with bucket < 10000 are on")
            or diag join ', ', @wrong[0 .. ($#wrong < 9 ? $#wrong : 9)];
    }
}

# ------------------------------------------------- 2. order
is(both('first-wins', 'userId=s1&trait_role=staff'), 'off', 'first-wins: s1 in both segments: the first rule (0 %) decides: off');
is(both('first-wins', 'userId=r2&trait_role=staff'), 'on', 'first-wins: r2 only in staff-role: the second rule (100 %): on');
is(both('first-wins', 'userId=nobody'), 'on', 'first-wins: nobody matches: the fallthrough (100 %): on');
is(both('first-wins-rev', 'userId=s1&trait_role=staff'), 'on', 'first-wins-rev: s1 in both: the first rule (100 %) decides: on');
is(both('first-wins-rev', 'userId=s1'), 'off', 'first-wins-rev: s1 without the role: the second rule (0 %): off');
is(both('first-wins-rev', 'userId=nobody'), 'off', 'first-wins-rev: the fallthrough (0 %): off');
# mixed: beta is in rules 0 (100 %) and 1 (0 %): rule 0 decides
is(both('mixed', 'userId=u5&trait_plan=beta'), 'on', 'mixed: a beta user: rule 0 (100 %), not rule 1 (0 %)');
is(both('mixed', 'userId=r2&trait_role=staff'), 'off', 'mixed: a staff-role user: rule 1 (0 %)');
{
    my @wrong;
    for my $i (1 .. 300) {
        my $want = bucket('mixed', "m$i") < 30000 ? 'on' : 'off';
        my $got = both('mixed', "userId=m$i");
        push @wrong, "m$i: $got" if $got ne $want;
    }
    is(scalar @wrong, 0, 'mixed: 300 other users: rule 2 (segments [], 30 %) by their bucket, not the fallthrough (0 %)')
        or diag "@wrong";
}

# ------------------------------------------------- 9. flags_status, GET /flags
{
    my (undef, undef, $raw) = http_request(GET => '/flags-status');
    like($raw, qr/"name":"staff-plus-10","enabled":true,"rolloutPercentage":10,"segments":\["staff","staff-role"\],"rules":\[\{"segments":\["staff","staff-role"\],"rolloutPercentage":100\}\],"effectiveRolloutPercentage":10,/,
         'flags_status: staff-plus-10 has its rules right after "segments", and no "targets"');
    like($raw, qr/"name":"named","enabled":true,"rolloutPercentage":0,"segments":\["beta"\],"rules":\[\{"segments":\["beta"\],"rolloutPercentage":0\}\],"targets":\{"on":2,"off":1\},"effectiveRolloutPercentage":0,/,
         'flags_status: named: its rule and "targets" as counts (a duplicate id is one user)');
    like($raw, qr/"name":"named-hi",[^{}]*"segments":\["beta"\],"rules":\[\{"segments":\["beta"\],"rolloutPercentage":100\}\],"targets":\{"on":0,"off":2\},"effectiveRolloutPercentage":100,/,
         'flags_status: named-hi: no on list counts 0');
    like($raw, qr/"name":"named-rb","enabled":true,"rolloutPercentage":0,"segments":\[\],"targets":\{"on":1,"off":0\},"effectiveRolloutPercentage":0,/,
         'flags_status: named-rb: targets without rules: no "rules"');
    like($raw, qr/"name":"mixed","enabled":true,"rolloutPercentage":0,"segments":\["staff","beta","staff-role"\],"rules":\[\{"segments":\["staff","beta"\],"rolloutPercentage":100\},\{"segments":\["beta","staff-role"\],"rolloutPercentage":0\},\{"segments":\[\],"rolloutPercentage":30\}\],"effectiveRolloutPercentage":0,/,
         'flags_status: mixed: the three rules in order');
    like($raw, qr/"name":"plain","enabled":true,"rolloutPercentage":30,"segments":\["beta"\],"effectiveRolloutPercentage":30,/,
         'flags_status: a flag without rules or targets as before');
    unlike($raw, qr/"name":"plain",[^{}]*"(?:rules|targets)"/, '... with neither member');
    my $f = raw_flags($ka->{(sort keys %$ka)[0]}, 'tok_shop', 'userId=u1');
    is_deeply($f->{mixed}, { name => 'mixed', enabled => JSON::PP::true, rolloutPercentage => 0,
                             segments => ['staff', 'beta', 'staff-role'] },
              'GET /flags: mixed: every segment its rules name, in order, no repeats; the fallthrough\'s percentage');
    is_deeply($f->{'staff-plus-10'}, { name => 'staff-plus-10', enabled => JSON::PP::false, rolloutPercentage => 10,
                                       segments => ['staff', 'staff-role'] },
              'GET /flags: staff-plus-10 for u1 (bucket ' . bucket('staff-plus-10', 'u1') . ')');
    is_deeply($f->{'named-rb'}, { name => 'named-rb', enabled => JSON::PP::false, rolloutPercentage => 0, segments => [] },
              'GET /flags: a flag with targets only: segments []');
    my (undef, $body) = kreq($ka->{(sort keys %$ka)[0]}, GET => '/flags?userId=u1&trait_plan=beta', 'tok_shop');
    like($body, qr/\{"name":"plain","enabled":(?:true|false),"rolloutPercentage":30,"segments":\["beta"\]\}/,
         'GET /flags: a flag without rules: the same bytes as before');
}

# ------------------------------------------------- 4. targets
is(both('named', 'userId=t-on1'), 'on', 'named: t-on1 (listed twice) is on at fallthrough 0');
is(both('named', 'userId=t-on2&trait_plan=beta'), 'on', 'named: t-on2 in beta is on against the rule at 0 %');
is(both('named', 'userId=u5&trait_plan=beta'), 'off', 'named: an unnamed beta user: the rule at 0 %');
is(both('named', 'userId=u5'), 'off', 'named: an unnamed user: the fallthrough at 0 %');
is(both('named-hi', 'userId=t-off1&trait_plan=beta'), 'off', 'named-hi: t-off1 in beta is off against the rule at 100 %');
is(both('named-hi', 'userId=t-off2'), 'off', 'named-hi: t-off2 is off against the fallthrough at 100 %');
is(both('named-hi', 'userId=u5&trait_plan=beta'), 'on', 'named-hi: an unnamed beta user: on');
is(both('named-hi', 'userId=u5'), 'on', 'named-hi: an unnamed user: on');
is(both('named', 'trait_userId=t-on1'), 'off', 'named: a trait named userId is not the caller\'s id');
is(both('named-sticky', 'userId=t-on1&trait_accountId=acc-9'), 'on', 'named-sticky: t-on1 is named by its userId, whatever its stickiness trait');
is(both('named-sticky', 'userId=zz&trait_accountId=acc-1'), 'off', 'named-sticky: a stickiness trait that is a named id names nobody');
is(both('named-sticky', 'userId=&trait_accountId=t-on1'), 'off', 'named-sticky: an empty userId is no user');
is(both('named-killed', 'userId=t-on1'), 'off', 'named-killed: enabled false turns the named-on user off');
is(both('named-rb', 'userId=t-on1'), 'on', 'named-rb: t-on1 is on (named) before the rollback');
is(both('named-rb', 'userId=u5'), 'off', 'named-rb: others are off (0 %)');

# a rollback reaches named users
{
    my ($st) = http_request(POST => '/ingest/errors', body => '{"flagName":"named-rb","message":"m"}',
                            headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
    is($st, 204, 'an error report of named-rb');
    is(status_flags('shop')->{'named-rb'}{rolledBack}, JSON::PP::true, '... rolls it back');
    is(both('named-rb', 'userId=t-on1'), 'off', '... and t-on1 is off on both workers');
}

# overrides
{
    my ($st) = admin(PUT => 'overrides/shop/named', '{"enabled": false}');
    is($st, 204, 'override named {"enabled": false}');
    is(both('named', 'userId=t-on1'), 'off', '... t-on1 is off');
    ($st) = admin(PUT => 'overrides/shop/named', '{"rolloutPercentage": 0}');
    is($st, 204, 'override named {"rolloutPercentage": 0}');
    is(both('named', 'userId=t-on1'), 'off', '... t-on1 is off');
    is(both('named', 'userId=t-on2&trait_plan=beta'), 'off', '... t-on2 in beta is off');
    ($st) = admin(PUT => 'overrides/shop/named', '{"rolloutPercentage": 50}');
    is($st, 204, 'override named {"rolloutPercentage": 50}');
    my @wrong;
    for my $q (map({ ["t-on$_", "userId=t-on$_"], ["t-on$_", "userId=t-on$_&trait_plan=beta"] } 1, 2),
               ['t-off1', 'userId=t-off1'], map({ ["v$_", "userId=v$_" . ($_ % 2 ? '&trait_plan=beta' : '')] } 1 .. 60)) {
        my ($u, $query) = @$q;
        my $want = in_rollout('named', $u, 50) ? 'on' : 'off';
        my $got = both('named', $query);
        push @wrong, "$query: $got" if $got ne $want;
    }
    is(scalar @wrong, 0, '... 50 % replaces every percentage and sets the targets aside: '
                         . '65 users, named or not, in the rule or not, on iff bucket < 50000') or diag "@wrong";
    ($st) = admin(DELETE => 'overrides/shop/named');
    is($st, 204, 'override removed');
    is(both('named', 'userId=t-on1'), 'on', '... t-on1 is on again');

    ($st) = admin(PUT => 'overrides/shop/named-hi', '{"rolloutPercentage": 100}');
    is($st, 204, 'override named-hi {"rolloutPercentage": 100}');
    is(both('named-hi', 'userId=t-off1&trait_plan=beta'), 'on', '... t-off1 is on');
    is(both('named-hi', 'userId=t-off2'), 'on', '... t-off2 is on');
    ($st) = admin(DELETE => 'overrides/shop/named-hi');
    is(both('named-hi', 'userId=t-off2'), 'off', 'override removed: t-off2 is off again');
}

# ------------------------------------------------- 6. flags_context user=
{
    my ($lo) = grep { bucket('staff-plus-10', $_) < 10000 } map { "c$_" } 1 .. 100;
    my ($hi) = grep { bucket('staff-plus-10', $_) >= 10000 && bucket('mixed', $_) >= 30000 } map { "c$_" } 1 .. 100;
    my $mlo = bucket('mixed', $lo) < 30000 ? 1 : 0;
    for my $w (sort keys %$ka) {
        my ($st, $b) = kreq($ka->{$w}, GET => '/var?u=s1', 'x');
        is("$st $b", '200 spt=1 mixed=1', "worker $w: flags_context user=s1: the \$userId rule inside \"rules\"");
        ($st, $b) = kreq($ka->{$w}, GET => "/var?u=$hi", 'x');
        is("$st $b", '200 spt=0 mixed=0', "worker $w: user=$hi (buckets above both): off");
        ($st, $b) = kreq($ka->{$w}, GET => "/var?u=$lo", 'x');
        is("$st $b", "200 spt=1 mixed=$mlo", "worker $w: user=$lo (under 10 %): on by the fallthrough");
    }
}

# ------------------------------------------------- 5. OFREP
{
    my $md = sub { my ($pct, %x) = @_; { rolloutPercentage => $pct, rolledBack => JSON::PP::false, %x } };
    my $ans = sub {
        my ($key, $value, $reason, $meta) = @_;
        return { key => $key, value => $value ? JSON::PP::true : JSON::PP::false, reason => $reason,
                 variant => $value ? 'on' : 'off', metadata => $meta };
    };
    my ($lo) = grep { bucket('staff-plus-10', $_) < 10000 } map { "o$_" } 1 .. 100;
    my ($hi) = grep { bucket('staff-plus-10', $_) >= 10000 } map { "o$_" } 1 .. 100;
    my ($sp_on) = grep { bucket('split-rule', $_) < 50000 } map { "o$_" } 1 .. 100;
    my ($sp_off) = grep { bucket('split-rule', $_) >= 50000 } map { "o$_" } 1 .. 100;
    my ($m_on) = grep { bucket('mixed', $_) < 30000 } map { "o$_" } 1 .. 100;
    my @cases = (
        ['staff-plus-10', { targetingKey => 's1' }, $ans->('staff-plus-10', 1, 'TARGETING_MATCH', $md->(10, ruleIndex => 0)), 'a staff user: rule 0 at 100 %'],
        ['staff-plus-10', { targetingKey => $lo }, $ans->('staff-plus-10', 1, 'SPLIT', $md->(10)), 'the fallthrough at 10 %, on'],
        ['staff-plus-10', { targetingKey => $hi }, $ans->('staff-plus-10', 0, 'SPLIT', $md->(10)), 'the fallthrough at 10 %, off'],
        ['split-rule', { targetingKey => $sp_on, plan => 'beta' }, $ans->('split-rule', 1, 'SPLIT', $md->(100, ruleIndex => 0)), 'rule 0 at 50 %, on'],
        ['split-rule', { targetingKey => $sp_off, plan => 'beta' }, $ans->('split-rule', 0, 'SPLIT', $md->(100, ruleIndex => 0)), 'rule 0 at 50 %, off'],
        ['split-rule', { targetingKey => $sp_off }, $ans->('split-rule', 1, 'DEFAULT', $md->(100)), 'the fallthrough at 100 %: DEFAULT'],
        ['mixed', { targetingKey => 'r2', role => 'staff' }, $ans->('mixed', 0, 'TARGETING_MATCH', $md->(0, ruleIndex => 1)), 'rule 1 at 0 %'],
        ['mixed', { targetingKey => $m_on }, $ans->('mixed', 1, 'SPLIT', $md->(0, ruleIndex => 2)), 'rule 2 (segments []) at 30 %'],
        ['named', { targetingKey => 't-on1' }, $ans->('named', 1, 'TARGETING_MATCH', $md->(0, targeted => JSON::PP::true)), 'a named on user'],
        ['named', { targetingKey => 'u5' }, $ans->('named', 0, 'DEFAULT', $md->(0)), 'the fallthrough at 0 %: DEFAULT'],
        ['named-hi', { targetingKey => 't-off1', plan => 'beta' }, $ans->('named-hi', 0, 'TARGETING_MATCH', $md->(100, targeted => JSON::PP::true)), 'a named off user'],
        ['named-sticky', { targetingKey => 't-on1' }, $ans->('named-sticky', 1, 'TARGETING_MATCH', $md->(0, targeted => JSON::PP::true)), 'targets without rules, a named user'],
        ['named-sticky', { targetingKey => 'u5', accountId => 'acc-1' }, $ans->('named-sticky', 0, 'DEFAULT', $md->(0)), 'targets without rules, the fallthrough at 0 %: DEFAULT'],
        ['named-killed', { targetingKey => 't-on1' }, $ans->('named-killed', 0, 'DISABLED', $md->(100)), 'enabled false: DISABLED'],
        ['named-rb', { targetingKey => 't-on1' }, $ans->('named-rb', 0, 'DISABLED', { rolloutPercentage => 0, rolledBack => JSON::PP::true }), 'rolled back: DISABLED'],
        ['plain', { targetingKey => 'u5', plan => 'free' }, $ans->('plain', 0, 'TARGETING_MATCH', $md->(30, segmentMatched => JSON::PP::false)), 'a flag without rules: the old table'],
    );
    my %ctx_bulk;
    for my $c (@cases) {
        my ($flag, $ctx, $want, $what) = @$c;
        my ($st, undef, $b) = http_request(POST => "/ofrep/v1/evaluate/flags/$flag",
            body => encode_json({ context => $ctx }),
            headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
        is($st, 200, "OFREP single $flag, $what: 200");
        is_deeply(decode_json($b), $want, "OFREP single $flag, $what") or diag $b;
        ($st, undef, $b) = http_request(POST => '/ofrep/v1/evaluate/flags',
            body => encode_json({ context => $ctx }),
            headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
        my ($got) = grep { $_->{key} eq $flag } @{ (eval { decode_json($b) } // {})->{flags} // [] };
        is_deeply($got, $want, "OFREP bulk $flag, $what");
    }
    # overridden: the override's percentage decides, named users included
    my @ov = (['{"enabled": false}', 't-on1', $ans->('named', 0, 'DISABLED', $md->(0)), 'overridden off: DISABLED'],
              ['{"rolloutPercentage": 0}', 't-on1', $ans->('named', 0, 'STATIC', $md->(0)), 'overridden to 0 %: STATIC'],
              ['{"rolloutPercentage": 100}', 'u5', $ans->('named', 1, 'STATIC', $md->(100)), 'overridden to 100 %: STATIC'],
              ['{"rolloutPercentage": 50}', 't-on1', $ans->('named', in_rollout('named', 't-on1', 50), 'SPLIT', $md->(50)), 'overridden to 50 %: SPLIT, t-on1 by its bucket']);
    for my $o (@ov) {
        my ($body, $user, $want, $what) = @$o;
        my ($st) = admin(PUT => 'overrides/shop/named', $body);
        is($st, 204, "override named $body");
        my (undef, undef, $b) = http_request(POST => '/ofrep/v1/evaluate/flags/named',
            body => encode_json({ context => { targetingKey => $user } }),
            headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
        is_deeply(decode_json($b), $want, "OFREP $what") or diag $b;
    }
    admin(DELETE => 'overrides/shop/named');
}

# ------------------------------------------------- 5. the SDK's POST {loc}flags
{
    my $T = '{"type":"and","conditions":[]}';
    my $F = '{"type":"or","conditions":[]}';
    my $M = sub { qq({"type":"match","traitKey":"$_[0]","traitValue":"$_[1]"}) };
    my $seg = sub { qq({"segmentId":"$_[0]","condition":$_[1],"rolloutPercentage":$_[2],"sticky":false}) };
    my $flag = sub {
        my ($name, $enabled, $pct, @segs) = @_;
        return qq({"name":"$name","enabled":$enabled,"rolloutPercentage":$pct,"value":null,"segments":[)
               . join(',', @segs) . '],"stickyAssignments":[]}';
    };
    my $sdk = sub {
        my ($user, $traits) = @_;
        my $s = $ka->{(sort keys %$ka)[0]};
        my ($st, $b) = kreq($s, POST => '/api/sdk/flags', 'tok_shop',
                            JSON::PP->new->canonical->encode({ userId => $user, traits => $traits // {} }));
        my %f;
        while ($b =~ /(\{"name":"([^"]+)",.*?"stickyAssignments":\[\]\})/g) { $f{$2} = $1 }
        return ($st, \%f);
    };
    my $r = sub { in_rollout($_[0], $_[1], $_[2]) ? 100 : 0 };

    my ($st, $f) = $sdk->('s1');
    is($st, 200, 'SDK POST flags for s1: 200');
    is($f->{'staff-plus-10'},
       $flag->('staff-plus-10', 'true', $r->('staff-plus-10', 's1', 10),
               $seg->('staff', $T, 100), $seg->('staff-role', $M->('role', 'staff'), 100)),
       'SDK, staff-plus-10 for s1 (staff): one segment per (rule, segment), staff always true, the fallthrough resolved');
    is($f->{mixed},
       $flag->('mixed', 'true', 0,
               $seg->('staff', $T, 100), $seg->('beta', $M->('plan', 'beta'), 100),
               $seg->('beta', $M->('plan', 'beta'), 0), $seg->('staff-role', $M->('role', 'staff'), 0),
               $seg->('rules[2]', $T, $r->('mixed', 's1', 30))),
       'SDK, mixed for s1: rules in order, "rules[2]" for segments [], each resolved with its rule\'s percentage');
    ($st, $f) = $sdk->('u7', { plan => 'beta' });
    is($f->{'staff-plus-10'},
       $flag->('staff-plus-10', 'true', $r->('staff-plus-10', 'u7', 10),
               $seg->('staff', $F, 100), $seg->('staff-role', $M->('role', 'staff'), 100)),
       'SDK, staff-plus-10 for u7 (not staff): staff always false');
    is($f->{'split-rule'},
       $flag->('split-rule', 'true', 100, $seg->('beta', $M->('plan', 'beta'), $r->('split-rule', 'u7', 50))),
       'SDK, split-rule for u7: the rule\'s 50 % resolved for u7 (bucket ' . bucket('split-rule', 'u7') . ')');
    ($st, $f) = $sdk->('t-on1', { plan => 'beta' });
    is($f->{named}, $flag->('named', 'true', 100), 'SDK, named for t-on1 (named on): no segments, 100');
    like($f->{'named-killed'} // '', qr/^\{"name":"named-killed","enabled":false,"rolloutPercentage":0,/,
         'SDK, named-killed for t-on1 (named on, enabled false): off');
    ($st, $f) = $sdk->('t-off1', { plan => 'beta' });
    is($f->{'named-hi'}, $flag->('named-hi', 'true', 0), 'SDK, named-hi for t-off1 (named off): no segments, 0');
    ($st) = admin(PUT => 'overrides/shop/named', '{"rolloutPercentage": 50}');
    ($st, $f) = $sdk->('u7', { plan => 'beta' });
    is($f->{named}, $flag->('named', 'true', $r->('named', 'u7', 50)),
       'SDK, named overridden to 50 %: no segments, the override resolved for u7');
    admin(DELETE => 'overrides/shop/named');
}

# ------------------------------------------------- 5. the SDK's live refresh
{
    my $post = sub {
        my (undef, undef, $b) = http_request(POST => '/api/sdk/flags', body => $_[0],
            headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
        $b =~ s/^\{/{"type":"flags_refreshed",/;
        return $b;
    };
    my $batch = sub {
        my ($user, $plan) = @_;
        return qq({"type":"evaluation_batch","evaluations":[{"type":"evaluation","flagName":"named","result":true,)
             . qq("traits":{) . ($plan ? qq("plan":"$plan") : '') . qq(},"userId":"$user","timestamp":1700000000000}]});
    };
    my $ws = Ws->open('/ws?token=tok_shop');
    is($ws->{status}, 101, 'an SDK WebSocket');
    my $m = $ws->message(2);
    is_deeply($m, [1, $post->('{}')], 'WS: the first flags_refreshed (no user) is POST {loc}flags\'s');
    $ws->text($batch->('s1'));
    $m = $ws->message(2);
    is_deeply($m, [1, $post->('{"userId":"s1","traits":{}}')], 'WS: for s1, POST {loc}flags\'s flags');
    like($m->[1] // '', qr/\{"name":"staff-plus-10","enabled":true,"rolloutPercentage":\d+,"value":null,"segments":\[\{"segmentId":"staff","condition":\{"type":"and","conditions":\[\]\},"rolloutPercentage":100,/,
         '... staff-plus-10 with the staff segment always true');
    $ws->text($batch->('t-on1', 'beta'));
    $m = $ws->message(2);
    is_deeply($m, [1, $post->('{"userId":"t-on1","traits":{"plan":"beta"}}')], 'WS: for t-on1, POST {loc}flags\'s flags');
    like($m->[1] // '', qr/\{"name":"named","enabled":true,"rolloutPercentage":100,"value":null,"segments":\[\],/,
         '... named: t-on1 is named on');
    my ($st) = admin(PUT => 'overrides/shop/named', '{"rolloutPercentage": 0}');
    is($st, 204, 'override named {"rolloutPercentage": 0}');
    $m = $ws->message(3);
    like($m->[1] // '', qr/\{"name":"named","enabled":true,"rolloutPercentage":0,"value":null,"segments":\[\],/,
         'WS: the change is pushed: named is off for t-on1');
    is_deeply($m, [1, $post->('{"userId":"t-on1","traits":{"plan":"beta"}}')], '... the same as POST {loc}flags');
    ($st) = admin(DELETE => 'overrides/shop/named');
    $m = $ws->message(3);
    like($m->[1] // '', qr/\{"name":"named","enabled":true,"rolloutPercentage":100,/, 'WS: override removed: named is on again for t-on1');
    close $ws->{s};
}

# ------------------------------------------------- 8. a ramp's stage as the fallthrough
{
    ok(wait_for(sub { ((((status_flags('shop')->{ramped} // {})->{ramp} // {})->{state}) // '') eq 'running' }, 10),
       'ramped: the ramp runs');
    my $rf = status_flags('shop')->{ramped};
    is($rf->{ramp}{percentage}, 5, '... at its first stage, 5 %');
    is($rf->{effectiveRolloutPercentage}, 5, 'flags_status: the effective fallthrough is the stage');
    is_deeply($rf->{rules}, [{ segments => ['staff'], rolloutPercentage => 100 }], 'flags_status: the rule keeps its 100 %');
    for my $u (@staff) {
        cmp_ok(bucket('ramped', $u), '>=', 5000, "$u is above the 5 % bucket");
        is(both('ramped', "userId=$u"), 'on', "ramped: $u (staff) is on");
    }
    my @wrong;
    my $n_on = 0;
    for my $i (1 .. 600) {
        my $want = bucket('ramped', "user-$i") < 5000 ? 'on' : 'off';
        $n_on++ if $want eq 'on';
        my $got = both('ramped', "userId=user-$i");
        push @wrong, "user-$i: $got" if $got ne $want;
    }
    cmp_ok($n_on, '>', 10, "$n_on of 600 users are under the 5 % stage");
    is(scalar @wrong, 0, 'ramped: 600 others, on both workers, exactly those under the 5 % stage') or diag "@wrong";
    is(raw_flags($ka->{(sort keys %$ka)[0]}, 'tok_shop', 'userId=s1')->{ramped}{rolloutPercentage}, 5,
       'GET /flags: rolloutPercentage is the stage');
}

# ------------------------------------------------- 3. monotone widening
{
    my @users = map { ["w$_", "userId=w$_" . ($_ % 2 ? '&trait_plan=beta' : '')] } 1 .. 1000;
    my $want = sub {
        my ($flag, $rule, $fall) = @_;
        return { map { my ($u, $q) = @$_; ($u => in_rollout($flag, $u, $q =~ /beta/ ? $rule : $fall) ? 'on' : 'off') } @users };
    };
    my $check = sub {
        my ($flag, $token, $expect, $what) = @_;
        my @wrong;
        for my $w (sort keys %$ka) {
            for (@users) {
                my ($u, $q) = @$_;
                my $got = (flags_of($ka->{$w}, $token, $q) // {})->{$flag} // 'absent';
                push @wrong, "$w $u: $got" if $got ne $expect->{$u};
            }
        }
        is(scalar @wrong, 0, $what) or diag join ', ', @wrong[0 .. ($#wrong < 9 ? $#wrong : 9)];
    };
    my $old = $want->('widen', 20, 5);
    my $new = $want->('widen', 60, 30);
    my @old_on = grep { $old->{$_} eq 'on' } keys %$old;
    my $gained = grep { $new->{$_} eq 'on' && $old->{$_} eq 'off' } keys %$new;
    cmp_ok(scalar @old_on, '>', 50, scalar(@old_on) . ' of 1,000 users on at beta 20 % / 5 %');
    cmp_ok($gained, '>', 100, "$gained more on at 60 % / 30 %");
    $check->('widen', 'tok_shop', $old, 'widen before the reload: 1,000 users on both workers, exactly by their buckets');

    write_file("$dir/conf/shop.json", shop_file(60, 30));
    my @before = worker_pids($master);
    nginx_signal($master, 'HUP');
    # while the reload runs, old and new workers answer: every user on
    # before is on in every answer, and each answer is the old or the new
    my (@lost, @odd);
    my %old_pid = map { $_ => 1 } @before;
    my ($until, $i, $from_old) = (time + 10, 0, 0);
    while (time < $until) {
        my ($u, $q) = @{ $users[$i++ % @users] };
        my ($st, $h, $b) = http_request(GET => "/flags?$q", headers => ['Authorization: Bearer tok_shop']);
        next unless $st == 200;
        my ($f) = grep { $_->{name} eq 'widen' } @{ decode_json($b)->{flags} };
        my $got = $f->{enabled} ? 'on' : 'off';
        push @lost, $u if $old->{$u} eq 'on' && $got ne 'on';
        push @odd, $u if $got ne $old->{$u} && $got ne $new->{$u};
        $from_old++ if $old_pid{$h->{'x-worker'} // 0};
        last if $i > 300 && !grep { $old_pid{$_} } worker_pids($master);
    }
    is(scalar @lost, 0, "during the reload ($i answers, $from_old by an old worker): no user on before was off")
        or diag "@lost";
    is(scalar @odd, 0, '... and each answer was the old or the new one') or diag "@odd";
    ok(wait_for(sub { my %b = map { $_ => 1 } @before; !grep { $b{$_} } worker_pids($master) }, 10),
       'the old workers are gone');
    $ka = worker_connections('/flags?userId=u0');
    is(scalar keys %$ka, 2, 'a keep-alive connection on each new worker');
    $check->('widen', 'tok_shop', $new, 'after the reload: exactly the users under 60 % (beta) / 30 % (others)');

    # the same by the runtime definitions PUT
    my $lold = $want->('widen-live', 20, 5);
    my $lnew = $want->('widen-live', 60, 30);
    $check->('widen-live', 'tok_live', $lold, 'widen-live before the PUT: exactly by the buckets');
    my ($st, $b) = admin(PUT => 'definitions/live/flags/widen-live',
        '{"enabled": true, "rolloutPercentage": 30, "rules": [{"segments": ["beta"], "rolloutPercentage": 60}]}');
    is("$st $b", '200 {"version":2,"added":[],"changed":["widen-live"],"removed":[],"kept":[]}', 'the PUT widens widen-live: version 2');
    my $lost = grep { $lold->{$_} eq 'on' && $lnew->{$_} ne 'on' } keys %$lold;
    is($lost, 0, 'the new buckets keep every user on before (as computed)');
    $check->('widen-live', 'tok_live', $lnew, 'after the PUT, on both workers: exactly the users under 60 % / 30 %');
}

# ------------------------------------------------- 7. nginx -t and the PUT refuse
{
    my $t = prefix_dir('targeting-t');
    my $segs = '"segments": {"staff": {"rules": [{"trait": "$userId", "op": "in", "values": ["s1"]}]}}';
    my $ok_rule = '{"segments": ["staff"], "rolloutPercentage": 1}';
    my $x = sub { '{"name": "x", "enabled": true, "rolloutPercentage": 1, ' . $_[0] . '}' };
    my $ids = sub { my ($p, $n) = @_; join ',', map { qq("$p$_") } 1 .. $n };
    my @bad = (
        ['rules beside segments', $x->(qq("segments": ["staff"], "rules": [$ok_rule])),
         '"rules" and "segments" cannot both be given (a rule names its own segments)'],
        ['rules an object', $x->('"rules": {"segments": [], "rolloutPercentage": 1}'), '"rules" must be an array of objects'],
        ['a rule a number', $x->('"rules": [1]'), '"rules" must be an array of objects'],
        ['segments a string', $x->(qq("rules": [$ok_rule, {"segments": "staff", "rolloutPercentage": 1}])),
         'rules[1]: "segments" must be an array of strings'],
        ['segments missing', $x->(qq("rules": [$ok_rule, {"rolloutPercentage": 1}])),
         'rules[1]: "segments" is missing'],
        ['segments of numbers', $x->(qq("rules": [$ok_rule, {"segments": [1], "rolloutPercentage": 1}])),
         'rules[1]: "segments" must be an array of strings'],
        ['unknown segment', $x->(qq("rules": [$ok_rule, {"segments": ["staff", "nope"], "rolloutPercentage": 1}])),
         'rules[1]: unknown segment "nope"'],
        ['percentage missing', $x->(qq("rules": [$ok_rule, {"segments": ["staff"]}])),
         'rules[1]: "rolloutPercentage" is missing'],
        ['percentage a string', $x->(qq("rules": [$ok_rule, {"segments": ["staff"], "rolloutPercentage": "50"}])),
         'rules[1]: "rolloutPercentage" must be a number'],
        ['percentage 100.001', $x->(qq("rules": [$ok_rule, {"segments": ["staff"], "rolloutPercentage": 100.001}])),
         'rules[1]: "rolloutPercentage" must be between 0 and 100'],
        ['percentage -1', $x->(qq("rules": [$ok_rule, {"segments": ["staff"], "rolloutPercentage": -1}])),
         'rules[1]: "rolloutPercentage" must be between 0 and 100'],
        ['percentage 4 decimals', $x->(qq("rules": [$ok_rule, {"segments": ["staff"], "rolloutPercentage": 12.3456}])),
         'rules[1]: "rolloutPercentage" has more than 3 decimals'],
        ['1,001 rules', $x->('"rules": [' . join(',', ('{"segments": [], "rolloutPercentage": 1}') x 1001) . ']'),
         'more than 1000 rules'],
        ['targets an array', $x->('"targets": ["u1"]'), '"targets" must be an object with "on" and "off" lists of user ids'],
        ['targets.on a string', $x->('"targets": {"on": "u1"}'), '"targets" must be an object with "on" and "off" lists of user ids'],
        ['an empty id', $x->('"targets": {"on": ["a", "b", ""]}'),
         'targets.on[2]: a user id must be a non-empty string of at most 1024 bytes'],
        ['a number for an id', $x->('"targets": {"on": ["a", "b", 7]}'),
         'targets.on[2]: a user id must be a non-empty string of at most 1024 bytes'],
        ['an id of 1,025 bytes', $x->('"targets": {"on": ["a", "b", "' . ('i' x 1025) . '"]}'),
         'targets.on[2]: a user id must be a non-empty string of at most 1024 bytes'],
        ['a bad off id', $x->('"targets": {"off": [null]}'),
         'targets.off[0]: a user id must be a non-empty string of at most 1024 bytes'],
        ['10,001 named users', $x->('"targets": {"on": [' . $ids->('on', 5001) . '], "off": [' . $ids->('off', 5000) . ']}'),
         'more than 10000 named users in "targets"'],
        ['one user on and off', $x->('"targets": {"on": ["u0", "u1"], "off": ["u1"]}'),
         'user "u1" is in both targets.on and targets.off'],
    );
    write_file("$t/conf/nginx.conf", nginx_conf(http => "    flags_project shop token=tok_t file=bad.json;\n", server => ''));
    for my $c (@bad) {
        my ($what, $flag, $text) = @$c;
        write_file("$t/conf/bad.json", qq({"flags": [$flag], $segs}));
        my ($rc, $out) = nginx_test($t);
        isnt($rc, 0, "nginx -t: $what fails");
        like($out, qr/\[emerg\] [^\n]*\/conf\/bad\.json: flag "x": \Q$text\E in \S+nginx\.conf:\d+\n/,
             "... $text") or diag $out;
        my ($st, $b) = admin(PUT => 'definitions/live/flags/x', $flag);
        is($st, 400, "definitions PUT: $what: 400");
        my $e = eval { decode_json($b) } // {};
        is($e->{error}, 'invalid_definitions', '... invalid_definitions');
        like($e->{message} // '', qr/^\S+\/conf\/live\.json: flag "x": \Q$text\E$/, '... the same text, naming the file and the flag')
            or diag $b;
    }
    # the limits themselves are accepted
    my @good = (
        ['1,000 rules', $x->('"rules": [' . join(',', ('{"segments": [], "rolloutPercentage": 1}') x 1000) . ']')],
        ['10,000 named users, duplicates counted once',
         $x->('"targets": {"on": [' . $ids->('on', 6000) . ',"on1","on2"], "off": [' . $ids->('off', 4000) . ',"off9"]}')],
        ['an id of 1,024 bytes and a rule at 12.345 %',
         $x->('"targets": {"on": ["' . ('i' x 1024) . '"]}, "rules": [{"segments": ["staff"], "rolloutPercentage": 12.345}]')],
    );
    for my $c (@good) {
        my ($what, $flag) = @$c;
        write_file("$t/conf/bad.json", qq({"flags": [$flag], $segs}));
        my ($rc, $out) = nginx_test($t);
        is($rc, 0, "nginx -t: $what: valid") or diag $out;
        my ($st, $b) = admin(PUT => 'definitions/live/flags/x?dryRun=1', $flag);
        is($st, 200, "definitions PUT (dry run): $what: 200") or diag $b;
    }
    # an unknown member of a rule: loaded, with a warning naming the flag and the rule
    write_file("$t/conf/bad.json", qq({"flags": [) . $x->('"rules": [{"segments": [], "rolloutPercentage": 1, "colour": "red"}]') . "], $segs}");
    my ($wrc, $wout) = nginx_test($t);
    is($wrc, 0, 'nginx -t: an unknown member of a rule is no error');
    like($wout, qr/\[warn\] [^\n]*\/conf\/bad\.json: flag "x": rules\[0\]: unknown field "colour" ignored in \S+nginx\.conf:\d+\n/,
         '... but a warning naming the flag and the rule') or diag $wout;
    my (undef, undef, $h) = admin(GET => 'definitions/live');
    is($h->{etag}, '"v2"', 'live is still at version 2 after the refusals');
}

nginx_stop($master);
done_testing();
