package FlagsTest;

# Helpers for the scenario tests that Test::Nginx::Socket cannot express
# (nginx -t output, reloads, restarts, signals): each test gets its own
# prefix directory, starts its own nginx and ends only that nginx, by PID.
#
# With TEST_NGINX_USE_VALGRIND set (as for Test::Nginx), every nginx here,
# "nginx -t" included, runs under valgrind with t/valgrind.suppress: in the
# foreground (daemon off) as our child, master process and workers as
# usual (forked workers are checked too; --trace-children=yes also follows
# an exec).  Valgrind writes to <prefix>/valgrind/<start>.<pid>.log; when
# nginx_test() returns or nginx_stop() has seen nginx exit, the reports are
# read and a report with a frame in the module (ngx_http_flags_*, fl_*,
# fl::, a source file of src/ or the module's .so) fails the test file.
# Other reports are shown, not failed.  The helper's own waits get longer
# (TEST_NGINX_VALGRIND_SLOWDOWN, default 10 times); assertions do not.

use strict;
use warnings;

use Exporter 'import';
use File::Basename qw(dirname basename);
use lib dirname(__FILE__);
use NginxProc ();
use File::Path qw(make_path remove_tree);
use File::Spec;
use IO::Socket::INET;
use JSON::PP ();
use POSIX qw(WNOHANG);
use Test::Builder;
use Text::ParseWords qw(shellwords);
use Time::HiRes qw(sleep time);

our @EXPORT = qw(prefix_dir write_file read_file nginx_conf nginx_test raw_connect
                 nginx_start nginx_signal nginx_stop http_request
                 wait_for wait_port worker_pids valgrind_clean
                 default_report_log unused_port prometheus_api
                 spawn reap keepalive_request worker_request
                 worker_connections temp_paths host_request host_status
                 host_flag skip_without);

our $Binary = $ENV{TEST_NGINX_BINARY} || 'nginx';
my $Module = $ENV{TEST_NGINX_LOAD_MODULES}
    or die "TEST_NGINX_LOAD_MODULES must name the module\n";
our $Port = $ENV{TEST_NGINX_FLAGS_PORT} || 1986;

our $Valgrind = $ENV{TEST_NGINX_USE_VALGRIND};
my $Slowdown = $ENV{TEST_NGINX_VALGRIND_SLOWDOWN} || 10;
my $Here = dirname(File::Spec->rel2abs(__FILE__));
my $Suppressions = File::Spec->catfile($Here, '..', 'valgrind.suppress');
# the module's own source files, to attribute valgrind frames
my $OwnFiles = join '|', map { quotemeta basename($_) }
    glob("$Here/../../src/*.[ch] $Here/../../src/core/*.[ch]pp $Here/../../src/core/*.h");

my @Started;

# Without flags_error_log, reports go beside nginx's compiled-in access log
# (--http-log-path; on Debian /var/log/nginx/flags-errors.log), a system
# path no test writes to (nginx_conf() sets a log under the prefix).
sub default_report_log {
    my ($log) = `$Binary -V 2>&1` =~ /--http-log-path=(\S+)/;
    $log //= 'logs/access.log';
    $log =~ s{[^/]*$}{flags-errors.log};
    return $log;
}
my %Child;       # under valgrind: pid => its valgrind log pattern
my $Runs = 0;    # valgrind runs so far (names the log files)

# A wait of the helper (never an assertion's bound), longer under valgrind.
sub slow { $Valgrind ? $_[0] * $Slowdown : $_[0] }

# The whole file is skipped, naming the first of the programs that is not
# on PATH (the real redis-server, prometheus, ... the tests start).
sub skip_without {
    for my $bin (@_) {
        next if `command -v $bin 2>/dev/null`;
        Test::Builder->new->skip_all("$bin is not installed");
    }
}

# GET a Prometheus HTTP API path (/api/v1/query?..., /api/v1/alerts) of
# the server a test started on 127.0.0.1:$port: its decoded JSON, or undef.
sub prometheus_api {
    my ($port, $path) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                  Timeout => 5) or return undef;
    print $s "GET $path HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    local $/;
    my $resp = <$s> // '';
    my (undef, $body) = split /\r\n\r\n/, $resp, 2;
    require JSON::PP;
    return eval { JSON::PP::decode_json($body // '') };
}

# A port of 127.0.0.1 nobody listens on now, never the suite's own nor one
# this test got before: for the extra servers a test starts (backends,
# Redis, Prometheus, more nginx hosts).  Drawn at random below the
# kernel's ephemeral range (ip_local_port_range): a port the kernel hands
# out itself can become, before the server binds it, the local end of one
# of the many outgoing connections a test makes (to Redis, Sentinel, a
# backend), and the server's bind() then fails.
my %Given = ($Port => 1);
my ($PortLo, $PortHi) = (10000, 32767);
if (open my $range, '<', '/proc/sys/net/ipv4/ip_local_port_range') {
    my ($first) = split ' ', (<$range> // '');
    $PortHi = $first - 1 if defined $first && $first =~ /^\d+$/ && $first > $PortLo + 1000;
    close $range;
}
sub unused_port {
    for (1 .. 500) {
        my $p = $PortLo + int rand($PortHi - $PortLo + 1);
        next if $Given{$p};
        my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $p,
                                      Listen => 1, ReuseAddr => 1)
            or next;
        close $s;
        $Given{$p} = 1;
        return $p;
    }
    die "no unused port in 500 tries\n";
}

sub prefix_dir {
    my ($name) = @_;
    my $base = $ENV{TEST_NGINX_SERVROOT} || 't/servroot';
    my $dir = dirname($base) . "/scenario-$name";
    remove_tree($dir);
    make_path("$dir/conf", "$dir/logs", "$dir/html");
    return $dir;
}

sub write_file { NginxProc::write_file(@_) }
sub read_file  { NginxProc::read_file(@_) }

# The http block's temp directories under the prefix, those CONF (the text
# of a configuration) does not set itself: nginx would otherwise create
# its compiled-in ones (/var/lib/nginx/body, ...) and chown them to the
# worker user at every start.  For the tests that write nginx.conf
# themselves.
sub temp_paths {
    my ($conf) = @_;
    my $lines = '';
    for my $kind (qw(client_body proxy fastcgi uwsgi scgi)) {
        $lines .= "    ${kind}_temp_path ${kind}_temp;\n" unless ($conf // '') =~ /\b${kind}_temp_path\b/;
    }
    return $lines;
}

# A full nginx.conf around an http block body.  Whatever the test does not
# set itself is kept under the prefix, never in the system's paths: the
# report log (without flags_error_log it is the default beside nginx's
# compiled-in access log, on Debian /var/log/nginx/flags-errors.log) and
# the temp directories (compiled-in /var/lib/nginx/body and the like,
# which nginx creates and gives to the worker user at every start).  These
# lines come last in the http block, so no line a test counts moves.
# default_report_log => 1 leaves the report log at its default (t/032
# checks the default in a mount namespace of its own).
sub nginx_conf {
    my (%o) = @_;
    my $workers = $o{workers} // 2;
    my $user = $> == 0 ? "user root;\n" : '';
    my $own = '';
    my $all = ($o{http} // '') . ($o{server} // '');
    $own .= "    flags_error_log logs/flags-errors.log;\n"
        if !$o{default_report_log} && $all !~ /\bflags_error_log\b/;
    $own .= temp_paths($all);
    return <<"_EOC_";
load_module $Module;
${user}worker_processes $workers;
daemon ${\($Valgrind ? 'off' : 'on')};
master_process on;
error_log logs/error.log ${\($o{log_level} // 'info')};
pid logs/nginx.pid;
events { worker_connections 256; accept_mutex off; }
http {
    access_log off;
${\($o{http} // '')}
    server {
        listen 127.0.0.1:$Port;
        server_name localhost;
${\($o{server} // '')}
    }
$own}
_EOC_
}

# ---- valgrind -----------------------------------------------------------

# The valgrind command line (as Test::Nginx builds it for a number, else the
# option string itself) and the log file pattern of this run.
sub valgrind_cmd {
    my ($dir) = @_;
    make_path("$dir/valgrind");
    my $log = "$dir/valgrind/" . ++$Runs . '.%p.log';
    my @opts;
    if ($Valgrind =~ /^\d+$/) {
        @opts = qw(-q --tool=memcheck --leak-check=full --show-possibly-lost=no
                   --num-callers=100 --keep-debuginfo=yes --trace-children=yes
                   --gen-suppressions=all);
        push @opts, "--suppressions=$Suppressions" if -f $Suppressions;
    } else {
        @opts = ('-q', shellwords($Valgrind));
    }
    push @opts, "--log-file=$log" unless grep { /^--log-(?:file|fd|socket)\b/ } @opts;
    return ($log, 'valgrind', @opts);
}

# Reports in valgrind's output: a header line with at least one stack,
# followed by the suppression --gen-suppressions printed for it.
sub valgrind_reports {
    my ($text) = @_;
    my (@reports, $cur, $in_supp);
    my $close = sub {
        push @reports, $cur if $cur && $cur =~ /^==\d+==\s+(?:at|by) 0x/m;
        undef $cur;
    };
    for my $line (split /^/, $text) {
        if ($in_supp || $line =~ /^\{\s*$/) {
            $close->();
            $reports[-1] .= $line if @reports;
            $in_supp = $line !~ /^\}/;
        } elsif ($line =~ /^==\d+== \S/) {
            $close->();
            $cur = $line;
        } elsif ($line =~ /^==\d+==\s*$/) {
            $close->();
        } elsif (defined $cur) {
            $cur .= $line;
        }
    }
    $close->();
    return @reports;
}

sub module_frame {
    my ($report) = @_;
    for my $l (split /\n/, $report) {
        next unless $l =~ /^==\d+==\s+(?:at|by) 0x/;
        return 1 if $l =~ /\b(?:ngx_http_flags_\w+|fl_\w+|fl::)/
                 || $l =~ /ngx_http_flags_module\.so/
                 || (length $OwnFiles && $l =~ /\((?:$OwnFiles):\d+\)/);
    }
    return 0;
}

# Checks the valgrind logs of a run (the pattern valgrind_cmd gave): true
# when valgrind found nothing in the module.  A module report is a failed
# test (from END, after done_testing, that still fails the file: it breaks
# the plan); other reports are only shown.
sub valgrind_clean {
    my ($pattern, $what) = @_;
    return 1 unless $Valgrind && defined $pattern;
    (my $glob = $pattern) =~ s/%p/*/;
    my (@ours, @other);
    for my $f (sort glob $glob) {
        for my $r (valgrind_reports(read_file($f) // '')) {
            if (module_frame($r)) { push @ours, $r } else { push @other, $r }
        }
    }
    my $tb = Test::Builder->new;
    if (@other) {
        $tb->diag("valgrind: " . @other . " report(s) outside the module ($what), "
                  . "not counted as failures:\n" . join "\n", @other);
    }
    return 1 unless @ours;
    $tb->ok(0, "valgrind: no report in the module ($what)");
    $tb->diag(join "\n", @ours);
    return 0;
}

# ---- running nginx -------------------------------------------------------

# nginx -t: returns (exit status, everything nginx printed).
sub nginx_test {
    my ($dir, $conf) = @_;
    $conf //= 'conf/nginx.conf';
    unless ($Valgrind) {
        my $out = `$Binary -p $dir/ -c $conf -t 2>&1`;
        return ($? >> 8, $out);
    }
    my ($log, @vg) = valgrind_cmd($dir);
    my $q = join ' ', map { "'$_'" } @vg, $Binary, '-p', "$dir/", '-c', $conf, '-t';
    my $out = `$q 2>&1`;
    my $rc = $? >> 8;
    valgrind_clean($log, "nginx -t in $dir");
    return ($rc, $out);
}

# nginx_start($dir, wrap => 'prlimit --fsize=4000'): the command runs nginx
# under another one (a resource limit, say).
# nginx_start($dir, wrap => 'prlimit --fsize=4000'): the command runs nginx
# under another one (a resource limit, say).
sub nginx_start {
    my ($dir, %o) = @_;
    return nginx_start_valgrind($dir) if $Valgrind;
    my $pid = NginxProc::nginx_start($Binary, $dir, port => $Port, wrap => $o{wrap},
                                     timeout => slow(5));
    push @Started, $pid;
    return $pid;
}

# Under valgrind nginx stays in the foreground: our child, in a process
# group of its own, its stdout and stderr in <prefix>/valgrind/N.out.
sub nginx_start_valgrind {
    my ($dir) = @_;
    unlink "$dir/logs/nginx.pid";
    my ($log, @vg) = valgrind_cmd($dir);
    (my $out = $log) =~ s/\.%p\.log$/.out/;
    my @cmd = (@vg, $Binary, '-p', "$dir/", '-c', 'conf/nginx.conf');
    my $child = fork;
    die "fork: $!" unless defined $child;
    if ($child == 0) {
        setpgrp(0, 0);
        open STDOUT, '>', $out or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        { no warnings 'exec'; exec { $cmd[0] } @cmd; }
        POSIX::_exit(127);
    }
    $Child{$child} = $log;
    push @Started, $child;
    my $exited = sub { waitpid($child, WNOHANG) == $child };
    my $pid = wait_for(sub {
        return -1 if $exited->();
        my $p = read_file("$dir/logs/nginx.pid");
        return $p && $p =~ /^(\d+)/ ? $1 : 0;
    }, 5);
    my $up = $pid && $pid != -1 && wait_for(sub {
        return -1 if $exited->();
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port,
                                      Timeout => 1);
        return $s ? 1 : 0;
    }, 5);
    if (!$up || $up == -1) {
        my $why = !$pid ? 'no pid file in ' . "$dir/logs" : 'nginx exited or does not listen';
        if (kill 0, $child) {
            nginx_stop($child);          # checks the valgrind logs too
        } else {
            valgrind_clean(delete $Child{$child}, "nginx $child (failed start)");
            @Started = grep { $_ != $child } @Started;
        }
        die "nginx under valgrind failed to start ($why): " . (read_file($out) // '');
    }
    # The master listens before it forks its workers; a daemon nginx has
    # them by the time it returns, a slow one under valgrind may not yet.
    my ($n) = (read_file("$dir/conf/nginx.conf") // '') =~ /^\s*worker_processes\s+(\d+)\s*;/m;
    wait_for(sub { worker_pids($child) >= $n }, 5) if $n;
    return $child;
}

sub nginx_signal { NginxProc::nginx_signal(@_) }

sub nginx_stop {
    my ($pid) = @_;
    if (exists $Child{$pid}) {
        # our child: gone once reaped (kill 0 is true for a zombie)
        my $gone = sub { waitpid($pid, WNOHANG) == $pid || !kill 0, $pid };
        kill 'QUIT', $pid;
        unless (wait_for($gone, 10)) {
            kill 'TERM', -$pid;
            wait_for($gone, 5) or do { kill 'KILL', -$pid; waitpid($pid, 0) };
        }
        @Started = grep { $_ != $pid } @Started;
        my $log = delete $Child{$pid};
        valgrind_clean($log, "nginx $pid");
        return;
    }
    NginxProc::nginx_stop($pid, slow(10));
    @Started = grep { $_ != $pid } @Started;
}

END {
    my $status = $?;
    # a copy: nginx_stop() takes each one out of @Started
    nginx_stop($_) for @{[ @Started ]};
    $? = $status;
}

# A helper program the test starts (redis-server, prometheus), its output
# into $log, without the sanitizer runtime a SANITIZE run preloads for
# nginx: returns its PID, which reap() ends (TERM, then KILL after 10 s).
sub spawn {
    my ($log, @cmd) = @_;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        delete $ENV{LD_PRELOAD};
        open STDOUT, '>', $log or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        { no warnings 'exec'; exec @cmd; }
        POSIX::_exit(127);
    }
    return $pid;
}

sub reap {
    my ($pid) = @_;
    return unless $pid && kill 0, $pid;
    kill 'TERM', $pid;
    my $until = time + 10;
    sleep 0.1 while waitpid($pid, WNOHANG) != $pid && time < $until;
    if (kill 0, $pid) { kill 'KILL', $pid; waitpid($pid, 0); }
}

sub wait_for {
    my ($cond, $timeout) = @_;
    return NginxProc::wait_for($cond, slow($timeout));
}

sub wait_port {
    my ($port) = @_;
    return NginxProc::wait_port($port, slow(5));
}

# The PIDs of the master's worker processes (children of the master).
sub worker_pids { NginxProc::worker_pids(@_) }

# A connection to the nginx under test, for tests that write raw bytes.
sub raw_connect {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port,
                                  Timeout => 5);
    die "connect: $!" unless $s;
    return $s;
}

# One request on its own connection: returns (status, \%headers, body).
sub http_request {
    my ($method, $path, %o) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port,
                                  Timeout => 10)
        or return (0, {}, "connect: $!");
    my $body = $o{body} // '';
    my $req = "$method $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    for my $h (@{ $o{headers} || [] }) {
        $req .= "$h\r\n";
    }
    $req .= "Content-Length: " . length($body) . "\r\n" if length $body;
    $req .= "\r\n$body";
    print $s $req;
    local $/;
    my $resp = <$s> // '';
    close $s;
    my ($head, $rbody) = split /\r\n\r\n/, $resp, 2;
    return (0, {}, $resp) unless defined $head;
    my ($status_line, @lines) = split /\r\n/, $head;
    my ($status) = $status_line =~ m{^HTTP/1\.\d (\d+)};
    my %h;
    for (@lines) {
        my ($k, $v) = split /:\s*/, $_, 2;
        $h{lc $k} = $v;
    }
    return ($status // 0, \%h, $rbody // '');
}

# One request on a keep-alive connection kept between calls (opened
# again when the server closed it): returns (status, \%headers, body).
my $Ka;
sub keepalive_request {
    my ($method, $path, %o) = @_;
    my $body = $o{body} // '';
    for my $try (1, 2) {
        $Ka ||= IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port,
                                      Timeout => 10) or return (0, {}, "connect: $!");
        my $req = "$method $path HTTP/1.1\r\nHost: localhost\r\n";
        $req .= "$_\r\n" for @{ $o{headers} || [] };
        $req .= "Content-Length: " . length($body) . "\r\n" if length $body;
        print $Ka "$req\r\n$body";
        my $head = '';
        while (my $l = <$Ka>) { $head .= $l; last if $l eq "\r\n" }
        if ($head eq '') { undef $Ka; next }
        my ($status, @lines) = split /\r\n/, $head;
        ($status) = $status =~ m{^HTTP/1\.1 (\d+)};
        my %h = map { my ($k, $v) = split /:\s*/, $_, 2; (lc $k, $v) } @lines;
        my $rbody = '';
        read($Ka, $rbody, $h{'content-length'}) if $h{'content-length'};
        undef $Ka if ($h{connection} // '') =~ /close/i;
        return ($status // 0, \%h, $rbody);
    }
    return (0, {}, '');
}

# One request on the keep-alive connection $s, with the token of project
# shop (or $token) and a JSON content type: (status, body, the X-Worker
# header's pid).
sub worker_request {
    my ($s, $method, $path, $body, $token) = @_;
    $body //= '';
    $token //= 'tok_shop';
    print $s "$method $path HTTP/1.1\r\nHost: localhost\r\n"
           . "Authorization: Bearer $token\r\nContent-Type: application/json\r\n"
           . "Content-Length: " . length($body) . "\r\n\r\n$body";
    my $head = '';
    while ($head !~ /\r\n\r\n/) {
        my $n = sysread($s, $head, 4096, length $head);
        die "connection closed" unless $n;
    }
    my ($h, $rest) = split /\r\n\r\n/, $head, 2;
    my ($len) = $h =~ /^Content-Length: (\d+)/mi;
    $len //= 0;
    while (length $rest < $len) {
        my $n = sysread($s, $rest, $len - length $rest, length $rest);
        die "connection closed" unless $n;
    }
    die "Connection: close" if $h =~ /^Connection: close/mi;
    my ($st) = $h =~ m{^HTTP/1\.1 (\d+)};
    my ($pid) = $h =~ /^X-Worker: (\d+)/mi;
    return ($st, $rest, $pid);
}

# Keep-alive connections, one on each of two workers, found by the
# X-Worker header that $path answers with: the sockets, by worker pid.
sub worker_connections {
    my ($path, $tries) = @_;
    my %by_worker;
    my $asked = 0;
    for (1 .. ($tries // 60)) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port,
                                      Timeout => 10) or die "connect: $!";
        my (undef, undef, $pid) = worker_request($s, 'GET', $path);
        $asked++;
        if ($pid && !$by_worker{$pid}) { $by_worker{$pid} = $s } else { close $s }
        last if keys %by_worker == 2;
    }
    # in list context, also how many requests the probing made
    return wantarray ? (\%by_worker, $asked) : \%by_worker;
}

# The hosts of a fleet test listen on ports of their own: one request to
# the host on $port, flags_status (at $path, default /flags-status) of
# that host decoded, and one flag of its first project (undef when the
# host does not answer).
sub host_request {
    my ($port, @args) = @_;
    local $Port = $port;
    return http_request(@args);
}

sub host_status {
    my ($port, $path) = @_;
    my ($st, undef, $body) = host_request($port, GET => $path // '/flags-status');
    return undef unless $st && $st == 200;
    return JSON::PP::decode_json($body);
}

sub host_flag {
    my ($port, $name, $path) = @_;
    my $s = host_status($port, $path) or return undef;
    my ($f) = grep { $_->{name} eq $name } @{ $s->{projects}[0]{flags} };
    return $f;
}

1;
