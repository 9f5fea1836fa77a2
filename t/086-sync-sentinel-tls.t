# flags_sync sentinel://... tls=on (docs/sync.md, "TLS" and "Sentinel"):
# Debian's redis-server and redis-sentinel on TLS ports only, certificates
# made here by openssl.  With the right CA the host asks the Sentinel over
# TLS, then syncs with the master it names over TLS, each checked against
# its own peer's address; with a CA that signed neither, the Sentinel's
# certificate does not verify, the host says why and keeps serving.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use FlagsRedis;
use Time::HiRes qw(sleep time);

my $redis_bin = `command -v redis-server 2>/dev/null`;
chomp $redis_bin;
my $sentinel_bin = `command -v redis-sentinel 2>/dev/null`;
chomp $sentinel_bin;
my $openssl = `command -v openssl 2>/dev/null`;
chomp $openssl;
plan skip_all => 'redis-server is not installed' unless $redis_bin;
plan skip_all => 'redis-sentinel is not installed' unless $sentinel_bin;
plan skip_all => 'openssl is not installed' unless $openssl;

my $d = prefix_dir('sentinel-tls');
my $pki = "$d/pki";

# one certificate for 127.0.0.1 serves the master and the Sentinel, and
# is the client certificate redis asks of its replica links
redis_pki($pki, 'IP:127.0.0.1');

my @tls = ('--tls-cert-file', "$pki/server.pem", '--tls-key-file', "$pki/server.key",
           '--tls-ca-cert-file', "$pki/ca.pem", '--tls-auth-clients', 'no');
my $name = 't086tls';
my ($mport, $sport) = (unused_port(), unused_port());
my %proc;
END { local $?; reap($_) for values %proc }

mkdir "$d/master";
$proc{master} = spawn("$d/logs/master.log", $redis_bin, '--port', 0,
    '--tls-port', $mport, '--bind', '127.0.0.1', '--save', '',
    '--appendonly', 'no', '--dir', "$d/master", @tls);
ok(wait_port($mport), 'the master listens on its TLS port only');

mkdir "$d/sentinel";
write_file("$d/sentinel/sentinel.conf", <<"_C_");
port 0
tls-port $sport
tls-cert-file $pki/server.pem
tls-key-file $pki/server.key
tls-ca-cert-file $pki/ca.pem
tls-auth-clients no
tls-replication yes
bind 127.0.0.1
daemonize no
dir $d/sentinel
sentinel resolve-hostnames no
sentinel monitor $name 127.0.0.1 $mport 1
sentinel down-after-milliseconds $name 1000
_C_
$proc{sentinel} = spawn("$d/logs/sentinel.log", $sentinel_bin,
                        "$d/sentinel/sentinel.conf");
ok(wait_port($sport), 'the Sentinel listens on its TLS port only');

# --- two hosts: the right CA and a wrong one --------------------------------
my @port = map { unused_port() } 0 .. 1;
my @dir = map { prefix_dir("sentinel-tls-$_") } 0 .. 1;
my @pid;
END { local $?; nginx_stop($_) for grep { $_ } @pid }

for my $i (0 .. 1) {
    my $ca = $i == 0 ? 'ca.pem' : 'wrong-ca.pem';
    local $FlagsTest::Port = $port[$i];
    write_file("$dir[$i]/conf/shop.json",
               '{"flags": [{"name": "calm", "enabled": true, "rolloutPercentage": 100}]}');
    write_file("$dir[$i]/conf/nginx.conf", nginx_conf(workers => 2, http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log off;
    flags_sync sentinel://127.0.0.1:$sport/$name tls=on tls_ca=$pki/$ca interval=200ms prefix=t086tls: host=h$i;
_H_
        location = /flags { flags_evaluate; }
        location = /flags-status { flags_status; }
_S_
    my ($rc, $out) = nginx_test($dir[$i]);
    is($rc, 0, "host $i: nginx -t accepts sentinel:// with tls=on") or diag $out;
    $pid[$i] = nginx_start($dir[$i]);
}

sub sync_of {
    my $s = host_status($port[$_[0]]);
    return $s ? $s->{sync} : {};
}

# the right CA: the Sentinel answers over TLS, the master is synced over TLS
ok(wait_for(sub { sync_of(0)->{connected} }, 10), 'host 0: synced through the Sentinel')
    or diag(explain(sync_of(0)), read_file("$dir[0]/logs/error.log") // '');
my $s0 = sync_of(0);
is($s0->{master}, "127.0.0.1:$mport", 'host 0: the master is the one the Sentinel named');
is($s0->{sentinel}, "127.0.0.1:$sport", 'host 0: the Sentinel that named it');
ok($s0->{tls}, 'host 0: over TLS');
ok(wait_for(sub { $s0 = sync_of(0); ($s0->{rounds} // 0) >= 3 }, 5),
   "host 0: rounds run ($s0->{rounds})");
my $keys = `redis-cli --tls --cacert '$pki/ca.pem' -h 127.0.0.1 -p $mport --scan --pattern 't086tls:*' 2>&1`;
like($keys, qr/^t086tls:\{shop\}:ctl$/m, "the master holds the project's control hash, written over TLS");
my $log0 = read_file("$dir[0]/logs/error.log") // '';
like($log0, qr/\[notice\] .*flags: sync: master of "$name" is 127\.0\.0\.1:$mport \(sentinel 127\.0\.0\.1:$sport\)/,
     'host 0: says which master the Sentinel named');

# the wrong CA: the Sentinel's certificate does not verify; serving goes on
ok(wait_for(sub {
    (read_file("$dir[1]/logs/error.log") // '') =~ /\[error\] \d+#\d+: flags: sync: no sentinel named the master of "$name" \(127\.0\.0\.1:$sport: TLS: the peer's certificate does not verify: self-signed certificate in certificate chain \(19\)\); hosts decide alone until one does$/m
}, 10), "host 1: the error line names the Sentinel and why its certificate does not verify")
    or diag(read_file("$dir[1]/logs/error.log") // '');
my $s1 = sync_of(1);
ok(!$s1->{connected}, 'host 1: not synced');
is($s1->{rounds}, 0, 'host 1: no round ran');
my $t0 = time;
my ($st, undef, $body) = host_request($port[1], GET => '/flags?userId=u1',
                                      headers => ['Authorization: Bearer tok_1']);
is($st, 200, 'host 1: GET /flags answers 200 meanwhile');
like($body, qr/"name":"calm","enabled":true/, 'host 1: with its flag, decided locally');
cmp_ok(time - $t0, '<', 0.5, 'host 1: without waiting');
for my $i (0 .. 1) {
    my $log = read_file("$dir[$i]/logs/error.log") // '';
    unlike($log, qr/\[(alert|crit|emerg)\]/, "host $i: no alert, crit or emerg line");
}

done_testing();
