package NginxProc;

# Starting and stopping nginx for the tests and the benchmarks: the one
# place that knows how (t/helper/FlagsTest.pm, bench/lib/LoadGen.pm and,
# through t/helper/nginxctl, the shell scripts use it).  Core Perl only,
# and it needs no test environment.
#
# nginx runs as a daemon with <prefix>/conf/nginx.conf; its master is
# known by the PID in <prefix>/logs/nginx.pid and is only ever signalled by
# that PID, never by name.  Only 127.0.0.1 is contacted.

use strict;
use warnings;

use Exporter 'import';
use File::Basename qw(dirname);
use File::Path qw(make_path);
use IO::Socket::INET;
use Time::HiRes qw(time sleep);

our @EXPORT_OK = qw(nginx_start nginx_stop nginx_signal worker_pids wait_for
                    wait_port read_file write_file);

sub read_file {
    my ($path) = @_;
    open my $fh, '<', $path or return undef;
    local $/;
    my $c = <$fh>;
    close $fh;
    return $c;
}

sub write_file {
    my ($path, $content) = @_;
    make_path(dirname($path));
    open my $fh, '>', $path or die "$path: $!\n";
    print $fh $content;
    close $fh or die "$path: $!\n";
}

# Polls $cond until it returns true (returned) or $timeout seconds pass
# (undef).
sub wait_for {
    my ($cond, $timeout) = @_;
    my $until = time + $timeout;
    while (1) {
        my $r = $cond->();
        return $r if $r;
        return undef if time >= $until;
        sleep 0.02;
    }
}

sub wait_port {
    my ($port, $timeout) = @_;
    return wait_for(sub {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                      Proto => 'tcp', Timeout => 1);
        return $s ? 1 : 0;
    }, $timeout // 5);
}

# nginx_start($bin, $prefix, port => P, wrap => 'cmd args', timeout => s):
# starts nginx and returns the master's PID once the pid file is written
# and, with a port, 127.0.0.1:port answers.  wrap runs nginx under another
# command (taskset, prlimit).  Dies with nginx's own words on failure.
sub nginx_start {
    my ($bin, $prefix, %o) = @_;
    my $timeout = $o{timeout} // 5;
    unlink "$prefix/logs/nginx.pid";
    my $wrap = $o{wrap} ? "$o{wrap} " : '';
    my $out = `$wrap$bin -p $prefix/ -c conf/nginx.conf 2>&1`;
    die "nginx failed to start: $out" if $?;
    my $pid = wait_for(sub {
        my $p = read_file("$prefix/logs/nginx.pid");
        return $p && $p =~ /^(\d+)/ ? $1 : undef;
    }, $timeout) or die "no pid file in $prefix/logs\n";
    if (defined $o{port}) {
        wait_port($o{port}, $timeout)
            or die "nginx does not listen on 127.0.0.1:$o{port}\n";
    }
    # the master listens before it forks its workers: a caller that counts
    # them must find them all
    my ($n) = (read_file("$prefix/conf/nginx.conf") // '') =~ /^\s*worker_processes\s+(\d+)\s*;/m;
    if ($n) {
        wait_for(sub { worker_pids($pid) >= $n }, $timeout)
            or die "nginx $pid did not start its $n workers\n";
    }
    return $pid;
}

sub nginx_signal {
    my ($pid, $sig) = @_;
    return kill $sig, $pid;
}

# Graceful stop (QUIT) of a master we started, by PID, waiting up to
# $timeout seconds (10); then TERM, then KILL of it and its workers.
# Returns true when it is gone.
sub nginx_stop {
    my ($pid, $timeout) = @_;
    return 1 unless $pid && kill 0, $pid;
    my @w = worker_pids($pid);
    kill 'QUIT', $pid;
    return 1 if wait_for(sub { !alive($pid) }, $timeout // 10);
    kill 'TERM', $pid;
    return 1 if wait_for(sub { !alive($pid) }, 3);
    kill 'KILL', $_ for @w;
    kill 'KILL', $pid;
    return wait_for(sub { !alive($pid) }, 3);
}

# Alive and not a zombie (a master we forked ourselves stays one until
# reaped).
sub alive {
    my ($pid) = @_;
    return 0 unless kill 0, $pid;
    my $stat = read_file("/proc/$pid/stat") // return 1;
    my $rest = (split /\)\s/, $stat, 2)[1] // return 1;
    return (split ' ', $rest)[0] ne 'Z';
}

# PIDs of the live children of a master, from /proc/<pid>/stat, sorted.
sub worker_pids {
    my ($master) = @_;
    my @pids;
    opendir my $d, '/proc' or return ();
    for my $p (grep { /^\d+$/ } readdir $d) {
        my $stat = read_file("/proc/$p/stat") or next;
        my $rest = (split /\)\s/, $stat, 2)[1] // next;
        my @f = split ' ', $rest;
        # f[0] = state, f[1] = ppid; a zombie is not a live worker
        push @pids, $p if $f[1] == $master && $f[0] ne 'Z';
    }
    closedir $d;
    @pids = sort { $a <=> $b } @pids;
    return wantarray ? @pids : scalar @pids;
}

1;
