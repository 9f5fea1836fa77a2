package FlagsTest;

# Helpers for the scenario tests that Test::Nginx::Socket cannot express
# (nginx -t output, reloads, restarts, signals): each test gets its own
# prefix directory, starts its own nginx and ends only that nginx, by PID.

use strict;
use warnings;

use Exporter 'import';
use File::Path qw(make_path remove_tree);
use File::Basename qw(dirname);
use IO::Socket::INET;
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);

our @EXPORT = qw(prefix_dir write_file read_file nginx_conf nginx_test
                 nginx_start nginx_signal nginx_stop http_request
                 wait_for wait_port worker_pids);

my $Binary = $ENV{TEST_NGINX_BINARY} || 'nginx';
my $Module = $ENV{TEST_NGINX_LOAD_MODULES}
    or die "TEST_NGINX_LOAD_MODULES must name the module\n";
our $Port = $ENV{TEST_NGINX_FLAGS_PORT} || 1986;

my @Started;

sub prefix_dir {
    my ($name) = @_;
    my $base = $ENV{TEST_NGINX_SERVROOT} || 't/servroot';
    my $dir = dirname($base) . "/scenario-$name";
    remove_tree($dir);
    make_path("$dir/conf", "$dir/logs", "$dir/html");
    return $dir;
}

sub write_file {
    my ($path, $content) = @_;
    make_path(dirname($path));
    open my $fh, '>', $path or die "$path: $!";
    print $fh $content;
    close $fh;
}

sub read_file {
    my ($path) = @_;
    open my $fh, '<', $path or return undef;
    local $/;
    my $c = <$fh>;
    close $fh;
    return $c;
}

# A full nginx.conf around an http block body.
sub nginx_conf {
    my (%o) = @_;
    my $workers = $o{workers} // 2;
    my $user = $> == 0 ? "user root;\n" : '';
    return <<"_EOC_";
load_module $Module;
${user}worker_processes $workers;
daemon on;
master_process on;
error_log logs/error.log ${\($o{log_level} // 'info')};
pid logs/nginx.pid;
events { worker_connections 256; accept_mutex off; }
http {
    access_log off;
$o{http}
    server {
        listen 127.0.0.1:$Port;
        server_name localhost;
$o{server}
    }
}
_EOC_
}

# nginx -t: returns (exit status, everything nginx printed).
sub nginx_test {
    my ($dir) = @_;
    my $out = `$Binary -p $dir/ -c conf/nginx.conf -t 2>&1`;
    return ($? >> 8, $out);
}

sub nginx_start {
    my ($dir) = @_;
    my $out = `$Binary -p $dir/ -c conf/nginx.conf 2>&1`;
    die "nginx failed to start: $out" if $?;
    my $pid;
    wait_for(sub { $pid = read_file("$dir/logs/nginx.pid"); $pid }, 5)
        or die "no pid file in $dir/logs";
    chomp $pid;
    push @Started, $pid;
    wait_port($Port) or die "nginx does not listen on $Port";
    return $pid;
}

sub nginx_signal {
    my ($pid, $sig) = @_;
    kill $sig, $pid;
}

sub nginx_stop {
    my ($pid) = @_;
    return unless $pid && kill 0, $pid;
    kill 'QUIT', $pid;
    wait_for(sub { !kill 0, $pid }, 10) or kill 'KILL', $pid;
    @Started = grep { $_ != $pid } @Started;
}

END {
    nginx_stop($_) for @Started;
}

sub wait_for {
    my ($cond, $timeout) = @_;
    my $until = time + $timeout;
    while (time < $until) {
        my $r = $cond->();
        return $r if $r;
        sleep 0.05;
    }
    return undef;
}

sub wait_port {
    my ($port) = @_;
    return wait_for(sub {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                      PeerPort => $port, Timeout => 1);
        return $s ? 1 : 0;
    }, 5);
}

# The PIDs of the master's worker processes (children of the master).
sub worker_pids {
    my ($master) = @_;
    my @pids;
    opendir my $d, '/proc' or return ();
    for my $p (grep { /^\d+$/ } readdir $d) {
        my $stat = read_file("/proc/$p/stat") or next;
        my @f = split ' ', (split /\)\s/, $stat, 2)[1];
        push @pids, $p if $f[1] == $master;
    }
    @pids = sort { $a <=> $b } @pids;
    return wantarray ? @pids : scalar @pids;
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

1;
