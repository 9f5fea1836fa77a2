#!/usr/bin/perl
# bench/metrics.pl - flags_metrics with 1,000 flags (docs/metrics.md).
#
#   bench/metrics.pl            (module built: ./build.sh first)
#
# One nginx, one worker, one project of FLAGS flags (bench/gen-flags.py,
# seed 42), every flag evaluated and one of them rolled back, so every
# family has samples.  Then:
#   - the body: bytes, lines, and bytes once gzip'd (what a Prometheus
#     that asks for gzip would receive if nginx's gzip were on);
#   - one client, one keep-alive connection, SCRAPES scrapes one after the
#     other: wall time per scrape (mean, p50, p99) as the client sees it;
#   - CONNS connections for DURATION s (bench/lib/LoadGen.pm): scrapes/s,
#     and the worker's CPU time per scrape (utime + stime of
#     /proc/<pid>/stat), the time nginx spends rendering and sending one.
#
# Environment: FLAGS (1000), SCRAPES (300), CONNS (4), DURATION (3),
# BENCH_PORT (18095), NGINX_BIN.  Exit status: non-zero when nginx does not
# start, a scrape is not a 200 of the expected size, or the error log has
# [alert]/[crit].
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/helper", "$FindBin::Bin/lib";
use NginxProc qw(nginx_start nginx_stop worker_pids);
use LoadGen ();
use IO::Socket::INET;
use IO::Compress::Gzip qw(gzip $GzipError);
use File::Path qw(make_path remove_tree);
use POSIX ();
use Time::HiRes qw(time);

my $FLAGS = $ENV{FLAGS} // 1000;
my $SCRAPES = $ENV{SCRAPES} // 300;
my $CONNS = $ENV{CONNS} // 4;
my $DURATION = $ENV{DURATION} // 3;
my $PORT = $ENV{BENCH_PORT} // 18095;
my $BIN = $ENV{NGINX_BIN} // '/usr/sbin/nginx';
my $ROOT = "$FindBin::Bin/..";
my $MODULE = "$ROOT/build/ngx_http_flags_module.so";
my $PREFIX = "$ROOT/build/bench-metrics";

die "no module at $MODULE: run ./build.sh\n" unless -f $MODULE;
$SIG{PIPE} = 'IGNORE';

remove_tree($PREFIX);
make_path("$PREFIX/conf", "$PREFIX/logs");
system("python3 '$FindBin::Bin/gen-flags.py' --flags $FLAGS --seed 42 "
       . "--name-prefix ff >'$PREFIX/conf/bench.json'") == 0
    or die "gen-flags.py failed\n";
my $user = $> == 0 ? "user root;\n" : '';
NginxProc::write_file("$PREFIX/conf/nginx.conf", <<"_C_");
load_module $MODULE;
${user}worker_processes 1;
error_log logs/error.log warn;
pid logs/nginx.pid;
events { worker_connections 256; }
http {
    access_log off;
    flags_project bench token=tok_bench file=bench.json;
    flags_error_log off;
    server {
        listen 127.0.0.1:$PORT;
        keepalive_requests 100000;
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /metrics { flags_metrics; allow 127.0.0.1; deny all; }
    }
}
_C_

my $master = nginx_start($BIN, $PREFIX, port => $PORT);
END { nginx_stop($master) if $master }
my ($worker) = worker_pids($master);

# one keep-alive connection; request() returns (status, body)
my $conn = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $PORT, Timeout => 10)
    or die "connect: $!\n";
sub request {
    my ($req) = @_;
    print $conn $req;
    my $head = '';
    while ($head !~ /\r\n\r\n/) {
        my $n = sysread($conn, $head, 65536, length $head);
        die "connection closed\n" unless $n;
    }
    my ($h, $body) = split /\r\n\r\n/, $head, 2;
    my ($status) = $h =~ m{^HTTP/1\.1 (\d+)};
    my ($len) = $h =~ /\r\nContent-Length: (\d+)/i;
    $len //= 0;
    while (length $body < $len) {
        my $n = sysread($conn, $body, $len - length $body, length $body);
        die "connection closed\n" unless $n;
    }
    return ($status, $body);
}

my $scrape = "GET /metrics HTTP/1.1\r\nHost: b\r\n\r\n";

# every flag evaluated, and the first one rolled back (20 errors, the
# default min_errors, against one enabled evaluation)
for (1 .. 3) {
    my ($s) = request("GET /flags?userId=bench-user-7&plan=pro HTTP/1.1\r\nHost: b\r\n"
                      . "Authorization: Bearer tok_bench\r\n\r\n");
    die "GET /flags: $s\n" unless $s == 200;
}
my ($first) = do { local $/; open my $f, '<', "$PREFIX/conf/bench.json" or die; <$f> }
    =~ /"name":\s*"([^"]+)"/;
for (1 .. 20) {
    my $b = qq({"flagName":"$first","message":"bench"});
    my ($s) = request("POST /ingest/errors HTTP/1.1\r\nHost: b\r\n"
                      . "Authorization: Bearer tok_bench\r\nContent-Type: application/json\r\n"
                      . "Content-Length: " . length($b) . "\r\n\r\n$b");
    die "POST /ingest/errors: $s\n" unless $s == 204;
}

my ($s, $body) = request($scrape);
die "GET /metrics: $s\n" unless $s == 200;
die "no rollback in the metrics\n" unless $body =~ /^flags_rolled_back\{[^}]*\} 1$/m;
my $size = length $body;
my $lines = () = $body =~ /\n/g;
gzip(\$body => \my $gz) or die "gzip: $GzipError\n";

# ---- one client, one scrape after the other ----------------------------
my @t;
for (1 .. $SCRAPES) {
    my $t0 = time;
    my ($st, $b) = request($scrape);
    push @t, time - $t0;
    die "scrape: $st, " . length($b) . " bytes\n" unless $st == 200 && length $b == $size;
}
@t = sort { $a <=> $b } @t;
my $mean = 0;
$mean += $_ for @t;
$mean /= @t;
my $pct = sub { $t[int($_[0] * $#t + 0.5)] };
close $conn;

# ---- CONNS connections ------------------------------------------------------
sub cpu_ticks {
    my $stat = NginxProc::read_file("/proc/$worker/stat") // '';
    $stat =~ s/^.*\) //s;
    my @f = split ' ', $stat;
    return $f[11] + $f[12];                    # utime + stime
}
my $hz = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;
my $c0 = cpu_ticks();
my $bad = 0;
my $st = LoadGen::run(
    port => $PORT, conns => $CONNS, depth => 1, max_seconds => $DURATION,
    next => sub { ($scrape, ['metrics', 200]) },
    on_response => sub { $bad++ unless length($_[2]) == $size },
    drain_seconds => 5,
);
my $cpu = (cpu_ticks() - $c0) / $hz;
my $answered = $st->{answered} || 1;

printf "flags_metrics, %d flags in one project (bench/gen-flags.py, seed 42)\n", $FLAGS;
printf "  body                %d bytes, %d lines (%.0f bytes a flag); gzip'd %d bytes\n",
    $size, $lines, $size / $FLAGS, length $gz;
printf "  one client          %d scrapes: mean %.0f us, p50 %.0f us, p99 %.0f us (%.0f scrapes/s)\n",
    $SCRAPES, $mean * 1e6, $pct->(0.5) * 1e6, $pct->(0.99) * 1e6, 1 / $mean;
printf "  %d connections       %.0f scrapes/s over %.1f s (%d answered, %d unexpected)\n",
    $CONNS, $st->{answered} / $st->{elapsed}, $st->{elapsed}, $st->{answered},
    $st->{unexpected} + $bad;
printf "  worker CPU          %.0f us a scrape (utime + stime, %d Hz ticks)\n",
    $cpu / $answered * 1e6, $hz;

my $log = NginxProc::read_file("$PREFIX/logs/error.log") // '';
my $fail = $st->{unexpected} + $bad + $st->{unanswered};
if ($log =~ /\[(?:alert|crit|emerg)\]/) {
    print STDERR "error log:\n$log";
    $fail++;
}
exit($fail ? 1 : 0);
