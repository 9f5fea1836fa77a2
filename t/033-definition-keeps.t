# A definition change never undoes a mitigation (issue 25): the operator's
# case.  A 5 % override set through flags_admin on "risky" (25 % for the
# segment "beta"), a rollback of "cousin" (the same segment) and an
# override on the ramped "manual"; then the segment is edited and nginx
# reloaded.  With two workers, keep-alive clients and a request held open
# on an old worker across the reload: every flag keeps its mitigation, the
# users answered before are answered alike by every worker, flags_status,
# the log and the event ring say what was kept, the state file holds it
# under the new definitions, and only flags_admin clears it.  Then the
# same across a restart: the state file restores the rollback and the
# override onto a definition changed while nginx was stopped.  Last, a
# kept rollback of a ramped flag stops its new ramp until it is cleared.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;
use IO::Socket::INET;

my $dir = prefix_dir('definition-keeps');
my $log = sub { read_file("$dir/logs/error.log") // '' };
my $state_path = "$dir/conf/state/flags-state.json";
mkdir "$dir/conf/state";
my $Users = 200;

sub flags_file {
    my (@plans) = @_;
    my $plans = join ',', map { qq("$_") } @plans;
    return <<"_J_";
{"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": 25, "segments": ["beta"]},
  {"name": "cousin", "enabled": true, "rolloutPercentage": 50, "segments": ["beta"],
   "rollback": {"minErrors": 1, "rate": 0.001, "window": 60}},
  {"name": "plain", "enabled": true, "rolloutPercentage": 30},
  {"name": "manual", "enabled": true, "rolloutPercentage": 0, "segments": ["beta"],
   "ramp": {"stages": [{"percentage": 10, "hold": 3600}, {"percentage": 50, "hold": 3600},
                       {"percentage": 100}]}}
 ],
 "segments": {"beta": {"rules": [{"trait": "plan", "op": "in", "values": [$plans]}]}}}
_J_
}

write_file("$dir/conf/shop.json", flags_file('pro'));
write_file("$dir/conf/nginx.conf", nginx_conf(log_level => 'notice', http => <<'_H_', server => <<'_S_'));
    flags_project shop token=tok_shop file=shop.json;
    flags_state_file state/flags-state.json;
_H_
        keepalive_requests 100000;
        location = /flags { add_header X-Worker $pid; flags_evaluate; }
        location = /ingest/errors { add_header X-Worker $pid; flags_ingest_errors; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_

my $master = nginx_start($dir);
is(scalar(worker_pids($master)), 2, 'two workers');

sub status {
    my (undef, undef, $b) = http_request(GET => '/flags-status');
    return eval { decode_json($b) } // {};
}

sub flag_status {
    my ($name) = @_;
    my ($f) = grep { $_->{name} eq $name } @{ status()->{projects}[0]{flags} // [] };
    return $f // {};
}

sub admin {
    my ($method, $path, $body) = @_;
    my ($st) = http_request($method, "/flags-admin/$path", body => $body // '',
                            headers => ['Content-Type: application/json']);
    return $st;
}

# The users u1 .. u$Users of plan $plan that flag $name is on for, asked on
# the keep-alive connection $s (one worker), as "u1 u7 ...": one GET each.
sub on_users {
    my ($s, $name, $plan) = @_;
    my @on;
    for my $i (1 .. $Users) {
        my ($st, $body) = worker_request($s, GET => "/flags?userId=u$i&trait_plan=$plan");
        die "GET /flags: $st" unless $st == 200;
        push @on, "u$i" if $body =~ /"name":"\Q$name\E","enabled":true,/;
    }
    return join ' ', @on;
}

sub one_answer {
    my ($s, $name, $user, $plan) = @_;
    my ($st, $body) = worker_request($s, GET => "/flags?userId=$user&trait_plan=$plan");
    my ($f) = $body =~ /(\{"name":"\Q$name\E","enabled":(?:true|false),"rolloutPercentage":[\d.]+)/;
    return $f // "status $st";
}

# A reload: done when two new workers run and no old one accepts any more.
sub is_exiting {
    my ($pid) = @_;
    return (read_file("/proc/$pid/cmdline") // '') =~ /shutting down/
        || $log->() =~ /\b$pid#\d+: gracefully shutting down/;
}
sub reload {
    my @old = worker_pids($master);
    my $n = () = $log->() =~ /reconfiguring/g;
    nginx_signal($master, 'HUP');
    wait_for(sub { (() = $log->() =~ /reconfiguring/g) > $n }, 10) or die 'no reload';
    wait_for(sub {
        my %old = map { $_ => 1 } @old;
        my @w = worker_pids($master);
        return (grep { !$old{$_} } @w) >= 2 && !grep { $old{$_} && !is_exiting($_) } @w;
    }, 10) or die 'no new workers';
    return @old;
}

# --- the mitigations ------------------------------------------------------------
my $ka = worker_connections('/flags?userId=u1');
my @w = sort keys %$ka;
is(scalar @w, 2, 'a keep-alive connection on each worker');
my $s25 = on_users($ka->{ $w[0] }, 'risky', 'pro');
is(on_users($ka->{ $w[1] }, 'risky', 'pro'), $s25, 'both workers answer risky for the same users');
my $n25 = () = $s25 =~ /u/g;
cmp_ok($n25, '>', 25, "risky at 25 %: $n25 of $Users pro users");

is(admin(PUT => 'overrides/shop/risky', '{"rolloutPercentage": 5}'), 204, 'the mitigation: risky overridden to 5 %');
my $s5 = on_users($ka->{ $w[0] }, 'risky', 'pro');
is(on_users($ka->{ $w[1] }, 'risky', 'pro'), $s5, 'both workers answer the 5 % alike');
my $n5 = () = $s5 =~ /u/g;
ok($n5 > 0 && $n5 < $n25 / 2, "at 5 %: $n5 users");
my %in25 = map { $_ => 1 } split ' ', $s25;
ok(!grep({ !$in25{$_} } split ' ', $s5), '... all of them among the 25 %');
my %in5 = map { $_ => 1 } split ' ', $s5;
my ($out) = grep { !$in5{$_} } split ' ', $s25;     # on at 25 %, off at 5 %
my ($in) = split ' ', $s5;

my ($st) = worker_request($ka->{ $w[0] }, POST => '/ingest/errors', '{"flagName":"cousin","message":"m"}');
is($st, 204, 'a report of cousin');
like(one_answer($ka->{ $w[1] }, 'cousin', 'u1', 'pro'), qr/"enabled":false,"rolloutPercentage":0$/,
     'cousin (the same segment) is rolled back');
my $cousin_at = flag_status('cousin')->{rollback}{at};
ok($cousin_at, "its record: at $cousin_at");

ok(wait_for(sub { (flag_status('manual')->{ramp}{state} // '') eq 'running' }, 5), 'manual\'s ramp runs');
is(admin(PUT => 'ramps/shop/manual', '{"action":"advance"}'), 204, '... advanced to 50 %');
is(admin(PUT => 'overrides/shop/manual', '{"enabled": false}'), 204, '... and manual switched off by an override');
my $manual_started = flag_status('manual')->{ramp}{startedAt};
ok($manual_started, 'its ramp started');
is(flag_status('manual')->{ramp}{stage}, 1, '... at stage 1');

my $plain_before = flag_status('plain');
my $etag = (http_request(GET => '/flags?userId=u1&trait_plan=pro', headers => ['Authorization: Bearer tok_shop']))[1]{etag};
ok($etag, "an ETag before the reload: $etag");

# a request of an old worker held open across the reload: its headers are
# not all sent yet
my $held = raw_connect();
$held->autoflush(1);
print $held "GET /flags?userId=$out&trait_plan=pro HTTP/1.1\r\nHost: localhost\r\n";
sleep 0.3;

# --- the segment is edited, nginx reloaded -----------------------------------------
write_file("$dir/conf/shop.json", flags_file('pro', 'enterprise'));
my @old = reload();

print $held "Authorization: Bearer tok_shop\r\nConnection: close\r\n\r\n";
my $held_resp = do { local $/; <$held> } // '';
close $held;
my ($held_pid) = $held_resp =~ /^X-Worker: (\d+)/mi;
ok($held_pid && grep({ $_ == $held_pid } @old), 'the held request was answered by an old worker');
like($held_resp, qr/"name":"risky","enabled":false,/, "... which kept the mitigation for $out (off at 5 %)");

my $risky = flag_status('risky');
is($risky->{rolloutPercentage}, 25, 'risky: the new definition, at 25 %');
is($risky->{effectiveRolloutPercentage}, 5, '... still served at 5 %');
is_deeply($risky->{override}, { rolloutPercentage => 5 }, '... its override kept');
is($risky->{rolledBack}, JSON::PP::false, '... not rolled back');

my $cousin = flag_status('cousin');
is($cousin->{rolledBack}, JSON::PP::true, 'cousin (the same segment): its rollback kept');
is($cousin->{effectiveRolloutPercentage}, 0, '... served at 0 %');
is($cousin->{rollback}{at}, $cousin_at, '... with the record decided before the reload');
is($cousin->{rollback}{decidedBy}, 'rule', '... by the rule');
is($cousin->{counters}{errors}, 1, '... its lifetime counters kept');
is($cousin->{window}{errors}, 0, '... its window fresh');

my $manual = flag_status('manual');
is_deeply($manual->{override}, { enabled => JSON::PP::false }, 'manual: its override kept');
is($manual->{effectiveRolloutPercentage}, 0, '... served at 0 %');
ok(wait_for(sub { my $r = flag_status('manual')->{ramp};
                 $r && $r->{startedAt} && $r->{startedAt} ne $manual_started }, 5),
   '... its ramp started again (a new definition)');
is(flag_status('manual')->{ramp}{stage}, 0, '... at stage 0');

is_deeply(flag_status('plain')->{definedAt}, $plain_before->{definedAt}, 'plain, unchanged, keeps its definition');

$ka = worker_connections('/flags?userId=u1');
@w = sort keys %$ka;
is(scalar @w, 2, 'keep-alive connections on the two new workers');
ok(!grep({ my $n = $_; grep { $_ == $n } @old } @w), '... none of them old');
for my $k (0, 1) {
    is(on_users($ka->{ $w[$k] }, 'risky', 'pro'), $s5, "new worker $k: risky on for the same pro users as before the reload");
    is(on_users($ka->{ $w[$k] }, 'risky', 'enterprise'), $s5, "new worker $k: the new definition: enterprise users too, at 5 %");
    is(on_users($ka->{ $w[$k] }, 'cousin', 'pro'), '', "new worker $k: cousin off for every user");
    is(on_users($ka->{ $w[$k] }, 'manual', 'enterprise'), '', "new worker $k: manual off for every user");
}

like($log->(), qr/\[notice\] [^\n]*flags: flag "risky" of project "shop" has a new definition: its override \(rolloutPercentage 5\) is kept/,
     'the log: risky\'s override kept, with its value, at notice');
like($log->(), qr/\[notice\] [^\n]*flags: flag "cousin" of project "shop" has a new definition: its rollback is kept/,
     'the log: cousin\'s rollback kept');
like($log->(), qr/\[notice\] [^\n]*flags: flag "manual" of project "shop" has a new definition: its override \(enabled false\) is kept/,
     'the log: manual\'s override kept');
unlike($log->(), qr/flag "plain" of project "shop" has a new definition/, 'nothing for plain');
unlike($log->(), qr/were cleared|\[error\] [^\n]*new definition|\[(?:alert|crit)\]/, 'nothing cleared, no error about it');

my %ev = map { ($_->{flag} // '') => $_ } grep { $_->{kind} eq 'definition' } @{ status()->{events} // [] };
is($ev{risky}{detail}, 'a new definition: its override (rolloutPercentage 5) is kept', 'the event ring says it for risky');
is($ev{cousin}{detail}, 'a new definition: its rollback is kept', '... for cousin');
is($ev{risky}{by}, 'definition', '... made by a definition');

my ($st2, $h2) = http_request(GET => '/flags?userId=u1&trait_plan=pro',
                              headers => ['Authorization: Bearer tok_shop', "If-None-Match: $etag"]);
is($st2, 200, 'the ETag of before the reload no longer matches');
isnt($h2->{etag}, $etag, '... a new one');

my $state = read_file($state_path) // '';
like($state, qr/"flag":"risky","definitionHash":"[0-9a-f]+","rollback":null,"override":\{"rolloutPercentage":5\}/,
     'the state file holds risky\'s override');
like($state, qr/"flag":"cousin","definitionHash":"[0-9a-f]+","rollback":\{"at":\d+,"errors":1,/, '... and cousin\'s rollback');

# --- only flags_admin clears them ---------------------------------------------------
is(admin(DELETE => 'overrides/shop/risky'), 204, 'flags_admin removes risky\'s override');
is(admin(DELETE => 'rollbacks/shop/cousin'), 204, '... and clears cousin\'s rollback');
is(admin(DELETE => 'overrides/shop/manual'), 204, '... and removes manual\'s override');
for my $k (0, 1) {
    is(on_users($ka->{ $w[$k] }, 'risky', 'pro'), $s25, "worker $k: risky back at 25 % for the same users");
}
my $cousin_on = () = on_users($ka->{ $w[0] }, 'cousin', 'pro') =~ /u/g;
cmp_ok($cousin_on, '>', 50, "cousin on again ($cousin_on of $Users at 50 %)");
is(flag_status('manual')->{effectiveRolloutPercentage}, 10, 'manual serves its new ramp\'s stage 0 (10 %), not the old 50 %');
$state = read_file($state_path) // '';
unlike($state, qr/"flag":"(?:risky|cousin)"/, 'the state file holds neither any more');

# --- a restart: the state file restores onto a changed definition ------------------
is(admin(PUT => 'overrides/shop/risky', '{"rolloutPercentage": 5}'), 204, 'risky overridden to 5 % again');
($st) = worker_request($ka->{ $w[0] }, POST => '/ingest/errors', '{"flagName":"cousin","message":"m"}');
is($st, 204, 'cousin reported again');
ok(wait_for(sub { (read_file($state_path) // '') =~ /"flag":"cousin","definitionHash":"[0-9a-f]+","rollback":\{/ }, 5),
   'the state file holds the rollback');
$cousin_at = flag_status('cousin')->{rollback}{at};
close $_ for values %$ka;
nginx_stop($master);
write_file("$dir/conf/shop.json", flags_file('pro'));
$master = nginx_start($dir);

$risky = flag_status('risky');
is_deeply($risky->{override}, { rolloutPercentage => 5 }, 'after the restart: risky\'s override restored onto its changed definition');
is($risky->{effectiveRolloutPercentage}, 5, '... served at 5 %');
$cousin = flag_status('cousin');
is($cousin->{rolledBack}, JSON::PP::true, 'cousin\'s rollback restored onto its changed definition');
is($cousin->{rollback}{at}, $cousin_at, '... its record whole');
$ka = worker_connections('/flags?userId=u1');
@w = sort keys %$ka;
for my $k (0, 1) {
    is(on_users($ka->{ $w[$k] }, 'risky', 'pro'), $s5, "worker $k after the restart: risky on for the 5 % users");
    is(on_users($ka->{ $w[$k] }, 'risky', 'enterprise'), '', "worker $k: the definition of the file (pro only)");
}
like($log->(), qr/\[notice\] [^\n]*flags: flag "risky" of project "shop" has a new definition since the state file was written: its override \(rolloutPercentage 5\) is restored onto it/,
     'the restore names risky and its override');
like($log->(), qr/\[notice\] [^\n]*flags: flag "cousin" of project "shop" has a new definition since the state file was written: its rollback is restored onto it/,
     '... and cousin and its rollback');
like($log->(), qr/state file "[^"]+": restored 1 rollbacks and 1 overrides \(and 0 ramps\), those of 2 flags onto a changed definition; skipped 0 entries of removed flags/,
     'the counts: two flags restored onto a changed definition');
is(admin(DELETE => 'overrides/shop/risky'), 204, 'flags_admin removes the override');
is(admin(DELETE => 'rollbacks/shop/cousin'), 204, '... and clears the rollback');
is(on_users($ka->{ $w[1] }, 'risky', 'pro'), $s25, 'risky back at 25 %');

# --- a kept rollback stops the new definition's ramp ------------------------------
is(admin(PUT => 'overrides/shop/manual', '{"enabled": false}'), 204, 'manual overridden off');
ok(wait_for(sub { (read_file($state_path) // '') =~ /"flag":"manual","definitionHash":"[0-9a-f]+","rollback":null/ }, 5),
   '... in the state file');
close $_ for values %$ka;
nginx_stop($master);
# while nginx is stopped, a rollback record of manual (as an older version
# wrote them) under the same definition
my $file = read_file($state_path);
$file =~ s/("flag":"manual","definitionHash":"[0-9a-f]+","rollback":)null/$1\{"at":1795000000000,"errors":3,"enabledEvaluations":9\}/
    or die 'no entry of manual';
write_file($state_path, $file);
$master = nginx_start($dir);
$manual = flag_status('manual');
is($manual->{rolledBack}, JSON::PP::true, 'manual rolled back from the state file');
my $manual_at = $manual->{rollback}{at};
write_file("$dir/conf/shop.json", flags_file('pro', 'enterprise'));
reload();
$manual = flag_status('manual');
is($manual->{rolledBack}, JSON::PP::true, 'a new definition keeps the rollback of a ramped flag');
is($manual->{rollback}{at}, $manual_at, '... its record');
is_deeply($manual->{override}, { enabled => JSON::PP::false }, '... and its override');
is($manual->{ramp}{state}, 'rolledBack', 'the new ramp is rolled back at once');
is($manual->{ramp}{startedAt}, undef, '... before it started');
is($manual->{ramp}{decision}{cause}, 'otherRollback', '... by the kept rollback');
like($log->(), qr/\[notice\] [^\n]*flags: flag "manual" of project "shop" has a new definition: its rollback and its override \(enabled false\) are kept/,
     'the log names both');
is(admin(DELETE => 'rollbacks/shop/manual'), 204, 'flags_admin clears the rollback');
ok(wait_for(sub { my $r = flag_status('manual')->{ramp}; $r && $r->{state} eq 'running' && $r->{startedAt} }, 5),
   '... and the new ramp starts');
is(flag_status('manual')->{ramp}{stage}, 0, '... at stage 0');
is(admin(DELETE => 'overrides/shop/manual'), 204, 'flags_admin removes the override');
is(flag_status('manual')->{effectiveRolloutPercentage}, 10, 'manual serves its new ramp\'s first stage');

unlike($log->(), qr/\[(?:alert|crit|emerg)\]/, 'no alert, crit or emerg');
nginx_stop($master);
done_testing();
