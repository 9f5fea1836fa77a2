# A Sentinel failover loses, doubles and resurrects nothing (issue 28,
# docs/sync.md "What a failover loses").  A master and a replica
# (redis-server) and three Sentinels (redis-sentinel) on free ports of
# 127.0.0.1; two nginx hosts (h0, h1, two workers each) with flags_sync
# sentinel://.  The test reports errors on both hosts all along and counts
# every 204 it got; a flag rolled back before the failover, one cleared,
# an override set.  Then three times: the master is killed (-9) while
# rounds are in flight, a replica promoted, the hosts follow; the old
# master comes back as a replica.  The new master's window sums equal the
# 204s exactly; the rollback is never lifted, the clear never undone, the
# override always in force, each rollback counted once a host.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use FlagsRedis;
use IO::Socket::INET;
use JSON::PP ();
use POSIX ();
use Time::HiRes qw(sleep time);

skip_without(qw(redis-server redis-sentinel redis-cli));

my $name = 'sx';
my $lo = '127.0.0.1';
my $rdir = prefix_dir('sentinel-exact-redis');
my (%proc, @pid);

END { local $?; reap($_) for values %proc }

sub redis_start {
    my ($tag, $port, @more) = @_;
    mkdir "$rdir/$tag";
    $proc{$tag} = redis_server($port, "$rdir/$tag", @more);
}

sub sentinel_start {
    my ($tag, $port, $mport) = @_;
    mkdir "$rdir/$tag";
    write_file("$rdir/$tag/sentinel.conf", <<"_C_");
port $port
bind $lo
daemonize no
dir $rdir/$tag
sentinel resolve-hostnames no
sentinel monitor $name $lo $mport 2
sentinel down-after-milliseconds $name 1000
sentinel failover-timeout $name 3000
sentinel parallel-syncs $name 1
_C_
    $proc{$tag} = spawn("$rdir/$tag.log", 'redis-sentinel',
                        "$rdir/$tag/sentinel.conf");
    wait_port($port) or die "redis-sentinel $tag did not listen on $port\n";
}

sub kill9 {
    my ($tag) = @_;
    my $p = delete $proc{$tag} or return;
    kill 'KILL', $p;
    waitpid $p, 0;
}

# one redis-cli command: its lines (--raw)
sub rcli { redis_cli(@_) }

# the fleet's error sum of a flag's window hash
sub errors_in {
    my ($p, $flag) = @_;
    my ($key) = grep { /:\Q$flag\E$/ } rcli($p, 'KEYS', 'sx:{shop}:w:*');
    return 0 unless $key;
    my %h = rcli($p, 'HGETALL', $key);
    my $e = 0;
    $e += $h{$_} for grep { /:e$/ } keys %h;
    return $e;
}

sub ctl_has {
    my ($p, $kind, $flag) = @_;
    my %h = rcli($p, 'HGETALL', 'sx:{shop}:ctl');
    my ($f) = grep { /^\Q$kind\E:[0-9a-f]{16}:\Q$flag\E$/ } keys %h;
    return $f ? $h{$f} : undef;
}

my %port = map { $_ => unused_port() } qw(r0 r1 s0 s1 s2);
redis_start('r0', $port{r0});
redis_start('r1', $port{r1}, '--replicaof', $lo, $port{r0});
sentinel_start($_, $port{$_}, $port{r0}) for qw(s0 s1 s2);

# every Sentinel knows the replica and the two others before hosts start
sub sentinels_ready {
    my ($master) = @_;
    for my $s (qw(s0 s1 s2)) {
        my @a = rcli($port{$s}, 'SENTINEL', 'get-master-addr-by-name', $name);
        return 0 unless "@a" eq "$lo $port{$master}";
        my @r = rcli($port{$s}, 'SENTINEL', 'replicas', $name);
        my %r = @r % 2 ? () : @r;
        return 0 unless ($r{flags} // '') eq 'slave'
            && ($r{'master-link-status'} // '') eq 'ok';
        my @o = rcli($port{$s}, 'SENTINEL', 'sentinels', $name);
        return 0 unless grep({ $_ eq 'sentinel' } @o) == 2;
    }
    return 1;
}
ok(wait_for(sub { sentinels_ready('r0') }, 30),
   'three Sentinels watch the master and know its replica and each other');

# --- the nginx hosts ----------------------------------------------------------
my $shop = <<'_J_';
{"flags": [
  {"name": "count", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 100000000, "rate": 0.999, "window": 300}},
  {"name": "tripa", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 2, "rate": 0.001, "window": 300}},
  {"name": "clearb", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 2, "rate": 0.001, "window": 300}},
  {"name": "calm", "enabled": true, "rolloutPercentage": 100}
]}
_J_

my @hport = map { unused_port() } 0 .. 1;
my @hdir = map { prefix_dir("sentinel-exact-$_") } 0 .. 1;
my $url = "sentinel://$lo:$port{s0},$lo:$port{s1},$lo:$port{s2}/$name";

for my $i (0, 1) {
    local $FlagsTest::Port = $hport[$i];
    write_file("$hdir[$i]/conf/shop.json", $shop);
    write_file("$hdir[$i]/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_sync $url interval=200ms prefix=sx: host=h$i;
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
        location = /metrics { flags_metrics; }
        location /flags-admin/ { flags_admin; }
_S_
    push @pid, nginx_start($hdir[$i]);
}

sub req { my ($i, @args) = @_; return host_request($hport[$i], @args) }
sub sync { my $s = host_status($hport[$_[0]]); return $s ? $s->{sync} : {} }
sub state_of { host_flag($hport[$_[0]], $_[1]) }

sub rolled {
    my $f = state_of(@_) or return -1;
    return $f->{rolledBack} ? 1 : 0;
}

sub override_pct {
    my $f = state_of($_[0], 'calm') or return -1;
    return $f->{override} ? $f->{override}{rolloutPercentage} // -1 : -1;
}

sub report {
    my ($i, $flag) = @_;
    my ($st) = req($i, POST => '/ingest/errors',
        body => qq({"flagName":"$flag","message":"boom"}),
        headers => ['Authorization: Bearer tok_1',
                    'Content-Type: application/json']);
    return $st;
}

sub metric {
    my ($i, $flag, $by) = @_;
    my ($st, undef, $body) = req($i, GET => '/metrics');
    return -1 unless $st == 200;
    return $body =~ /^flags_rollbacks_total\{project="shop",flag="\Q$flag\E",by="\Q$by\E"\} (\d+)$/m
        ? $1 : 0;
}

sub log_lines {
    my ($i, $re) = @_;
    return grep { /$re/ } split /\n/, read_file("$hdir[$i]/logs/error.log") // '';
}

for my $i (0, 1) {
    ok(wait_for(sub { sync($i)->{connected} }, 5), "host h$i: connected");
    is(sync($i)->{master}, "$lo:$port{r0}", "host h$i: to the master r0");
}

# --- before the failovers: A rolled back, B cleared, C overridden ------------
is(report($_, 'tripa'), 204, "host h$_: an error of tripa") for 0, 1;
is(report($_, 'clearb'), 204, "host h$_: an error of clearb") for 0, 1;
for my $i (0, 1) {
    ok(wait_for(sub { rolled($i, 'tripa') == 1 && rolled($i, 'clearb') == 1 }, 5),
       "host h$i: the fleet rolled tripa and clearb back");
}
is((req(0, DELETE => '/flags-admin/rollbacks/shop/clearb'))[0], 204,
   'host h0: the rollback of clearb cleared');
is((req(1, PUT => '/flags-admin/overrides/shop/calm',
        body => '{"rolloutPercentage": 30}',
        headers => ['Content-Type: application/json']))[0], 204,
   'host h1: an override of calm (30%)');
for my $i (0, 1) {
    ok(wait_for(sub { rolled($i, 'clearb') == 0 && override_pct($i) == 30 }, 5),
       "host h$i: clearb cleared and calm overridden across the fleet");
}
ok(wait_for(sub {
    defined ctl_has($port{r1}, 'ov', 'calm') && !defined ctl_has($port{r1}, 'rb', 'clearb')
        && defined ctl_has($port{r1}, 'rb', 'tripa');
}, 5), 'the replica holds tripa rolled back, clearb cleared, the override');
my @rb = map { metric($_, 'tripa', 'fleet') } 0, 1;
is_deeply(\@rb, [1, 1], "tripa's rollback counted once a host (by=fleet)");

# --- errors reported all along: each 204 counted ------------------------------
# a child per host, one error of "count" every 5 ms on a keep-alive
# connection; at the stop file it writes how many 204s it got, how many
# other answers, and the slowest answer
sub traffic {
    my ($i, $out, $stop) = @_;
    my $pidc = fork // die "fork: $!";
    return $pidc if $pidc;
    my ($ok, $bad, $slowest) = (0, 0, 0);
    my $c = IO::Socket::INET->new(PeerAddr => $lo, PeerPort => $hport[$i],
                                  Timeout => 5) or POSIX::_exit(2);
    until (-e $stop) {
        my $t = time;
        my $st = eval { (worker_request($c, 'POST', '/ingest/errors',
            '{"flagName":"count","message":"boom"}', 'tok_1'))[0] } // 0;
        my $d = time - $t;
        $slowest = $d if $d > $slowest;
        if ($st == 204) { $ok++ } else { $bad++ }
        if (!$st) {
            $c = IO::Socket::INET->new(PeerAddr => $lo, PeerPort => $hport[$i],
                                       Timeout => 5) or POSIX::_exit(2);
        }
        sleep 0.005;
    }
    write_file($out, "$ok $bad $slowest\n");
    POSIX::_exit(0);
}

# a MONITOR connection on the master: returns once a round's EVALSHA (or
# EVAL) is seen, after $delay seconds more
sub after_a_round {
    my ($p, $delay) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => $lo, PeerPort => $p, Timeout => 5)
        or die "connect $p: $!";
    print $s "*1\r\n\$7\r\nMONITOR\r\n";
    my $t = time;
    while (my $l = <$s>) {
        last if $l =~ /"EVAL(?:SHA)?"/i;
        die "no round seen in 5 s\n" if time - $t > 5;
    }
    close $s;
    sleep $delay if $delay;
}

my %sent = (0 => 0, 1 => 0);
my ($master, $replica) = ('r0', 'r1');
my @figures;
my @moment = ([0, 'right after a round\'s EVALSHA'],
              [0.1, '100 ms after an EVALSHA (mid-interval)'],
              [0.03, '30 ms after an EVALSHA']);
my $last_kill = 0;
for my $k (0 .. 2) {
    my ($delay, $what) = @{ $moment[$k] };
    # Sentinel starts no second failover of a master within twice the
    # failover-timeout (3 s) of the last one
    sleep 0.2 while time - $last_kill < 7;
    my $stop = "$rdir/stop$k";
    my @child = map { traffic($_, "$rdir/traffic$k-$_", $stop) } 0, 1;
    $proc{"t$k-$_"} = $child[$_] for 0, 1;
    sleep 1;
    after_a_round($port{$master}, $delay);
    my $t0 = time;
    $last_kill = $t0;
    kill9($master);
    my (%took, $lifted, $resurrected, $lost_ov) = ();
    ok(wait_for(sub {
        for my $i (0, 1) {
            # during the failover: never lifted, never resurrected
            $lifted++ if rolled($i, 'tripa') != 1;
            $resurrected++ if rolled($i, 'clearb') != 0;
            $lost_ov++ if override_pct($i) != 30;
            next if $took{$i};
            my $s = sync($i);
            $took{$i} = time - $t0
                if ($s->{master} // '') eq "$lo:$port{$replica}" && $s->{connected};
        }
        return keys %took == 2;
    }, 40), "failover $k ($what): both hosts follow to $replica");
    my $follow = (sort { $b <=> $a } values %took)[0] // 99;
    ok($follow <= FlagsTest::slow(8), sprintf 'failover %d: the last host follows %.2f s after the kill', $k, $follow);
    ok(!$lifted, "failover $k: tripa stayed rolled back on both hosts all along");
    ok(!$resurrected, "failover $k: clearb stayed cleared on both hosts all along");
    ok(!$lost_ov, "failover $k: the override of calm stayed in force on both hosts all along");
    is((rcli($port{$replica}, 'ROLE'))[0], 'master', "failover $k: $replica was promoted");

    # errors keep coming after the failover, then the count stops
    sleep 1;
    write_file($stop, '');
    my $stopped = time;
    for my $i (0, 1) {
        waitpid delete $proc{"t$k-$i"}, 0;
        my ($ok, $bad, $slowest) = split ' ', read_file("$rdir/traffic$k-$i") // '0 -1 9';
        ok($ok > 100, "failover $k: host h$i answered $ok error reports with 204");
        is($bad, 0, "failover $k: host h$i: no other answer");
        ok($slowest < 0.2, sprintf 'failover %d: host h%d: no report waited for Redis (slowest %.3f s)',
           $k, $i, $slowest);
        $sent{$i} += $ok;
    }
    my $want = $sent{0} + $sent{1};
    my $got;
    ok(wait_for(sub { ($got = errors_in($port{$replica}, 'count')) == $want }, 10),
       "failover $k: the new master holds exactly the $want errors of count the hosts took");
    is($got, $want, "failover $k: nothing lost, nothing doubled")
        or diag "host h0 $sent{0}, host h1 $sent{1}";
    my $converged = time - $stopped;
    sleep 1;     # rounds go on: the sum stays
    is(errors_in($port{$replica}, 'count'), $want, "failover $k: and stays so");
    ok(defined ctl_has($port{$replica}, 'rb', 'tripa'), "failover $k: the new master holds tripa rolled back");
    ok(!defined ctl_has($port{$replica}, 'rb', 'clearb'), "failover $k: ... clearb cleared");
    ok(defined ctl_has($port{$replica}, 'ov', 'calm'), "failover $k: ... the override of calm");
    for my $i (0, 1) {
        is(rolled($i, 'tripa'), 1, "failover $k: host h$i: tripa rolled back");
        is(rolled($i, 'clearb'), 0, "failover $k: host h$i: clearb not rolled back");
        is(override_pct($i), 30, "failover $k: host h$i: calm's override in force");
        is(metric($i, 'tripa', 'fleet'), 1, "failover $k: host h$i: tripa's rollback still counted once");
        is(metric($i, 'clearb', 'fleet'), 1, "failover $k: host h$i: clearb's rollback still counted once");
    }
    push @figures, [$k, $took{0}, $took{1}, $converged];
    diag sprintf 'failover %d (%s): host h0 followed %.2f s, host h1 %.2f s after the kill; sums exact %.2f s after the last report',
        $k, $what, $took{0}, $took{1}, $converged;

    # the old master comes back as a replica of the new one
    redis_start($master, $port{$master}, '--replicaof', $lo, $port{$replica});
    ($master, $replica) = ($replica, $master);
    ok(wait_for(sub { sentinels_ready($master) }, 30),
       "failover $k: the Sentinels see $replica back as the replica of $master");
}

for my $i (0, 1) {
    is(scalar(log_lines($i, qr/flags: rollback of flag "tripa" of project "shop" cleared/)),
       0, "host h$i: tripa's rollback was never lifted");
    is(scalar(log_lines($i, qr/\[(?:alert|crit|emerg)\]|exited on signal/)), 0,
       "host h$i: no alert, no crash");
}
nginx_stop($_) for @pid;

done_testing();
