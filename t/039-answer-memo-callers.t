# The memo of answers with many callers at once (issue 23): a memo slot is
# chosen by the caller's bytes, not by the location alone, so 1,000
# callers who poll in turn are each answered from the memo.
#
# An answer is kept the second time its key is seen (docs/evaluation.md,
# "The memo of answers"), so a caller's first two requests are computed
# and its third is a memo answer.  The memo's answers are what its fold
# counts: with error_log at debug (nginx built --with-debug, as Debian's
# is), "flags: memo fold: N answers of project ... counted" lines, whose
# sum is the number of memo answers.  The requests' own log lines go to
# another file (the http block's error_log), so only the cycle's debug
# lines, the fold's among them, are in logs/error.log.
#
# Two workers, two keep-alive connections kept open all along: the odd
# callers on one, the even on the other, their requests alternating.
# Whichever worker each connection reaches, every caller stays with one
# worker's memo, so the counts below hold either way.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use JSON::PP;

my $bin = $ENV{TEST_NGINX_BINARY} || 'nginx';
plan skip_all => 'nginx is not built --with-debug' unless `$bin -V 2>&1` =~ /--with-debug/;

my $dir = prefix_dir('memo-callers');
my $Port = $FlagsTest::Port;

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "on", "enabled": true, "rolloutPercentage": 100},
  {"name": "half", "enabled": true, "rolloutPercentage": 50}
 ]}
_J_

my $http = <<"_C_";
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_error_log off;
    error_log $dir/logs/http.log notice;
    keepalive_requests 100000;
_C_

my $server = <<'_C_';
        location = /flags { flags_evaluate; }
        location = /status { flags_status; }
        location /ofrep/ { flags_ofrep; }
_C_

write_file("$dir/conf/nginx.conf",
           nginx_conf(http => $http, server => $server, log_level => 'debug'));
my $master = nginx_start($dir);

# A keep-alive connection: one request, its whole response.
sub conn {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port, Timeout => 10)
        or die "connect: $!";
    return $s;
}

sub ask {
    my ($s, $method, $path, $body) = @_;
    my $req = "$method $path HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer tok_shop\r\n";
    $req .= "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n" if defined $body;
    $req .= "\r\n" . ($body // '');
    print $s $req;
    my $head = '';
    while ($head !~ /\r\n\r\n\z/) {
        my $n = sysread($s, my $c, 1);
        return (0, '') unless $n;
        $head .= $c;
    }
    my ($st) = $head =~ m{^HTTP/1\.1 (\d+)};
    my ($len) = $head =~ /^Content-Length: (\d+)\r$/mi;
    my $got = '';
    while (length($got) < ($len // 0)) {
        my $n = sysread($s, $got, $len - length($got), length $got);
        last unless $n;
    }
    return ($st, $got);
}

# The memo answers counted so far: the sum of the fold lines.
sub memo_hits {
    my $log = read_file("$dir/logs/error.log") // '';
    my $n = 0;
    $n += $1 while $log =~ /flags: memo fold: (\d+) answers of project "shop" counted/g;
    return $n;
}

sub evaluations {
    my (undef, undef, $b) = http_request(GET => '/status');
    my ($f) = grep { $_->{name} eq 'on' } @{ decode_json($b)->{projects}[0]{flags} };
    return $f->{counters}{evaluations};
}

# two connections for the whole test: a caller's requests all reach the
# worker its connection reached
my @conns = (conn(), conn());

# rounds of every caller in turn; the number of answers that were not 200
sub rounds {
    my ($callers, $n, $req) = @_;
    my $bad = 0;
    for (1 .. $n) {
        for my $i (1 .. $callers) {
            my ($st) = ask($conns[$i % 2], $req->($i));
            $bad++ if $st != 200;
        }
    }
    return $bad;
}

# the status read folds the reading worker; the other folds at the end of
# its cycle: wait until both have
sub hits_settle {
    my ($want) = @_;
    evaluations();
    wait_for(sub { memo_hits() >= $want }, 5);
    select(undef, undef, undef, 0.2);
    return memo_hits();
}

is(memo_hits(), 0, 'no memo answer before any request');

# --- GET /flags: 1,000 callers -------------------------------------------

my $flags = sub { ('GET', "/flags?userId=caller$_[0]&trait_plan=p" . ($_[0] % 7)) };

is(rounds(1000, 2, $flags), 0, '1,000 callers ask twice each, in turn: 2,000 answers 200');
is(hits_settle(0), 0, '... none from the memo (an answer is kept when its key is seen again)');
is(evaluations(), 2000, '... 2,000 evaluations counted');

is(rounds(1000, 1, $flags), 0, 'each asks a third time: 1,000 answers 200');
is(hits_settle(1000), 1000, '... all 1,000 from the memo');
is(evaluations(), 3000, '... and counted: 3,000 evaluations');

is(rounds(1000, 2, $flags), 0, 'two more rounds');
is(hits_settle(3000), 3000, '... 2,000 more memo answers');
is(evaluations(), 5000, '... 5,000 evaluations');

# --- OFREP: single and bulk evaluations, 500 callers each ---------------------

my $before = memo_hits();
my $single = sub { ('POST', '/ofrep/v1/evaluate/flags/half', qq({"context":{"targetingKey":"o$_[0]"}})) };
is(rounds(500, 3, $single), 0, 'OFREP single: 500 callers, three times each');
is(hits_settle($before + 500), $before + 500, '... each third answer from the memo');

$before = memo_hits();
my $bulk = sub { ('POST', '/ofrep/v1/evaluate/flags', qq({"context":{"targetingKey":"b$_[0]"}})) };
is(rounds(500, 3, $bulk), 0, 'OFREP bulk: 500 callers, three times each');
is(hits_settle($before + 500), $before + 500, '... each third answer from the memo');

close $_ for @conns;
nginx_stop($master);

my $errors = join "\n", grep { /\[(?:alert|crit|emerg)\]/ } split /\n/, read_file("$dir/logs/error.log");
is($errors, '', 'no alert, crit or emerg');

done_testing();
