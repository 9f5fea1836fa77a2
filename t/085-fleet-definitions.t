# One version of the definitions for the fleet (issue 25, "The fleet";
# docs/sync.md "One version for the fleet"): three nginx hosts of two
# workers, a definitions=runtime project, flags_sync to a real
# redis-server with key_file=.  A write on h0 is served by h1 and h2
# within a few intervals; a flag added at runtime is synced (its override
# reaches the other hosts: the round's arrays follow the new flag count);
# two concurrent writes on two hosts: one 200, one 412; a host that starts
# later (its versions gone) serves the newest; Redis stopped: a write
# answers 503 and applies nowhere, every host keeps serving, and a host
# restarted meanwhile serves its last version; Redis restarted empty is
# reseeded and takes writes again; a flag removed at runtime; a version
# written into Redis by another tool and signed as docs/sync.md says is
# served; a tampered version (document changed, signature kept), an
# unsigned one and a signed one that "nginx -t" would refuse are refused
# by every host: counted, logged at error, the old version kept, and
# writes answer 412 until the key is deleted and reseeded.  First,
# key_file='s nginx -t checks; last, two hosts without key_file=, where a
# version anyone writes into Redis is served (what docs/sync.md warns of).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP ();
use IO::Socket::INET;
use Time::HiRes qw(sleep time);
use Digest::SHA qw(hmac_sha256_hex);

my $redis_bin = `command -v redis-server 2>/dev/null`;
my $cli_bin = `command -v redis-cli 2>/dev/null`;
chomp($redis_bin, $cli_bin);
plan skip_all => 'redis-server or redis-cli is not installed'
    unless $redis_bin && $cli_bin;

my $rport = unused_port();
my $rdir = prefix_dir('fleet-defs-redis');
my @port = map { unused_port() } 0 .. 2;
my @dir = map { prefix_dir("fleet-defs-$_") } 0 .. 2;
my @pid;
my $key = 't085:{shop}:defs';

sub start_redis {
    my $pid = spawn("$rdir/logs/redis.log", $redis_bin, '--port', $rport,
                    '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
                    '--daemonize', 'no', '--dir', $rdir);
    wait_port($rport) or die "redis-server did not listen on $rport\n";
    return $pid;
}
my $redis = start_redis();
END { local $?; reap($redis) }

sub cli {
    my (@args) = @_;
    open my $fh, '-|', $cli_bin, '-p', $rport, '-n', 5, @args or die "redis-cli: $!";
    local $/;
    my $out = <$fh> // '';
    close $fh;
    $out =~ s/\s+\z//;
    return $out;
}

for my $i (0 .. 2) {
    local $FlagsTest::Port = $port[$i];
    write_file("$dir[$i]/conf/shop.json",
               '{"flags": [{"name": "base", "enabled": true, "rolloutPercentage": 100}]}');
    write_file("$dir[$i]/conf/fleet.key", "t085-0123456789abcdef-fleet-key\n");
    write_file("$dir[$i]/conf/nginx.conf", nginx_conf(log_level => 'info', http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json definitions=runtime;
    flags_state_file $dir[$i]/state.json;
    flags_error_log off;
    flags_sync redis://127.0.0.1:$rport/5 interval=200ms prefix=t085: host=h$i key_file=fleet.key;
_H_
        location = /flags { flags_evaluate; }
        location = /flags-status { flags_status; }
        location = /metrics { flags_metrics; }
        location /flags-admin/ { flags_admin; }
_S_
}
# --- key_file= at configuration time: the checks of password_file=, 16 bytes at least ------------
{
    my $d = prefix_dir('fleet-defs-conf');
    write_file("$d/conf/shop.json", '{"flags": [{"name": "base", "enabled": true, "rolloutPercentage": 100}]}');
    write_file("$d/conf/key-empty", "\n");
    write_file("$d/conf/key-short", "fifteen-bytes!!\n");
    write_file("$d/conf/key-large", 'k' x 513);
    write_file("$d/conf/key-ok", "sixteen-bytes!!!\r\n");
    for my $case (["key_file=$d/conf/none", qr/\[emerg\] [^\n]*flags_sync: cannot open key_file "\Q$d\E\/conf\/none" \(2: No such file or directory\)/],
                  ['key_file=key-empty', qr/\[emerg\] [^\n]*flags_sync: key_file "\Q$d\E\/conf\/key-empty" is empty/],
                  ['key_file=key-short', qr/\[emerg\] [^\n]*flags_sync: key_file "\Q$d\E\/conf\/key-short" is shorter than 16 bytes/],
                  ['key_file=key-large', qr/\[emerg\] [^\n]*flags_sync: key_file "\Q$d\E\/conf\/key-large" is larger than 512 bytes/],
                  ["key_file=$d/conf", qr/\[emerg\] [^\n]*flags_sync: key_file "\Q$d\E\/conf" is not a regular file/],
                  ['key_file=key-ok key_file=key-ok', qr/\[emerg\] [^\n]*flags_sync: duplicate key_file=/],
                  ['key_file=', qr/\[emerg\] [^\n]*flags_sync: key_file= needs a path/],
                  ['key_file=key-ok', undef]) {
        my ($param, $want) = @$case;
        write_file("$d/conf/nginx.conf", nginx_conf(server => '', http => <<"_H_"));
    flags_project shop token=tok_1 file=shop.json definitions=runtime;
    flags_state_file $d/state.json;
    flags_sync redis://127.0.0.1:1 $param;
_H_
        my ($rc, $out) = nginx_test($d);
        if ($want) {
            isnt($rc, 0, "nginx -t refuses $param");
            like($out, $want, '... and says why');
        } else {
            is($rc, 0, "nginx -t takes $param (16 bytes once its CRLF is dropped)") or diag $out;
        }
    }
}

sub start { local $FlagsTest::Port = $port[$_[0]]; return nginx_start($dir[$_[0]]) }
push @pid, start($_) for 0 .. 2;

sub version {
    my $s = host_status($port[$_[0]]) or return -1;
    return $s->{projects}[0]{definitions}{version} // -1;
}
# the names GET /flags answers, asked $n times (connections land on both
# workers); the answers joined with " | " when they differ
sub names {
    my ($i, $n) = @_;
    my %seen;
    for (1 .. ($n // 1)) {
        my ($st, undef, $body) = host_request($port[$i], GET => '/flags',
                                              headers => ['Authorization: Bearer tok_1']);
        $seen{ $st == 200 ? join ',', sort map { $_->{name} } @{ JSON::PP::decode_json($body)->{flags} }
                          : "status $st" } = 1;
    }
    return join ' | ', sort keys %seen;
}
sub put_flag {
    my ($i, $flag, $pct, @h) = @_;
    return host_request($port[$i], PUT => "/flags-admin/definitions/shop/flags/$flag",
                        body => qq({"enabled": true, "rolloutPercentage": $pct}),
                        headers => ['Content-Type: application/json', @h]);
}
sub rejected {
    my ($i, $reason) = @_;
    my (undef, undef, $m) = host_request($port[$i], GET => '/metrics');
    my ($n) = $m =~ /^flags_definitions_rejected_total\{project="shop",reason="$reason"\} (\d+)$/m;
    return $n // -1;
}
sub errlog { read_file("$dir[$_[0]]/logs/error.log") // '' }
sub all_at {
    my ($v, $names, $t) = @_;
    $names = join ',', sort split /,/, $names;
    return wait_for(sub { !grep { version($_) != $v || (names($_, 4) // '') ne $names } 0 .. 2 }, $t // 5);
}

ok(all_at(1, 'base'), 'every host serves version 1, the file');
ok(wait_for(sub { !grep { !(host_status($port[$_]) // {})->{sync}{connected} } 0 .. 2 }, 5),
   'every host is connected to redis');

# --- a write on h0 reaches h1 and h2 -------------------------------------------------------
my ($st, $h, $body) = put_flag(0, 'fresh', 100);
my $t0 = time;
is($st, 200, 'h0: PUT of a new flag: 200');
is($h->{etag}, '"v2"', '... ETag "v2"');
like($body, qr/"version":2,"added":\["fresh"\]/, "... the answer: $body");
is(version(0), 2, 'h0 serves version 2 as it answers');
is(names(0, 4), 'base,fresh', '... on both workers');
ok(wait_for(sub { version(1) == 2 && version(2) == 2 }, 2), 'h1 and h2 serve version 2');
my $took = time - $t0;
cmp_ok($took, '<', 1.0, sprintf('... within a few 200 ms intervals (%.3f s)', $took));
ok(all_at(2, 'base,fresh'), 'GET /flags on every host, both workers: base and fresh');
is(cli('HGET', $key, 'v'), '2', 'redis holds version 2');
like(cli('HGET', $key, 'sig'), qr/^[0-9a-f]{64}$/, '... signed (HMAC-SHA256, hex)');
is(cli('HGET', $key, 'host'), 'h0', '... written on h0');
like(errlog(1), qr/\[notice\] [^\n]*flags: project "shop" has definitions version 2 from the fleet \(written on host "h0"\)/,
     'h1 logs the version it took');

# the flag added at runtime is synced like the file's: its override on h1
# reaches h0 and h2 (the syncing workers' arrays grew with the project)
($st) = host_request($port[1], PUT => '/flags-admin/overrides/shop/fresh',
                     body => '{"rolloutPercentage": 7}', headers => ['Content-Type: application/json']);
is($st, 204, 'h1: override of fresh, the runtime flag');
for my $i (0, 2) {
    ok(wait_for(sub { ((host_flag($port[$i], 'fresh') // {})->{effectiveRolloutPercentage} // -1) == 7 }, 5),
       "h$i serves fresh at the fleet's 7 %");
}

# --- two writes at once on two hosts: one wins ----------------------------------------------
my @sock;
for my $i (1, 2) {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port[$i], Timeout => 10)
        or die "connect: $!";
    push @sock, $s;
}
my @req = map {
    my $b = qq({"enabled": true, "rolloutPercentage": 50});
    "PUT /flags-admin/definitions/shop/flags/from-h$_ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    . "Content-Type: application/json\r\nIf-Match: \"v2\"\r\nContent-Length: " . length($b) . "\r\n\r\n$b"
} 1, 2;
print { $sock[$_] } $req[$_] for 0, 1;
my @status = map { local $/; my $r = readline($_) // ''; $r =~ m{^HTTP/1\.1 (\d+)} ? $1 : 0 } @sock;
is(join(',', sort @status), '200,412', "two concurrent writes (h1, h2, both If-Match v2): one 200, one 412 (@status)");
my $winner = $status[0] == 200 ? 'from-h1' : 'from-h2';
ok(all_at(3, "base,$winner,fresh"), "every host serves version 3, with $winner only");

# --- a host that starts later serves the newest ---------------------------------------------
nginx_stop($pid[2]);
system('rm', '-rf', "$dir[2]/state.json", "$dir[2]/state.json.definitions");
($st) = put_flag(0, 'later', 30);
is($st, 200, 'h0: version 4 while h2 is down');
$pid[2] = start(2);
ok(wait_for(sub { version(2) == 4 }, 3), 'h2, started later with no version of its own, serves version 4');
ok(all_at(4, "base,$winner,fresh,later"), 'every host serves version 4');

# --- Redis away -------------------------------------------------------------------------------
reap($redis);
undef $redis;
ok(wait_for(sub { !grep { (host_status($port[$_]) // {})->{sync}{connected} } 0 .. 2 }, 5),
   'redis stopped: no host is connected');
($st, $h, $body) = put_flag(1, 'lonely', 10);
is($st, 503, 'h1: a write with redis away: 503');
like($body, qr/"error":"fleet_unavailable"/, "... fleet_unavailable: $body");
sleep 0.5;
ok(all_at(4, "base,$winner,fresh,later", 1), 'every host keeps serving version 4, without the refused flag');
ok(!-e "$dir[1]/state.json.definitions/shop/v5.json", '... h1 stored no version 5');

# a host restarted while Redis is away serves its last version
nginx_stop($pid[1]);
$pid[1] = start(1);
is(version(1), 4, 'h1 restarted with redis down: serves version 4');
is(names(1, 4), join(',', sort 'base', $winner, 'fresh', 'later'), '... on both workers');

# --- Redis back, empty: reseeded ---------------------------------------------------------
$redis = start_redis();
ok(wait_for(sub { cli('HGET', $key, 'v') eq '4' }, 5), 'redis restarted empty is reseeded with version 4');
like(cli('HGET', $key, 'sig'), qr/^[0-9a-f]{64}$/, '... signed');
is(scalar(grep { errlog($_) =~ /\[notice\] [^\n]*flags: sync: project "shop": the fleet is seeded with this host's definitions version 4/ } 0 .. 2),
   1, '... by exactly one host, which logs it');
cmp_ok(scalar(grep { errlog($_) =~ /\[notice\] [^\n]*flags: sync: project "shop": the fleet holds definitions version 0, this host 4: it seeds the fleet at the next round/ } 0 .. 2),
       '>=', 1, '... the seeding host said why first (a host whose round came after the seed has nothing to say)');
ok(wait_for(sub { (put_flag(2, 'after', 40))[0] == 200 }, 5), 'h2: a write after the reseed: 200');
ok(all_at(5, "after,base,$winner,fresh,later"), 'every host serves version 5');

# --- a flag removed at runtime: the rounds go on with fewer flags ------------------------------
($st, undef, $body) = host_request($port[0], DELETE => '/flags-admin/definitions/shop/flags/fresh');
is($st, 200, "h0: DELETE of fresh: 200 $body");
ok(all_at(6, "after,base,$winner,later"), 'every host serves version 6, without fresh');
ok(wait_for(sub { (put_flag(1, 'after', 45))[0] == 200 }, 3), 'h1: a write after the removal: 200');
ok(all_at(7, "after,base,$winner,later"), 'every host serves version 7');
ok(wait_for(sub { ((host_flag($port[2], 'after') // {})->{rolloutPercentage} // -1) == 45 }, 1),
   '... h2 serves its 45 %');

# --- a version written by another tool, signed as docs/sync.md says ---------------------------
my $secret = 't085-0123456789abcdef-fleet-key';
sub sign {
    my ($v, $at, $entry, $doc) = @_;
    return hmac_sha256_hex("flags-definitions\nshop\n$v\n$at\n$entry\n$doc", $secret);
}
sub put_version {
    my ($v, $doc, %o) = @_;
    my $at = int(time * 1000);
    my $entry = qq({"version":$v,"at":"2026-01-01T00:00:00Z","by":"tool","host":"tool","added":[],"changed":[],"removed":[]});
    my $sig = sign($v, $at, $entry, $o{signed_doc} // $doc);
    cli('DEL', $key);
    cli('HSET', $key, 'v', $v, 'at', $at, 'entry', $entry, 'doc', $doc, 'host', 'tool',
        $o{unsigned} ? () : ('sig', $sig));
}
my $doc7 = cli('HGET', $key, 'doc');
(my $doc8 = $doc7) =~ s/\]\s*\}\s*\z/,{"name":"outside","enabled":true,"rolloutPercentage":20}]}/ or die "doc: $doc7";
put_version(8, $doc8);
ok(all_at(8, "after,base,$winner,later,outside"), 'version 8, signed outside nginx with the key: every host serves it');

# --- a tampered version: refused everywhere ---------------------------------------------------
(my $doc9 = $doc8) =~ s/"rolloutPercentage":20/"rolloutPercentage":90/ or die;
put_version(9, $doc9, signed_doc => $doc8);
ok(wait_for(sub { !grep { rejected($_, 'signature') != 1 } 0 .. 2 }, 3),
   'a tampered version 9 (document changed, signature kept): every host counts one refusal (signature)');
sleep 0.6;
for my $i (0 .. 2) {
    is(version($i), 8, "h$i keeps serving version 8");
    is(rejected($i, 'signature'), 1, "h$i counted it once, round after round");
    my @lines = errlog($i) =~ /(\[error\] [^\n]*definitions version 9 in redis \(from host "tool"\) refused: its signature does not verify under key_file=; this host keeps serving version 8)/g;
    is(scalar @lines, 1, "h$i logged why once, at error");
}
is((host_flag($port[0], 'outside') // {})->{rolloutPercentage}, 20, 'the tampered percentage is served nowhere (h0: 20)');

# --- an unsigned version: refused under a key -------------------------------------------------
put_version(10, $doc9, unsigned => 1);
ok(wait_for(sub { !grep { rejected($_, 'signature') != 2 } 0 .. 2 }, 3),
   'version 10 without a signature: every host counts a second refusal');
for my $i (0 .. 2) {
    like(errlog($i), qr/\[error\] [^\n]*definitions version 10 in redis \(from host "tool"\) refused: it is not signed, and key_file= is set; this host keeps serving version 8/,
         "h$i logged it");
    is(version($i), 8, "h$i keeps serving version 8");
}

# --- a signed version that nginx -t would refuse ----------------------------------------------
(my $doc11 = $doc8) =~ s/"rolloutPercentage":20/"rolloutPercentage":101/ or die;
put_version(11, $doc11);
ok(wait_for(sub { !grep { rejected($_, 'invalid') != 1 } 0 .. 2 }, 3),
   'a signed version 11 with a percentage of 101: every host counts it invalid');
for my $i (0 .. 2) {
    like(errlog($i), qr/\[error\] [^\n]*definitions version 11 in redis \(from host "tool"\) refused: [^\n]*outside[^\n]*; this host keeps serving version 8/,
         "h$i logged nginx -t's message, naming the flag");
    is(version($i), 8, "h$i keeps serving version 8");
}
($st, undef, $body) = put_flag(0, 'blocked', 1);
is($st, 412, 'a write on version 8 while redis holds the refused 11: 412 (the compare-and-set)');
like($body, qr/"error":"version_conflict"/, "... version_conflict: $body");

# deleting the key lets the hosts reseed it, and writes go on
cli('DEL', $key);
ok(wait_for(sub { cli('HGET', $key, 'v') eq '8' }, 3), 'the key deleted: reseeded with version 8');
ok(wait_for(sub { (put_flag(2, 'blocked', 1))[0] == 200 }, 3), 'h2: a write goes through again');
ok(all_at(9, "after,base,blocked,$winner,later,outside"), 'every host serves version 9');
is((put_flag(0, 'ten', 10))[0], 200, 'h0: version 10');
ok(all_at(10, "after,base,blocked,$winner,later,outside,ten"), '... served by every host');
is((put_flag(1, 'eleven', 11))[0], 200, 'h1: version 11, a number refused before');
ok(all_at(11, "after,base,blocked,eleven,$winner,later,outside,ten"), '... served by every host');

for my $i (0 .. 2) {
    ok(errlog($i) !~ /\[(?:alert|crit|emerg)\]/, "h$i: no alert, crit or emerg");
}
nginx_stop($_) for @pid;

# --- without key_file=: versions go unsigned, and whoever writes to Redis decides -------------
{
    my @up = map { unused_port() } 0 .. 1;
    my @ud = map { prefix_dir("fleet-defs-nokey-$_") } 0 .. 1;
    my @upid;
    my $ukey = 't085u:{shop}:defs';
    for my $i (0, 1) {
        local $FlagsTest::Port = $up[$i];
        write_file("$ud[$i]/conf/shop.json",
                   '{"flags": [{"name": "base", "enabled": true, "rolloutPercentage": 100}]}');
        write_file("$ud[$i]/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_1 file=shop.json definitions=runtime;
    flags_state_file $ud[$i]/state.json;
    flags_error_log off;
    flags_sync redis://127.0.0.1:$rport/5 interval=200ms prefix=t085u: host=u$i;
_H_
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_
        push @upid, nginx_start($ud[$i]);
    }
    my $uversion = sub { ((host_status($up[$_[0]]) // {})->{projects}[0]{definitions}{version}) // -1 };
    ok(wait_for(sub { !grep { !(host_status($up[$_]) // {})->{sync}{connected} } 0, 1 }, 5),
       'no key: both hosts connected');
    my ($ust) = host_request($up[0], PUT => '/flags-admin/definitions/shop/flags/open',
                             body => '{"enabled": true, "rolloutPercentage": 5}',
                             headers => ['Content-Type: application/json']);
    is($ust, 200, 'no key: a write on u0');
    ok(wait_for(sub { $uversion->(1) == 2 }, 3), '... served by u1');
    is(cli('HEXISTS', $ukey, 'sig'), '0', '... stored unsigned');
    my $evil = '{"flags": [{"name": "base", "enabled": true, "rolloutPercentage": 100}, '
             . '{"name": "open", "enabled": true, "rolloutPercentage": 100}]}';
    cli('HSET', $ukey, 'v', 3, 'doc', $evil,
        'entry', '{"version":3,"at":"2026-01-01T00:00:00Z","by":"anyone","host":"anyone","added":[],"changed":["open"],"removed":[]}');
    ok(wait_for(sub { !grep { $uversion->($_) != 3 } 0, 1 }, 3),
       'no key: a version anyone wrote into redis is served by every host');
    ok(wait_for(sub { ((host_flag($up[1], 'open') // {})->{rolloutPercentage} // -1) == 100 }, 1),
       '... "open" at their 100 %');
    nginx_stop($_) for @upid;
}
done_testing();
