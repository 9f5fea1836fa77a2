# Who can make a ramp's rules act (docs/regression.md, "Who can make it
# act"; docs/ramps.md, "The backstop"), two workers, keep-alive clients,
# addresses given by X-Forwarded-For through real_ip:
#   - one address, however many reports (with or without userIds,
#     "enabled": true), moves the regression rule by two errors in all,
#     and a proof waits for minSources distinct witnesses: seven
#     addresses make a proof that minSources 8 holds, the eighth decides;
#   - the guide's limit_req recipe, as written, in front of the reports;
#   - one address posting "enabled": false reports does not mask a canary
#     that fails for 25 real users;
#   - a report whose "enabled" contradicts its user's answer is witnessed
#     by no cohort;
#   - the absolute rule stays a backstop while a ramp runs: a failure the
#     off cohort does not share is rolled back even when the regression
#     rule cannot decide, and a masking client does not stop it.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;
use Time::HiRes qw(time sleep);

my $root = "$FindBin::Bin/..";
my $dir = prefix_dir('ramp-trust');
my $Old = unused_port();
my $New = unused_port();

# the guide's recipe, as written
my $readme = read_file("$root/docs/guide.md");
my ($recipe) = $readme =~ /```\n(limit_req_zone [^\n]*rate=6r\/m;\n\nlocation = \/ingest\/errors \{.*?\})\n```/s;
ok($recipe, "the guide's limit_req recipe") or BAIL_OUT('no recipe in the README');
my ($zone_line, $location) = split /\n\n/, $recipe, 2;
$location =~ s{location = /ingest/errors}{location = /recipe/ingest/errors};

my $slow = '{"tick": 1, "alpha": 0.000001, "dispersion": 1000}';
write_file("$dir/conf/shop.json", <<"_J_");
{"flags": [
  {"name": "lone", "enabled": true, "rolloutPercentage": 0,
   "rollback": {"minErrors": 100000, "minSources": 8},
   "ramp": {"stages": [{"percentage": 5, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "recipe", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 5, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "canary", "enabled": true, "rolloutPercentage": 0,
   "rollback": {"minErrors": 100000},
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "backstop", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": $slow}},
  {"name": "half", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "claims", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 50, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}}
 ]}
_J_

my $http = <<"_C_";
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_error_log off;
    flags_rollback min_errors=20 rate=10% window=60s min_sources=3;
    flags_context shop user=\$arg_uid;
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Forwarded-For;
    $zone_line

    map \$flag_canary \$canary_upstream { 1 b_fail; default b_ok; }
    map \$flag_backstop \$backstop_upstream { 1 b_fail; default b_ok; }
    upstream b_ok { server 127.0.0.1:$Old; }
    upstream b_fail { server 127.0.0.1:$New; }
    server { listen 127.0.0.1:$Old; location / { return 200 "ok\\n"; } }
    server { listen 127.0.0.1:$New; location / { return 500 "new\\n"; } }
_C_

my $server = <<"_C_";
        location = /flags { flags_evaluate; }
        location = /status { flags_status; }
        location = /ingest/errors { flags_ingest_errors; }
        $location
        location = /canary {
            flags_upstream_errors on;
            proxy_pass http://\$canary_upstream;
        }
        location = /backstop {
            flags_upstream_errors on;
            proxy_pass http://\$backstop_upstream;
        }
_C_

write_file("$dir/conf/nginx.conf",
           nginx_conf(http => $http, server => $server, log_level => 'error'));
my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'the configuration is valid') or diag($out);
my $master = nginx_start($dir);

my @auth = ('Authorization: Bearer tok_shop');

sub status {
    my (undef, undef, $b) = keepalive_request(GET => '/status');
    my $j = eval { decode_json($b) } or return {};
    return { map { $_->{name} => $_ } @{ $j->{projects}[0]{flags} } };
}

sub report {
    my ($addr, $flag, %o) = @_;
    my %r = (flagName => $flag, message => 'boom', %o);
    my ($st) = keepalive_request(POST => $o{path} // '/ingest/errors',
                          headers => [@auth, 'Content-Type: application/json',
                                      "X-Forwarded-For: $addr"],
                          body => encode_json({ map { $_ => $r{$_} } grep { $_ ne 'path' } keys %r }));
    return $st;
}

ok(wait_for(sub { (status()->{lone}{ramp} // {})->{state} eq 'running' }, 5), 'the ramps run');

# the users on and off for each flag (every flag is asked at once)
my (%on, %off);
for my $i (1 .. 600) {
    my (undef, undef, $b) = keepalive_request(GET => "/flags?userId=u$i", headers => \@auth);
    my $j = decode_json($b);
    for my $f (@{ $j->{flags} }) {
        push @{ ($f->{enabled} ? \%on : \%off)->{$f->{name}} }, "u$i";
    }
}
cmp_ok(scalar @{ $on{lone} }, '>=', 10, 'some users are on at 5 %');

# healthy traffic: every flag evaluated for users of both cohorts
my $turn = 0;
sub traffic {
    for (1 .. 2) {
        my $u = $on{lone}[$turn % @{ $on{lone} }];
        keepalive_request(GET => "/flags?userId=$u", headers => \@auth);
        for my $k (1 .. 6) {
            keepalive_request(GET => "/flags?userId=$off{lone}[($turn * 6 + $k) % @{ $off{lone} }]",
                       headers => \@auth);
        }
        $turn++;
    }
}

# runs $each every ~100 ms for $secs seconds, with traffic
sub run_for {
    my ($secs, $each) = @_;
    my $end = time + $secs;
    my $n = 0;
    while (time < $end) {
        traffic();
        $each->($n++) if $each;
        sleep 0.1;
    }
}


# ------------------------------------------------ one address, the floor
# ten reports a second from one address, no userId, "enabled": true
my $accepted = 0;
run_for(10, sub { $accepted++ if report('10.1.0.1', 'lone', enabled => JSON::PP::true) == 204 });
cmp_ok($accepted, '>=', 60, "one address sent $accepted reports");
my $s = status()->{lone};
is($s->{rolledBack}, JSON::PP::false, 'one address does not roll the ramp back');
is($s->{ramp}{state}, 'running', '... the ramp runs on');
my $ev = $s->{ramp}{evidence};
is($ev->{witnesses}, 1, 'its proof rests on one witness');
is($ev->{errors}{on}, 2, "one witness counts two errors in all ($accepted sent)");
is($ev->{heldForWitnesses}, JSON::PP::false, '... no proof to hold');
is($s->{window}{errors}, $accepted, 'the window counts every report (the absolute rule sees them)');
is($s->{window}{sources}, 1, '... from one source');

# the red team's case: 50 reports without a userId from one address to a
# healthy ramp at 50 %, under min_sources=3 (http level)
my $half = 0;
run_for(5, sub { $half++ if report('10.1.9.9', 'half') == 204 });
$s = status()->{half};
cmp_ok($half, '>=', 40, "one address sent $half reports to a 50 % ramp");
is($s->{rolledBack}, JSON::PP::false, '... and it is not rolled back');
is($s->{ramp}{evidence}{errors}{on}, 2, '... its evidence took two of them');
is($s->{ramp}{evidence}{witnesses}, 1, '... from one witness');

# six more addresses, each for two ticks and more: 14 errors make a proof
# at 5 %, which minSources 8 holds back
for my $a (2 .. 7) {
    run_for(2.5, sub { report("10.1.0.$a", 'lone', enabled => JSON::PP::true) if $_[0] % 3 == 0 });
}
run_for(1.5);
$s = status()->{lone};
$ev = $s->{ramp}{evidence};
is($s->{rolledBack}, JSON::PP::false, 'seven addresses do not roll it back under minSources 8');
is($ev->{witnesses}, 7, '... seven witnesses');
is($ev->{errors}{on}, 14, '... two errors each');
cmp_ok($ev->{ratio}, '>=', 1, "the evidence alone would have decided ($ev->{ratio})");
is($ev->{heldForWitnesses}, JSON::PP::true, '... and the floor holds it');

# the eighth: the floor is met
run_for(3, sub { report("10.1.0.8", 'lone', enabled => JSON::PP::true) if $_[0] % 5 == 0 });
ok(wait_for(sub { status()->{lone}{rolledBack} }, 3), 'the eighth address\'s errors roll it back');
$s = status()->{lone};
is($s->{ramp}{state}, 'rolledBack', '... by the ramp');
is($s->{ramp}{decision}{cause}, 'regression', '... its regression rule');
is($s->{ramp}{evidence}{witnesses}, 8, '... on eight witnesses');
is($s->{rollback}{sources}, 8, '... which its rollback record gives as its sources');
is($s->{ramp}{evidence}{heldForWitnesses}, JSON::PP::false, '... no longer held');

# ------------------------------------------------ the README's recipe
# invented on-cohort users with "enabled": true, as fast as allowed
my %st;
my $k = 0;
for (1 .. 11) {
    $st{ report('10.2.0.1', 'recipe', enabled => JSON::PP::true, userId => $on{recipe}[$k++],
                path => '/recipe/ingest/errors') }++;
}
is($st{204}, 11, 'the recipe lets one address send 11 reports at once');
run_for(12, sub {
    $st{ report('10.2.0.1', 'recipe', enabled => JSON::PP::true,
                userId => $on{recipe}[$k++ % @{ $on{recipe} }],
                path => '/recipe/ingest/errors') }++ if $_[0] % 3 == 0;
});
cmp_ok($st{204}, '<=', 13, "then about one every 10 s ($st{204} accepted)");
cmp_ok($st{429}, '>=', 20, "the rest are refused ($st{429} x 429)");
$s = status()->{recipe};
is($s->{rolledBack}, JSON::PP::false, 'the recipe\'s one address does not roll a 5 % stage back');
is($s->{ramp}{evidence}{witnesses}, 1, '... one witness, whatever the userIds');
is($s->{ramp}{evidence}{errors}{on}, 2, '... two errors in all');

# ------------------------------------------------ a mask does not hide a canary
my @real = @{ $on{canary} }[0 .. 24];
my @calm = @{ $off{canary} }[0 .. 24];
my ($masks, $fails) = (0, 0);
# the mask starts before the canary fails, and goes on while it does
run_for(2, sub {
    $masks++ if report('10.3.0.1', 'canary', enabled => JSON::PP::false) == 204;
    $masks++ if report('10.3.0.1', 'canary', enabled => JSON::PP::false,
                       userId => $calm[$_[0] % 25]) == 204;
});
my $t0 = time;
my $end = $t0 + 20;
while (time < $end && !status()->{canary}{rolledBack}) {
    for my $i (0 .. 24) {
        my ($st) = keepalive_request(GET => "/canary?uid=$real[$i]");
        $fails++ if $st == 500;
        keepalive_request(GET => "/canary?uid=$calm[$i]");
        # the masking client: off-cohort reports, with and without users
        $masks++ if report('10.3.0.1', 'canary', enabled => JSON::PP::false) == 204;
        $masks++ if report('10.3.0.1', 'canary', enabled => JSON::PP::false,
                           userId => $calm[$i]) == 204;
    }
    sleep 0.2;
}
my $took = time - $t0;
$s = status()->{canary};
is($s->{rolledBack}, JSON::PP::true,
   sprintf('the canary failing for 25 users is rolled back in %.1f s despite %d masking reports', $took, $masks));
is($s->{ramp}{decision}{cause}, 'regression', '... by the regression rule');
cmp_ok($masks, '>=', 60, "... the mask was sent ($masks reports)");
cmp_ok($s->{ramp}{evidence}{errors}{off}, '<', $s->{ramp}{evidence}{errors}{on},
       "... the mask counted twice in all ($s->{ramp}{evidence}{errors}{off} off, $s->{ramp}{evidence}{errors}{on} on)");

# ------------------------------------------------ claims that contradict
# 30 addresses claim "enabled": true for users the flag answers off, and
# 4 addresses for users it answers on, within traffic
my $before = status()->{claims}{ramp}{evidence}{errors}{on};
my %claimed;
run_for(2.5, sub {
    return unless $_[0] == 0;
    $claimed{ report("10.4.0.$_", 'claims', enabled => JSON::PP::true, userId => $off{claims}[$_]) }++
        for 1 .. 30;
    $claimed{ report("10.5.0.$_", 'claims', enabled => JSON::PP::true, userId => $on{claims}[$_]) }++
        for 1 .. 4;
});
is($claimed{204}, 34, 'every claim is accepted (204)');
$s = status()->{claims};
is($s->{ramp}{evidence}{errors}{on} - $before, 4, 'only the four claims the server agrees with are witnessed');
is($s->{ramp}{evidence}{errors}{off}, 0, '... and the contradicted ones in no cohort');
is($s->{cohorts}{on}{errors}, 34, 'every report is still counted in its claimed cohort');

# ------------------------------------------------ the backstop
# on users fail (62 of them), off users do not; the regression rule of
# this flag cannot decide in time (alpha 1e-6, dispersion 1000)
my @bon = @{ $on{backstop} }[0 .. 61];
my @boff = @{ $off{backstop} }[0 .. 61];
$t0 = time;
$end = $t0 + 15;
my $i = 0;
while (time < $end && !status()->{backstop}{rolledBack}) {
    keepalive_request(GET => "/backstop?uid=$bon[$i % 62]");
    keepalive_request(GET => "/backstop?uid=$boff[$i % 62]");
    keepalive_request(GET => "/backstop?uid=$boff[($i + 31) % 62]");
    report('10.6.0.1', 'backstop', enabled => JSON::PP::false);
    $i++;
    sleep 0.05 if $i % 10 == 0;
}
$s = status()->{backstop};
is($s->{rolledBack}, JSON::PP::true, "a failure of the on cohort alone is rolled back by the backstop ($i on requests)");
is($s->{rollback}{decidedBy}, 'rule', '... by this host\'s rule');
cmp_ok($s->{rollback}{sources}, '>=', 3, '... from its distinct sources');
cmp_ok($s->{ramp}{evidence}{ratio}, '<', 1, '... where the regression rule had not decided');
is($s->{ramp}{state}, 'rolledBack', '... and the ramp stops');
my $log = read_file("$dir/logs/error.log");
like($log, qr/flags: rolled back flag "backstop" of project "shop": \d+ errors and \d+ enabled evaluations in 60 s from \d+ distinct sources \(min_errors=20 rate=10% min_sources=3; decided by this host's rule, the ramp's backstop: its off cohort does not fail alike\)/,
     'the log says the backstop decided');
unlike($log, qr/\[(alert|crit|emerg)\]/, 'no alert');

nginx_stop($master);
done_testing();
