# Clients that misbehave at the connection level: a body shorter than its
# Content-Length and then gone, slow senders, stalled senders, half-open
# connections. After each, the same workers are alive and answer.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use Time::HiRes qw(sleep);

my $dir = prefix_dir('bad-clients');
write_file("$dir/conf/p.json",
           '{"flags":[{"name":"f","enabled":true,"rolloutPercentage":100}]}');
write_file("$dir/conf/nginx.conf", nginx_conf(http => <<'_H_', server => <<'_S_'));
    flags_project p token=tok file=p.json;
    flags_error_log logs/reports.log;
    client_body_timeout 1s;
    client_header_timeout 1s;
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
_S_

my $master = nginx_start($dir);
my @workers = worker_pids($master);
is(scalar @workers, 2, 'two workers');

my $report = '{"flagName":"f","message":"slow"}';
my $head = "POST /ingest/errors HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n"
         . "Content-Type: application/json\r\nConnection: close\r\n";

sub still_fine {
    my ($what) = @_;
    my ($st, undef, $body) = http_request(GET => '/flags?userId=u', headers => ['Authorization: Bearer tok']);
    is($st, 200, "$what: the next request is answered");
    is($body, '{"flags":[{"name":"f","enabled":true,"rolloutPercentage":100,"segments":[]}]}',
       "$what: with the right answer");
    is_deeply([worker_pids($master)], \@workers, "$what: no worker died");
}

# --- a body shorter than its Content-Length, then the client goes away -------
for my $i (1 .. 20) {
    my $s = raw_connect();
    print $s $head . "Content-Length: 500\r\n\r\n" . substr($report, 0, 10);
    close $s;
}
sleep 0.3;
still_fine('short bodies');

# --- a slow client: the report in 12 pieces, 100 ms apart --------------------
{
    my $s = raw_connect();
    my $req = $head . "Content-Length: " . length($report) . "\r\n\r\n" . $report;
    my $n = 12;
    my $step = int(length($req) / $n) + 1;
    for (my $off = 0; $off < length $req; $off += $step) {
        print $s substr($req, $off, $step);
        $s->flush;
        sleep 0.1;
    }
    local $/;
    my $resp = <$s> // '';
    like($resp, qr{^HTTP/1\.1 204 }, 'a slow report is accepted');
    close $s;
}

# --- a client that stalls mid-body: nginx times it out (client_body_timeout) --
{
    my $s = raw_connect();
    print $s $head . "Content-Length: " . length($report) . "\r\n\r\n" . substr($report, 0, 5);
    $s->flush;
    local $/;
    my $t0 = time;
    my $resp = <$s> // '';
    ok(time - $t0 <= 4, 'the stalled client is let go by client_body_timeout');
    unlike($resp, qr{ 204 }, 'a stalled report is not accepted');
    close $s;
}
still_fine('stalled body');

# --- 100 half-open connections, then a good request --------------------------
{
    my @open;
    for (1 .. 100) {
        my $s = raw_connect();
        print $s "GET /flags?userId=u HTTP/1.1\r\nHost: x\r\nAuthoriza";
        push @open, $s;
    }
    still_fine('half-open connections');
    close $_ for @open;
}

# --- chunked body with a broken chunk size: nginx's own 400 ------------------
{
    my $s = raw_connect();
    print $s $head . "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n";
    local $/;
    my $resp = <$s> // '';
    like($resp, qr{^HTTP/1\.1 400 }, 'a broken chunked body is refused by nginx');
    close $s;
}
still_fine('broken chunked body');

# only the slow report was accepted: exactly one line
my @lines = split /\n/, read_file("$dir/logs/reports.log") // '';
is(scalar @lines, 1, 'exactly the accepted report is in the log');
like($lines[0] // '', qr/"message":"slow"\}$/, 'and it is whole');

my $log = read_file("$dir/logs/error.log") // '';
unlike($log, qr/\[(alert|crit|emerg)\]|signal \d+/, 'no alert, crit, emerg or signal in the error log');

nginx_stop($master);
done_testing();
