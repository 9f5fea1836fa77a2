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
#   my $c = $mon->next_call(qr/h:h0:/, $seconds);  # the next EVAL(SHA) matching
#   redis_pki($pki, $san, $client);                # certificates for TLS
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

our @EXPORT = qw(redis_server redis_kill redis_cli redis_monitor redis_pki);

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

# Certificates for the TLS tests, made by openssl in the directory $pki
# (created here; openssl's output in $pki/openssl.log): a CA (ca.pem,
# ca.key), a CA that signs nothing else (wrong-ca.pem), redis's
# certificate signed by the CA for the subjectAltName $san (server.pem,
# server.key) and, when $client is true, a client certificate
# (client.pem, client.key).  Keys are mode 0600.
sub redis_pki {
    my ($pki, $san, $client) = @_;
    my $openssl = `command -v openssl 2>/dev/null`;
    chomp $openssl;
    die "openssl is not installed\n" unless $openssl;
    mkdir $pki or die "mkdir $pki: $!";
    my $ossl = sub {
        system("cd '$pki' && '$openssl' @_ >>openssl.log 2>&1") == 0
            or die "openssl @_ failed: " . (FlagsTest::read_file("$pki/openssl.log") // '');
    };
    my $ec = '-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';
    $ossl->("req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj /CN=flags-test-ca");
    $ossl->("req -x509 $ec -keyout wrong-ca.key -out wrong-ca.pem -days 2 -subj /CN=flags-wrong-ca");
    FlagsTest::write_file("$pki/server.ext", "subjectAltName=$san\n");
    $ossl->("req $ec -keyout server.key -out server.csr -subj /CN=127.0.0.1");
    $ossl->("x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 2 -days 2 -extfile server.ext -out server.pem");
    chmod 0600, "$pki/server.key";
    return unless $client;
    FlagsTest::write_file("$pki/client.ext", "extendedKeyUsage=clientAuth\n");
    $ossl->("req $ec -keyout client.key -out client.csr -subj /CN=flags-client");
    $ossl->("x509 -req -in client.csr -CA ca.pem -CAkey ca.key -set_serial 3 -days 2 -extfile client.ext -out client.pem");
    chmod 0600, "$pki/client.key";
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

# the next EVAL or EVALSHA whose line matches $re within $timeout
# seconds (a host's call: its key), or undef
sub next_call {
    my ($self, $re, $timeout) = @_;
    my $until = Time::HiRes::time() + $timeout;
    while (Time::HiRes::time() < $until) {
        my $l = $self->line($until - Time::HiRes::time()) // return undef;
        return $l if $l =~ /"EVAL(?:SHA)?"/ && $l =~ $re;
    }
    return undef;
}

sub close { close $_[0]{sock} }

1;
