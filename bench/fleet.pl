#!/usr/bin/perl
# bench/fleet.pl - a fleet of nginx hosts synced through one Redis
# (flags_sync, docs/sync.md).
#
#   bench/fleet.pl            (module built: ./build.sh first)
#
# Starts, on 127.0.0.1 with free ports and by PID only, one redis-server
# (no persistence) and HOSTS nginx (one worker each) with the same flags
# and `flags_sync redis://127.0.0.1:P interval=INTERVAL`, plus one more
# nginx with the same configuration but no flags_sync (the baseline of c).
# Two projects: "rb" (30 flags; "risky" rolls back at 10 fleet errors)
# and "fleet" (1,000 flags, all on).  Then:
#
#  a. ROUNDS times: one error report of "risky" to each of HOSTS-1 hosts
#     (one each, so no host reaches min_errors alone), a pause of three
#     intervals so that they are all in Redis, then the clock starts just
#     before the report that brings the fleet sum to min_errors, sent to
#     the remaining host (another one each round).  Every host is polled
#     (GET /flags of "rb", every POLL_MS) until it no longer serves
#     "risky": the time to the LAST host, p50 / p99 / max.  The rollback is
#     then cleared through flags_admin on one host and the time until every
#     host serves the flag again is measured the same way.
#  b. Redis load with 1,000 flags: INFO commandstats / stats / cpu before
#     and after a LOAD_SECONDS window in which every host answers a GET
#     /flags of "fleet" (all 1,000 flags evaluated, so every flag has a
#     delta each interval) every 100 ms; commands per second per host.
#  c. GET /flags of "rb" with wrk (bench/report.lua, -t1 -c16): a synced
#     host vs the same nginx without flags_sync vs a static file holding
#     the same body (a `return 200` added to the nginx without flags_sync by
#     a reload once the body is known), alternated, WRK_RUNS
#     runs of WRK_SECONDS each; the measured workers on CPU 0, wrk on
#     CPU 1 (when there are two CPUs).
#
#   MODE=storm bench/fleet.pl   (reconnects after an outage; only this)
#
#  d. HOSTS nginx (one worker each, one project of 30 flags) connected to
#     Redis, which runs with --loglevel verbose: it logs each connection
#     it accepts ("Accepted 127.0.0.1:PORT") with its millisecond.  Redis
#     is killed (SIGKILL, by PID), kept down DOWN seconds, started again
#     on the same port; when every host says connected again, the accepted
#     connections of the new Redis are counted: the most in any 10 ms and
#     in any 1 s (sliding windows), and when the first, the median and the
#     last arrived after Redis was back.  START=together starts the hosts
#     all at once (a deployment, a boot) instead of one after the other.
#     MODULE=path measures another build (the one before a change).
#
# Environment: HOSTS (10), INTERVAL (200ms; storm: 1s), ROUNDS (10),
# POLL_MS (5), LOAD_SECONDS (10), WRK_SECONDS (5), WRK_RUNS (2), NGINX_BIN,
# MODE, DOWN (20), START (one; together), MODULE.
# Exit status: non-zero when nginx or Redis does not start or dies, a host
# rolls back before the crossing or never (10 s), a clear never reaches a
# host, wrk fails or gets non-2xx answers, or an error log has
# [alert]/[crit]/[emerg].  A ratio below the 0.9 target is printed, not
# a failure.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/helper";
use NginxProc qw(nginx_start nginx_stop worker_pids wait_port read_file write_file);
use IO::Socket::INET;
use File::Path qw(make_path remove_tree);
use JSON::PP ();
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);

my $MODE = $ENV{MODE} // 'fleet';
my $STORM = $MODE eq 'storm';
my $HOSTS = $ENV{HOSTS} // 10;
my $INTERVAL = $ENV{INTERVAL} // ($STORM ? '1s' : '200ms');
my $DOWN = $ENV{DOWN} // 20;
my $TOGETHER = ($ENV{START} // 'one') eq 'together';
my $ROUNDS = $ENV{ROUNDS} // 10;
my $POLL = ($ENV{POLL_MS} // 5) / 1000;
my $LOAD_SECONDS = $ENV{LOAD_SECONDS} // 10;
my $WRK_SECONDS = $ENV{WRK_SECONDS} // 5;
my $WRK_RUNS = $ENV{WRK_RUNS} // 2;
my $BIN = $ENV{NGINX_BIN} // '/usr/sbin/nginx';
my $ROOT = "$FindBin::Bin/..";
my $MODULE = $ENV{MODULE} // "$ROOT/build/ngx_http_flags_module.so";
my $PREFIX = "$ROOT/build/bench-fleet";
my $MIN_ERRORS = 10;

my ($ival_s) = $INTERVAL =~ /^(\d+)ms$/ ? ($1 / 1000) : $INTERVAL =~ /^(\d+)s$/ ? ($1) : ();
die "INTERVAL must be like 200ms or 1s\n" unless defined $ival_s;
die "HOSTS must be at least 2\n" unless $HOSTS >= 2;
die "MODE is fleet or storm\n" unless $MODE =~ /^(?:fleet|storm)$/;
die "no module at $MODULE: run ./build.sh\n" unless -f $MODULE;
my $redis_bin = `command -v redis-server 2>/dev/null`;
chomp $redis_bin;
die "redis-server not found\n" unless $redis_bin;
$SIG{PIPE} = 'IGNORE';

my %given;
sub free_port {
    # storm: below the ephemeral range, so that the hosts' own connects to
    # Redis cannot take a port a host is about to listen on
    if ($STORM) {
        my ($lo) = split ' ', read_file('/proc/sys/net/ipv4/ip_local_port_range') // '32768';
        for (1 .. 1000) {
            my $p = 10000 + int rand($lo - 10000);
            next if $given{$p}++;
            my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $p,
                                          Listen => 1, ReuseAddr => 1) or next;
            return $p;
        }
        die "no free port below $lo\n";
    }
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
        or die "no free port: $!\n";
    return $s->sockport;
}

remove_tree($PREFIX);
make_path("$PREFIX/redis");

# --- Redis -----------------------------------------------------------------
my $rport = free_port();
my $redis_pid;
# storm: verbose, so that Redis logs every connection it accepts
sub redis_up {
    my ($log) = @_;
    $redis_pid = fork() // die "fork: $!\n";
    if (!$redis_pid) {
        open STDOUT, '>', "$PREFIX/redis/$log";
        open STDERR, '>&', \*STDOUT;
        exec $redis_bin, '--port', $rport, '--bind', '127.0.0.1', '--save', '',
             '--appendonly', 'no', '--daemonize', 'no', '--dir', "$PREFIX/redis",
             '--loglevel', $STORM ? 'verbose' : 'notice';
        exit 127;
    }
}
redis_up('redis.log');
my (@master, $nosync_master);
END {
    local $?;
    nginx_stop($_) for grep { $_ } @master, $nosync_master;
    if ($redis_pid) { kill 'KILL', $redis_pid; waitpid $redis_pid, 0 }
}
$SIG{INT} = $SIG{TERM} = sub { exit 130 };
wait_port($rport, 5) or die "redis-server did not listen on $rport\n";

my $redis = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $rport, Timeout => 5)
    or die "connect to redis: $!\n";

sub resp_read {
    my $line = <$redis> // die "redis closed the connection\n";
    $line =~ s/\r\n$//;
    my ($t, $v) = (substr($line, 0, 1), substr($line, 1));
    return $v if $t eq '+' || $t eq ':';
    die "redis: $v\n" if $t eq '-';
    if ($t eq '$') {
        return undef if $v < 0;
        my $buf = '';
        while (length $buf < $v + 2) {
            read($redis, $buf, $v + 2 - length $buf, length $buf) or die "redis: short read\n";
        }
        return substr($buf, 0, $v);
    }
    return [map { resp_read() } 1 .. $v] if $t eq '*';
    die "redis: unexpected reply $line\n";
}

sub redis_cmd {
    print $redis '*' . @_ . "\r\n" . join('', map { '$' . length($_) . "\r\n$_\r\n" } @_);
    return resp_read();
}

# --- flags and nginx ----------------------------------------------------------
my $rb = join ',',
    qq({"name":"risky","enabled":true,"rolloutPercentage":100,)
        . qq("rollback":{"minErrors":$MIN_ERRORS,"rate":0.001,"window":60}}),
    map { qq({"name":"flag-$_","enabled":true,"rolloutPercentage":50}) } 1 .. 29;
my $fleet = join ',', map { qq({"name":"f$_","enabled":true,"rolloutPercentage":100}) } 1 .. 1000;
my $user = $> == 0 ? "user root;\n" : '';

# the configuration of a host; storm: one small project, nothing else
sub host_conf {
    my ($dir, $port, $sync) = @_;
    make_path("$dir/conf", "$dir/logs", "$dir/html");
    write_file("$dir/conf/rb.json", qq({"flags":[$rb]}));
    write_file("$dir/conf/fleet.json", qq({"flags":[$fleet]})) unless $STORM;
    my $line = $sync ? "flags_sync redis://127.0.0.1:$rport interval=$INTERVAL prefix=bench:;" : '';
    my $fleet_project = $STORM ? '' : 'flags_project fleet token=tok_fleet file=fleet.json;';
    write_file("$dir/conf/nginx.conf", <<"_C_");
load_module $MODULE;
${user}worker_processes 1;
error_log logs/error.log warn;
pid logs/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    flags_project rb token=tok_rb file=rb.json;
    $fleet_project
    flags_error_log off;
    $line
    server {
        listen 127.0.0.1:$port backlog=1024;
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /status { flags_status; }
        location /admin/ { flags_admin; }
        location = /static.json { root html; default_type application/json; }
    }
}
_C_
}

sub start_host {
    my ($dir, $port, $sync) = @_;
    host_conf($dir, $port, $sync);
    return nginx_start($BIN, $dir, port => $port);
}

my @port = map { free_port() } 1 .. $HOSTS;
my $nosync_port = free_port();
if ($STORM && $TOGETHER) {
    # every nginx started at once, then each waited for
    host_conf("$PREFIX/h$_", $port[$_], 1) for 0 .. $HOSTS - 1;
    my @kids;
    for my $i (0 .. $HOSTS - 1) {
        my $k = fork() // die "fork: $!\n";
        if (!$k) {
            exec $BIN, '-p', "$PREFIX/h$i/", '-c', 'conf/nginx.conf';
            exit 127;
        }
        push @kids, $k;
    }
    waitpid $_, 0 for @kids;
    my @missing;
    for my $i (0 .. $HOSTS - 1) {
        my $m = NginxProc::wait_for(sub {
            my $p = read_file("$PREFIX/h$i/logs/nginx.pid");
            return $p && $p =~ /^(\d+)/ ? $1 : undef;
        }, 10);
        # the others are stopped (END) before this one is said
        $m ? push(@master, $m) : push(@missing, $i);
    }
    die "host(s) @missing did not start\n" if @missing;
} else {
    for my $i (0 .. $HOSTS - 1) {
        push @master, start_host("$PREFIX/h$i", $port[$i], 1);
    }
}
$nosync_master = start_host("$PREFIX/nosync", $nosync_port, 0) unless $STORM;

# one request on a connection of its own: (status, body)
sub request {
    my ($port, $method, $path, %o) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 5)
        or die "connect to 127.0.0.1:$port: $!\n";
    my $req = "$method $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
    $req .= "Authorization: Bearer $o{token}\r\n" if $o{token};
    $req .= "Content-Type: application/json\r\nContent-Length: " . length($o{body}) . "\r\n"
        if defined $o{body};
    print $s $req . "\r\n" . ($o{body} // '');
    local $/;
    my $resp = <$s> // '';
    my ($st) = $resp =~ m{^HTTP/1\.1 (\d{3}) } or die "$method $path on $port: no answer\n";
    my ($body) = $resp =~ /\r\n\r\n(.*)\z/s;
    return ($st, $body);
}

sub check_alive {
    for my $m (grep { $_ } @master, $nosync_master) {
        die "nginx $m died\n" unless kill 0, $m;
        my @w = worker_pids($m);
        die "nginx $m has no worker\n" unless @w;
    }
    die "redis-server died\n" if waitpid($redis_pid, WNOHANG) == $redis_pid;
}

# 1 when host $i serves "risky", 0 when it does not
sub risky_on {
    my ($i) = @_;
    my ($st, $body) = request($port[$i], GET => '/flags?userId=u1', token => 'tok_rb');
    die "GET /flags on host $i answered $st\n" unless $st == 200;
    my ($f) = grep { $_->{name} eq 'risky' } @{ JSON::PP::decode_json($body)->{flags} };
    die "host $i: no flag risky\n" unless $f;
    return $f->{enabled} ? 1 : 0;
}

sub report {
    my ($i) = @_;
    my ($st) = request($port[$i], POST => '/ingest/errors', token => 'tok_rb',
                       body => '{"flagName":"risky","message":"TypeError: boom"}');
    die "POST /ingest/errors on host $i answered $st\n" unless $st == 204;
}

# polls every host until each serves risky as $want; the seconds from $t0
# to the last host
sub until_all {
    my ($want, $t0, $what) = @_;
    my %seen;
    my $deadline = $t0 + 10;
    while (keys %seen < $HOSTS) {
        for my $i (0 .. $HOSTS - 1) {
            next if exists $seen{$i};
            $seen{$i} = time - $t0 if risky_on($i) == $want;
        }
        if (time > $deadline) {
            check_alive();
            die "$what: host(s) " . join(',', grep { !exists $seen{$_} } 0 .. $HOSTS - 1)
                . " never did (10 s)\n";
        }
        sleep $POLL;
    }
    return (sort { $a <=> $b } values %seen)[-1];
}

sub pct {
    my ($p, @v) = @_;
    @v = sort { $a <=> $b } @v;
    return $v[int($p / 100 * $#v + 0.5)];
}

sub connected {
    my ($i) = @_;
    my ($st, $b) = request($port[$i], GET => '/status');
    return $st == 200 && $b =~ /"sync":\{"connected":true/;
}

# every host connected to Redis
for my $i (0 .. $HOSTS - 1) {
    NginxProc::wait_for(sub { connected($i) }, 5) or die "host $i never connected to redis\n";
}

storm() if $STORM;
printf "%d nginx hosts (1 worker each) + 1 without flags_sync, redis-server %s on 127.0.0.1:%d; "
    . "interval=%s\n", $HOSTS, (redis_cmd('INFO', 'server') =~ /redis_version:(\S+)/)[0], $rport, $INTERVAL;

# --- a. threshold crossing -> last host serving the rollback -------------------
my (@roll, @clear);
for my $round (1 .. $ROUNDS) {
    my $last = ($round - 1) % $HOSTS;
    my @others = grep { $_ != $last } 0 .. $HOSTS - 1;
    # MIN_ERRORS - 1 reports spread over the other hosts
    report($others[$_ % @others]) for 0 .. $MIN_ERRORS - 2;
    sleep 3 * $ival_s + 0.05;
    for my $i (0 .. $HOSTS - 1) {
        die "round $round: host $i rolled back before the crossing\n" unless risky_on($i);
    }
    my $t0 = time;
    report($last);
    push @roll, until_all(0, $t0, "round $round: rollback") * 1000;
    my $t1 = time;
    my ($st) = request($port[($last + 1) % $HOSTS], DELETE => '/admin/rollbacks/rb/risky');
    die "DELETE /admin/rollbacks/rb/risky answered $st\n" unless $st == 204;
    push @clear, until_all(1, $t1, "round $round: clear") * 1000;
    sleep 2 * $ival_s;
}
check_alive();
printf "a. %d rounds, %d errors spread over %d hosts (min_errors=%d, no host alone):\n",
    $ROUNDS, $MIN_ERRORS, $HOSTS, $MIN_ERRORS;
printf "   crossing -> last host serving the rollback: p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms"
    . "  (%.2f / %.2f intervals)\n", pct(50, @roll), pct(99, @roll), pct(100, @roll),
    pct(50, @roll) / 1000 / $ival_s, pct(100, @roll) / 1000 / $ival_s;
printf "   admin clear on one host -> last host serving again: p50 %6.1f ms  p99 %6.1f ms  max %6.1f ms\n",
    pct(50, @clear), pct(99, @clear), pct(100, @clear);

# --- b. Redis commands per second per host with 1,000 flags ------------------
sub redis_snapshot {
    my %s;
    my $cs = redis_cmd('INFO', 'commandstats');
    while ($cs =~ /^cmdstat_(\w+):calls=(\d+),usec=(\d+)/mg) { $s{"calls:$1"} = $2; $s{"usec:$1"} = $3 }
    my $st = redis_cmd('INFO', 'stats');
    ($s{total}) = $st =~ /^total_commands_processed:(\d+)/m;
    my $cpu = redis_cmd('INFO', 'cpu');
    my ($u) = $cpu =~ /^used_cpu_user:([\d.]+)/m;
    my ($y) = $cpu =~ /^used_cpu_sys:([\d.]+)/m;
    $s{cpu} = $u + $y;
    $s{t} = time;
    return \%s;
}

# prime: every host has synced the 1,000 flags once
for my $i (0 .. $HOSTS - 1) {
    my ($st) = request($port[$i], GET => '/flags?userId=prime', token => 'tok_fleet');
    die "GET /flags (1,000 flags) on host $i answered $st\n" unless $st == 200;
}
sleep 3 * $ival_s;
my $b0 = redis_snapshot();
my ($n, $next) = (0, time);
while (time < $b0->{t} + $LOAD_SECONDS) {
    for my $i (0 .. $HOSTS - 1) {
        my ($st) = request($port[$i], GET => "/flags?userId=u$n", token => 'tok_fleet');
        die "GET /flags (1,000 flags) on host $i answered $st\n" unless $st == 200;
        $n++;
    }
    $next += 0.1;
    my $d = $next - time;
    sleep $d if $d > 0;
}
my $b1 = redis_snapshot();
check_alive();
{
    my $secs = $b1->{t} - $b0->{t};
    my %d = map { $_ => ($b1->{$_} // 0) - ($b0->{$_} // 0) } keys %$b1;
    my $scripts = ($d{'calls:evalsha'} // 0) + ($d{'calls:eval'} // 0);
    my $info = ($d{'calls:info'} // 0) + 3;     # this script's own INFO commands
    my ($inner, @top) = (0);
    for my $k (grep { /^calls:/ } keys %d) {
        next if $k =~ /^calls:(evalsha|eval|info)$/;
        $inner += $d{$k};
    }
    @top = sort { $d{$b} <=> $d{$a} } grep { /^calls:/ && !/:info$/ && $d{$_} } keys %d;
    printf "b. %d flags all on, %d GET /flags (all flags evaluated) spread over %.1f s, interval=%s:\n",
        1000, $n, $secs, $INTERVAL;
    printf "   per host: %.1f script calls/s, %.0f commands/s inside scripts, "
        . "%.0f commands/s total (total_commands_processed)\n",
        $scripts / $secs / $HOSTS, $inner / $secs / $HOSTS, ($d{total} - $info) / $secs / $HOSTS;
    printf "   redis: %.0f commands/s in all, CPU %.0f %% of one core; %.0f us a script call\n",
        ($scripts + $inner) / $secs, 100 * $d{cpu} / $secs,
        $scripts ? (($d{'usec:evalsha'} // 0) + ($d{'usec:eval'} // 0)) / $scripts : 0;
    printf "   by command: %s\n", join ', ', map { (my $c = $_) =~ s/^calls://; "$c $d{$_}" } @top;
}

# --- c. GET /flags: sync on vs without flags_sync vs static ------------------
my $wrk = `command -v wrk 2>/dev/null`;
chomp $wrk;
if (!$wrk) {
    print "c. skipped: wrk not found (./build.sh bench installs it)\n";
} else {
    my ($st, $body) = request($port[0], GET => '/flags?userId=u1', token => 'tok_rb');
    die "GET /flags answered $st\n" unless $st == 200;
    my ($st2, $body2) = request($nosync_port, GET => '/flags?userId=u1', token => 'tok_rb');
    die "the host without flags_sync answers another body\n" unless $body2 eq $body;
    # the static baseline: a return 200 of that body, added to the nginx
    # without flags_sync by a reload (HUP to its master, by PID)
    die "the body holds a '\$' or is too long for a return text\n" if $body =~ /\$/ || length $body > 3900;
    (my $esc = $body) =~ s/([\\'])/\\$1/g;
    my $conf = read_file("$PREFIX/nosync/conf/nginx.conf");
    my @old = worker_pids($nosync_master);
    $conf =~ s{(location = /static\.json)}{location = /static { default_type application/json; return 200 '$esc'; }\n        $1};
    write_file("$PREFIX/nosync/conf/nginx.conf", $conf);
    kill 'HUP', $nosync_master;
    NginxProc::wait_for(sub {
        my @w = worker_pids($nosync_master);
        @w == 1 && $w[0] != $old[0] && (request($nosync_port, GET => '/static'))[1] eq $body;
    }, 10) or die "the reload of the nginx without flags_sync failed\n";
    my $two = `nproc` > 1;
    if ($two) {
        system("taskset -pc 0 $_ >/dev/null") for worker_pids($master[0]), worker_pids($nosync_master);
    }
    my %rps;
    my @cases = (['sync', $port[0], '/flags?userId=u1', 1],
                 ['nosync', $nosync_port, '/flags?userId=u1', 1],
                 ['static', $nosync_port, '/static', 0]);
    for my $run (1 .. $WRK_RUNS) {
        for my $c (@cases) {
            my ($key, $p, $path, $auth) = @$c;
            my @cmd = ($two ? ('taskset', '-c', '1') : (), $wrk, '-t1', '-c16', "-d${WRK_SECONDS}s",
                       '-s', "$FindBin::Bin/report.lua",
                       $auth ? ('-H', 'Authorization: Bearer tok_rb') : (),
                       "http://127.0.0.1:$p$path");
            my $out = `@{[ join ' ', map { "'$_'" } @cmd ]} 2>&1`;
            die "wrk failed: $out\n" if $?;
            my %f = $out =~ /(\w+)=(\d+)/g;
            die "wrk: no BENCH line: $out\n" unless $f{requests};
            die "wrk: $f{non2xx} non-2xx answers on $key\n" if $f{non2xx};
            die "wrk: socket errors on $key: $out\n" if $f{connect} + $f{read} + $f{write} + $f{timeout};
            push @{ $rps{$key} }, $f{requests} / ($f{duration_us} / 1e6);
        }
    }
    check_alive();
    my %mean = map { my $v = $rps{$_}; ($_ => eval { my $s = 0; $s += $_ for @$v; $s / @$v }) } keys %rps;
    printf "c. GET /flags (30 flags, %d bytes), wrk -t1 -c16, %d x %d s each, alternated%s:\n",
        length $body, $WRK_RUNS, $WRK_SECONDS, $two ? ' (workers on CPU 0, wrk on CPU 1)' : '';
    printf "   %-28s %8.0f req/s\n", 'sync on', $mean{sync};
    printf "   %-28s %8.0f req/s   sync/no-sync ratio %.3f %s\n", 'same nginx, no flags_sync',
        $mean{nosync}, $mean{sync} / $mean{nosync}, $mean{sync} / $mean{nosync} >= 0.9 ? '(>= 0.9: met)' : '(BELOW the 0.9 target)';
    printf "   %-28s %8.0f req/s   sync/static ratio   %.3f %s\n", 'return 200 of the same body',
        $mean{static}, $mean{sync} / $mean{static}, $mean{sync} / $mean{static} >= 0.9 ? '(>= 0.9: met)' : '(BELOW the 0.9 target)';
}

# --- d. reconnects after an outage ----------------------------------------------

# the connections a Redis log says it accepted, but from the client ports
# in %$not: their times (wall clock, seconds with milliseconds, within the
# day the log was written)
sub accepted {
    my ($log, $not) = @_;
    my @t;
    for (split /\n/, read_file($log) // '') {
        next unless / (\d\d):(\d\d):(\d\d)\.(\d{3}) - Accepted 127\.0\.0\.1:(\d+)$/;
        next if $not->{$5};
        push @t, $1 * 3600 + $2 * 60 + $3 + $4 / 1000;
    }
    return sort { $a <=> $b } @t;
}

# the most times within any window of $w seconds
sub peak {
    my ($w, @t) = @_;
    my ($best, $j) = (0, 0);
    for my $i (0 .. $#t) {
        $j++ while $t[$i] - $t[$j] >= $w - 1e-9;
        $best = $i - $j + 1 if $i - $j + 1 > $best;
    }
    return $best;
}

sub day_seconds {
    my @l = localtime($_[0]);
    return $l[2] * 3600 + $l[1] * 60 + $l[0] + ($_[0] - int $_[0]);
}

sub storm {
    sleep 3 * $ival_s + 2;
    check_alive();
    close $redis;
    kill 'KILL', $redis_pid;
    waitpid $redis_pid, 0;
    my $t_down = time;
    sleep $DOWN;
    for my $i (0 .. $HOSTS - 1) {
        die "host $i still says connected with Redis down\n" if connected($i);
    }
    redis_up('redis-2.log');
    # listening: this script's own connect, left out of the count
    my %mine;
    NginxProc::wait_for(sub {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $rport) or return 0;
        $mine{ $s->sockport } = 1;
        return 1;
    }, 5) or die "redis-server did not listen again on $rport\n";
    my $t_up = time;
    my %back;
    while (keys %back < $HOSTS) {
        for my $i (0 .. $HOSTS - 1) {
            $back{$i} = 1 if !$back{$i} && connected($i);
        }
        die "host(s) " . join(',', grep { !$back{$_} } 0 .. $HOSTS - 1)
            . " not back 90 s after Redis\n" if time > $t_up + 90;
        sleep 0.1;
    }
    check_alive();
    my $up = day_seconds($t_up);
    my @t = accepted("$PREFIX/redis/redis-2.log", \%mine);
    my @rel = map { $_ - $up } @t;
    printf "d. %d hosts (1 worker each), interval=%s, Redis killed and started again after %d s%s:\n",
        $HOSTS, $INTERVAL, $DOWN, $TOGETHER ? ' (hosts started all at once)' : '';
    printf "   %d connections accepted by the new Redis (verbose log) until every host was back\n",
        scalar @t;
    printf "   peak: %d in any 10 ms, %d in any 100 ms, %d in any 1 s\n",
        peak(0.01, @t), peak(0.1, @t), peak(1, @t);
    printf "   after Redis was back: first %.2f s, median %.2f s, last %.2f s\n",
        $rel[0], $rel[$#rel / 2], $rel[-1] if @rel;
    # the hosts' first connects, when they started (this script's own
    # connections are there too: one, for INFO)
    my @first = accepted("$PREFIX/redis/redis.log", {});
    printf "   at the hosts' start: %d connections, peak %d in any 10 ms, %d in any 100 ms, %d in any 1 s\n",
        scalar @first, peak(0.01, @first), peak(0.1, @first), peak(1, @first);
    my %sec;
    $sec{ int($_ < 0 ? 0 : $_) }++ for @rel;
    printf "   per second after Redis was back: %s\n",
        join ' ', map { "$_:" . ($sec{$_} // 0) } 0 .. (sort { $b <=> $a } keys %sec)[0];
    my $bad = 0;
    for my $d (map { "h$_" } 0 .. $HOSTS - 1) {
        my $log = read_file("$PREFIX/$d/logs/error.log") // '';
        my @l = grep { /\[(alert|crit|emerg)\]/ } split /\n/, $log;
        if (@l) { print STDERR "$d/logs/error.log:\n", map { "  $_\n" } @l; $bad = 1 }
    }
    exit $bad;
}

# --- logs -----------------------------------------------------------------------
my $bad = 0;
for my $d ((map { "h$_" } 0 .. $HOSTS - 1), 'nosync') {
    my $log = read_file("$PREFIX/$d/logs/error.log") // '';
    my @l = grep { /\[(alert|crit|emerg)\]/ } split /\n/, $log;
    if (@l) { print STDERR "$d/logs/error.log:\n", map { "  $_\n" } @l; $bad = 1 }
}
for my $i (0 .. $HOSTS - 1) {
    my ($st, $b) = request($port[$i], GET => '/status');
    my ($f) = $b =~ /"failures":(\d+)/;
    if (!defined $f || $f) { print STDERR "host $i: sync failures: ", $f // '?', "\n"; $bad = 1 }
}
exit $bad;
