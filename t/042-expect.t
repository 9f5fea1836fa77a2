# "Expect: 100-continue": a request refused before its body is read gets
# the final status at once, never "100 Continue" first (nginx does the same
# for client_max_body_size); the connection stays usable for the next
# request once the client has sent (or dropped) the body.  An accepted
# report still gets 100 and then 204.  Raw sockets, since the point is the
# exact order of what nginx writes.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Select;
use IO::Socket::INET;

my $dir = prefix_dir('expect');

write_file("$dir/conf/shop.json",
           '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100}]}');
write_file("$dir/conf/nginx.conf", nginx_conf(http => <<'_H_', server => <<'_S_'));
    flags_project shop token=tok file=shop.json;
    flags_error_log logs/reports.log;
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_max_report_size 1k; flags_ingest_errors; }
        location /flags-admin/ { flags_max_report_size 1k; flags_admin; }
_S_

my $pid = nginx_start($dir);

# One response (head and, by Content-Length, body) read from $s, or what
# arrived before $wait seconds of silence.
sub read_response {
    my ($s, $wait) = @_;
    my $sel = IO::Select->new($s);
    my $buf = '';
    my $need;
    while ($sel->can_read($wait // 5)) {
        my $n = sysread($s, $buf, 65536, length $buf);
        last unless $n;
        if (!defined $need && $buf =~ /\r\n\r\n/) {
            my $head_len = $+[0];
            my ($head) = substr($buf, 0, $head_len);
            my ($len) = $head =~ /^Content-Length:\s*(\d+)/mi;
            $need = $head_len + ($head =~ m{^HTTP/1\.1 (?:1\d\d|204)} ? 0 : $len // 0);
        }
        last if defined $need && length $buf >= $need;
    }
    return $buf;
}

my $auth = "Authorization: Bearer tok\r\n";
my $json = "Content-Type: application/json\r\n";
my $next = "GET /flags HTTP/1.1\r\nHost: localhost\r\n${auth}\r\n";

# [name, request head without the blank line, body the client sends anyway,
#  expected status line]
my @refused = (
    ['no token (401)', "POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\n$json",
     '{"flagName":"a","message":"m"}', '401 Unauthorized'],
    ['bad method (405)', "PUT /flags HTTP/1.1\r\nHost: localhost\r\n$auth",
     '{}', '405 Not Allowed'],
    ['not JSON (415)', "POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\n${auth}Content-Type: text/plain\r\n",
     'plain text', '415 Unsupported Media Type'],
    ['declared length over the limit (413)', "POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\n$auth$json",
     '{"flagName":"a","message":"' . ('x' x 2000) . '"}', '413 Request Entity Too Large'],
    ['admin PUT, unknown project (404)', "PUT /flags-admin/overrides/nope/a HTTP/1.1\r\nHost: localhost\r\n$json",
     '{"enabled":false}', '404 Not Found'],
    ['admin PUT, unknown flag (404)', "PUT /flags-admin/overrides/shop/nope HTTP/1.1\r\nHost: localhost\r\n$json",
     '{"enabled":false}', '404 Not Found'],
    ['admin PUT, unknown route (404)', "PUT /flags-admin/other/shop/a HTTP/1.1\r\nHost: localhost\r\n$json",
     '{"enabled":false}', '404 Not Found'],
    ['admin PUT on a rollback (405)', "PUT /flags-admin/rollbacks/shop/a HTTP/1.1\r\nHost: localhost\r\n$json",
     '{"enabled":false}', '405 Not Allowed'],
    ['admin PUT, declared length over the limit (413)', "PUT /flags-admin/overrides/shop/a HTTP/1.1\r\nHost: localhost\r\n$json",
     '{"enabled":false' . (' ' x 2000) . '}', '413 Request Entity Too Large'],
);

for my $c (@refused) {
    my ($name, $head, $body, $status) = @$c;
    my $s = raw_connect();
    print $s $head . "Content-Length: " . length($body) . "\r\nExpect: 100-continue\r\n\r\n";
    my $resp = read_response($s);
    like($resp, qr{\AHTTP/1\.1 \Q$status\E\r\n}, "$name: the final status comes first");
    unlike($resp, qr{100 Continue}, "$name: no 100 Continue");
    like($resp, qr{\r\nContent-Type: application/json\r\n}, "$name: a JSON error");

    # the client sends its body anyway (RFC 7231 allows it), then pipelines
    print $s $body . $next;
    $resp = read_response($s);
    like($resp, qr{\AHTTP/1\.1 200 OK\r\n.*\r\n\r\n\{"flags":\[}s,
         "$name: the connection answers the next request");
    close $s;
}

# An accepted report: 100 Continue, then the body, then 204.
{
    my $body = '{"flagName":"a","message":"m"}';
    my $s = raw_connect();
    print $s "POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\n$auth$json"
        . "Content-Length: " . length($body) . "\r\nExpect: 100-continue\r\n\r\n";
    my $resp = read_response($s);
    is($resp, "HTTP/1.1 100 Continue\r\n\r\n", 'a good report is told to continue');
    print $s $body;
    $resp = read_response($s);
    like($resp, qr{\AHTTP/1\.1 204 No Content\r\n}, 'then accepted with 204');
    close $s;
}

unlike(read_file("$dir/logs/error.log") // '', qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg');
nginx_stop($pid);
done_testing();
