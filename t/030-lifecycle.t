# State across the life of nginx: every worker sees a rollback, HUP keeps
# state, a changed definition keeps it (at a reload and at a restart), the
# state file brings rollbacks and overrides back after a restart, a corrupt state file is ignored, USR1
# reopens the report log, a changed zone size is logged.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;

my $dir = prefix_dir('lifecycle');

my $flags_v1 = <<'_J_';
{"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 50, "window": 60}},
  {"name": "tuned", "enabled": true, "rolloutPercentage": 100},
  {"name": "steady", "enabled": true, "rolloutPercentage": 100}
]}
_J_

(my $flags_v2 = $flags_v1) =~ s/"rolloutPercentage": 100,\n   "rollback"/"rolloutPercentage": 90,\n   "rollback"/;

sub conf {
    my (%o) = @_;
    my $zone = $o{zone} ? "flags_zone $o{zone};\n" : '';
    write_file("$dir/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    $zone
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log logs/reports.log;
    flags_state_file state/flags-state.json;
_H_
        location = /flags { add_header X-Worker $pid; flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_
}

sub evaluate {
    my ($st, $h, $body) = http_request(GET => '/flags?userId=u1',
                                       headers => ['Authorization: Bearer tok_1']);
    return ($st, $h->{'x-worker'}, $body);
}

sub report {
    my ($flag, $msg) = @_;
    my ($st) = http_request(POST => '/ingest/errors', body => qq({"flagName":"$flag","message":"$msg"}),
                            headers => ['Authorization: Bearer tok_1', 'Content-Type: application/json']);
    return $st;
}

sub risky_state {
    my (undef, undef, $body) = evaluate();
    return $body =~ /"name":"risky","enabled":(true|false),"rolloutPercentage":([\d.]+)/
        ? "$1/$2" : "?";
}

my $log = sub { read_file("$dir/logs/error.log") // '' };

write_file("$dir/conf/shop.json", $flags_v1);
mkdir "$dir/conf/state";
conf();
my $master = nginx_start($dir);
my @workers = worker_pids($master);
is(scalar @workers, 2, 'two workers');

# --- a rollback is seen by every worker -------------------------------------
is(risky_state(), 'true/100', 'risky starts enabled');
is(report('risky', "e$_"), 204, "report $_") for 1 .. 3;
my %seen;
for (1 .. 40) {
    my ($st, $worker, $body) = evaluate();
    $seen{$worker}{ $body =~ /"name":"risky","enabled":false,"rolloutPercentage":0,/ ? 'off' : 'on' }++;
}
is(scalar keys %seen, 2, 'both workers answered') or diag explain \%seen;
for my $w (sort keys %seen) {
    is_deeply([sort keys %{ $seen{$w} }], ['off'], "worker $w sees the rollback");
}
like($log->(), qr/\[error\].*flags: rolled back flag "risky" of project "shop": 3 errors and 1 enabled evaluations in 60 s from 1 distinct sources \(min_errors=3 rate=50% min_sources=1; decided by this host\x27s rule\)/,
     'the rollback line, at error by default, names the project, the flag and the counts');
# a rollback's write goes to a thread pool: the report does not wait for it
ok(wait_for(sub { (read_file("$dir/conf/state/flags-state.json") // '') =~ /"project":"shop","flag":"risky"/ }, 5),
   'the state file holds the rollback');

# --- override on another flag, kept in the state file -----------------------
my ($st) = http_request(PUT => '/flags-admin/overrides/shop/tuned', body => '{"rolloutPercentage": 12.5}');
is($st, 204, 'override set');
like($log->(), qr/\[notice\] [^\n]*flags: override set for flag "tuned" of project "shop"/,
     'the override is routine: logged at notice by default');
unlike($log->(), qr/\[error\] [^\n]*flags: override set/, '... not at error');
like(read_file("$dir/conf/state/flags-state.json"), qr/"flag":"tuned".*"rolloutPercentage":12\.5/s,
     'the state file holds the override');

# --- HUP with the same definitions keeps everything --------------------------
nginx_signal($master, 'HUP');
ok(wait_for(sub { my @w = worker_pids($master); @w == 2 && !grep { my $o = $_; grep { $_ == $o } @workers } @w }, 10),
   'new workers after HUP');
is(risky_state(), 'false/0', 'rollback survives the reload');
my (undef, undef, $status) = http_request(GET => '/flags-status');
like($status, qr/"name":"tuned","enabled":true,"rolloutPercentage":100,"segments":\[\],"effectiveRolloutPercentage":12\.5,"rolledBack":false,"override":\{"rolloutPercentage":12\.5\}/,
     'override survives the reload');
like($status, qr/"name":"risky".*?"counters":\{"evaluations":42,"enabledEvaluations":1,"errors":3\}/,
     'lifetime counters survive the reload');

# --- USR1 reopens the report log ---------------------------------------------
rename "$dir/logs/reports.log", "$dir/logs/reports.log.1";
is(report('steady', 'before reopen'), 204, 'report into the renamed file');
nginx_signal($master, 'USR1');
ok(wait_for(sub { -e "$dir/logs/reports.log" }, 5), 'USR1 created a new report log');
sleep 0.3;
is(report('steady', 'after reopen'), 204, 'report after reopen');
like(read_file("$dir/logs/reports.log.1"), qr/"message":"before reopen"/, 'old file has the earlier line');
like(read_file("$dir/logs/reports.log"), qr/"message":"after reopen"\}\n\z/, 'new file has the later line');
my @lines = split /\n/, read_file("$dir/logs/reports.log.1") . read_file("$dir/logs/reports.log");
is(scalar @lines, 5, 'five accepted reports, five lines');

# --- restart: the state file restores rollback and override -----------------
nginx_stop($master);
$master = nginx_start($dir);
is(risky_state(), 'false/0', 'rollback restored after a restart');
(undef, undef, $status) = http_request(GET => '/flags-status');
like($status, qr/"name":"tuned",.*?"override":\{"rolloutPercentage":12\.5\}/, 'override restored after a restart');
like($status, qr/"name":"risky",.*?"counters":\{"evaluations":1,"enabledEvaluations":0,"errors":0\}.*?"rollback":\{"at":"20\d\d-[^"]+Z","errors":3,"enabledEvaluations":1,"sources":1,"decidedBy":"rule"\}/,
     'rollback record restored, counters fresh');
like($log->(), qr/state file .*restored 1 rollbacks and 1 overrides/, 'restore is logged');

# --- a changed definition keeps the rollback and the override at reload ----
write_file("$dir/conf/shop.json", $flags_v2);
nginx_signal($master, 'HUP');
ok(wait_for(sub { $log->() =~ /flags: flag "risky" of project "shop" has a new definition: its rollback is kept/ }, 10),
   'changed definition: the reload says the rollback is kept');
ok(wait_for(sub { (http_request(GET => '/flags-status'))[2] =~ /"name":"risky","enabled":true,"rolloutPercentage":90,/ }, 10),
   'the new workers answer');
(undef, undef, $status) = http_request(GET => '/flags-status');
like($status, qr/"name":"risky","enabled":true,"rolloutPercentage":90,"segments":\[\],"effectiveRolloutPercentage":0,"rolledBack":true,/,
     'changed definition: rollback kept at reload (issue 25)');
is(risky_state(), 'false/0', '... and served');
like($status, qr/"name":"tuned",.*?"override":\{"rolloutPercentage":12\.5\}/, 'unchanged flag keeps its override');
my ($st2) = http_request(DELETE => '/flags-admin/rollbacks/shop/risky');
is($st2, 204, 'flags_admin clears it');
is(risky_state(), 'true/90', '... and the new definition answers');

# --- changed definition while stopped: restored onto it at start ------------
is(report('risky', "again$_"), 204, "report $_ on v2") for 1 .. 3;
is(risky_state(), 'false/0', 'v2 rolled back');
nginx_stop($master);
write_file("$dir/conf/shop.json", $flags_v1);
$master = nginx_start($dir);
is(risky_state(), 'false/0', 'definition changed while stopped: rollback restored onto it (issue 25)');
like($log->(), qr/\[notice\] [^\n]*flags: flag "risky" of project "shop" has a new definition since the state file was written: its rollback is restored onto it/,
     'the restore names the flag and what it kept');
like($log->(), qr/state file .*restored 1 rollbacks and 1 overrides \(and 0 ramps\), those of 1 flags onto a changed definition; skipped 0 entries of removed flags/,
     'the counts say one flag had a changed definition');
is((http_request(DELETE => '/flags-admin/rollbacks/shop/risky'))[0], 204, 'flags_admin clears it');
is(risky_state(), 'true/100', '... and v1 answers again');

# --- a corrupt state file is logged and ignored -------------------------------
nginx_stop($master);
write_file("$dir/conf/state/flags-state.json", '{"version":1,"flags":[{"project":');
$master = nginx_start($dir);
is(risky_state(), 'true/100', 'corrupt state file: nginx starts with clean state');
like($log->(), qr/\[warn\].*flags: ignoring state file ".*flags-state\.json": /, 'corrupt state file is logged');

# --- a changed zone size resets counters and says so --------------------------
conf(zone => 'flags:4m');
nginx_signal($master, 'HUP');
ok(wait_for(sub { $log->() =~ /flags: zone "flags" changed size: counters were reset, rollbacks and overrides come from the state file/ }, 10),
   'zone size change is logged');

unlike($log->(), qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg in the error log');
unlike($log->(), qr/tok_1/, 'the token never appears in the error log');

nginx_stop($master);
done_testing();
