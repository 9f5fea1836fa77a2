#!/usr/bin/perl
# bench/push.pl - live push at scale (docs/push.md).
#
#   bench/push.pl [N]     (module built: ./build.sh first)
#
# Starts one nginx (2 workers) under build/bench-push/, opens N SSE streams
# ({loc}v1/events) and N WebSockets (/ws, each after its first
# flags_refreshed), then, ROUNDS times, changes the project and measures
# for every client the time from the change to the moment its event
# arrived.  Odd rounds roll a flag back the way production does: one
# GET /flags (an enabled evaluation), then error reports; the clock starts
# just before the report that crosses min_errors.  Even rounds clear the
# rollback through flags_admin (the clock starts before that request):
# p50 / p99 / max over all clients, per kind.  Memory: the workers' RSS
# (VmRSS of /proc) before the clients connect and with them connected,
# divided by the number of connections.
#
# One process drives every client with IO::Select; the file limit is raised
# (ulimit -n, by re-executing under sh; nginx inherits it) so that 2N
# sockets fit.
#
# Environment: N (5000: 10,000 connections), ROUNDS (6), BENCH_PORT (18090), NGINX_BIN.
# Exit status: non-zero when nginx does not start, a client is refused or
# misses an event (within 5 s), or the error log has [alert]/[crit].
use strict;
use warnings;
use FindBin;
use lib "$FindBin::Bin/../t/helper";
use NginxProc qw(nginx_start nginx_stop worker_pids);
use IO::Socket::INET;
use IO::Select;
use File::Path qw(make_path remove_tree);
use Time::HiRes qw(time sleep);
use MIME::Base64 qw(encode_base64);

my $N = $ARGV[0] // $ENV{N} // 5000;
my $ROUNDS = $ENV{ROUNDS} // 6;
my $PORT = $ENV{BENCH_PORT} // 18090;
my $BIN = $ENV{NGINX_BIN} // '/usr/sbin/nginx';
my $ROOT = "$FindBin::Bin/..";
my $MODULE = "$ROOT/build/ngx_http_flags_module.so";
my $PREFIX = "$ROOT/build/bench-push";

# room for 2N sockets here and in nginx (whose worker_connections, 4N +
# 512, should not exceed the limit either)
unless ($ENV{PUSH_BENCH_LIMITED}) {
    my $want = 4 * $N + 768;
    $ENV{PUSH_BENCH_LIMITED} = 1;
    exec 'sh', '-c', "ulimit -n $want 2>/dev/null || ulimit -n \$(ulimit -Hn); exec \"\$0\" \"\$@\"",
         $^X, $0, @ARGV;
    die "exec: $!";
}

$SIG{PIPE} = 'IGNORE';
die "no module at $MODULE: run ./build.sh\n" unless -f $MODULE;

remove_tree($PREFIX);
make_path("$PREFIX/conf", "$PREFIX/logs");
my $flags = join ',', qq({"name":"flag-0","enabled":true,"rolloutPercentage":100}),
    map { qq({"name":"flag-$_","enabled":true,"rolloutPercentage":50}) } 1 .. 29;
write_file("$PREFIX/conf/bench.json", qq({"flags":[$flags]}));
my $user = $> == 0 ? "user root;\n" : '';
write_file("$PREFIX/conf/nginx.conf", <<"_C_");
load_module $MODULE;
${user}worker_processes 2;
error_log logs/error.log warn;
pid logs/nginx.pid;
# one worker may get every client: push takes at most half of its
# worker_connections (docs/push.md)
events { worker_connections ${\ (4 * $N + 512)}; accept_mutex off; }
http {
    access_log off;
    flags_project bench token=pub_bench file=bench.json;
    flags_error_log off;
    flags_rollback min_errors=3 rate=1% window=60s;
    flags_push_max_connections ${\ (2 * $N)};
    server {
        listen 127.0.0.1:$PORT backlog=4096;
        location /ofrep/ { flags_ofrep; }
        location = /ws { flags_websocket; }
        location /admin/ { flags_admin; }
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
    }
}
_C_

my $master = nginx_start($BIN, $PREFIX, port => $PORT);
END { nginx_stop($master) if $master }
sleep 0.3;

sub write_file { open my $f, '>', $_[0] or die "$_[0]: $!"; print $f $_[1]; close $f }
sub read_file { open my $f, '<', $_[0] or return undef; local $/; my $s = <$f>; close $f; $s }

sub rss_kb {
    my $t = 0;
    for my $pid (worker_pids($master)) {
        my ($kb) = (read_file("/proc/$pid/status") // '') =~ /^VmRSS:\s+(\d+)/m;
        $t += $kb // 0;
    }
    return $t;
}

sub connect_one {
    my $s;
    for (1 .. 50) {
        $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $PORT, Timeout => 5) and last;
        sleep 0.05;
    }
    die "connect: $!\n" unless $s;
    $s->blocking(0);
    return $s;
}

# one request on a connection of its own; dies unless the status is $want
sub request {
    my ($method, $path, $body, $want) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $PORT, Timeout => 5) or die;
    my $req = "$method $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        . "Authorization: Bearer pub_bench\r\n";
    $req .= "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n" if defined $body;
    print $s $req . "\r\n" . ($body // '');
    local $/;
    my $resp = <$s> // '';
    die "$method $path: $resp\n" unless $resp =~ m{^HTTP/1\.1 $want };
    return $resp;
}

my $REPORT = '{"flagName":"flag-0","message":"TypeError: x is undefined"}';

# odd rounds: the rollback of flag-0 (100 %, so the GET is an enabled
# evaluation); returns the time just before the report that trips it
sub roll_back {
    request(GET => '/flags?userId=u-1', undef, 200);
    request(POST => '/ingest/errors', $REPORT, 204) for 1 .. 2;
    my $t0 = time;
    request(POST => '/ingest/errors', $REPORT, 204);
    return $t0;
}

sub clear {
    my $t0 = time;
    request(DELETE => '/admin/rollbacks/bench/flag-0', undef, 204);
    return $t0;
}

my $rss0 = rss_kb();
my (@clients, %by_fd);
my $t = time;

# SSE: the stream is open once its header arrived
for my $i (1 .. $N) {
    my $s = connect_one();
    syswrite $s, "GET /ofrep/v1/events?token=pub_bench HTTP/1.1\r\nHost: x\r\n\r\n";
    push @clients, { s => $s, kind => 'sse', buf => '', ready => 0 };
}
for my $i (1 .. $N) {
    my $s = connect_one();
    my $key = encode_base64(join('', map { chr int rand 256 } 1 .. 16), '');
    syswrite $s, "GET /ws?token=pub_bench HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
        . "Connection: Upgrade\r\nSec-WebSocket-Key: $key\r\nSec-WebSocket-Version: 13\r\n\r\n";
    push @clients, { s => $s, kind => 'ws', buf => '', ready => 0 };
}
$by_fd{ fileno $_->{s} } = $_ for @clients;
my $sel = IO::Select->new(map { $_->{s} } @clients);

# Reads what arrived; a client is "ready" once connected (SSE header, WS
# first flags_refreshed) and "got" once a later event arrived.
sub pump {
    my ($until, $done) = @_;
    while (time < $until && !$done->()) {
        for my $s ($sel->can_read(0.05)) {
            my $c = $by_fd{ fileno $s };
            my $n = sysread($s, my $chunk, 65536);
            if (!$n) { die "a $c->{kind} client was closed\n" if defined $n || !$!{EAGAIN} ; next }
            $c->{buf} .= $chunk;
            my $t = time;
            if ($c->{kind} eq 'sse') {
                if (!$c->{ready} && $c->{buf} =~ s/^HTTP\/1\.1 (\d+).*?\r\n\r\n//s) {
                    die "SSE refused: $1\n" unless $1 == 200;
                    $c->{ready} = 1;
                }
                if ($c->{ready} && $c->{buf} =~ /refetchEvaluation/) { $c->{got} //= $t; $c->{buf} = '' }
            } else {
                if (!$c->{ready} && $c->{buf} =~ s/^HTTP\/1\.1 (\d+).*?\r\n\r\n//s) {
                    die "WebSocket refused: $1\n" unless $1 == 101;
                    $c->{ready} = 0.5;
                }
                while ($c->{ready} && $c->{buf} =~ /flags_refreshed.*?\]\}\]\}/s) {
                    $c->{buf} =~ s/^.*?flags_refreshed.*?\]\}\]\}//s;
                    if ($c->{ready} == 0.5) { $c->{ready} = 1 } else { $c->{got} //= $t }
                }
            }
        }
    }
}

pump(time + 60, sub { !grep { $_->{ready} != 1 } @clients });
my $ready = grep { $_->{ready} == 1 } @clients;
die "only $ready of ${\ scalar @clients} clients connected\n" if $ready != @clients;
printf "connected %d SSE + %d WebSocket clients in %.1f s\n", $N, $N, time - $t;
sleep 1;
my $rss1 = rss_kb();

my (%lat);
for my $round (1 .. $ROUNDS) {
    $_->{got} = undef for @clients;
    my $t0 = $round % 2 ? roll_back() : clear();
    pump(time + 5, sub { !grep { !defined $_->{got} } @clients });
    my @missed = grep { !defined $_->{got} } @clients;
    die scalar(@missed) . " clients missed the event of round $round\n" if @missed;
    push @{ $lat{ $_->{kind} } }, ($_->{got} - $t0) * 1000 for @clients;
    push @{ $lat{last} }, (sort { $a <=> $b } map { ($_->{got} - $t0) * 1000 } @clients)[-1];
    sleep 0.3;
}

sub pct {
    my ($p, @v) = @_;
    @v = sort { $a <=> $b } @v;
    return $v[int($p / 100 * $#v + 0.5)];
}

printf "%d rounds (rollback by reports, then cleared), time from the change to the event:\n", $ROUNDS;
for my $k ('sse', 'ws') {
    my @v = @{ $lat{$k} };
    printf "  %-9s p50 %6.1f ms   p99 %6.1f ms   max %6.1f ms\n",
        $k eq 'sse' ? 'SSE' : 'WebSocket', pct(50, @v), pct(99, @v), pct(100, @v);
}
my @last = @{ $lat{last} };
printf "  last client of a round: p50 %6.1f ms   max %6.1f ms\n", pct(50, @last), pct(100, @last);
printf "worker RSS: %d KB before, %d KB with %d connections: %.1f KB a connection\n",
    $rss0, $rss1, 2 * $N, ($rss1 - $rss0) / (2 * $N);

my $log = read_file("$PREFIX/logs/error.log") // '';
if ($log =~ /\[(alert|crit|emerg)\]/) {
    print STDERR "error log:\n$log";
    exit 1;
}
close $_->{s} for @clients;
exit 0;
