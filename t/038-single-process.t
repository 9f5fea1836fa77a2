# A reload with "master_process off" and open push connections (issue
# 16). nginx reloads such a single process in place and then accepts no
# connection with the new configuration (stock nginx 1.22 does this with no
# module at all), so the module refuses that reload with a clear [emerg]:
# the running configuration keeps serving, its open event stream still
# hears changes, and new requests and streams are answered.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use Time::HiRes qw(sleep time);

my $dir = prefix_dir('single-process');
my $module = $ENV{TEST_NGINX_LOAD_MODULES};
my $port = $FlagsTest::Port;

sub conf {
    my ($flags) = @_;
    write_file("$dir/conf/shop.json", $flags);
    my $user = $> == 0 ? "user root;\n" : '';
    write_file("$dir/conf/nginx.conf", <<"_C_");
load_module $module;
${user}master_process off;
daemon ${\($FlagsTest::Valgrind ? 'off' : 'on')};
error_log logs/error.log info;
pid logs/nginx.pid;
events { worker_connections 256; }
http {
    access_log off;
    flags_project shop token=tok_1 file=$dir/conf/shop.json;
    flags_error_log off;
    server {
        listen 127.0.0.1:$port;
        location = /flags { flags_evaluate; }
        location /ofrep/ { flags_ofrep; }
        location /flags-admin/ { allow 127.0.0.1; deny all; flags_admin; }
    }
${\temp_paths()}}
_C_
}

conf('{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100}]}');
my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'nginx -t of a single-process configuration passes') or diag($out);
my $pid = nginx_start($dir);

sub flags {
    my (undef, undef, $body) = http_request(GET => '/flags?userId=u1',
                                            headers => ['Authorization: Bearer tok_1']);
    return $body;
}

sub sse_open {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 5)
        or die "connect: $!";
    print $s "GET /ofrep/v1/events?token=tok_1 HTTP/1.1\r\nHost: localhost\r\n\r\n";
    my $head = '';
    while ($head !~ /\r\n\r\n/) {
        my $n = sysread($s, my $chunk, 4096);
        last unless $n;
        $head .= $chunk;
    }
    return ($s, $head);
}

sub sse_wait {
    my ($s, $re, $timeout) = @_;
    my $buf = '';
    my $until = time + $timeout;
    $s->blocking(0);
    while (time < $until) {
        my $n = sysread($s, my $chunk, 4096);
        $buf .= $chunk if $n;
        return $buf if $buf =~ $re;
        sleep 0.05;
    }
    return $buf;
}

is(flags(), '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100,"segments":[]}]}',
   'GET /flags before the reload');
my ($old, $head) = sse_open();
like($head, qr{^HTTP/1\.1 200 }, 'an event stream is open');

# a new flags file and a reload (HUP, as nginx -s reload sends it)
conf('{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100},'
     . '{"name":"b","enabled":true,"rolloutPercentage":100}]}');
nginx_signal($pid, 'HUP');
my $log = sub { read_file("$dir/logs/error.log") };
ok(wait_for(sub { $log->() =~ /\[emerg\] \d+#\d+: flags: nginx cannot reload with "master_process off" \(its one process would accept no connection with the new configuration\): the running configuration keeps serving; restart nginx to load the new one in \S+nginx\.conf:\d+$/m }, 5),
   'the reload is refused with the reason, the file and the line');

is(flags(), '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100,"segments":[]}]}',
   'the running configuration keeps answering (flag b is not loaded)');
my ($st) = http_request(PUT => '/flags-admin/overrides/shop/a', body => '{"enabled": false}',
                        headers => ['Content-Type: application/json']);
is($st, 204, 'an admin change is taken');
like(sse_wait($old, qr/refetchEvaluation/, 3), qr/^data: \{"type":"refetchEvaluation","etag":"1"\}$/m,
     'the stream opened before the reload hears it');
my ($new, $head2) = sse_open();
like($head2, qr{^HTTP/1\.1 200 }, 'a new event stream is answered after the refused reload');
close $old;
close $new;

unlike($log->(), qr/\[(?:alert|crit)\]/, 'no alert or crit in the error log');
nginx_stop($pid);
done_testing();
