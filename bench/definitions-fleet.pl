#!/usr/bin/perl
# bench/definitions-fleet.pl - one version of a runtime project's
# definitions for a fleet (flags_sync, docs/sync.md "One version for the
# fleet"): how long from the 200 of a write on one host until every host
# serves the new version.
#
#   bench/definitions-fleet.pl          (module built: ./build.sh first)
#
# Starts, on 127.0.0.1 with free ports and by PID only, one redis-server
# (no persistence) and HOSTS nginx (WORKERS workers each), each with a
# definitions=runtime project of FLAGS flags, flags_state_file and
# `flags_sync ... interval=INTERVAL key_file=...` (versions signed).  Then
# CHANGES times: a PUT of the whole document (FLAGS flags, one percentage
# changed) on host (change % HOSTS); the clock starts at its 200, and
# every host is polled (HEAD of flags_admin's definitions route, whose
# ETag names the version the answering worker serves, every POLL_MS)
# until all serve it.  Prints p50 / p99 / max of that time, and of the
# PUT itself (proposal, compare-and-set in Redis, stored, every worker of
# that host serving it).
#
# Environment: HOSTS (10), WORKERS (1), FLAGS (1000), CHANGES (50),
# INTERVAL (200ms), POLL_MS (5), NGINX_BIN.
# Exit status: non-zero when nginx or Redis does not start, a PUT does not
# answer 200, a version does not reach every host within 10 s, or an
# error log has [alert]/[crit]/[emerg].
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/helper";
use NginxProc qw(nginx_start nginx_stop wait_port read_file write_file);
use IO::Socket::INET;
use File::Path qw(make_path remove_tree);
use Time::HiRes qw(time sleep);

my $HOSTS = $ENV{HOSTS} // 10;
my $WORKERS = $ENV{WORKERS} // 1;
my $FLAGS = $ENV{FLAGS} // 1000;
my $CHANGES = $ENV{CHANGES} // 50;
my $INTERVAL = $ENV{INTERVAL} // '200ms';
my $POLL = ($ENV{POLL_MS} // 5) / 1000;
my $BIN = $ENV{NGINX_BIN} // '/usr/sbin/nginx';
my $ROOT = "$FindBin::Bin/..";
my $MODULE = "$ROOT/build/ngx_http_flags_module.so";
my $PREFIX = "$ROOT/build/bench-definitions-fleet";

die "no module at $MODULE: run ./build.sh\n" unless -f $MODULE;
my $redis_bin = `command -v redis-server 2>/dev/null`;
chomp $redis_bin;
die "redis-server not found\n" unless $redis_bin;
$SIG{PIPE} = 'IGNORE';

sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1)
        or die "no free port: $!\n";
    return $s->sockport;
}

remove_tree($PREFIX);
make_path("$PREFIX/redis");

my $rport = free_port();
my $redis_pid = fork() // die "fork: $!\n";
if (!$redis_pid) {
    open STDOUT, '>', "$PREFIX/redis/redis.log";
    open STDERR, '>&', \*STDOUT;
    exec $redis_bin, '--port', $rport, '--bind', '127.0.0.1', '--save', '',
         '--appendonly', 'no', '--daemonize', 'no', '--dir', "$PREFIX/redis";
    exit 127;
}
my @master;
END {
    local $?;
    nginx_stop($_) for grep { $_ } @master;
    if ($redis_pid) { kill 'TERM', $redis_pid; waitpid $redis_pid, 0 }
}
$SIG{INT} = $SIG{TERM} = sub { exit 130 };
wait_port($rport, 5) or die "redis-server did not listen on $rport\n";

# the document: FLAGS flags, flag 0's percentage is the change's number
sub doc {
    my ($pct) = @_;
    return '{"flags":[' . join(',', map {
        qq({"name":"f$_","enabled":true,"rolloutPercentage":) . ($_ ? 50 : $pct) . '}'
    } 0 .. $FLAGS - 1) . ']}';
}
my $user = $> == 0 ? "user root;\n" : '';

my @port = map { free_port() } 1 .. $HOSTS;
for my $i (0 .. $HOSTS - 1) {
    my $dir = "$PREFIX/h$i";
    make_path("$dir/conf", "$dir/logs", "$dir/html");
    write_file("$dir/conf/fleet.json", doc(0));
    write_file("$dir/conf/fleet.key", "bench-definitions-fleet-key-0123456789\n");
    write_file("$dir/conf/nginx.conf", <<"_C_");
load_module $MODULE;
${user}worker_processes $WORKERS;
error_log logs/error.log warn;
pid logs/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    flags_project fleet token=tok file=fleet.json definitions=runtime;
    flags_state_file $dir/state.json;
    flags_error_log off;
    flags_sync redis://127.0.0.1:$rport interval=$INTERVAL prefix=benchdefs: host=h$i key_file=fleet.key;
    server {
        listen 127.0.0.1:$port[$i] backlog=1024;
        location = /status { flags_status; }
        location /admin/ { flags_admin; }
    }
}
_C_
    push @master, nginx_start($BIN, $dir, port => $port[$i]);
}

sub request {
    my ($port, $method, $path, $body) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 10)
        or die "connect to 127.0.0.1:$port: $!\n";
    my $req = "$method $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
    $req .= "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n"
        if defined $body;
    print $s $req . "\r\n" . ($body // '');
    local $/;
    my $resp = <$s> // '';
    my ($st) = $resp =~ m{^HTTP/1\.1 (\d{3}) } or die "$method $path on $port: no answer\n";
    my ($etag) = $resp =~ m{\r\nETag: "v(\d+)"}i;
    return ($st, $etag // 0, $resp);
}

sub version_of { (request($port[$_[0]], HEAD => '/admin/definitions/fleet'))[1] }

# every host connected before the first change
my $until = time + 10;
sleep 0.1 while time < $until && grep { (request($port[$_], GET => '/status'))[2] !~ /"connected":true/ } 0 .. $HOSTS - 1;

my (@spread, @put);
my $v = 1;
for my $n (1 .. $CHANGES) {
    my $h = $n % $HOSTS;
    my $t0 = time;
    my ($st, $tag, $resp) = request($port[$h], PUT => '/admin/definitions/fleet', doc($n % 100));
    my $t1 = time;
    die "change $n on h$h: $st\n$resp\n" unless $st == 200;
    $v = $tag;
    my %pending = map { $_ => 1 } 0 .. $HOSTS - 1;
    while (%pending) {
        for my $i (keys %pending) {
            delete $pending{$i} if version_of($i) >= $v;
        }
        last unless %pending;
        die "version $v did not reach h" . join(',h', sort keys %pending) . " in 10 s\n" if time - $t1 > 10;
        sleep $POLL;
    }
    push @put, ($t1 - $t0) * 1000;
    push @spread, (time - $t1) * 1000;
}

sub pct {
    my ($p, @v) = @_;
    @v = sort { $a <=> $b } @v;
    my $i = int($p / 100 * @v + 0.999999) - 1;
    $i = 0 if $i < 0;
    return $v[$i];
}

my $size = length doc(0);
printf "definitions-fleet: %d hosts x %d worker(s), %d flags (%d bytes), interval=%s, %d changes, signed\n",
    $HOSTS, $WORKERS, $FLAGS, $size, $INTERVAL, $CHANGES;
printf "  the PUT (proposal, CAS, stored, this host's workers): p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
    pct(50, @put), pct(99, @put), pct(100, @put);
printf "  from the 200 until all %d hosts serve it:            p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
    $HOSTS, pct(50, @spread), pct(99, @spread), pct(100, @spread);

my $bad = 0;
for my $i (0 .. $HOSTS - 1) {
    my $log = read_file("$PREFIX/h$i/logs/error.log") // '';
    if ($log =~ /\[(alert|crit|emerg)\][^\n]*/) { warn "h$i: $&\n"; $bad = 1 }
}
exit $bad;
