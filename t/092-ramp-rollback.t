# A ramped flag's rollback and its clearing move the ramp at once
# (docs/ramps.md, "What stops a ramp"), whichever worker answers next and
# however soon: two workers, one keep-alive connection on each, the admin
# calls back to back with no pause between them, five rounds.
#
#   a report that trips the absolute rule on one worker, then at once on
#   the other an "advance": 409, the flag is rolled back, the stage stays;
#   DELETE the rollback on one worker, then at once on the other the
#   status says paused (and the stage's percentage is served), and
#   "resume" answers 204: running, fresh evidence, no decision.
#
# Before the fix the ramp followed its flag only at its next step (twice a
# second), so these admin calls found the ramp of the moment before.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;
use IO::Socket::INET;

my $dir = prefix_dir('ramp-rollback');

# no evaluation is ever asked for, so the stage never counts an off
# evaluation and the absolute rule guards the flag (docs/ramps.md)
write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "search-v2", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 5, "hold": 3600}, {"percentage": 50, "hold": 3600},
                       {"percentage": 100}],
            "regression": {"tick": 1}}}
 ]}
_J_
mkdir "$dir/state";

write_file("$dir/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_', log_level => 'error'));
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_error_log off;
    flags_state_file $dir/state/flags-state.json;
    flags_rollback min_errors=3 rate=10% window=60s;
    keepalive_requests 10000;
_H_
        location = /ingest/errors {
            flags_ingest_errors;
            add_header X-Worker $pid always;
        }
        location = /status {
            flags_status;
            add_header X-Worker $pid always;
        }
        location /admin/ {
            flags_admin;
            add_header X-Worker $pid always;
            allow 127.0.0.1;
            deny all;
        }
_S_

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'the configuration is valid') or diag($out);
my $master = nginx_start($dir);


my %by_worker = %{ worker_connections('/status', 60) };
my ($A, $B) = map { $by_worker{$_} } sort keys %by_worker;
ok($A && $B, 'a keep-alive connection on each of the two workers') or BAIL_OUT('one worker only');

sub flag_status {
    my ($s) = @_;
    my ($st, $b) = worker_request($s, 'GET', '/status');
    return decode_json($b)->{projects}[0]{flags}[0];
}
sub report {
    my ($s) = @_;
    my ($st) = worker_request($s, 'POST', '/ingest/errors', '{"flagName":"search-v2","message":"m"}');
    return $st;
}
sub act {
    my ($s, $action) = @_;
    return worker_request($s, 'PUT', '/admin/ramps/shop/search-v2', qq({"action":"$action"}));
}

ok(wait_for(sub { (flag_status($A)->{ramp} // {})->{state} eq 'running' }, 5), 'the ramp runs');
my ($st, $body) = act($A, 'advance');
is($st, 204, 'advance to 50 %');
is(flag_status($B)->{ramp}{stage}, 1, '... stage 1');

for my $round (1 .. 5) {
    # three reports trip the absolute rule; the last one's answer means
    # the flag is rolled back, so the very next call must see it so
    is(report($A), 204, "round $round: a report") for 1 .. 2;
    is(report($B), 204, "round $round: the report that trips the rule");
    ($st, $body) = act($A, 'advance');
    is($st, 409, "round $round: advance right after the rollback: 409");
    is_deeply(eval { decode_json($body) } // $body, {error => 'ramp_conflict',
              message => 'the flag is rolled back: clear the rollback, or restart the ramp'},
              "round $round: ... ramp_conflict, the flag is rolled back");
    my $f = flag_status($B);
    is($f->{rolledBack}, JSON::PP::true, "round $round: the flag is rolled back");
    is($f->{ramp}{state}, 'rolledBack', "round $round: the ramp says rolledBack");
    is($f->{ramp}{stage}, 1, "round $round: the advance changed no stage");
    is($f->{ramp}{decision}{cause}, 'otherRollback', "round $round: decided by another rule");
    is($f->{effectiveRolloutPercentage}, 0, "round $round: 0 % served");

    # the operator clears it and resumes at once, on the other worker
    ($st) = worker_request($B, 'DELETE', '/admin/rollbacks/shop/search-v2');
    is($st, 204, "round $round: DELETE the rollback: 204");
    $f = flag_status($A);
    is($f->{rolledBack}, JSON::PP::false, "round $round: cleared");
    is($f->{ramp}{state}, 'paused', "round $round: the ramp is paused at once");
    is($f->{ramp}{waitingFor}{resume}, JSON::PP::true, "round $round: ... waiting for resume");
    is($f->{effectiveRolloutPercentage}, 50, "round $round: the stage's 50 % is served again");
    ($st, $body) = act($A, 'resume');
    is($st, 204, "round $round: resume right after the DELETE: 204") or diag($body);
    $f = flag_status($B);
    is($f->{ramp}{state}, 'running', "round $round: running");
    is($f->{ramp}{decision}, undef, "round $round: no decision");
    cmp_ok($f->{ramp}{evidence}{ticks}, '<=', 1, "round $round: fresh evidence");
    is($f->{ramp}{stage}, 1, "round $round: at its stage");
}

# the reverse of a resume that came too early: a pause right after the
# DELETE is no conflict either
is(report($A), 204, 'a report') for 1 .. 3;
($st) = worker_request($A, 'DELETE', '/admin/rollbacks/shop/search-v2');
is($st, 204, 'DELETE the rollback');
($st) = act($B, 'pause');
is($st, 204, 'pause right after: 204 and nothing changes (it is paused)');
($st) = act($B, 'resume');
is($st, 204, 'resume: 204');

my $log = read_file("$dir/logs/error.log");
unlike($log, qr/\[(alert|crit|emerg)\]/, 'no alert in the log');

close $A;
close $B;
nginx_stop($master);
done_testing();
