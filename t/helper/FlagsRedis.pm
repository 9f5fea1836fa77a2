package FlagsRedis;

# What the fleet tests (t/08x) do with Debian's redis-server and
# redis-cli, once: start a server on a port of the test's own, in a
# directory of the test's own, without persistence unless asked; end it by
# its PID; run one redis-cli command and read its answer.
#
#   my $pid = redis_server($port, $dir, @more);   # dies if it does not listen
#   redis_kill($pid);                              # SIGKILL, then reaped
#   my @lines = redis_cli($port, 'HGETALL', $key); # --raw, one line a value
#   my $mon = redis_monitor($port);                # MONITOR: every command
#   my $l = $mon->line($seconds);                  # the next one, or undef
#
# @more are more redis-server arguments ('--requirepass', 'x', ...); they
# follow the defaults, so a later '--save' or '--dbfilename' wins.  The
# server's output goes to $dir/redis.log.

use strict;
use warnings;
use Exporter 'import';
use FlagsTest qw(spawn wait_port);
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time);

our @EXPORT = qw(redis_server redis_kill redis_cli redis_monitor);

sub redis_server {
    my ($port, $dir, @more) = @_;
    my $pid = spawn("$dir/redis.log", 'redis-server', '--port', $port,
                    '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
                    '--dir', $dir, @more);
    wait_port($port) or die "redis-server did not listen on $port\n";
    return $pid;
}

sub redis_kill {
    my ($pid) = @_;
    return unless $pid;
    kill 'KILL', $pid;
    waitpid $pid, 0;
}

# One command: its answer's lines (redis-cli --raw), each argument quoted
# for the shell whatever it holds.
sub redis_cli {
    my ($port, @cmd) = @_;
    my $q = join ' ', map { my $a = $_; $a =~ s/'/'\\''/g; "'$a'" } @cmd;
    my @out = `redis-cli -h 127.0.0.1 -p $port --raw $q 2>&1`;
    chomp @out;
    return @out;
}

# MONITOR on a connection of its own: every command the server runs, one
# line each, read as they come.
sub redis_monitor {
    my ($port) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                     Timeout => 5)
        or die "MONITOR: $!\n";
    print $sock "MONITOR\r\n";
    my $mon = bless { sock => $sock, buf => '' }, 'FlagsRedis::Monitor';
    my $ok = $mon->line(5) // '';
    die "MONITOR answered '$ok'\n" unless $ok eq '+OK';
    return $mon;
}

package FlagsRedis::Monitor;

# the next line within $timeout seconds, or undef
sub line {
    my ($self, $timeout) = @_;
    my $until = Time::HiRes::time() + $timeout;
    while ($self->{buf} !~ /\r\n/) {
        my $left = $until - Time::HiRes::time();
        return undef if $left <= 0;
        return undef unless IO::Select->new($self->{sock})->can_read($left);
        my $n = sysread($self->{sock}, $self->{buf}, 65536, length $self->{buf});
        return undef unless $n;
    }
    $self->{buf} =~ s/^(.*?)\r\n//s;
    return $1;
}

sub close { close $_[0]{sock} }

1;
