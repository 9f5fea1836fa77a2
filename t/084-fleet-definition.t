# flags_sync and a new definition (issue 25): the fleet keeps a flag's
# rollback and override under its definition hash ("rb:<def>:<flag>",
# "ov:<def>:<flag>", docs/sync.md).  Two nginx hosts (2 workers each) and
# a real redis-server: an override and a rollback reach both hosts; host
# h0 reloads with new definitions and keeps both, round after round (the
# fleet's empty record of the new definition does not clear them: the
# host publishes what it kept), while h1, still on the old definitions,
# keeps its own; h1 reloads too and keeps both; then flags_admin on h0
# removes the override and clears the rollback, and h1 follows through
# the fleet under the new definitions.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP ();
use Time::HiRes qw(sleep);

my $redis_bin = `command -v redis-server 2>/dev/null`;
my $cli_bin = `command -v redis-cli 2>/dev/null`;
chomp($redis_bin, $cli_bin);
plan skip_all => 'redis-server or redis-cli is not installed'
    unless $redis_bin && $cli_bin;

my $rport = unused_port();
my $rdir = prefix_dir('fleet-definition-redis');
my @port = map { unused_port() } 0 .. 1;
my @dir = map { prefix_dir("fleet-definition-$_") } 0 .. 1;
my @pid;

my $redis = spawn("$rdir/logs/redis.log", $redis_bin, '--port', $rport,
                  '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
                  '--daemonize', 'no', '--dir', $rdir);
wait_port($rport) or die "redis-server did not listen on $rport\n";
END { local $?; reap($redis) }

sub cli {
    my (@args) = @_;
    open my $fh, '-|', $cli_bin, '-p', $rport, '-n', 3, @args or die "redis-cli: $!";
    local $/;
    my $out = <$fh> // '';
    close $fh;
    $out =~ s/\s+\z//;
    return $out;
}

sub shop {
    my ($risky, $cousin) = @_;
    return <<"_J_";
{"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": $risky},
  {"name": "cousin", "enabled": true, "rolloutPercentage": $cousin,
   "rollback": {"minErrors": 1, "rate": 0.001, "window": 60}},
  {"name": "calm", "enabled": true, "rolloutPercentage": 100}
]}
_J_
}

for my $i (0, 1) {
    local $FlagsTest::Port = $port[$i];
    write_file("$dir[$i]/conf/shop.json", shop(25, 50));
    write_file("$dir[$i]/conf/nginx.conf", nginx_conf(log_level => 'notice', http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_sync redis://127.0.0.1:$rport/3 interval=200ms prefix=t084: host=h$i;
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_
    push @pid, nginx_start($dir[$i]);
}

sub flag { host_flag($port[$_[0]], $_[1]) // {} }
sub admin {
    my ($i, $method, $path, $body) = @_;
    my ($st) = host_request($port[$i], $method, "/flags-admin/$path", body => $body // '',
                            headers => ['Content-Type: application/json']);
    return $st;
}
sub override_of { my $o = flag(@_)->{override}; $o ? JSON::PP::encode_json($o) : 'null' }
sub rolled { flag(@_)->{rolledBack} ? 1 : 0 }
sub logged { (read_file("$dir[$_[0]]/logs/error.log") // '') =~ $_[1] }

sub reload {
    my ($i) = @_;
    my @old = worker_pids($pid[$i]);
    write_file("$dir[$i]/conf/shop.json", shop(30, 60));
    nginx_signal($pid[$i], 'HUP');
    ok(wait_for(sub { my %o = map { $_ => 1 } @old; !grep { $o{$_} } worker_pids($pid[$i]) }, 10),
       "h$i reloaded: its old workers are gone");
    ok(wait_for(sub { (flag($i, 'risky')->{rolloutPercentage} // 0) == 30 }, 5), "h$i serves the new definitions");
}

# the fleet's fields of a flag, as "kind:def" (the definition's 16 hex digits)
sub fields {
    my ($flag) = @_;
    my @f = sort grep { /^(?:rb|ov):[0-9a-f]{16}:\Q$flag\E$/ } split /\n/, cli('HKEYS', 't084:{shop}:ctl');
    return @f;
}

# --- the mitigations reach the fleet ---------------------------------------------
is(admin(0, PUT => 'overrides/shop/risky', '{"rolloutPercentage": 5}'), 204, 'h0: risky overridden to 5 %');
my ($st) = host_request($port[0], POST => '/ingest/errors', body => '{"flagName":"cousin","message":"m"}',
                        headers => ['Authorization: Bearer tok_1', 'Content-Type: application/json']);
is($st, 204, 'h0: a report of cousin');
ok(wait_for(sub { override_of(1, 'risky') eq '{"rolloutPercentage":5}' }, 5), 'h1 has the override from the fleet');
ok(wait_for(sub { rolled(1, 'cousin') }, 5), 'h1 has the rollback from the fleet');
my @old_risky = fields('risky');
my @old_cousin = fields('cousin');
is(scalar @old_risky, 1, 'the fleet holds one override of risky: ' . join ' ', @old_risky);
is(scalar @old_cousin, 1, '... one rollback of cousin: ' . join ' ', @old_cousin);

# --- h0 reloads with new definitions -------------------------------------------------
reload(0);
ok(logged(0, qr/\[notice\] [^\n]*flags: flag "risky" of project "shop" has a new definition: its override \(rolloutPercentage 5\) is kept/),
   'h0 logs the kept override');
ok(wait_for(sub { fields('risky') == 2 && fields('cousin') == 2 }, 5),
   'h0 published what it kept under the new definitions');
my ($new_risky) = grep { $_ ne $old_risky[0] } fields('risky');
like($new_risky // '', qr/^ov:/, "... the override: $new_risky");
sleep 1;        # five rounds
is(override_of(0, 'risky'), '{"rolloutPercentage":5}', 'h0 keeps the override, rounds after the reload');
is(flag(0, 'risky')->{effectiveRolloutPercentage}, 5, '... served at 5 %');
is(rolled(0, 'cousin'), 1, 'h0 keeps the rollback');
is(override_of(1, 'risky'), '{"rolloutPercentage":5}', 'h1, on the old definitions, keeps the override');
is(rolled(1, 'cousin'), 1, '... and the rollback');

# --- h1 reloads too --------------------------------------------------------------------
reload(1);
sleep 1;
is(override_of(1, 'risky'), '{"rolloutPercentage":5}', 'h1 keeps the override on the new definition');
is(rolled(1, 'cousin'), 1, '... and the rollback');
is(scalar(fields('risky')), 2, 'the fleet still holds one override a definition');

# --- flags_admin clears them, the fleet follows on the new definitions ----------------
is(admin(0, DELETE => 'overrides/shop/risky'), 204, 'h0: flags_admin removes the override');
is(admin(0, DELETE => 'rollbacks/shop/cousin'), 204, 'h0: ... and clears the rollback');
ok(wait_for(sub { override_of(1, 'risky') eq 'null' }, 5), 'h1 follows: no override');
ok(wait_for(sub { !rolled(1, 'cousin') }, 5), 'h1 follows: no rollback');
is(flag(1, 'risky')->{effectiveRolloutPercentage}, 30, 'h1 serves the new definition\'s 30 %');
sleep 1;
is(override_of(0, 'risky'), 'null', 'h0 stays cleared');
is(rolled(0, 'cousin'), 0, '... both');

for my $i (0, 1) {
    ok(!logged($i, qr/\[(?:alert|crit|emerg)\]/), "h$i: no alert, crit or emerg");
}
nginx_stop($_) for @pid;
done_testing();
