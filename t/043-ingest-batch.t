# Reports accepted in one pass of the event loop share one write(2) of the
# report log and are answered after it.  Many pipelined reports on one
# connection and on several connections at once, over 2 workers: every 204
# has exactly one complete line, no refused report has one, and the
# counters are exact.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Select;
use IO::Socket::INET;
use JSON::PP ();

my $dir = prefix_dir('ingest-batch');
my $log = sub { read_file("$dir/logs/error.log") // '' };

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "busy", "enabled": true, "rolloutPercentage": 100, "rollback": false}
]}
_J_

write_file("$dir/conf/nginx.conf", nginx_conf(workers => 2, http => <<'_H_', server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log logs/reports.log;
    keepalive_requests 100000;
_H_
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
_S_

# One connection's pipeline: n reports, every 10th for a flag that does not
# exist (404, never logged); the last asks to close.  All written at once.
sub pipeline {
    my ($tag, $n) = @_;
    my ($out, @msgs) = ('');
    for my $i (1 .. $n) {
        my $flag = $i % 10 == 0 ? 'nope' : 'busy';
        my $msg = "$tag-$i " . ('x' x ($i % 7 * 40));
        my $body = qq({"flagName":"$flag","message":"$msg","stack":"at a.js:$i\\nat b.js:2"});
        $out .= "POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\n"
              . "Authorization: Bearer tok_1\r\nContent-Type: application/json\r\n"
              . ($i == $n ? "Connection: close\r\n" : '')
              . "Content-Length: " . length($body) . "\r\n\r\n$body";
        push @msgs, [$flag, $msg];
    }
    return ($out, \@msgs);
}

# Sends every pipeline on its own connection at once, reads all answers;
# returns, per connection, the list of statuses in order.
sub run_pipelines {
    my (@pipes) = @_;
    my (@socks, %buf, %idx);
    my $sel = IO::Select->new;
    for my $i (0 .. $#pipes) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $FlagsTest::Port,
                                      Timeout => 10) or die "connect: $!";
        $s->autoflush(1);
        push @socks, $s;
        $idx{fileno $s} = $i;
        $buf{$i} = '';
        $sel->add($s);
    }
    # write in pieces, so that nginx sees both whole and split requests
    for my $i (0 .. $#pipes) {
        my $p = $pipes[$i];
        while (length $p) {
            my $chunk = substr($p, 0, 4096, '');
            syswrite($socks[$i], $chunk) // die "write: $!";
        }
    }
    my $deadline = time + 30;
    while ($sel->count && time < $deadline) {
        for my $s ($sel->can_read(1)) {
            my $n = sysread($s, my $chunk, 65536);
            if (!$n) { $sel->remove($s); close $s; next }
            $buf{$idx{fileno $s}} .= $chunk;
        }
    }
    return map { [ $buf{$_} =~ m{HTTP/1\.1 (\d{3}) }g ] } 0 .. $#pipes;
}

my $master = nginx_start($dir);

my @pipes = ([pipeline('one', 400)]);
push @pipes, [pipeline("par$_", 150)] for 1 .. 8;

my @statuses = run_pipelines(map { $_->[0] } @pipes);

my (%acked, $expected_404, $got_404);
for my $c (0 .. $#pipes) {
    my $msgs = $pipes[$c][1];
    my $st = $statuses[$c];
    is(scalar @$st, scalar @$msgs, "connection $c: an answer for each of its " . scalar(@$msgs) . " reports");
    for my $i (0 .. $#$msgs) {
        my ($flag, $msg) = @{ $msgs->[$i] };
        my $want = $flag eq 'busy' ? 204 : 404;
        if (($st->[$i] // 0) != $want) {
            fail("connection $c report $i: answered " . ($st->[$i] // 'nothing') . ", not $want");
            last;
        }
        $acked{$msg}++ if $want == 204;
    }
}

my (undef, undef, $status) = http_request(GET => '/flags-status');
my $counted = JSON::PP->new->decode($status)->{projects}[0]{flags}[0]{counters}{errors};
nginx_stop($master);

my $content = read_file("$dir/logs/reports.log") // '';
like($content, qr/\n\z/, 'the report log ends with a complete line');
my @lines = split /\n/, $content;
my @parsed = grep { ref } map { eval { JSON::PP->new->decode($_) } } @lines;
is(scalar @parsed, scalar @lines, 'every line is one whole JSON report');
my %logged;
$logged{$_->{message}}++ for @parsed;
is(scalar(keys %acked), 400 - 40 + 8 * (150 - 15), 'every report for an existing flag was answered 204');
is_deeply(\%logged, \%acked, 'each 204 has exactly one line, and nothing else is logged');
is($counted, scalar(keys %acked), 'flags_status counted exactly the acknowledged reports');
unlike($log->(), qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg');

done_testing();
