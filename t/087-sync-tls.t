# flags_sync over TLS (docs/sync.md, "TLS"): rediss:// to Debian's
# redis-server on a TLS port, with a CA, server and client certificates
# made here by openssl; a certificate that does not verify, a name that
# does not match, client certificates required and given or missing,
# plain redis:// against the TLS port, and peers that are no TLS server.
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

my $redis_bin = `command -v redis-server 2>/dev/null`;
chomp $redis_bin;
my $openssl = `command -v openssl 2>/dev/null`;
chomp $openssl;
plan skip_all => 'redis-server is not installed' unless $redis_bin;
plan skip_all => 'openssl is not installed' unless $openssl;

my $d = prefix_dir('sync-tls');
my $pki = "$d/pki";

# --- certificates: a CA, redis's certificate (127.0.0.1 and redis.test),
# a client's, and a CA that signed neither ---------------------------------
redis_pki($pki, 'IP:127.0.0.1,DNS:redis.test', 1);

# --- redis-server on a TLS port only ---------------------------------------
my $rport = unused_port();
my $redis_pid;

sub redis_start {
    my ($auth_clients) = @_;
    $redis_pid = spawn("$d/logs/redis.log", $redis_bin,
        '--port', 0, '--tls-port', $rport, '--bind', '127.0.0.1',
        '--tls-cert-file', "$pki/server.pem", '--tls-key-file', "$pki/server.key",
        '--tls-ca-cert-file', "$pki/ca.pem", '--tls-auth-clients', $auth_clients,
        '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', $d);
    wait_port($rport) or die "redis-server did not listen on $rport\n";
}

sub redis_stop { reap($redis_pid); undef $redis_pid }

# one command by redis-cli over TLS: its output
sub rcli {
    my (@cmd) = @_;
    my $q = join ' ', map { "'$_'" } @cmd;
    return scalar `redis-cli --tls --cacert '$pki/ca.pem' --cert '$pki/client.pem' --key '$pki/client.key' -h 127.0.0.1 -p $rport $q 2>&1`;
}

# peers that speak no TLS: pid => port
my %fake;
END { local $?; redis_stop(); reap($_) for keys %fake }

# A listener that accepts and then: 'silent' never answers, 'garbage'
# reads the client's hello and answers bytes that are no TLS, 'close'
# reads the hello and closes.
sub fake_server {
    my ($mode) = @_;
    my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                  Listen => 16, ReuseAddr => 1)
        or die "listen: $!";
    my $port = $l->sockport;
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        my @keep;
        while (my $c = $l->accept) {
            push @keep, $c;
            next if $mode eq 'silent';
            sysread $c, my $hello, 4096;
            if ($mode eq 'garbage') {
                syswrite $c, "-ERR this is not TLS\r\n" . ("\xff" x 512);
            } else {
                close $c;
            }
        }
        POSIX::_exit(0);
    }
    close $l;
    $fake{$pid} = $port;
    return $port;
}

# A TLS server (openssl s_server with redis's certificate) that completes
# the handshake, then sends what its stdin gives: 'silent' nothing (a pipe
# the test holds open), 'zeros' an endless stream of zero bytes.
my @pipes;
sub tls_peer {
    my ($mode) = @_;
    my $port = unused_port();
    pipe(my $r, my $w) or die "pipe: $!";
    my $pid = fork // die "fork: $!";
    if (!$pid) {
        close $w;
        if ($mode eq 'zeros') {
            open STDIN, '<', '/dev/zero' or POSIX::_exit(126);
        } else {
            open STDIN, '<&', $r or POSIX::_exit(126);
        }
        open STDOUT, '>', "$d/logs/s_server-$mode.log" or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        { no warnings 'exec';
          exec $openssl, 's_server', '-quiet', '-accept', "127.0.0.1:$port",
               '-cert', "$pki/server.pem", '-key', "$pki/server.key"; }
        POSIX::_exit(127);
    }
    close $r;
    push @pipes, $w;
    $fake{$pid} = $port;
    wait_port($port) or die "openssl s_server did not listen on $port\n";
    return $port;
}

# --- nginx hosts ------------------------------------------------------------
my @port = map { unused_port() } 0 .. 3;
my @dir = map { prefix_dir("sync-tls-$_") } 0 .. 3;
my @pid;

my $shop = <<'_J_';
{"flags": [
  {"name": "calm", "enabled": true, "rolloutPercentage": 100}
]}
_J_

sub host_conf {
    my ($i, $sync) = @_;
    local $FlagsTest::Port = $port[$i];
    write_file("$dir[$i]/conf/shop.json", $shop);
    write_file("$dir[$i]/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_sync $sync interval=200ms prefix=t087: host=h$i;
_H_
        location = /flags { flags_evaluate; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_
}

# host $i (re)started with flags_sync $sync; its error log starts empty
sub host_start {
    my ($i, $sync) = @_;
    host_stop($i);
    host_conf($i, $sync);
    my ($rc, $out) = nginx_test($dir[$i]);
    is($rc, 0, "host $i: nginx -t accepts flags_sync $sync") or diag $out;
    unlink "$dir[$i]/logs/error.log";
    local $FlagsTest::Port = $port[$i];
    $pid[$i] = nginx_start($dir[$i]);
}

sub host_stop {
    my ($i) = @_;
    nginx_stop($pid[$i]) if $pid[$i];
    undef $pid[$i];
}

sub req { my ($i, @args) = @_; return host_request($port[$i], @args) }

sub status { host_status($port[$_[0]]) }

sub log_lines {
    my ($i, $re) = @_;
    return grep { /$re/ } split /\n/, read_file("$dir[$i]/logs/error.log") // '';
}

# GET /flags answers 200 with the flag, quickly: serving never waits
sub serves {
    my ($i, $what) = @_;
    my $t0 = time;
    my ($st, undef, $body) = req($i, GET => '/flags?userId=u1',
                                 headers => ['Authorization: Bearer tok_1']);
    my $took = time - $t0;
    is($st, 200, "host $i: GET /flags answers 200 $what");
    like($body, qr/"name":"calm"/, "host $i: with its flag");
    cmp_ok($took, '<', 0.5, "host $i: without waiting for redis ($took s)");
}

# host $i is not connected, says TLS, and its loss is one error line
# matching $re, with no [crit] or [alert] line (nginx's own TLS lines are
# the loss's reason, not lines of their own)
sub fails_with {
    my ($i, $re, $what, $tls) = @_;
    my $line = qr/\[error\] \d+#\d+: flags: sync: redis at 127\.0\.0\.1:\d+: $re; hosts decide alone until it is back$/;
    ok(wait_for(sub { scalar log_lines($i, $line) }, 5),
       "host $i: $what: the error line says why")
        or diag join "\n", log_lines($i, qr/sync|SSL/);
    note $_ for log_lines($i, qr/\[(error|info)\] .*flags: sync: redis/);
    # the retries (backoff 200 ms, 400 ms, 800 ms) are not errors again
    ok(wait_for(sub { (status($i) // {})->{sync}{failures} >= 3 }, 5),
       "host $i: $what: it retries");
    my $s = status($i);
    is($s->{sync}{connected}, JSON::PP::false, "host $i: $what: not connected");
    is($s->{sync}{tls}, $tls // JSON::PP::true, "host $i: $what: tls as configured");
    is(scalar(log_lines($i, qr/\[error\] .*flags: sync:/)), 1,
       "host $i: $what: the loss is logged once at error");
    is(scalar(log_lines($i, qr/\[(crit|alert|emerg)\]|exited on signal/)), 0,
       "host $i: $what: no crit, alert or crashed worker");
    is(scalar(worker_pids($pid[$i])), 2, "host $i: $what: two workers");
    serves($i, "($what)");
}

# --- nginx -t: the parameters' errors name file and line ------------------
{
    my $t = $dir[3];
    local $FlagsTest::Port = $port[3];
    write_file("$t/conf/shop.json", $shop);
    write_file("$t/conf/not-a-cert.pem", "hello\n");
    write_file("$t/conf/open.key", read_file("$pki/client.key"));
    chmod 0644, "$t/conf/open.key";
    write_file("$t/conf/group.key", read_file("$pki/client.key"));
    chmod 0640, "$t/conf/group.key";
    my $r = 'rediss://127.0.0.1:1';
    for my $case (["$r tls_ca=$pki/none.pem", qr/flags_sync: cannot open tls_ca "\Q$pki\E\/none\.pem" \(2: No such file or directory\)/],
                  ["$r tls_ca=$t/conf", qr/flags_sync: tls_ca "\Q$t\E\/conf" is not a regular file/],
                  ["$r tls_ca=not-a-cert.pem", qr/flags_sync: tls_ca "\Q$t\E\/conf\/not-a-cert\.pem" holds no certificate OpenSSL can read/],
                  ["$r tls_ca=$pki/ca.pem tls_cert=$pki/client.pem tls_key=open.key", qr/flags_sync: tls_key "\Q$t\E\/conf\/open\.key" can be read or written by other users \(mode 0644\): chmod 600 it/],
                  ["$r tls_cert=$pki/client.pem tls_key=group.key", qr/flags_sync: tls_key "\Q$t\E\/conf\/group\.key" can be read or written by other users \(mode 0640\)/],
                  ["$r tls_cert=$pki/client.pem tls_key=$pki/none.key", qr/flags_sync: cannot open tls_key "\Q$pki\E\/none\.key" \(2: No such file or directory\)/],
                  ["$r tls_cert=$pki/client.pem tls_key=$pki/server.key", qr/flags_sync: tls_key "\Q$pki\E\/server\.key" is not the key of tls_cert "\Q$pki\E\/client\.pem"/],
                  ["$r tls_cert=$pki/client.pem", qr/flags_sync: tls_cert= and tls_key= go together/],
                  ["$r tls_ca=", qr/flags_sync: "tls_ca=" needs a path/],
                  ["$r tls_ca=$pki/ca.pem tls_ca=$pki/ca.pem", qr/flags_sync: duplicate tls_ca=/],
                  ["$r tls=off", qr/flags_sync: "tls=off" with a rediss:\/\/ URL/],
                  ["$r tls_verify=maybe", qr/flags_sync: invalid "tls_verify=maybe": on or off/],
                  ["redis://127.0.0.1:1 tls_ca=$pki/ca.pem", qr/flags_sync: tls_ca=, tls_cert=, tls_key=, tls_name= and tls_verify= need a rediss:\/\/ URL or tls=on/],
                  ["redis://127.0.0.1:1 tls_sni=x", qr/flags_sync: unknown parameter "tls_sni=x"/],
                  ["redissss://127.0.0.1:1", qr/flags_sync: "redissss:\/\/127\.0\.0\.1:1" is not a redis:\/\/ URL/],
                  ["rediss://:secret\@127.0.0.1", qr/flags_sync: "rediss:\/\/:\*\*\*\@127\.0\.0\.1" needs HOST:PORT/])
    {
        write_file("$t/conf/nginx.conf", nginx_conf(http => <<"_H_", server => ''));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_sync $case->[0];
_H_
        my ($rc, $out) = nginx_test($t);
        isnt($rc, 0, "nginx -t refuses flags_sync $case->[0]");
        like($out, qr/\[emerg\] \d+#\d+: $case->[1].* in \Q$t\E\/conf\/nginx\.conf:\d+/,
             'with a message naming the file and line') or diag $out;
        unlike($out, qr/secret/, 'and no password');
    }
}

# --- a good CA: two hosts sync over TLS -------------------------------------
redis_start('no');

host_start(0, "rediss://127.0.0.1:$rport tls_ca=$pki/ca.pem");
# the name checked and sent (SNI) is another name of the certificate
host_start(1, "redis://127.0.0.1:$rport tls=on tls_ca=$pki/ca.pem tls_name=redis.test");

for my $i (0, 1) {
    ok(wait_for(sub { my $s = status($i); $s && $s->{sync}{connected} }, 5),
       "host $i: connected over TLS");
    my $s = status($i);
    is($s->{sync}{tls}, JSON::PP::true, "host $i: flags_status says tls");
    is($s->{sync}{failures}, 0, "host $i: no failure");
}
{
    my ($st) = req(0, PUT => '/flags-admin/overrides/shop/calm',
                   body => '{"rolloutPercentage": 12.5}',
                   headers => ['Content-Type: application/json']);
    is($st, 204, 'host 0: override of calm set');
    ok(wait_for(sub {
        my $f = host_flag($port[1], 'calm');
        $f && $f->{override} && ($f->{override}{rolloutPercentage} // -1) == 12.5
    }, 3), 'host 1: the override crossed through redis over TLS');
    # what Redis holds, read by redis-cli over TLS
    my ($field) = grep { /^ov:[0-9a-f]{16}:calm$/ } split /\n/, rcli('HKEYS', 't087:{shop}:ctl');
    ok($field, 'redis holds an override field of calm') or diag rcli('HKEYS', 't087:{shop}:ctl');
    is(rcli('HGET', 't087:{shop}:ctl', $field // 'none'), "12500\n",
       'redis holds the override (milli-percent)');
    for my $i (0, 1) {
        is(scalar(log_lines($i, qr/\[(error|crit|alert|emerg)\]/)), 0,
           "host $i: no error line");
    }
    serves(0, 'over TLS');
}
host_stop(1);

# a reload reads the files into a new SSL context: the new generation's
# syncing worker connects over it
{
    my @old = worker_pids($pid[0]);
    my $rounds = status(0)->{sync}{rounds};
    nginx_signal($pid[0], 'HUP');
    ok(wait_for(sub {
        my @w = worker_pids($pid[0]);
        my %old = map { $_ => 1 } @old;
        @w == 2 && !grep { $old{$_} } @w
    }, 10), 'host 0: reloaded, two new workers');
    ok(wait_for(sub {
        my $s = status(0);
        $s && $s->{sync}{connected} && $s->{sync}{rounds} > $rounds + 2
            && grep { $_ == $s->{sync}{owner} } worker_pids($pid[0])
    }, 5), 'host 0: a new worker syncs over TLS after the reload');
    is(scalar(log_lines(0, qr/\[(error|crit|alert|emerg)\]/)), 0,
       'host 0: no error line across the reload');
}

{
    my $s = status(0);
    ok(exists $s->{sync}{lastSuccess} && exists $s->{sync}{owner},
       'the other fields of "sync" are kept');
}
host_stop(0);

# --- a CA that did not sign redis's certificate ----------------------------
host_start(2, "rediss://127.0.0.1:$rport tls_ca=$pki/wrong-ca.pem");
fails_with(2, qr/TLS: the peer's certificate does not verify: self-signed certificate in certificate chain \(19\)/,
           'wrong CA');

# the same without verification: encrypted, not authenticated
host_start(2, "rediss://127.0.0.1:$rport tls_ca=$pki/wrong-ca.pem tls_verify=off");
ok(wait_for(sub { my $s = status(2); $s && $s->{sync}{connected} }, 5),
   'host 2: tls_verify=off connects with the wrong CA');

# --- a name the certificate does not hold ----------------------------------
host_start(2, "rediss://127.0.0.1:$rport tls_ca=$pki/ca.pem tls_name=other.test");
fails_with(2, qr/TLS: the peer's certificate does not match "other\.test" \(set tls_name= to a name it holds\)/,
           'tls_name mismatch');

# --- plain redis:// against the TLS port -----------------------------------
host_start(2, "redis://127.0.0.1:$rport");
fails_with(2, qr/(closed the connection|could not read|protocol error)/,
           'plain redis:// to the TLS port', JSON::PP::false);

# --- client certificates required -------------------------------------------
redis_stop();
redis_start('yes');

host_start(3, "rediss://127.0.0.1:$rport tls_ca=$pki/ca.pem tls_cert=$pki/client.pem tls_key=$pki/client.key");
ok(wait_for(sub { my $s = status(3); $s && $s->{sync}{connected} }, 5),
   'host 3: connected with its client certificate');
is(scalar(log_lines(3, qr/\[(error|crit|alert|emerg)\]/)), 0, 'host 3: no error line');
host_stop(3);

host_start(2, "rediss://127.0.0.1:$rport tls_ca=$pki/ca.pem");
# (TLS 1.3: the server's alert comes after the handshake, read whether
# the commands' write or the read meets the closed connection first)
fails_with(2, qr/could not (read|send): SSL_read\(\) failed \(SSL: error:[0-9A-F]+:SSL routines::tlsv13 alert certificate required:SSL alert number 116\)/,
           'client certificate required and missing');
redis_stop();

# --- peers that are no TLS server ---------------------------------------------
{
    my $p = fake_server('silent');
    host_start(2, "rediss://127.0.0.1:$p tls_ca=$pki/ca.pem");
    serves(2, 'while the handshake waits');
    # the connect's timeout bounds the handshake: max(5 x 200 ms, 2 s)
    fails_with(2, qr/TLS handshake timed out/, 'a silent peer');

    $p = fake_server('garbage');
    host_start(2, "rediss://127.0.0.1:$p tls_ca=$pki/ca.pem");
    fails_with(2, qr/TLS: handshake failed: SSL_do_handshake\(\) failed \(SSL: error:.*\)/,
               'a peer answering garbage');

    $p = fake_server('close');
    host_start(2, "rediss://127.0.0.1:$p tls_ca=$pki/ca.pem");
    fails_with(2, qr/TLS: handshake failed: (peer closed connection in SSL handshake|SSL_do_handshake\(\) failed .*)/,
               'a peer that closes');

    # TLS up, then the Redis protocol's own bounds, as without TLS
    $p = tls_peer('silent');
    host_start(2, "rediss://127.0.0.1:$p tls_ca=$pki/ca.pem");
    fails_with(2, qr/timed out/, 'a TLS peer that never answers');

    $p = tls_peer('zeros');
    host_start(2, "rediss://127.0.0.1:$p tls_ca=$pki/ca.pem");
    fails_with(2, qr/protocol error/, 'a TLS peer sending zero bytes');
}
host_stop(2);

done_testing();
