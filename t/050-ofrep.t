# flags_ofrep (docs/ofrep.md): OpenFeature OFREP single and bulk
# evaluation, reasons, the same answer and the same counting as GET /flags,
# rollbacks and overrides, ETag and If-None-Match, every error, hostile
# bodies, keep-alive.  Two workers; every http_request() is a connection of
# its own, so both serve.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;

my $dir = prefix_dir('ofrep');
my $shop = "$FindBin::Bin/flags/shop.json";

write_file("$dir/conf/ofrep.json", <<'_J_');
{"flags": [
  {"name": "on", "enabled": true, "rolloutPercentage": 100},
  {"name": "zero", "enabled": true, "rolloutPercentage": 0},
  {"name": "killed", "enabled": false, "rolloutPercentage": 100},
  {"name": "half", "enabled": true, "rolloutPercentage": 50},
  {"name": "pro-only", "enabled": true, "rolloutPercentage": 100, "segments": ["pro"]},
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 1, "window": 60}}
],
 "segments": {"pro": {"rules": [{"trait": "plan", "op": "eq", "value": "pro"}]}}}
_J_

write_file("$dir/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=pub_shop_1 token=pub_shop_2 file=$shop;
    flags_project rb token=pub_rb file=ofrep.json;
    flags_error_log logs/reports.log;
_H_
        location = /flags { flags_evaluate; }
        location /ofrep/ { flags_max_report_size 8k; flags_ofrep; }
        location /strict/ { flags_max_traits 2; flags_ofrep; }
        location /noslash { flags_ofrep; }
        location ~ ^/re/[a-z]+/ { flags_ofrep; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_

my $master = nginx_start($dir);
my @workers = worker_pids($master);
is(scalar @workers, 2, 'two workers');

my $json = JSON::PP->new->canonical;
my $SHOP = 'Authorization: Bearer pub_shop_1';
my $RB = 'Authorization: Bearer pub_rb';
my $BULK = '/ofrep/v1/evaluate/flags';
my $ONE = '/ofrep/v1/evaluate/flags/';

sub post {
    my ($path, $body, @headers) = @_;
    return http_request(POST => $path, body => $body, headers => [@headers]);
}

# POST with a body and an auth header: (status, headers, body)
sub bulk { post($BULK, $_[1], $_[0], @_[2 .. $#_]) }
sub one  { post($ONE . $_[1], $_[2], $_[0], @_[3 .. $#_]) }

sub context { $json->encode({ context => $_[0] }) }

sub status_flag {
    my ($project, $flag) = @_;
    my ($st, undef, $body) = http_request(GET => '/flags-status');
    die "flags_status: $st" unless $st == 200;
    for my $p (@{ $json->decode($body)->{projects} }) {
        next unless $p->{name} eq $project;
        for my $f (@{ $p->{flags} }) {
            return $f if $f->{name} eq $flag;
        }
    }
    die "no $project/$flag in flags_status";
}

sub counters {
    my ($project, @flags) = @_;
    return { map { my $c = status_flag($project, $_)->{counters};
                   ($_ => [$c->{evaluations}, $c->{enabledEvaluations}]) } @flags };
}

my $ETAG = qr/^"[0-9a-f]{16}"$/;

# ---------------------------------------------------------------- success

{
    my ($st, $h, $body) = bulk($SHOP, context({ targetingKey => 'user-2', plan => 'pro', country => 'DE' }));
    is($st, 200, 'bulk: 200');
    is($h->{'content-type'}, 'application/json', 'bulk: JSON');
    is($h->{'cache-control'}, 'no-store', 'bulk: no-store');
    like($h->{etag}, $ETAG, 'bulk: a strong ETag of 16 hex digits');
    is($h->{'content-length'}, length $body, 'bulk: Content-Length');
    is($body, '{"flags":['
        . '{"key":"new-checkout","value":true,"reason":"SPLIT","variant":"on","metadata":{"rolloutPercentage":25,"rolledBack":false,"segmentMatched":true}},'
        . '{"key":"dark-mode","value":true,"reason":"SPLIT","variant":"on","metadata":{"rolloutPercentage":60,"rolledBack":false}},'
        . '{"key":"always-on","value":true,"reason":"STATIC","variant":"on","metadata":{"rolloutPercentage":100,"rolledBack":false}},'
        . '{"key":"killed","value":false,"reason":"DISABLED","variant":"off","metadata":{"rolloutPercentage":100,"rolledBack":false}},'
        . '{"key":"by-account","value":false,"reason":"SPLIT","variant":"off","metadata":{"rolloutPercentage":50,"rolledBack":false}}],'
        . '"eventStreams":[{"type":"sse","endpoint":{"requestUri":"/ofrep/v1/events?token=pub_shop_1"},"inactivityDelaySec":120}]}',
       'bulk: every flag in file order, and the event stream');

    ($st, $h, $body) = one($SHOP, 'new-checkout', context({ targetingKey => 'user-2', plan => 'pro', country => 'de' }));
    is($st, 200, 'single: 200');
    is($h->{'content-type'}, 'application/json', 'single: JSON');
    is($h->{'cache-control'}, 'no-store', 'single: no-store');
    ok(!exists $h->{etag}, 'single: no ETag');
    is($body, '{"key":"new-checkout","value":true,"reason":"SPLIT","variant":"on","metadata":{"rolloutPercentage":25,"rolledBack":false,"segmentMatched":true}}',
       'single: the flag');

    # the other token of the project is the one the stream names
    ($st, $h, $body) = bulk('Authorization: Bearer pub_shop_2', '{}');
    like($body, qr{"requestUri":"/ofrep/v1/events\?token=pub_shop_2"}, 'the stream carries the token the client sent');
}

# One answer per reason (docs/ofrep.md): half is 50 %, bucket("half",
# "alice") = 1756, bucket("half", "bob") = 67702.
{
    my %want = (
        'on/alice'        => '{"key":"on","value":true,"reason":"STATIC","variant":"on","metadata":{"rolloutPercentage":100,"rolledBack":false}}',
        'zero/alice'      => '{"key":"zero","value":false,"reason":"STATIC","variant":"off","metadata":{"rolloutPercentage":0,"rolledBack":false}}',
        'killed/alice'    => '{"key":"killed","value":false,"reason":"DISABLED","variant":"off","metadata":{"rolloutPercentage":100,"rolledBack":false}}',
        'half/alice'      => '{"key":"half","value":true,"reason":"SPLIT","variant":"on","metadata":{"rolloutPercentage":50,"rolledBack":false}}',
        'half/bob'        => '{"key":"half","value":false,"reason":"SPLIT","variant":"off","metadata":{"rolloutPercentage":50,"rolledBack":false}}',
        'half/'           => '{"key":"half","value":false,"reason":"SPLIT","variant":"off","metadata":{"rolloutPercentage":50,"rolledBack":false}}',
        'pro-only/alice'  => '{"key":"pro-only","value":true,"reason":"TARGETING_MATCH","variant":"on","metadata":{"rolloutPercentage":100,"rolledBack":false,"segmentMatched":true}}',
        'pro-only/bob'    => '{"key":"pro-only","value":false,"reason":"TARGETING_MATCH","variant":"off","metadata":{"rolloutPercentage":100,"rolledBack":false,"segmentMatched":false}}',
    );
    my %ctx = (alice => { targetingKey => 'alice', plan => 'pro' },
               bob => { targetingKey => 'bob', plan => 'free' },
               '' => { plan => 'pro' });
    for my $case (sort keys %want) {
        my ($flag, $user) = split m{/}, $case, 2;
        $user //= '';
        my ($st, undef, $body) = one($RB, $flag, context($ctx{$user}));
        is($st, 200, "reason $case: 200");
        is($body, $want{$case}, "reason $case: the answer");
    }
}

# The same answer as GET /flags for the same caller, single and bulk.
{
    my @callers = (
        [ 'userId=user-1&trait_plan=pro&trait_country=de', { targetingKey => 'user-1', plan => 'pro', country => 'de' } ],
        [ 'userId=user-2&trait_plan=enterprise&trait_country=DE', { targetingKey => 'user-2', plan => 'enterprise', country => 'DE' } ],
        [ 'userId=alice', { targetingKey => 'alice' } ],
        [ 'userId=bob&trait_plan=pro', { targetingKey => 'bob', plan => 'pro', unused => JSON::PP::null } ],
        [ 'trait_accountId=acme', { accountId => 'acme' } ],
        [ 'trait_accountId=42', '{"context":{"accountId":42}}' ],
        [ 'trait_accountId=true&userId=u3', '{"context":{"accountId":true,"targetingKey":"u3"}}' ],
        [ 'trait_accountId=-1.5e3', '{"context":{"accountId":-1.5e3}}' ],
        [ '', '' ],
        [ 'userId=', '{"context":{"targetingKey":""}}' ],
    );
    for my $project ([ $SHOP, 'shop' ], [ $RB, 'rb' ]) {
        my ($auth, $name) = @$project;
        for my $c (@callers) {
            my ($query, $ctx) = @$c;
            my $body = ref $ctx ? context($ctx) : $ctx;
            my (undef, undef, $flags) = http_request(GET => "/flags?$query", headers => [$auth]);
            my @want = map { [ $_->{name}, $_->{enabled}, $_->{rolloutPercentage} ] }
                       @{ $json->decode($flags)->{flags} };
            my ($st, undef, $ofrep) = bulk($auth, $body);
            is($st, 200, "$name ?$query: bulk 200");
            my @got = map { [ $_->{key}, $_->{value}, $_->{metadata}{rolloutPercentage} ] }
                      @{ $json->decode($ofrep)->{flags} };
            is_deeply(\@got, \@want, "$name ?$query: bulk answers what GET /flags answers");
            for my $w (@want) {
                my ($st1, undef, $b1) = one($auth, $w->[0], $body);
                my $d = $json->decode($b1);
                is_deeply([ $st1, $d->{key}, $d->{value}, $d->{metadata}{rolloutPercentage} ],
                          [ 200, @$w ], "$name ?$query: $w->[0] alone too");
            }
        }
    }
}

# ---------------------------------------------------------------- counting

{
    my @flags = qw(on zero killed half pro-only risky);
    my $before = counters('rb', @flags);
    my $alice = context({ targetingKey => 'alice', plan => 'pro' });
    my (undef, $h) = bulk($RB, $alice);
    bulk($RB, $alice);
    bulk($RB, $alice, "If-None-Match: $h->{etag}");     # a 304 counts nothing
    one($RB, 'half', $alice);
    one($RB, 'half', context({ targetingKey => 'bob' }));
    one($RB, 'zero', $alice);
    # errors count nothing
    one($RB, 'half', '{"context":[]}');
    one($RB, 'nope', $alice);
    bulk($RB, '{');
    http_request(GET => $BULK, headers => [$RB]);
    bulk('Authorization: Bearer nope', $alice);
    my $after = counters('rb', @flags);
    # enabled for alice: on, half, pro-only, risky
    my %delta = (on => [2, 2], zero => [3, 0], killed => [2, 0],
                 half => [4, 3], 'pro-only' => [2, 2], risky => [2, 2]);
    for my $f (@flags) {
        is_deeply([ $after->{$f}[0] - $before->{$f}[0], $after->{$f}[1] - $before->{$f}[1] ],
                  $delta{$f}, "counting: $f counted as GET /flags would be");
    }
}

# ---------------------------------------------------------------- ETag

my $alice = context({ targetingKey => 'alice', plan => 'pro' });
my ($etag0, $body0);
{
    my ($st, $h, $body) = bulk($RB, $alice);
    ($etag0, $body0) = ($h->{etag}, $body);
    like($etag0, $ETAG, 'ETag: present');

    # the same normalised context: key order, a repeated key, a number or
    # its text, a null trait
    for my $same ('{"context":{"plan":"pro","targetingKey":"alice"}}',
                  '{"context":{"targetingKey":"bob","plan":"pro","targetingKey":"alice"}}',
                  '{"context":{"targetingKey":"alice","plan":"pro","x":null},"other":1}') {
        my (undef, $h2, $b2) = bulk($RB, $same);
        is($h2->{etag}, $etag0, "ETag: the same for $same");
        is($b2, $body0, "ETag: and the same bytes for $same");
    }
    my (undef, $hn) = bulk($RB, '{"context":{"targetingKey":"alice","plan":"pro","n":42}}');
    my (undef, $hs) = bulk($RB, '{"context":{"targetingKey":"alice","plan":"pro","n":"42"}}');
    is($hn->{etag}, $hs->{etag}, 'ETag: a number is its text');
    isnt($hn->{etag}, $etag0, 'ETag: an extra trait changes it, even one no rule reads');

    # the context changes it
    for my $other ({ targetingKey => 'alice2', plan => 'pro' }, { targetingKey => 'alice', plan => 'free' },
                   { targetingKey => 'alice' }, { plan => 'pro' }) {
        my (undef, $h2) = bulk($RB, context($other));
        isnt($h2->{etag}, $etag0, 'ETag: changes with the context ' . $json->encode($other));
    }
    # another token, another event stream URL, another tag
    my (undef, $h1) = bulk($SHOP, $alice);
    my (undef, $h2) = bulk('Authorization: Bearer pub_shop_2', $alice);
    isnt($h1->{etag}, $h2->{etag}, 'ETag: differs with the token in the event stream');

    # If-None-Match
    for my $inm ($etag0, "W/$etag0", qq{"nope", $etag0}, qq{W/"x" ,, W/$etag0 }, '*') {
        my ($st3, $h3, $b3) = bulk($RB, $alice, "If-None-Match: $inm");
        is($st3, 304, "If-None-Match: $inm: 304");
        is($b3, '', "If-None-Match: $inm: no body");
        is($h3->{etag}, $etag0, "If-None-Match: $inm: the ETag");
        is($h3->{'cache-control'}, 'no-store', "If-None-Match: $inm: no-store");
        ok(!exists $h3->{'content-length'} && !exists $h3->{'content-type'},
           "If-None-Match: $inm: no Content-Length, no Content-Type");
    }
    for my $inm ('"nope"', substr($etag0, 1, 16), uc $etag0, qq{$etag0 "x"}, qq{$etag0, *}) {
        my ($st3, $h3, $b3) = bulk($RB, $alice, "If-None-Match: $inm");
        is($st3, 200, "If-None-Match: $inm: 200");
        is($b3, $body0, "If-None-Match: $inm: the body");
    }
    # the tag of another context does not match
    my ($st4) = bulk($RB, context({ targetingKey => 'bob' }), "If-None-Match: $etag0");
    is($st4, 200, 'If-None-Match: the tag of another context is no match');
    # If-Match and If-Modified-Since mean nothing here
    my ($st5) = bulk($RB, $alice, 'If-Match: "other"', 'If-Modified-Since: Thu, 01 Jan 2037 00:00:00 GMT');
    is($st5, 200, 'If-Match and If-Modified-Since are ignored');
    # a single evaluation has no ETag and ignores If-None-Match
    my ($st6, $h6) = one($RB, 'half', $alice, 'If-None-Match: *');
    is($st6, 200, 'single: If-None-Match is ignored');
}

# ------------------------------------------------- rollbacks and overrides

{
    my $report = '{"flagName":"risky","message":"m"}';
    for (1 .. 3) {
        my ($st) = post('/ingest/errors', $report, $RB, 'Content-Type: application/json');
        is($st, 204, "report $_ for risky");
    }
    my ($st, undef, $body) = one($RB, 'risky', $alice);
    is($body, '{"key":"risky","value":false,"reason":"DISABLED","variant":"off","metadata":{"rolloutPercentage":0,"rolledBack":true}}',
       'a rolled-back flag answers DISABLED');
    my ($st2, $h2, $b2) = bulk($RB, $alice, "If-None-Match: $etag0");
    is($st2, 200, 'after a rollback the old ETag no longer matches');
    isnt($h2->{etag}, $etag0, 'after a rollback the ETag changes');
    like($b2, qr/\{"key":"risky","value":false,"reason":"DISABLED","variant":"off","metadata":\{"rolloutPercentage":0,"rolledBack":true\}\}/,
         'bulk: the rolled-back flag');
    my $etag_rb = $h2->{etag};

    # the same in GET /flags
    my (undef, undef, $flags) = http_request(GET => '/flags?userId=alice&trait_plan=pro', headers => [$RB]);
    like($flags, qr/"name":"risky","enabled":false,"rolloutPercentage":0,/, 'GET /flags agrees');

    # cleared: the first tag again (the tag is a function of the state)
    my ($st3) = http_request(DELETE => '/flags-admin/rollbacks/rb/risky');
    is($st3, 204, 'rollback cleared');
    my ($st4, $h4, $b4) = bulk($RB, $alice);
    is($h4->{etag}, $etag0, 'cleared: the ETag of the same state again');
    is($b4, $body0, 'cleared: the same answer');

    # overrides
    my ($st5) = http_request(PUT => '/flags-admin/overrides/rb/risky', body => '{"enabled": false}');
    is($st5, 204, 'override off');
    my (undef, $h6, $b6) = bulk($RB, $alice);
    like($b6, qr/\{"key":"risky","value":false,"reason":"DISABLED","variant":"off","metadata":\{"rolloutPercentage":0,"rolledBack":false\}\}/,
         'overridden off: DISABLED, not rolled back');
    isnt($h6->{etag}, $etag0, 'overridden off: another ETag');
    isnt($h6->{etag}, $etag_rb, 'overridden off: not the rollback\'s ETag either');

    http_request(PUT => '/flags-admin/overrides/rb/half', body => '{"rolloutPercentage": 100}');
    my (undef, undef, $b7) = one($RB, 'half', context({ targetingKey => 'bob' }));
    is($b7, '{"key":"half","value":true,"reason":"STATIC","variant":"on","metadata":{"rolloutPercentage":100,"rolledBack":false}}',
       'overridden to 100 %: STATIC');
    http_request(PUT => '/flags-admin/overrides/rb/half', body => '{"rolloutPercentage": 12.345}');
    my (undef, undef, $b8) = one($RB, 'half', context({ targetingKey => 'alice' }));
    is($b8, '{"key":"half","value":true,"reason":"SPLIT","variant":"on","metadata":{"rolloutPercentage":12.345,"rolledBack":false}}',
       'overridden to 12.345 %: SPLIT, the percentage as GET /flags writes it');
    http_request(PUT => '/flags-admin/overrides/rb/half', body => '{"rolloutPercentage": 0}');
    my (undef, undef, $b9) = one($RB, 'half', context({ targetingKey => 'alice' }));
    is($b9, '{"key":"half","value":false,"reason":"STATIC","variant":"off","metadata":{"rolloutPercentage":0,"rolledBack":false}}',
       'overridden to 0 %: STATIC');
    http_request(DELETE => '/flags-admin/overrides/rb/half');
    http_request(DELETE => '/flags-admin/overrides/rb/risky');
    my (undef, $h10) = bulk($RB, $alice);
    is($h10->{etag}, $etag0, 'overrides removed: the first ETag again');
}

# ---------------------------------------------------------------- errors

sub error_is {
    my ($what, $got, $status, $shape) = @_;
    my ($st, $h, $body) = @$got;
    is($st, $status, "$what: $status");
    is($h->{'content-type'}, 'application/json', "$what: JSON");
    my $d = eval { $json->decode($body) } // {};
    my $details = delete $d->{errorDetails};
    ok(defined $details && length $details, "$what: errorDetails");
    like($details // '', $shape->{details}, "$what: errorDetails says why") if $shape->{details};
    my %want = %$shape;
    delete $want{details};
    is_deeply($d, \%want, "$what: the body");
}

error_is('PARSE_ERROR, single', [one($RB, 'half', '{"context":')], 400,
         { key => 'half', errorCode => 'PARSE_ERROR', details => qr/not valid JSON/ });
error_is('PARSE_ERROR, bulk', [bulk($RB, '{"context":{}}}')], 400,
         { errorCode => 'PARSE_ERROR', details => qr/not valid JSON/ });
error_is('PARSE_ERROR, not an object', [bulk($RB, '[{"context":{}}]')], 400,
         { errorCode => 'PARSE_ERROR', details => qr/^request body must be a JSON object$/ });
error_is('PARSE_ERROR, invalid UTF-8', [one($RB, 'half', qq({"context":{"plan":"\xc0\xafx"}}))], 400,
         { key => 'half', errorCode => 'PARSE_ERROR', details => qr/UTF-8/ });
error_is('PARSE_ERROR, a lone surrogate', [bulk($RB, '{"context":{"plan":"\ud800"}}')], 400,
         { errorCode => 'PARSE_ERROR' });
error_is('PARSE_ERROR, deep nesting', [bulk($RB, '{"x":' . ('[' x 3000) . (']' x 3000) . '}')], 400,
         { errorCode => 'PARSE_ERROR', details => qr/^JSON nesting is deeper than 64 levels$/ });
error_is('INVALID_CONTEXT, context an array', [bulk($RB, '{"context":[]}')], 400,
         { errorCode => 'INVALID_CONTEXT', details => qr/^context must be an object$/ });
error_is('INVALID_CONTEXT, an object property', [one($RB, 'half', '{"context":{"plan":{"tier":1}}}')], 400,
         { key => 'half', errorCode => 'INVALID_CONTEXT', details => qr/^context property "plan" is an object/ });
error_is('INVALID_CONTEXT, an array property', [bulk($RB, '{"context":{"tags":["a"]}}')], 400,
         { errorCode => 'INVALID_CONTEXT', details => qr/^context property "tags" is an array/ });
error_is('INVALID_CONTEXT, targetingKey a number', [bulk($RB, '{"context":{"targetingKey":7}}')], 400,
         { errorCode => 'INVALID_CONTEXT', details => qr/^targetingKey must be a string$/ });
error_is('INVALID_CONTEXT, a NUL', [bulk($RB, '{"context":{"plan":"a\u0000"}}')], 400,
         { errorCode => 'INVALID_CONTEXT', details => qr/NUL/ });
error_is('INVALID_CONTEXT, an empty name', [bulk($RB, '{"context":{"":"x"}}')], 400,
         { errorCode => 'INVALID_CONTEXT', details => qr/empty name/ });
error_is('INVALID_CONTEXT, a value over 1024 bytes', [bulk($RB, context({ plan => 'x' x 1025 }))], 400,
         { errorCode => 'INVALID_CONTEXT', details => qr/^context property "plan" is longer than 1024 bytes$/ });
error_is('INVALID_CONTEXT, a name over 128 bytes', [bulk($RB, context({ 'n' x 129 => 'x' }))], 400,
         { errorCode => 'INVALID_CONTEXT', details => qr/longer than 128 bytes/ });
error_is('INVALID_CONTEXT, more than flags_max_traits', [post('/strict/v1/evaluate/flags', context({ a => 1, b => 2, c => 3 }), $RB)], 400,
         { errorCode => 'INVALID_CONTEXT', details => qr/^more than 2 traits in the context$/ });
{
    my ($st) = post('/strict/v1/evaluate/flags', context({ targetingKey => 'k', a => 1, b => 2, c => JSON::PP::null }), $RB);
    is($st, 200, 'flags_max_traits: targetingKey and nulls do not count');
}
error_is('FLAG_NOT_FOUND', [one($RB, 'nope', $alice)], 404,
         { key => 'nope', errorCode => 'FLAG_NOT_FOUND' });
error_is('FLAG_NOT_FOUND, a decoded key', [one($RB, 'no%20p%22e', $alice)], 404,
         { key => 'no p"e', errorCode => 'FLAG_NOT_FOUND' });
error_is('FLAG_NOT_FOUND, an empty key', [one($RB, '', $alice)], 404,
         { key => '', errorCode => 'FLAG_NOT_FOUND' });
error_is('FLAG_NOT_FOUND, a flag of another project', [one($SHOP, 'half', $alice)], 404,
         { key => 'half', errorCode => 'FLAG_NOT_FOUND' });
# a bad body is reported before an unknown flag
error_is('PARSE_ERROR before FLAG_NOT_FOUND', [one($RB, 'nope', '{')], 400,
         { key => 'nope', errorCode => 'PARSE_ERROR' });
# never TARGETING_KEY_MISSING: anonymous callers are defined
{
    my ($st, undef, $body) = one($RB, 'half', '{"context":{}}');
    is($st, 200, 'no targetingKey: 200, not TARGETING_KEY_MISSING');
    # no body at all, or no Content-Length: the empty context
    ($st, undef, $body) = http_request(POST => $ONE . 'on', headers => [$RB]);
    is($st, 200, 'no body: the empty context');
    is($body, '{"key":"on","value":true,"reason":"STATIC","variant":"on","metadata":{"rolloutPercentage":100,"rolledBack":false}}',
       'no body: the answer');
}
error_is('413, declared', [one($RB, 'half', '{"context":{"a":"' . ('x' x 8200) . '"}}')], 413,
         { key => 'half', errorCode => 'GENERAL', details => qr/flags_max_report_size/ });
error_is('405', [http_request(GET => $BULK, headers => [$RB])], 405,
         { errorCode => 'GENERAL' });
{
    my ($st, $h) = http_request(PUT => $ONE . 'half', headers => [$RB], body => $alice);
    is_deeply([$st, $h->{allow}], [405, 'POST'], '405 says Allow: POST');
    ($st, $h) = http_request(HEAD => $BULK, headers => [$RB]);
    is_deeply([$st, $h->{allow}], [405, 'POST'], 'HEAD: 405');
}
for my $path ('/ofrep/', '/ofrep/v1/evaluate', '/ofrep/v1/evaluate/flagsX', '/ofrep/v2/evaluate/flags',
              '/ofrep/x/v1/evaluate/flags') {
    error_is("404 $path", [post($path, $alice, $RB)], 404, { errorCode => 'GENERAL' });
}
{
    # the event stream (docs/push.md) is GET only
    my ($st, $h) = post('/ofrep/v1/events', $alice, $RB);
    is_deeply([$st, $h->{allow}], [405, 'GET'], 'POST to the event stream: 405, Allow: GET');
}
{
    # the path is checked first: an unknown path is 404 even without a token
    my ($st) = post('/ofrep/v2', $alice);
    is($st, 404, 'an unknown path is 404 before the token');
}

# 401 without a body, whatever the reason
for my $auth ([], ['Authorization: Bearer nope'], ['Authorization: Basic eDp5'],
              ['Authorization: Bearer a b']) {
    for my $path ($BULK, $ONE . 'half') {
        my ($st, $h, $body) = post($path, $alice, @$auth);
        my $what = "401 (@$auth) $path";
        is($st, 401, $what);
        is($body, '', "$what: no body");
        is($h->{'content-length'}, '0', "$what: Content-Length: 0");
        is($h->{'www-authenticate'},
           @$auth && $auth->[0] =~ /nope/ ? 'Bearer error="invalid_token"' : 'Bearer',
           "$what: the challenge");
    }
}

# ---------------------------------------------------------------- locations

{
    my ($st, undef, $body) = post('/noslash/v1/evaluate/flags', '', $RB);
    is($st, 200, 'a location without a trailing slash');
    like($body, qr{"requestUri":"/noslash/v1/events\?token=pub_rb"}, 'its stream path');
    ($st, undef, $body) = post('/re/abc/v1/evaluate/flags/on', '', $RB);
    is($st, 200, 'a regex location: single');
    ($st, undef, $body) = post('/re/abc/v1/evaluate/flags', '', $RB);
    like($body, qr{"requestUri":"/re/abc/v1/events\?token=pub_rb"}, 'a regex location: its stream path');
    ($st, undef, $body) = post('/re/a%20b/v1/evaluate/flags', '', $RB);
    is($st, 404, 'a regex location that does not match is not ours');
}

# ---------------------------------------------------------------- hostile

{
    # chunked, over the limit as read
    my $s = raw_connect();
    my $chunk = '{"context":{"a":"' . ('y' x 9000) . '"}}';
    print $s "POST $BULK HTTP/1.1\r\nHost: x\r\n$RB\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
           . sprintf("%x\r\n%s\r\n0\r\n\r\n", length $chunk, $chunk);
    local $/;
    my $resp = <$s> // '';
    close $s;
    like($resp, qr{^HTTP/1\.1 413 }, 'chunked over flags_max_report_size: 413');
    like($resp, qr{\r\n\r\n\{"errorCode":"GENERAL","errorDetails":"[^"]+"\}$}, 'chunked: the bulk error shape');

    # chunked within the limit
    $s = raw_connect();
    $chunk = context({ targetingKey => 'alice', plan => 'pro' });
    my ($a, $b) = (substr($chunk, 0, 10), substr($chunk, 10));
    print $s "POST $BULK HTTP/1.1\r\nHost: x\r\n$RB\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
           . sprintf("%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", length $a, $a, length $b, $b);
    $resp = <$s> // '';
    close $s;
    like($resp, qr{^HTTP/1\.1 200 }, 'chunked in two pieces: 200');
    like($resp, qr{\r\nETag: \Q$etag0\E\r\n}, 'chunked: the same ETag as in one piece');

    # wrong types everywhere
    for my $body ('"x"', '1', 'true', 'null', '{"context":1}', '{"context":true}', '{"context":"a"}',
                  '{"context":{"targetingKey":[]}}', '{"context":{"targetingKey":{}}}',
                  '{"context":{"a":[[[]]]}}', qq({"context":{"a":"\xff\xfe"}}), qq(\xef\xbb\xbf{}),
                  '{"context":{"a":1}', "\x00", '{"a":1,}') {
        my ($st, undef, $resp) = bulk($RB, $body);
        is($st, 400, 'hostile body ' . $json->encode([$body]) . ': 400');
        like($resp, qr/^\{"errorCode":"(?:PARSE_ERROR|INVALID_CONTEXT)","errorDetails":"(?:[^"\\]|\\.)*"\}$/, '... with a clean error');
    }
    # many traits, each a repeat: still one trait, within the limit
    my $many = '{"context":{' . join(',', map { qq("a":"$_") } 1 .. 700) . '}}';
    my ($st) = post('/strict/v1/evaluate/flags', $many, $RB);
    is($st, 200, '700 repeats of one property: one trait');
}

# ---------------------------------------------------------------- keep-alive

{
    my $s = raw_connect();
    my $ctx = context({ targetingKey => 'alice', plan => 'pro' });
    my $req = sub {
        my ($path, $body, @h) = @_;
        return "POST $path HTTP/1.1\r\nHost: x\r\n" . join('', map { "$_\r\n" } @h)
             . 'Content-Length: ' . length($body) . "\r\n\r\n$body";
    };
    print $s $req->($BULK, $ctx, $RB)
           . $req->($ONE . 'half', '{"context":', $RB)
           . $req->($ONE . 'half', $ctx, 'Authorization: Bearer nope')
           . $req->($BULK, $ctx, $RB, "If-None-Match: $etag0")
           . $req->('/ofrep/v9', $ctx, $RB)
           . $req->($ONE . 'half', $ctx, $RB, 'Connection: close');
    local $/;
    my $all = <$s> // '';
    close $s;
    my @status = $all =~ m{HTTP/1\.1 (\d+) }g;
    is_deeply(\@status, [200, 400, 401, 304, 404, 200], 'keep-alive: six pipelined answers in order');
    like($all, qr/\{"key":"half","value":true,"reason":"SPLIT","variant":"on","metadata":\{"rolloutPercentage":50,"rolledBack":false\}\}$/,
         'keep-alive: the last one whole');

    # Expect: 100-continue with a bad token: 401 at once, no 100
    $s = raw_connect();
    print $s "POST $BULK HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nExpect: 100-continue\r\n"
           . "Content-Length: 5\r\nConnection: close\r\n\r\n";
    my $resp = <$s> // '';
    close $s;
    like($resp, qr{^HTTP/1\.1 401 }, 'Expect: 100-continue and a bad token: 401 without 100 Continue');
}

# ---------------------------------------------------------------- the end

is_deeply([worker_pids($master)], \@workers, 'no worker died');
my $log = read_file("$dir/logs/error.log") // '';
unlike($log, qr/\[(?:alert|crit|emerg)\]/, 'nothing alarming in the error log');

nginx_stop($master);
done_testing();
