# The answers, pinned byte for byte (issue 27).  The speed work of issue 27
# (per-worker counters, prebuilt fragments, cheaper buckets, a compiled flag
# program) may change how an answer is built, never what it is: for the
# same definitions, state and caller every body and every ETag must stay
# the same bytes.  This file holds, as literals written down from the
# commit before any speed change (273f74b), the status, length, SHA-256
# and ETag header of each answer below; a change of one byte in one answer
# fails the test that names it.
#
# What is asked (two workers, one keep-alive connection on each; every
# input twice on each connection, so both workers and the answer memo's
# miss and hit answer it, and all four answers must be the same bytes):
#  - GET /flags of the bench's 30-flag and 1,000-flag projects
#    (bench/gen-flags.py --seed 42, as bench/run.sh builds them; the files'
#    SHA-256 is pinned too, so a change of the generator shows as that and
#    not as an answer change) for 22 users with traits that hit and miss
#    the generated segments, one caller with traits and no userId, and no
#    caller at all;
#  - the same after overrides through flags_admin (two percentages and
#    {"enabled":false} in each project), and after a rollback tripped by
#    error reports (the http-level flags_rollback policy); removing the
#    overrides and clearing the rollback must give back the first bytes;
#  - OFREP bulk (with its ETag) and single evaluations, and the DeployRamp
#    SDK's POST {loc}flags, for a few callers of each project;
#  - targeting: the bench's 1,000-flag project with rules and named users
#    (--targeting 3 --named-users 1000) for callers that are staff, named
#    on, named off and neither, and a small project written here with
#    rules, targets, a "$userId" segment and stickiness.
# No pinned answer holds a time or a counter.
#
# The pins are literals in __DATA__ ("key<TAB>status length sha256
# etag"; "-" for no ETag).  FLAGS_PIN_WRITE=<file> writes the table of this
# build instead of comparing: only for a deliberate change of the answers,
# never to make a speed change pass.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP ();
use Digest::SHA qw(sha256_hex);
use IO::Socket::INET;

my $Write = $ENV{FLAGS_PIN_WRITE};
my $dir = prefix_dir('answer-pin');
my $gen = "$FindBin::Bin/../bench/gen-flags.py";

# ---------------------------------------------------------------- inputs
my %Files = (
    'p30.json'   => ['--flags', 30, '--seed', 42, '--name-prefix', 'ff'],
    'p1000.json' => ['--flags', 1000, '--seed', 42, '--name-prefix', 'ff'],
    'p1000t.json' => ['--flags', 1000, '--seed', 42, '--name-prefix', 'ff',
                      '--targeting', 3, '--named-users', 1000],
);
my %FileSha = (
    'p30.json'    => '30ff784695121afc094cfc5809213eaa8562f81af21dfa839128e3b2068a332f',
    'p1000.json'  => 'a987fca1125dd7af57e9fe173c775bea673a54b54c21e01c76b9f9f797e285d6',
    'p1000t.json' => 'f523d9a328d027a48a6615ee9b6d91d02801593edb1710757d87b0abaa6885b7',
);
for my $f (sort keys %Files) {
    my $cmd = join ' ', 'python3', $gen, @{ $Files{$f} }, '>', "$dir/conf/$f";
    system($cmd) == 0 or die "$cmd: $?";
    open my $fh, '<:raw', "$dir/conf/$f" or die "$f: $!";
    my $sha = Digest::SHA->new(256)->addfile($fh)->hexdigest;
    is($sha, $FileSha{$f}, "bench/gen-flags.py wrote the same $f");
}

# Targeting written here: a segment on "$userId", rules with their own
# percentage, named users on and off, a kill switch over named users,
# stickiness on a trait, a flag whose rules everyone may fall through.
write_file("$dir/conf/tg.json", <<'_J_');
{"flags": [
  {"name": "staff-plus", "enabled": true, "rolloutPercentage": 10,
   "rules": [{"segments": ["staff"], "rolloutPercentage": 100},
             {"segments": ["staff-role"], "rolloutPercentage": 100}]},
  {"name": "named", "enabled": true, "rolloutPercentage": 0,
   "rules": [{"segments": ["beta"], "rolloutPercentage": 0}],
   "targets": {"on": ["t-on1", "t-on2"], "off": ["t-off1"]}},
  {"name": "named-hi", "enabled": true, "rolloutPercentage": 100,
   "rules": [{"segments": ["beta"], "rolloutPercentage": 100}],
   "targets": {"off": ["t-off1", "s1"]}},
  {"name": "named-killed", "enabled": false, "rolloutPercentage": 100,
   "rules": [{"segments": [], "rolloutPercentage": 100}],
   "targets": {"on": ["t-on1"]}},
  {"name": "sticky", "enabled": true, "rolloutPercentage": 50, "stickiness": "accountId",
   "targets": {"on": ["t-on2"]}},
  {"name": "split", "enabled": true, "rolloutPercentage": 100,
   "rules": [{"segments": ["beta"], "rolloutPercentage": 50}]},
  {"name": "mixed", "enabled": true, "rolloutPercentage": 0,
   "rules": [{"segments": ["staff", "beta"], "rolloutPercentage": 100},
             {"segments": ["beta", "staff-role"], "rolloutPercentage": 0},
             {"segments": [], "rolloutPercentage": 30}]},
  {"name": "dach", "enabled": true, "rolloutPercentage": 40,
   "rules": [{"segments": ["dach"], "rolloutPercentage": 60.5}]},
  {"name": "plain", "enabled": true, "rolloutPercentage": 30, "segments": ["beta"]}
 ],
 "segments": {
  "staff": {"rules": [{"trait": "$userId", "op": "in", "values": ["s1", "s2", "s3"]}]},
  "staff-role": {"rules": [{"trait": "role", "op": "eq", "value": "staff"}]},
  "beta": {"rules": [{"trait": "plan", "op": "eq", "value": "beta"}]},
  "dach": {"rules": [{"trait": "country", "op": "in", "values": ["de", "at", "ch"], "ignoreCase": true}]}
 }}
_J_

write_file("$dir/conf/nginx.conf", nginx_conf(http => <<'_H_', server => <<'_S_'));
    flags_project p30 token=pub_pin_30 file=p30.json;
    flags_project p1000 token=pub_pin_1000 file=p1000.json;
    flags_project p1000t token=pub_pin_1000t file=p1000t.json;
    flags_project tg token=pub_pin_tg file=tg.json;
    flags_rollback min_errors=3 rate=1% window=60s;
_H_
        add_header X-Worker $pid;
        keepalive_requests 100000;
        location = /flags { flags_evaluate; }
        location /ofrep/ { flags_ofrep; }
        location /api/sdk/ { flags_sdk; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; allow 127.0.0.1; deny all; }
        location /flags-admin/ { flags_admin; allow 127.0.0.1; deny all; }
_S_

my $master = nginx_start($dir);
is(scalar(worker_pids($master)), 2, 'two workers');

# ---------------------------------------------------------------- requests
my %Token = (p30 => 'pub_pin_30', p1000 => 'pub_pin_1000', p1000t => 'pub_pin_1000t',
             tg => 'pub_pin_tg');

# One request on the keep-alive connection $s: (status, {lowercase
# header => value}, body).  The module answers with Content-Length (none
# on a 204).
sub ka_request {
    my ($s, $method, $path, $headers, $body) = @_;
    $body //= '';
    my $req = "$method $path HTTP/1.1\r\nHost: localhost\r\n";
    $req .= "$_\r\n" for @$headers;
    $req .= "Content-Length: " . length($body) . "\r\n" if length $body;
    print $s "$req\r\n$body";
    my $buf = '';
    while ($buf !~ /\r\n\r\n/) {
        my $n = sysread($s, $buf, 65536, length $buf);
        die "connection closed before the header" unless $n;
    }
    my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
    my ($status_line, @lines) = split /\r\n/, $head;
    my ($status) = $status_line =~ m{^HTTP/1\.1 (\d+)};
    my %h = map { my ($k, $v) = split /:\s*/, $_, 2; (lc $k, $v) } @lines;
    return ($status, \%h, '') if $status == 204 || $status == 304;
    die "no Content-Length in $method $path" unless defined $h{'content-length'};
    die "Connection: close in $method $path" if ($h{connection} // '') =~ /close/i;
    while (length $rest < $h{'content-length'}) {
        my $n = sysread($s, $rest, $h{'content-length'} - length $rest, length $rest);
        die "connection closed in the body" unless $n;
    }
    return ($status, \%h, $rest);
}

# One keep-alive connection on each of the two workers, told apart by the
# X-Worker header.
my %Conn;
for (1 .. 200) {
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $FlagsTest::Port,
                                  Timeout => 10) or die "connect: $!";
    my (undef, $h) = ka_request($s, 'GET', '/flags-status', []);
    if ($h->{'x-worker'} && !$Conn{ $h->{'x-worker'} }) { $Conn{ $h->{'x-worker'} } = $s }
    else { close $s }
    last if keys %Conn == 2;
}
is(scalar(keys %Conn), 2, 'a keep-alive connection on each worker');
my @Conn = map { $Conn{$_} } sort keys %Conn;

my (%Pin, @Seen);
while (my $line = <DATA>) {
    chomp $line;
    next unless length $line;
    my ($key, $value) = split /\t/, $line, 2;
    die "pinned twice: $key" if exists $Pin{$key};
    $Pin{$key} = $value;
}

# Asks one input four times (twice on each worker's connection): all four
# must be the same bytes and the same ETag, and the pinned ones.
my %Got;
sub pin {
    my ($key, $method, $path, $project, $body) = @_;
    my @headers = ("Authorization: Bearer $Token{$project}");
    push @headers, 'Content-Type: application/json' if defined $body;
    my (%answers, $first);
    for my $s (@Conn, @Conn) {
        my ($st, $h, $b) = ka_request($s, $method, $path, \@headers, $body);
        my $sum = join ' ', $st, length $b, sha256_hex($b), $h->{etag} // '-';
        $first //= $sum;
        $answers{$sum}++;
    }
    if (keys %answers != 1) {
        fail("$key: the same bytes on both workers, memo miss and hit");
        diag(join "\n", sort keys %answers);
        return;
    }
    if (exists $Got{$key}) {
        # an input asked again after its state came back
        is($first, $Got{$key}, "$key: the same bytes as before");
        return;
    }
    $Got{$key} = $first;
    push @Seen, $key;
    return if $Write;
    is($first, $Pin{$key} // '(not pinned)', $key);
}

# The callers of the generated projects: traits that each generated
# segment tests, chosen so some match and some fail on a first or last
# rule (bench/gen-flags.py).  Numbers are sent as JSON numbers to OFREP
# and the SDK.
sub caller_traits {
    my ($k) = @_;
    my %t;
    $t{plan} = (qw(pro enterprise team free))[$k % 4] if $k % 5;
    $t{country} = (qw(de DE fr at))[$k % 4] if $k % 3;
    $t{appVersion} = (qw(2.3.1 1.9.9 3.1.0 2.0.0))[$k % 4] if $k % 7;
    $t{email} = (qw(ana.silva@example.com x@bench.com Bob@Other.org))[$k % 3] if $k % 2;
    $t{sessions} = (42, 3, 1000, 25)[$k % 4] if $k % 6;
    return \%t;
}
sub uri_escape { my ($v) = @_; $v =~ s/([^A-Za-z0-9._~-])/sprintf('%%%02X', ord $1)/ge; $v }
sub query {
    my ($user, $t) = @_;
    my @q;
    push @q, 'userId=' . uri_escape($user) if defined $user;
    push @q, map { "trait_$_=" . uri_escape($t->{$_}) } sort keys %$t;
    return @q ? '?' . join('&', @q) : '';
}
my $Canon = JSON::PP->new->canonical;
sub ofrep_context {
    my ($user, $t) = @_;
    my %c = %$t;
    $c{sessions} += 0 if exists $c{sessions};
    $c{targetingKey} = $user if defined $user;
    return $Canon->encode({ context => \%c });
}
sub sdk_body {
    my ($user, $t) = @_;
    my %t = %$t;
    $t{sessions} += 0 if exists $t{sessions};
    return $Canon->encode({ (defined $user ? (userId => $user) : ()), traits => \%t });
}

my @Callers = ((map { ["pin-user-$_", caller_traits($_)] } 1 .. 22),
               ['bench-user-7', { plan => 'pro', country => 'de', appVersion => '2.3.1',
                                  email => 'ana.silva@example.com', sessions => 42 }],
               [undef, { plan => 'pro', country => 'de', sessions => 42 }],
               [undef, {}]);
sub who { defined $_[0][0] ? $_[0][0] : %{ $_[0][1] } ? 'traits-only' : 'nobody' }

sub get_all {
    my ($phase, @projects) = @_;
    for my $p (@projects) {
        pin("$phase GET $p " . who($_), GET => '/flags' . query(@$_), $p) for @Callers;
    }
}
sub ofrep_sdk {
    my ($phase, $p, $single, @callers) = @_;
    for my $c (@callers) {
        my $who = who($c);
        pin("$phase OFREP-bulk $p $who", POST => '/ofrep/v1/evaluate/flags', $p, ofrep_context(@$c));
        pin("$phase SDK $p $who", POST => '/api/sdk/flags', $p, sdk_body(@$c));
        pin("$phase OFREP $p/$_ $who", POST => "/ofrep/v1/evaluate/flags/$_", $p, ofrep_context(@$c))
            for @$single;
    }
}

sub admin {
    my ($method, $path, $body) = @_;
    my ($st) = ka_request($Conn[0], $method, "/flags-admin/$path",
                          defined $body ? ['Content-Type: application/json'] : [], $body);
    return $st;
}

sub flag_state {
    my ($project, $flag) = @_;
    my (undef, undef, $body) = ka_request($Conn[1], 'GET', '/flags-status', []);
    my ($p) = grep { $_->{name} eq $project } @{ JSON::PP::decode_json($body)->{projects} };
    my ($f) = grep { $_->{name} eq $flag } @{ $p->{flags} };
    return $f;
}

my @Single30 = qw(ff-0000-upload ff-0003-cart ff-0006-login ff-0008-reports ff-0025-theme ff-0026-upload);
my @Few = @Callers[0, 1, 5, 22, 23, 24];

# ---------------------------------------------------------------- base
sub base {
    get_all('base', qw(p30 p1000));
    ofrep_sdk('base', 'p30', \@Single30, @Few);
    ofrep_sdk('base', 'p1000', [], @Callers[0, 22, 24]);
}
base();

# ---------------------------------------------------------------- targeting
# bench-user-10021 is in "staff-ids"; bench-user-2773 is named in 13 flags;
# bench-user-99223 is named on and bench-user-79876 named off in
# ff-0000-upload (the generated file, seed 42).
my @Tcallers = (['bench-user-7', $Callers[22][1]], ['bench-user-10021', {}],
                ['bench-user-2773', { plan => 'free', country => 'fr' }],
                ['bench-user-99223', {}], ['bench-user-79876', $Callers[22][1]],
                [undef, {}]);
pin("base GET p1000t " . who($_), GET => '/flags' . query(@$_), 'p1000t') for @Tcallers;
ofrep_sdk('base', 'p1000t', ['ff-0000-upload'], @Tcallers[1, 2]);

my @Tg = (['s1', {}], ['s2', { plan => 'beta' }], ['t-on1', {}], ['t-on2', { accountId => 'acc-9' }],
          ['t-off1', { plan => 'beta' }], ['u-7', { role => 'staff' }],
          ['u-8', { plan => 'beta', country => 'DE', accountId => 'acc-1' }],
          ['u-9', { country => 'ch' }], ['u-10', { plan => 'beta', role => 'staff' }],
          [undef, { accountId => 'acc-1', plan => 'beta' }], [undef, {}],
          map { ["tg-user-$_", { $_ % 2 ? (plan => 'beta') : (), $_ % 3 ? (country => 'at') : () }] } 1 .. 10);
pin("base GET tg " . who($_), GET => '/flags' . query(@$_), 'tg') for @Tg;
ofrep_sdk('base', 'tg', [qw(staff-plus named named-hi named-killed sticky mixed dach)], @Tg[0 .. 10]);

# ---------------------------------------------------------------- overrides
my %Override = (
    p30   => { 'ff-0003-cart' => '{"rolloutPercentage":37.5}',
               'ff-0025-theme' => '{"rolloutPercentage":12.345}',
               'ff-0026-upload' => '{"enabled":false}' },
    p1000 => { 'ff-0003-cart' => '{"rolloutPercentage":37.5}',
               'ff-0500-chat' => '{"rolloutPercentage":66}',
               'ff-0026-upload' => '{"enabled":false}' },
);
for my $p (sort keys %Override) {
    for my $f (sort keys %{ $Override{$p} }) {
        is(admin(PUT => "overrides/$p/$f", $Override{$p}{$f}), 204, "override $p/$f $Override{$p}{$f}");
    }
}
get_all('override', qw(p30 p1000));
ofrep_sdk('override', 'p30', \@Single30, @Few);
ofrep_sdk('override', 'p1000', [], @Callers[0, 22, 24]);

for my $p (sort keys %Override) {
    is(admin(DELETE => "overrides/$p/$_"), 204, "override $p/$_ removed") for sort keys %{ $Override{$p} };
}
base();                              # the same bytes as before the overrides

# ---------------------------------------------------------------- rollback
# min_errors=3 rate=1%: ten reports roll a flag back while its window
# holds at most 1,000 enabled evaluations (the phases above make about 500
# of each flag that is on for everyone).
my %Rollback = (p30 => 'ff-0000-upload', p1000 => 'ff-0028-checkout');
for my $p (sort keys %Rollback) {
    for (1 .. 10) {
        my ($st) = ka_request($Conn[$_ % 2], POST => '/ingest/errors',
                              ["Authorization: Bearer $Token{$p}", 'Content-Type: application/json'],
                              qq({"flagName":"$Rollback{$p}","message":"pin"}));
        is($st, 204, "report $_ on $p/$Rollback{$p}");
    }
    is(flag_state($p, $Rollback{$p})->{rolledBack}, JSON::PP::true, "$p/$Rollback{$p} rolled back");
}
get_all('rollback', qw(p30 p1000));
ofrep_sdk('rollback', 'p30', \@Single30, @Few);
ofrep_sdk('rollback', 'p1000', [], @Callers[0, 22, 24]);

for my $p (sort keys %Rollback) {
    is(admin(DELETE => "rollbacks/$p/$Rollback{$p}"), 204, "rollback of $p/$Rollback{$p} cleared");
}
base();                              # the same bytes as before the rollback

# ---------------------------------------------------------------- the end
if ($Write) {
    open my $out, '>', $Write or die "$Write: $!";
    print $out "$_\t$Got{$_}\n" for @Seen;
    close $out;
    pass("wrote " . scalar(@Seen) . " pins to $Write");
} else {
    is(scalar(@Seen), scalar(keys %Pin), 'every pinned answer was asked');
}
my %etags = map { (split / /, $Got{$_})[3] => 1 } grep { / (?:GET|OFREP-bulk) / } @Seen;
ok(!exists $etags{'-'}, 'every GET /flags and OFREP bulk answer has an ETag');

close $_ for @Conn;
nginx_stop($master);
unlike(read_file("$dir/logs/error.log"), qr/\[(alert|crit|emerg)\]/, 'no alert in the error log');
done_testing();

__DATA__
base GET p30 pin-user-1	200 2645 e9017104f225a739221803bce19bb9b1edb61ab0a451ad05194eee9f03606dbe "ab3efa961d85974d"
base GET p30 pin-user-2	200 2642 17e704e3d0bbebbb9649931ac46ae99b23273a65414f28f706f1708dd2255846 "99a223b3a8a8210e"
base GET p30 pin-user-3	200 2646 ce67a9e52ae9d5c4289555e53a3ff08dad8c084ea546e6fffd43a76022acaa87 "4749c4847c70595e"
base GET p30 pin-user-4	200 2639 dfb1c58211437df793cc4fb56024c08b4ea103de186cc66e79907b8c77f819cc "aff636be67455665"
base GET p30 pin-user-5	200 2648 1f437dad748f65364f7f6bc47d13604c55556e83a8081752ad97d2a377c14342 "26f7ac1d88b96b28"
base GET p30 pin-user-6	200 2645 986a42e7a6c132cbbfb2ad579e09a613284a63e749601c6e5676147f8272159d "cd24562b956d2508"
base GET p30 pin-user-7	200 2646 c0563e327bc47a6f9fabc0222a091e6df52e7d4a532d56724106f906312d8e0f "e9d5f5bb4c6e3d96"
base GET p30 pin-user-8	200 2640 8eec3479980202f4292063d9ddc94e4921b5ce79e794d556859c1b4a2d08f3a7 "8a18d0ec2e62c02a"
base GET p30 pin-user-9	200 2647 84a1aee61a4979845a8be54eb28fd89ab08b528cbd7671195ca09195e32c1e10 "e579c0df82e1c597"
base GET p30 pin-user-10	200 2643 a871c1ab13262e2c5c5b746c33ba8ca8dde10c52bc5db9464eb4dae86bee0a8d "05b2f224c1721c0c"
base GET p30 pin-user-11	200 2648 4ba2d4288458682c6e9ad24d1051a445441d96af7a173f3f5a85deb85208d4ec "ed497b081f7d21b4"
base GET p30 pin-user-12	200 2645 1061290761b722d0b6efdfc8faff0d2c84d1501db1f9e95dc29b9d2a991263ce "f2a634db75f6ac47"
base GET p30 pin-user-13	200 2645 ec38bb4e4848a6a9409ca2cbf40916bcb2cb4d05b62d5291568f8ab6e6749245 "efcb2c355056da5f"
base GET p30 pin-user-14	200 2647 b10cfff6c4d424bf8c1f8ba093a85710722fb6451f8b62a4bbdcc172974acdef "7206c3752e288c9e"
base GET p30 pin-user-15	200 2644 78d23397d5c2ce1792fb01192a006c11904f16836f301b0f1d740a3ae62a8430 "1dc78c20411ae02d"
base GET p30 pin-user-16	200 2640 1b07db2cb1f858f3fc13669921730f2aa9a517543296b777faab1a75d4a9d840 "5e3192d608af13be"
base GET p30 pin-user-17	200 2647 2c56416e19ace24841f6cc07a97143e12841d8499dbbc5b045fed729c505d99f "82694e99e1a5b3dc"
base GET p30 pin-user-18	200 2645 986a42e7a6c132cbbfb2ad579e09a613284a63e749601c6e5676147f8272159d "ba06b40e6580f55a"
base GET p30 pin-user-19	200 2645 07e596c7526eaaf5e773bf5657574bb6bae5bc5b5defe51272411ea9c1225375 "023770641bcc36bf"
base GET p30 pin-user-20	200 2642 3202f776c9eb1258f9e6264f65c9feeafebe08018ffc986d12147181879d5f37 "0b1c35e84d825103"
base GET p30 pin-user-21	200 2647 fbd842ac2d2720596f3da41cd68390ad34ef156d2d2282edaeea9724e940f941 "ba794018e840217f"
base GET p30 pin-user-22	200 2642 0e64383148304233ce3f125c1f3301501a3f3de12f7c92db3ad89672a7f100a3 "28393cd4997204bd"
base GET p30 bench-user-7	200 2641 3912d30056c9f285ce165412edf85574fac217d9731c607786db02a9a4031270 "193e4fd074afebfe"
base GET p30 traits-only	200 2650 9d25a043eea94118f17c63e17b8863d8f21c5609244e80edec7045a3ac2a40be "cbb0a802fa6287c0"
base GET p30 nobody	200 2651 3e3f586411db39da4e40e31cd821442e84bfed5a760c64526c48bf448859a59d "2157b36d6e16f657"
base GET p1000 pin-user-1	200 86833 2727d2525383a71a56e3623c6e62bb82b39334385ba801e4c245bb1aaf54c4aa "cda6ec1997834690"
base GET p1000 pin-user-2	200 86800 2b5fdac8027b0ffbbbf2f1afc9ea5e33ecab90b3169340850d41f589eed777fc "1a2e8279ef581780"
base GET p1000 pin-user-3	200 86874 511424b9e0f3cb42d545908f334a3802371d7664ee08b06fbb0ec23ed178f9a8 "f89df6e46adca23d"
base GET p1000 pin-user-4	200 86787 b6f9f7abbc0c7fce4b26e1ef909bd3d198d1abc078e4b3adb104143ddb6facef "c06053111b30a79b"
base GET p1000 pin-user-5	200 86948 26c41fa595e2e4e184ce0dcca6e82c0b4ef48a2c4d6e60ec070863cf1962733e "18b560ef0c439163"
base GET p1000 pin-user-6	200 86896 15af963f58bbdfcc2b9e64e2b7e9e6e94efc78231941d9ca5978d1f576e021ed "5e19e0befb7c620a"
base GET p1000 pin-user-7	200 86908 90bb33150dbb0b632b767dde61edd601bc380788358d7719dd70536783a21683 "ebec90110f8383a4"
base GET p1000 pin-user-8	200 86811 5add76a89dff71592e462dbaca86c71d5e942357863db044a70581c709c7bd0a "80bb7c3ba77cb422"
base GET p1000 pin-user-9	200 86899 69d04bc7e8f978a76706ef89c958863487753d8bece73d5e6f156da4bd700306 "cd11defd73501fd9"
base GET p1000 pin-user-10	200 86848 063747d94e3965076cb7ec97b6191c2e0294bf65d889a536b879dca40ad944be "5946fe17603bf046"
base GET p1000 pin-user-11	200 86947 219a007fdd942dc6e18a314140a3d37cf56a13f5c246bf1a897f0ddd446e8a8c "2c78b97921a2fbb1"
base GET p1000 pin-user-12	200 86899 4b8b7d848cb6e4d31fae2f3a186c6646b14c98471fe7febe6584c888ceac8f8b "90a4fc528316da96"
base GET p1000 pin-user-13	200 86826 b5fd6241ff361f13998c5ffb287cdbaa245fd75b3af98e55a7fd8182c08720a0 "30ce5c49aae27513"
base GET p1000 pin-user-14	200 86854 84b5a91fad9d31b11cc72c4cd6ec4a2197252aa78d2a7d82d3b48c9ddd38cfb1 "f70d4793739261f4"
base GET p1000 pin-user-15	200 86874 84c9582b3104b79a9ca505d7f7ebf57c331d4c19417717e8571dd4a4b2dfcf49 "4edf78a0516cde09"
base GET p1000 pin-user-16	200 86804 9a40175c88c6b71346669d053429c204953e8b3049e55676cc84be361892726f "eaf616f98d93f0b6"
base GET p1000 pin-user-17	200 86848 a72bbf2312919aee242f8552fea94e580ab933167cbc0f1bb91f524f69122633 "d0f87de2c797bce8"
base GET p1000 pin-user-18	200 86901 15139874ed6e4174a737fbdbfca84ec61f1099b27e7f688ed44050f48316f475 "8af0dd7803d27319"
base GET p1000 pin-user-19	200 86911 d93ca17a3e851e0e6c32c0ce17e7a7850ce3d774e54be5e1375da03a2a5a981c "af30128ad7917dd1"
base GET p1000 pin-user-20	200 86872 3f2d9fa64d172ba1309a9d294ee381ace2f8f91ccee667098cfcb825a223e3ab "e87d8fde16eb6d72"
base GET p1000 pin-user-21	200 86904 d93f4a175680d3ee9d207ff7e30b6e5f7e67371b7a71c8494e15d8922cd14dba "e486db0d945d740e"
base GET p1000 pin-user-22	200 86822 c3437da286c53df09f00e80ec0c0d30bcccb116590f8de3b67c67380b98d6dff "86053b417f60795e"
base GET p1000 bench-user-7	200 86749 c2c98d276fb39e6ddd1c42ee5ecbfc0c7bfbec939a7e90c71003a4f08a6121ad "d9551fcf06855ae0"
base GET p1000 traits-only	200 87008 4db1711799f11b9f930636ce6319f30c05201d6e50be4bbcdc17dd9915c273e4 "f801be1695e37760"
base GET p1000 nobody	200 87071 2e2ad194fd6d68b802bd74902b4d9a84cf47eb52bdd6399b10880adaaecdd90c "2acd8cc9c109d9ee"
base OFREP-bulk p30 pin-user-1	200 4557 32dd6a38702ebdfe6b1d1873c44b167744dadfdd4aa18befa1e42d1cf5240344 "d086d6fec0491881"
base SDK p30 pin-user-1	200 6915 3fbb6bb82ab2f7ec313af47dc6f9cab1e448cf1951425cb910efece8feb23430 -
base OFREP p30/ff-0000-upload pin-user-1	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
base OFREP p30/ff-0003-cart pin-user-1	200 122 4186be3f525a5d369b6e7b53c5e7325588ec33fac3d0006d9ff9d955af946a73 -
base OFREP p30/ff-0006-login pin-user-1	200 149 0908e0a987117454ffd6b48062e2a2c0ec9fa0cb4529469002ad781c50794c88 -
base OFREP p30/ff-0008-reports pin-user-1	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
base OFREP p30/ff-0025-theme pin-user-1	200 145 89846a09c335ed0f39a20802ae867acb3479d312980df7e114d54da4a213b2b7 -
base OFREP p30/ff-0026-upload pin-user-1	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
base OFREP-bulk p30 pin-user-2	200 4560 42d9f710d21665a816c2ca6b52ad27746c0e96be540c81fdf90a94c61524cc27 "69f90fb1f0288738"
base SDK p30 pin-user-2	200 6804 0b46353200fe2301ad6df6550784ff417b9e93027f5d80c9dfb240e1629e8c0f -
base OFREP p30/ff-0000-upload pin-user-2	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
base OFREP p30/ff-0003-cart pin-user-2	200 122 4186be3f525a5d369b6e7b53c5e7325588ec33fac3d0006d9ff9d955af946a73 -
base OFREP p30/ff-0006-login pin-user-2	200 160 53b19af2f023e600db599c0f30a086927fc5ed48ef0e89a6914adae899e2a5bb -
base OFREP p30/ff-0008-reports pin-user-2	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
base OFREP p30/ff-0025-theme pin-user-2	200 147 20523bf113434cd7b475f1ff428f80d3a1b03db39cc09423d155db5cd3bcb22a -
base OFREP p30/ff-0026-upload pin-user-2	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
base OFREP-bulk p30 pin-user-6	200 4611 b4e55c70b7ab4e11672ed1825df835282a972c19f85f4675f540e51ce2628ed3 "766dc2c40a592233"
base SDK p30 pin-user-6	200 6565 ccebe1ff4812ee9bca9f9c93689dbba566c33089a81769732a4de58001893211 -
base OFREP p30/ff-0000-upload pin-user-6	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
base OFREP p30/ff-0003-cart pin-user-6	200 122 4186be3f525a5d369b6e7b53c5e7325588ec33fac3d0006d9ff9d955af946a73 -
base OFREP p30/ff-0006-login pin-user-6	200 160 53b19af2f023e600db599c0f30a086927fc5ed48ef0e89a6914adae899e2a5bb -
base OFREP p30/ff-0008-reports pin-user-6	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
base OFREP p30/ff-0025-theme pin-user-6	200 147 20523bf113434cd7b475f1ff428f80d3a1b03db39cc09423d155db5cd3bcb22a -
base OFREP p30/ff-0026-upload pin-user-6	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
base OFREP-bulk p30 bench-user-7	200 4512 0d3da72024246508244c4b5a73f0f0692ca7b45c657825697f5de034dc7ec97e "cb8acc73e3fb7240"
base SDK p30 bench-user-7	200 6922 1342189042c9d755e6c59214fd44bfb615d6500c093da3a6866bd052764d1199 -
base OFREP p30/ff-0000-upload bench-user-7	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
base OFREP p30/ff-0003-cart bench-user-7	200 122 4186be3f525a5d369b6e7b53c5e7325588ec33fac3d0006d9ff9d955af946a73 -
base OFREP p30/ff-0006-login bench-user-7	200 149 0908e0a987117454ffd6b48062e2a2c0ec9fa0cb4529469002ad781c50794c88 -
base OFREP p30/ff-0008-reports bench-user-7	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
base OFREP p30/ff-0025-theme bench-user-7	200 147 20523bf113434cd7b475f1ff428f80d3a1b03db39cc09423d155db5cd3bcb22a -
base OFREP p30/ff-0026-upload bench-user-7	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
base OFREP-bulk p30 traits-only	200 4579 37486780263ce26b23473f0704df18657bc7d1b245a29db3947632a312141308 "4c23cad29d17993f"
base SDK p30 traits-only	200 6555 4acfa4e00ecb2a6fe3d377cc172565775f327200f14946b6df694664b568f8d5 -
base OFREP p30/ff-0000-upload traits-only	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
base OFREP p30/ff-0003-cart traits-only	200 124 d968e7c1fde9ffff176937128f7a740dc09e85c9fdbe5c91de37c643a3c09cac -
base OFREP p30/ff-0006-login traits-only	200 149 0908e0a987117454ffd6b48062e2a2c0ec9fa0cb4529469002ad781c50794c88 -
base OFREP p30/ff-0008-reports traits-only	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
base OFREP p30/ff-0025-theme traits-only	200 147 20523bf113434cd7b475f1ff428f80d3a1b03db39cc09423d155db5cd3bcb22a -
base OFREP p30/ff-0026-upload traits-only	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
base OFREP-bulk p30 nobody	200 4648 22bac54916f89f099768e11f63b352b622756fff1689abbcccb3955978b0a3d1 "b1ece83ba6d29c6c"
base SDK p30 nobody	200 6547 4e57403c0b2eb814e63ab049f28b604b492be9237fe3514ea779ce5615e8dd4f -
base OFREP p30/ff-0000-upload nobody	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
base OFREP p30/ff-0003-cart nobody	200 124 d968e7c1fde9ffff176937128f7a740dc09e85c9fdbe5c91de37c643a3c09cac -
base OFREP p30/ff-0006-login nobody	200 160 53b19af2f023e600db599c0f30a086927fc5ed48ef0e89a6914adae899e2a5bb -
base OFREP p30/ff-0008-reports nobody	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
base OFREP p30/ff-0025-theme nobody	200 158 9813d742b9b9b5675a1e75b79ecb6e5be568263cf8b0aea69c1d44d2f3f78cf9 -
base OFREP p30/ff-0026-upload nobody	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
base OFREP-bulk p1000 pin-user-1	200 145162 e23e8d2d329c1d5970c411d6f1b50e658ba3671f448de45152231ca15165d169 "87fe2e2fb732a8bb"
base SDK p1000 pin-user-1	200 224485 46629b4c840340cb8699377fc56176b40002472b677d372dc6c4e4f37907fb25 -
base OFREP-bulk p1000 bench-user-7	200 143734 2efb80f4baaa75203fdbe6a5201ca1462041d5b34d507a55ed7dd7c067cb8671 "5eb89e21ac81cfa9"
base SDK p1000 bench-user-7	200 224688 e53b723498059da0de86a7ec4fd28f3e861cdb6b3d5ee01141e33d4d49d7efeb -
base OFREP-bulk p1000 nobody	200 147859 12806cd1fc63a9244841358c6118da985ea29a392c745bffd2a81081780caab2 "081644c503ce3255"
base SDK p1000 nobody	200 214130 e1ec6534d1d11b73ffeee95c3cb30094824a93bd53ee412ad1f8d0a2a5650b3f -
base GET p1000t bench-user-7	200 91774 545d4a6b7beae3bec07c2b7969853e968cdf9632035cf2fdac8c3a0bdf3f483d "5039379129b6d060"
base GET p1000t bench-user-10021	200 91749 4b3fad92c9c606e7997ae6558ded3c52dad09ececcc670fba3fa2d623ee7be77 "641ad07d78806678"
base GET p1000t bench-user-2773	200 91949 3d0b84631337ef20cc2a516e21d37226f33a8c1ea39e263a5fe7e58515aee5cf "b40f70b2e0b31711"
base GET p1000t bench-user-99223	200 91992 8f51289d3714bb6750f221423aed1262baf635107160ffc0bb21b024afa57d84 "22113eeefb0de939"
base GET p1000t bench-user-79876	200 91750 ca770535670b40bf8b20f41bb641dd481758ea623f950a3e35192bd55c85b14b "b55fcab5a775ff51"
base GET p1000t nobody	200 92107 295b8b9fffcd7fbd2eaf43fa3f83bd974bf6656145b5a8b318f50d160cfda5d9 "9ef53f579eee7d81"
base OFREP-bulk p1000t bench-user-10021	200 147815 06e5eb186c3c01aff9a693546e4fcba358b45c8b58367ce8c98a49195a2b9b5d "13c8cf36babd3440"
base SDK p1000t bench-user-10021	200 290175 1f2b4ac57bb882bedd21581f9969f184eaf19fda425cd163181dfbc7d58f25e7 -
base OFREP p1000t/ff-0000-upload bench-user-10021	200 149 2c91a05a7a49700b2752121043b59a613d92c8c795805fddd164fda775cee210 -
base OFREP-bulk p1000t bench-user-2773	200 144958 a0c3265b50bb3e7cb0bd5ae0646ba965ae61fe50d1e5d79d3694f2fb4c88ce72 "13098727bd452174"
base SDK p1000t bench-user-2773	200 286178 4a3a92b0938f1334aa99f7245ab0321828ef5798509933c61a8dc12f4024ccdf -
base OFREP p1000t/ff-0000-upload bench-user-2773	200 151 e9e3edff79e8376415f4b22eb6a4575efdaec84f401f50f854e5f0c51ffc4d4e -
base GET tg s1	200 731 917992a46647c7ff10ef4d262cbb58d4f6c5ae8e41895b83683ff1eaa851174f "dff797f981d13a58"
base GET tg s2	200 729 ec66af40073a89391c79397ed3ef28db1ed09598874ab4e7cb27d856614b1d15 "0d754f462d704be7"
base GET tg t-on1	200 730 cde092dd2cb2423b1df301f706ca68adfe3b4b7b89a486034f89bad20dfff1bc "74d6f30e900cddb2"
base GET tg t-on2	200 729 b99d149119a285b3f8dd36b7a9b4c4efa14b647fee7d37c42207cbbaa57769da "db88bc9e8513cfb2"
base GET tg t-off1	200 733 85cd0084752344acf0c944bfb54120010ee462957bd9d8dc341f5a6a7fd5e28f "b6ad9e0a64fca248"
base GET tg u-7	200 730 582ccea9fa3fef553378074eb8d489579bdf3a253e99d29e4eca7d427c4d9533 "82f262c137123998"
base GET tg u-8	200 730 0c086d2687e1e3ab104dd19761e14cbd44b4becfb843581cf2041cc3c0348719 "96f38bdf82916ae1"
base GET tg u-9	200 731 6272649f23502ff069251cb0cc2cca3f046eb4effab81f10757a556d2fe587a1 "a9b633b73608df2a"
base GET tg u-10	200 730 ead44838ddea153e1f5f399378920a36b288f5f7d1e7b19a88d42467d2ca2e6c "13df61b1eb91a18d"
base GET tg traits-only	200 732 8dba502e8cef028de50a1c874602b6c93169816fcd2de98e971e0c3bf739846d "29bbbfeb533c34af"
base GET tg nobody	200 732 f279e20833358768da8629cad045087d8c8a56b1df47ddbf14f9d16b8302aee4 "0868f7cd5241e9b1"
base GET tg tg-user-1	200 732 8dba502e8cef028de50a1c874602b6c93169816fcd2de98e971e0c3bf739846d "47c565dfb2224a14"
base GET tg tg-user-2	200 731 6272649f23502ff069251cb0cc2cca3f046eb4effab81f10757a556d2fe587a1 "4abb29426b94c2a8"
base GET tg tg-user-3	200 730 0c086d2687e1e3ab104dd19761e14cbd44b4becfb843581cf2041cc3c0348719 "bdcaaee5ea69d840"
base GET tg tg-user-4	200 731 6272649f23502ff069251cb0cc2cca3f046eb4effab81f10757a556d2fe587a1 "946f85dd3b25c0b7"
base GET tg tg-user-5	200 730 0c086d2687e1e3ab104dd19761e14cbd44b4becfb843581cf2041cc3c0348719 "46d5bdca73c91c9a"
base GET tg tg-user-6	200 731 6272649f23502ff069251cb0cc2cca3f046eb4effab81f10757a556d2fe587a1 "5d011aa683daf740"
base GET tg tg-user-7	200 730 0c086d2687e1e3ab104dd19761e14cbd44b4becfb843581cf2041cc3c0348719 "ce940483a65e4687"
base GET tg tg-user-8	200 730 0c086d2687e1e3ab104dd19761e14cbd44b4becfb843581cf2041cc3c0348719 "a5233cd99c4d20af"
base GET tg tg-user-9	200 730 0c086d2687e1e3ab104dd19761e14cbd44b4becfb843581cf2041cc3c0348719 "ad2535875b4e7ac2"
base GET tg tg-user-10	200 731 6272649f23502ff069251cb0cc2cca3f046eb4effab81f10757a556d2fe587a1 "ee5e395a334a9d3c"
base OFREP-bulk tg s1	200 1316 4ceb7a8f524a8970c603a44bd2cb5c88f7b9bd468d458ff79e1c4e4943f02c06 "639f7a6154fdb029"
base SDK tg s1	200 2269 087ecc5c5e7e9b799d0dbba85562c01dc4ef55119844d36f97ace9bbef1e6ff1 -
base OFREP tg/staff-plus s1	200 144 0768babba4bc1a340a709105f0b8dcf36526fb7c4bfad9ea30910491b872c62e -
base OFREP tg/named s1	200 118 82036caccbe516c3d6feb296e5adc2984f7d3131830f00bd5b478050a9576821 -
base OFREP tg/named-hi s1	200 147 b378fde0682df90376b59226488721bc9966203f2d85b7d23e5b03f32b90fd12 -
base OFREP tg/named-killed s1	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky s1	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed s1	200 138 28a5e6908f4c09187f6b327d673f0d134abac81aeadb55231c9192df8c50a55d -
base OFREP tg/dach s1	200 116 b814e6b4f9ea8f243a2cd70ff8da421389c47e019c8fea8ab228016b7563ff19 -
base OFREP-bulk tg s2	200 1333 ddf21f4b087d42b13e3fd26bc2a061a5911e9cd6b954803df132f40e5c53eb01 "b27a2566dafd1e80"
base SDK tg s2	200 2399 7e44c2d34801bcf2e59c347b33ea8d3c4cae331b59569318eacf25687dceabb7 -
base OFREP tg/staff-plus s2	200 144 0768babba4bc1a340a709105f0b8dcf36526fb7c4bfad9ea30910491b872c62e -
base OFREP tg/named s2	200 140 de625c6a6a609d6b72b81b303ed93acc3d3c097b8e79e3d416334a8866e327bf -
base OFREP tg/named-hi s2	200 143 95890d35357f70880f9cc96a4f418c494052ed55158c060f56e745940aadfebe -
base OFREP tg/named-killed s2	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky s2	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed s2	200 138 28a5e6908f4c09187f6b327d673f0d134abac81aeadb55231c9192df8c50a55d -
base OFREP tg/dach s2	200 114 336827823084c7d3db67547fa1dd6b914a816d0113dacb6e240bc89682abe873 -
base OFREP-bulk tg t-on1	200 1280 cdd2493272afbeaf8019ab7fde0430474fa35df0460e0d618be9705e8081124f "bdbefc13c46aaacf"
base SDK tg t-on1	200 2271 c5ddd9be76c8e3ba167516ad337d9ff5308d77617d2b9105e1c26f4ae33e0a22 -
base OFREP tg/staff-plus t-on1	200 122 4af528bcbffcc6175f0005599e52ba51a39982831c74cc09bace6a15daf0b370 -
base OFREP tg/named t-on1	200 140 4a34b7a2885f9b827b8d2391f9ac55cbd2dbab516826d66a757e62bb67f4b89b -
base OFREP tg/named-hi t-on1	200 121 8284f23506e566bb85a95d23ea5d86b420700152704cf1cdb88e1a73eac6999a -
base OFREP tg/named-killed t-on1	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky t-on1	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed t-on1	200 128 dd08bb5f11a2ce8c9cf9c22ec0fe435967f401e0cf2bcdaa4659338306a94ae2 -
base OFREP tg/dach t-on1	200 116 b814e6b4f9ea8f243a2cd70ff8da421389c47e019c8fea8ab228016b7563ff19 -
base OFREP-bulk tg t-on2	200 1304 f8a3161a533b7e241569b2f14e926373078c97791e05bedc61531058b70e8ada "e9aa656b7a96f62c"
base SDK tg t-on2	200 2275 4741aa8969b2c7d602d9c4c447acb483767d4c47bc8b9fae820e9f93e9bebf7a -
base OFREP tg/staff-plus t-on2	200 120 af39d59c5f1b8a7de59430257c2bfba5937832cb64c5a9b72b73a6fde4d9ac8e -
base OFREP tg/named t-on2	200 140 4a34b7a2885f9b827b8d2391f9ac55cbd2dbab516826d66a757e62bb67f4b89b -
base OFREP tg/named-hi t-on2	200 121 8284f23506e566bb85a95d23ea5d86b420700152704cf1cdb88e1a73eac6999a -
base OFREP tg/named-killed t-on2	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky t-on2	200 142 be95aaca500a82e8641c7d90a928958165551436c82367c23c4f5c1fcbb84940 -
base OFREP tg/mixed t-on2	200 130 5f1ffd66118103055ffef384846364be64ba8a213004d0e453a0a3baebd3432b -
base OFREP tg/dach t-on2	200 116 b814e6b4f9ea8f243a2cd70ff8da421389c47e019c8fea8ab228016b7563ff19 -
base OFREP-bulk tg t-off1	200 1321 8fff26b9a10678aebfcb272a574cc907a1c00a011182d2e886a97a59df7a250a "7555ccf8384b57ea"
base SDK tg t-off1	200 2139 e132264ab13c67ac571d3d271d5f36c5a3a50ece2592c065a16366be19f83a64 -
base OFREP tg/staff-plus t-off1	200 122 4af528bcbffcc6175f0005599e52ba51a39982831c74cc09bace6a15daf0b370 -
base OFREP tg/named t-off1	200 142 f5fb0cc716ed2b7d45fd3677f35b2e55e9f8c8b29a8229dc14e30bc2c12c3807 -
base OFREP tg/named-hi t-off1	200 147 b378fde0682df90376b59226488721bc9966203f2d85b7d23e5b03f32b90fd12 -
base OFREP tg/named-killed t-off1	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky t-off1	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed t-off1	200 138 28a5e6908f4c09187f6b327d673f0d134abac81aeadb55231c9192df8c50a55d -
base OFREP tg/dach t-off1	200 116 b814e6b4f9ea8f243a2cd70ff8da421389c47e019c8fea8ab228016b7563ff19 -
base OFREP-bulk tg u-7	200 1290 c26151571da0e96ecfedb4d5c1918e83ad5d4ed01cf4d0dd7f69eefb2db6dfcf "7cd9f721a451e299"
base SDK tg u-7	200 2399 697d13d42165676a6ca7b36347b1cc516df3cc41e14ea540df9b85afaf886ab8 -
base OFREP tg/staff-plus u-7	200 144 eee8d1b34cb0682daf944e250dc42e1421c3d9a8e75843ea125cee464a19dbc5 -
base OFREP tg/named u-7	200 118 82036caccbe516c3d6feb296e5adc2984f7d3131830f00bd5b478050a9576821 -
base OFREP tg/named-hi u-7	200 121 8284f23506e566bb85a95d23ea5d86b420700152704cf1cdb88e1a73eac6999a -
base OFREP tg/named-killed u-7	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky u-7	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed u-7	200 140 3353d93b00694db4cbb73cde4f7c25e8375fb3062d05a01312f9c79e71688a5c -
base OFREP tg/dach u-7	200 114 336827823084c7d3db67547fa1dd6b914a816d0113dacb6e240bc89682abe873 -
base OFREP-bulk tg u-8	200 1325 8dcf044938b342ee6ea20c18449531c1d71e2da18727c9d80d8ccaea03a2346f "ac57885dc7b76e8a"
base SDK tg u-8	200 2398 c84348a1df76b35fe7a55ee31b00013e035021a8250d55aaa50a2c5bd9b378f9 -
base OFREP tg/staff-plus u-8	200 122 4af528bcbffcc6175f0005599e52ba51a39982831c74cc09bace6a15daf0b370 -
base OFREP tg/named u-8	200 140 de625c6a6a609d6b72b81b303ed93acc3d3c097b8e79e3d416334a8866e327bf -
base OFREP tg/named-hi u-8	200 143 95890d35357f70880f9cc96a4f418c494052ed55158c060f56e745940aadfebe -
base OFREP tg/named-killed u-8	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky u-8	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed u-8	200 138 28a5e6908f4c09187f6b327d673f0d134abac81aeadb55231c9192df8c50a55d -
base OFREP tg/dach u-8	200 128 0c5ef073ca67ce8154a62e44ad1a314fbd62bb9b1b50b6e5eccb5a294366b3bd -
base OFREP-bulk tg u-9	200 1272 59d0bab2b6958fb7ac6ef5e4593e92c740f3e7c08bae3345cd02e6bdeab09bf0 "f47e7e1a91ecf199"
base SDK tg u-9	200 2396 73bb7cc7d2b57df6ceef0656cf42d7af2bf68c2b639ead76934632634172c213 -
base OFREP tg/staff-plus u-9	200 122 4af528bcbffcc6175f0005599e52ba51a39982831c74cc09bace6a15daf0b370 -
base OFREP tg/named u-9	200 118 82036caccbe516c3d6feb296e5adc2984f7d3131830f00bd5b478050a9576821 -
base OFREP tg/named-hi u-9	200 121 8284f23506e566bb85a95d23ea5d86b420700152704cf1cdb88e1a73eac6999a -
base OFREP tg/named-killed u-9	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky u-9	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed u-9	200 130 5f1ffd66118103055ffef384846364be64ba8a213004d0e453a0a3baebd3432b -
base OFREP tg/dach u-9	200 128 0c5ef073ca67ce8154a62e44ad1a314fbd62bb9b1b50b6e5eccb5a294366b3bd -
base OFREP-bulk tg u-10	200 1335 e9ddc90181a9999e9c4e48044da1283ae8338953d72645feebe4cd773c76ce3c "13be1b502f397bbc"
base SDK tg u-10	200 2397 8f99170858d2d6155aa7d16cfa8b09402792951a909587c82244e24a61993790 -
base OFREP tg/staff-plus u-10	200 144 eee8d1b34cb0682daf944e250dc42e1421c3d9a8e75843ea125cee464a19dbc5 -
base OFREP tg/named u-10	200 140 de625c6a6a609d6b72b81b303ed93acc3d3c097b8e79e3d416334a8866e327bf -
base OFREP tg/named-hi u-10	200 143 95890d35357f70880f9cc96a4f418c494052ed55158c060f56e745940aadfebe -
base OFREP tg/named-killed u-10	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky u-10	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed u-10	200 138 28a5e6908f4c09187f6b327d673f0d134abac81aeadb55231c9192df8c50a55d -
base OFREP tg/dach u-10	200 114 336827823084c7d3db67547fa1dd6b914a816d0113dacb6e240bc89682abe873 -
base OFREP-bulk tg traits-only	200 1315 1617998c9998c660e01494b3d13b0b9cb1f6599d4eacbf6ee58a394b59fb02e0 "df9cd35cf3ed49e3"
base SDK tg traits-only	200 2391 e7b9659ed0a81516b6aa7e7f2a7c551ede9ceb1ea4f4aa81407a289841b09d2b -
base OFREP tg/staff-plus traits-only	200 122 4af528bcbffcc6175f0005599e52ba51a39982831c74cc09bace6a15daf0b370 -
base OFREP tg/named traits-only	200 140 de625c6a6a609d6b72b81b303ed93acc3d3c097b8e79e3d416334a8866e327bf -
base OFREP tg/named-hi traits-only	200 143 95890d35357f70880f9cc96a4f418c494052ed55158c060f56e745940aadfebe -
base OFREP tg/named-killed traits-only	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky traits-only	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed traits-only	200 138 28a5e6908f4c09187f6b327d673f0d134abac81aeadb55231c9192df8c50a55d -
base OFREP tg/dach traits-only	200 116 b814e6b4f9ea8f243a2cd70ff8da421389c47e019c8fea8ab228016b7563ff19 -
base OFREP-bulk tg nobody	200 1260 446ee657a8d8e2fc0ba391f4f1435395c9c078a317a56891e3f7cb5b82d7095f "7cacbdf515c272ef"
base SDK tg nobody	200 2391 e7b9659ed0a81516b6aa7e7f2a7c551ede9ceb1ea4f4aa81407a289841b09d2b -
base OFREP tg/staff-plus nobody	200 122 4af528bcbffcc6175f0005599e52ba51a39982831c74cc09bace6a15daf0b370 -
base OFREP tg/named nobody	200 118 82036caccbe516c3d6feb296e5adc2984f7d3131830f00bd5b478050a9576821 -
base OFREP tg/named-hi nobody	200 121 8284f23506e566bb85a95d23ea5d86b420700152704cf1cdb88e1a73eac6999a -
base OFREP tg/named-killed nobody	200 128 723340ebd14fd559b68c6eb256669fd200a354ee6b4dccdb01f9bd06d51798d3 -
base OFREP tg/sticky nobody	200 118 2bf7bf83e7f5e324e61625c980a7b8522094205b91f165b8dbd554e280b0d3ce -
base OFREP tg/mixed nobody	200 130 5f1ffd66118103055ffef384846364be64ba8a213004d0e453a0a3baebd3432b -
base OFREP tg/dach nobody	200 116 b814e6b4f9ea8f243a2cd70ff8da421389c47e019c8fea8ab228016b7563ff19 -
override GET p30 pin-user-1	200 2652 309ab32106c843aa11b6cdaffd0e5b2d397847a5376f5c3147485e336ffe177e "10bff38f92e437fd"
override GET p30 pin-user-2	200 2647 85017f6399f434a43477e7df9b44fb5ffe02ac7a139ce61ea09aff3495292fed "51a97230ce8f5b31"
override GET p30 pin-user-3	200 2652 60af36f2c040dbd60420097c4a5432fa9a422aa38d582259372c1d5e2c7a2c9c "92cef2f9cefab02c"
override GET p30 pin-user-4	200 2645 4b4cc01e25a402eb7193121be46d867fbc893c9c4b6e9d9f6ed26de8ac920f4c "2a7daed04212ef53"
override GET p30 pin-user-5	200 2653 765d306662867e9623d3b641379493d5a35f9a26d4b0e3bc77bfa10a158d49a4 "ba46e0c76b7799a9"
override GET p30 pin-user-6	200 2651 c4ac741e08df187769eacc6464c745489c75a90ccf3c05d4e0f71d4773fb5c2f "ba1e42bcbdcd8277"
override GET p30 pin-user-7	200 2652 9c3ca92079ade3e806e0d1aa6e3e7a313a18ff4e420f9ae3772c7bc61fbe60c4 "fd2d7f6f3fecf85e"
override GET p30 pin-user-8	200 2647 b8340a48e901f8f4d4f441ad42dcb3d9b31fac19a69457941248832c6b47331b "06e485d96f0689a8"
override GET p30 pin-user-9	200 2653 03dfadf7e314a969da1e17697d1b02321a90a5bed11a89dae644c27e1c91eebc "105658b322dc623b"
override GET p30 pin-user-10	200 2648 a7d46107086303afa6bdd69fa28fbb904d53069f442286daafa4196e8a9ce4da "482436b2643e6b8c"
override GET p30 pin-user-11	200 2653 82431a40a44f0e6e14ddd1a7c4c11f78f87f839a7f423b8b2a4dd34585664950 "777861fb29c651cd"
override GET p30 pin-user-12	200 2651 fd4c000438ce7c69cc6204ef857ea94d4e110f60f3e4e24427c37a681fd351cd "36b0d9528bd28aff"
override GET p30 pin-user-13	200 2650 ec8f014f24df40e2bae47e3c27c37ed5b48b9f4315cdb8cf0e5501ee78a697c8 "ca94c7ac69cb7fe3"
override GET p30 pin-user-14	200 2654 ddd58fe67414250b9ff2a93bc3c875cd39f64cb4cf74d2754878632b6f06f3ee "84f46e9f2fa96674"
override GET p30 pin-user-15	200 2650 caf09b1580025ecc3728d3b109664171c11f326a8d0b6fe7b6b55e7bc044e6b5 "e6782d0f95eddca5"
override GET p30 pin-user-16	200 2645 7c39ac7ae713c577e9378f4989ccce2a5e6652203f47d53596c261b208d2ca72 "1da3d76e686dcb96"
override GET p30 pin-user-17	200 2653 672f56545761aee3c8caefc254235df09f11d83ffdb654ba1fc306af324a1225 "e0e117f5bd0c3dfb"
override GET p30 pin-user-18	200 2650 2d031d7121acdd93b113e4327fe51ed444efa4b49c8dd8bd8c3b259a7a3e6b03 "420ee9efe035705e"
override GET p30 pin-user-19	200 2651 9e25d5d4015a602ce8950b884ff72d6c515aa625bf54aca72d6d5e14fc55b944 "d86b28afed11a319"
override GET p30 pin-user-20	200 2647 39010f2ef6976c4c05e82a370b06c6a58362d522e970f6fae462144a61a769f5 "0aa007819420631b"
override GET p30 pin-user-21	200 2653 d179cf8243d3a03d57e742174e0eea764dcb76ee0c2e12499614549027afd523 "c4d5680236ce4e02"
override GET p30 pin-user-22	200 2649 2f06f1b06a8a1d41060c45ab7d49f2c06223f93f031d960085a94de6e5f6788a "003b90d7a4b657c1"
override GET p30 bench-user-7	200 2646 beea314cd5ee75a3412b6bceefd71e81f8c6ec2fb230a47114af967b37671cc5 "08974a1b96f2c5fa"
override GET p30 traits-only	200 2655 82ba6ab01f63f471cb65d9e3d1bbd808e2eb3436219708bfea47f0b680b01412 "742ab48c1ee85c79"
override GET p30 nobody	200 2656 8abecf9d8bafceda72584366d8965c809d59970446098786e66e87d52ae98b04 "6278f1d13ae57163"
override GET p1000 pin-user-1	200 86835 1b5e3eefaf6f9b7cec61139e51d213e50406469efb3fc9eb46b45a05ab596a1b "741b77e3f60ce95d"
override GET p1000 pin-user-2	200 86801 adc75ca2fe9e9c086817ab60e96259b88403cb530c0d920a234db187e3ba97dc "c98e5b95c274ffe5"
override GET p1000 pin-user-3	200 86876 e38951fa7d41ae34ee9b92926bb02172fe2cd665ffc513ebccdd7713d7c93f7c "e801f9ef0ccf2c87"
override GET p1000 pin-user-4	200 86788 061cf5f8dde8ae12b55fc5f561b341975bfd0dd5d9b3bf8fdb8407f157381d4a "eb150e91ef1aef46"
override GET p1000 pin-user-5	200 86949 45179bb36ac4a3748f176fecc5d062e486d93cf8f8bd2d114efc225a3046800d "17d2ebc92d12879c"
override GET p1000 pin-user-6	200 86898 a7ed53f28f69cd32bb814072635a31b5ef2acf71fa0aedf9f9240d49daf049e7 "3f2c5498313f4f86"
override GET p1000 pin-user-7	200 86910 bd60e3d92345e918ff126808510454b61b05282ac51536c78d64c786d83019d8 "45b12d1ea664cd56"
override GET p1000 pin-user-8	200 86813 dd45ef6df4c5010c6d4be38641df5e98b28c2dc92e3b50680a1420dd89b00340 "de171ec09c1adb7e"
override GET p1000 pin-user-9	200 86900 28547d9aa26700af834eb957e4a1c1c80f51abbe0c3c8df08207c99d15d0652a "bd8122dd3bf2983d"
override GET p1000 pin-user-10	200 86849 01178fce928463697bdbba39b90ad97dc6e9aa91d764a8ed7ca73738840db6ab "7fd7292f0f58a8df"
override GET p1000 pin-user-11	200 86948 ca5912653c46d061fa8de19a2f8e780b9bf982bf68f75c81b2a04972755ba9e4 "fc1960ccb1febf63"
override GET p1000 pin-user-12	200 86900 6d22d6ebd86530dac61551579f2c732c143f7f8dba831aada43d883b4c531909 "eb5d8e597d407c9a"
override GET p1000 pin-user-13	200 86827 d30edb85771272f879a52e5c52f2a56fe11d7153f9e24731f9f73f937d2533f2 "0e4b96ff5908dd2a"
override GET p1000 pin-user-14	200 86856 55c4a05af2385da610310095f8364add5e86aac928813ece0b3f75683ee1d5b3 "d2d21a1675dadbc7"
override GET p1000 pin-user-15	200 86876 2ecc8ccdc17bf7893d3734e7c19cfaba8e9bea3318b769647603f4c3090bdeab "e8f0a406673113e8"
override GET p1000 pin-user-16	200 86805 3e2356f633caed74b38e80d67eac17926a15327097e75921580dc565e452a69c "94fc3781c7eb9813"
override GET p1000 pin-user-17	200 86850 5c3e47aa4d6eafe32b9bf12e49fb79de2556a73a37604cb6f6ee50493301c314 "e4915bf3381f853e"
override GET p1000 pin-user-18	200 86902 fead73f65664fccb0c6e9bc39ba39ec19b3df99c11e5e241b57c5ff269b2be32 "efd10864b2d17ede"
override GET p1000 pin-user-19	200 86913 7b4c3df3bd09b02fb5dd81b536553b176fceb37267a69b279cae1e00da1e49a9 "27c57fcf95e6eb18"
override GET p1000 pin-user-20	200 86873 c8186b36ee47db457b430bf561f9beb5f436f6d5e3078218c60a8847cacf045a "e2413fa78b1c726f"
override GET p1000 pin-user-21	200 86905 a73a50c1af6f7669696e2bcd97aea384adfa492f254a1945a3ced23fe87173b0 "b0439ff89931538b"
override GET p1000 pin-user-22	200 86824 a550392535f56670cc7611fd4f77f976817a86e953e61fd81e5280d104375320 "cbaaacd3ae5f3398"
override GET p1000 bench-user-7	200 86750 1d311c41cb65e034816c622d872569f00ee81a714c43e68bf140e4f3abc99c51 "789b4f7f21a7785d"
override GET p1000 traits-only	200 87009 a3c99f79190c213959ef41edce0b8e36ccaa713d554ad01cf104dd8eeab69119 "5db40ae50223adc1"
override GET p1000 nobody	200 87072 b2391d084871847c4b64418e5ae0af0e3593563dcdab03460f50188fa90348fa "efdf1498ae2e3b19"
override OFREP-bulk p30 pin-user-1	200 4569 b1e9ae549a8a85a19b42213212cf9d9c2b24f44d3c6356e7c22a55ed95faf006 "19567a27b5a68309"
override SDK p30 pin-user-1	200 6908 2bd1df31042532b4052d9f438b470d1bb8d343a06c06ebb81e2be834e70a6dc0 -
override OFREP p30/ff-0000-upload pin-user-1	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
override OFREP p30/ff-0003-cart pin-user-1	200 126 e5b8bfc6575d62701e0e9db74fb780f43a36c390a828db339b23a951cb85acfa -
override OFREP p30/ff-0006-login pin-user-1	200 149 0908e0a987117454ffd6b48062e2a2c0ec9fa0cb4529469002ad781c50794c88 -
override OFREP p30/ff-0008-reports pin-user-1	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
override OFREP p30/ff-0025-theme pin-user-1	200 151 61239670c805b98f3fe36e6f1ad5e8f508279f6e97f90e8525b3b6af7cdb9a2c -
override OFREP p30/ff-0026-upload pin-user-1	200 128 59136a4d6d7b973b5faa6224fdb6eca93742dea7f82dcf0f5d94eda4b1a077af -
override OFREP-bulk p30 pin-user-2	200 4568 227265b2b685708919f92d15a0e050169ce37111eac6c9ef590489ce400224ee "6ac2a9dc40f9428f"
override SDK p30 pin-user-2	200 6803 d677b5c96670036c3f0c1d6a10adf144d97dd5251a2697c2b2265c6f874c2150 -
override OFREP p30/ff-0000-upload pin-user-2	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
override OFREP p30/ff-0003-cart pin-user-2	200 124 defabdeaa1e141c92f6cd953929793338a88d6d126e602230bc9f8899095f0d3 -
override OFREP p30/ff-0006-login pin-user-2	200 160 53b19af2f023e600db599c0f30a086927fc5ed48ef0e89a6914adae899e2a5bb -
override OFREP p30/ff-0008-reports pin-user-2	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
override OFREP p30/ff-0025-theme pin-user-2	200 151 61239670c805b98f3fe36e6f1ad5e8f508279f6e97f90e8525b3b6af7cdb9a2c -
override OFREP p30/ff-0026-upload pin-user-2	200 128 59136a4d6d7b973b5faa6224fdb6eca93742dea7f82dcf0f5d94eda4b1a077af -
override OFREP-bulk p30 pin-user-6	200 4621 a4b3150f3ebbf39834000ccb9d7ee96f0d8d45515c55e304392037950705c1cb "566528ce9ca79cce"
override SDK p30 pin-user-6	200 6562 9e8fc53949c323a951013bf7cf75681a6c60bf1b49af24d5ef2117e638492cdc -
override OFREP p30/ff-0000-upload pin-user-6	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
override OFREP p30/ff-0003-cart pin-user-6	200 126 e5b8bfc6575d62701e0e9db74fb780f43a36c390a828db339b23a951cb85acfa -
override OFREP p30/ff-0006-login pin-user-6	200 160 53b19af2f023e600db599c0f30a086927fc5ed48ef0e89a6914adae899e2a5bb -
override OFREP p30/ff-0008-reports pin-user-6	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
override OFREP p30/ff-0025-theme pin-user-6	200 151 61239670c805b98f3fe36e6f1ad5e8f508279f6e97f90e8525b3b6af7cdb9a2c -
override OFREP p30/ff-0026-upload pin-user-6	200 128 59136a4d6d7b973b5faa6224fdb6eca93742dea7f82dcf0f5d94eda4b1a077af -
override OFREP-bulk p30 bench-user-7	200 4520 d2ae8dcdb1ff63f827aed7225938e52e7c9600194c1bbd65eaded1e5d8e99ecb "ee2c737b58aacda6"
override SDK p30 bench-user-7	200 6921 4a999c5228c707a26b11477fd0b43f19431dcbef7c6d67417e20948bba3c54b8 -
override OFREP p30/ff-0000-upload bench-user-7	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
override OFREP p30/ff-0003-cart bench-user-7	200 124 defabdeaa1e141c92f6cd953929793338a88d6d126e602230bc9f8899095f0d3 -
override OFREP p30/ff-0006-login bench-user-7	200 149 0908e0a987117454ffd6b48062e2a2c0ec9fa0cb4529469002ad781c50794c88 -
override OFREP p30/ff-0008-reports bench-user-7	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
override OFREP p30/ff-0025-theme bench-user-7	200 151 61239670c805b98f3fe36e6f1ad5e8f508279f6e97f90e8525b3b6af7cdb9a2c -
override OFREP p30/ff-0026-upload bench-user-7	200 128 59136a4d6d7b973b5faa6224fdb6eca93742dea7f82dcf0f5d94eda4b1a077af -
override OFREP-bulk p30 traits-only	200 4587 7cf8f1783d4fde83b880c29806c92641fb0d2ad00de853cf3334a091b75dc6e0 "edb2dc7d39c30d63"
override SDK p30 traits-only	200 6554 a581373c95e62c73f837104eed72ca45810e60e7c7fc708329cb8817171f38bb -
override OFREP p30/ff-0000-upload traits-only	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
override OFREP p30/ff-0003-cart traits-only	200 126 e5b8bfc6575d62701e0e9db74fb780f43a36c390a828db339b23a951cb85acfa -
override OFREP p30/ff-0006-login traits-only	200 149 0908e0a987117454ffd6b48062e2a2c0ec9fa0cb4529469002ad781c50794c88 -
override OFREP p30/ff-0008-reports traits-only	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
override OFREP p30/ff-0025-theme traits-only	200 151 61239670c805b98f3fe36e6f1ad5e8f508279f6e97f90e8525b3b6af7cdb9a2c -
override OFREP p30/ff-0026-upload traits-only	200 128 59136a4d6d7b973b5faa6224fdb6eca93742dea7f82dcf0f5d94eda4b1a077af -
override OFREP-bulk p30 nobody	200 4656 5b63ef0dc519648e05ca1232b55f9adcbe4b34bdc8e4423fc16b987800527c08 "b70c6350b0df41bb"
override SDK p30 nobody	200 6546 8fe6ac3d071157976aac6864e8813aae6319b185a5a2e55dfd43ed596df8d4a1 -
override OFREP p30/ff-0000-upload nobody	200 126 f9c7b8380938408e5c2ab47df9cfbf51315d7c8f9adf21adb6e046796294ac86 -
override OFREP p30/ff-0003-cart nobody	200 126 e5b8bfc6575d62701e0e9db74fb780f43a36c390a828db339b23a951cb85acfa -
override OFREP p30/ff-0006-login nobody	200 160 53b19af2f023e600db599c0f30a086927fc5ed48ef0e89a6914adae899e2a5bb -
override OFREP p30/ff-0008-reports nobody	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
override OFREP p30/ff-0025-theme nobody	200 162 f2ec1ae9095219e58b76a0cbd512df1a4e9ba5d662a220a4ac149d005abf38ef -
override OFREP p30/ff-0026-upload nobody	200 128 59136a4d6d7b973b5faa6224fdb6eca93742dea7f82dcf0f5d94eda4b1a077af -
override OFREP-bulk p1000 pin-user-1	200 145168 8cf8fd1d0699d15fdb774bcf1354ef9b47aec2f911cdf8942f04c376537da044 "e8440e2e9c1b92b2"
override SDK p1000 pin-user-1	200 224482 13fc66182c0a85d341e3eb59945ea47937658badab6b60e8f42ff7b547af6d03 -
override OFREP-bulk p1000 bench-user-7	200 143738 1430ffa5c2c00aa1d97e78f3574160812f5c5a219b160cd92351600baac11c8d "9adf05e282371aad"
override SDK p1000 bench-user-7	200 224687 fc878df0dbc6557f22dd825c8aab01660cc353ec4efc52c8a4491218efd703d6 -
override OFREP-bulk p1000 nobody	200 147863 ef65b49ddeb95d0c9312cc6b290d655eec8539c042047d2f87c12820fb6c2061 "0e4b59d87f88ff3c"
override SDK p1000 nobody	200 214129 5526c5c50718f0105fd2c7bd8c993fd208d144bfa184563f9e744e70716fcbbf -
rollback GET p30 pin-user-1	200 2644 e71f0f42d0de5bf430cc8abe2e5236dd5eb026443142e7cec3d7020b33e303c6 "64140402f6161b00"
rollback GET p30 pin-user-2	200 2641 cd6da58e43286687e2aa8f5d45df6ee7f477cece75b2213a303488c0cd998d97 "55193467344c39bc"
rollback GET p30 pin-user-3	200 2645 c5fb84f1dec0e194f8604b7014835f9d9ac756f5dc0a050e317f93d816b156f2 "51053bf6ac69e97a"
rollback GET p30 pin-user-4	200 2638 ca59360023bb202ba2a0269b556aa6eab7b7ee46e6b8e1bbb83ef14b243fc6c7 "55baef7e350ef68d"
rollback GET p30 pin-user-5	200 2647 158daf81db4fb60f67edc20804006ee43960ab4eb0ab9512f16f4088e5ec8dae "a09a5a887167cc65"
rollback GET p30 pin-user-6	200 2644 0e23d2871ab106e63e13d6311ba752c11069eca2e525ac8e770cff34dd38a574 "e3de2c9f8d3af907"
rollback GET p30 pin-user-7	200 2645 b8b5baa4792baa3ec403ad6e6a675d872ad6818d15deb6578da45a6cfe253494 "6ea31408fb9baa20"
rollback GET p30 pin-user-8	200 2639 a916e9cd8e658ba32f3ba3cc0aeb84d8f92f14f3a9c50db29ab18e2195509943 "1a734e0016fd9756"
rollback GET p30 pin-user-9	200 2646 1fcc022b5d25be2e852d9f9841e639dd9473bcbbe0806f73f112587e8b29432a "253381334d498c64"
rollback GET p30 pin-user-10	200 2642 57f78262c549b9052984e3dde2fb5b89a44e95a0d50f3de5d7e172a86f26971c "3b728a8ff7247343"
rollback GET p30 pin-user-11	200 2647 8237ef88863a76a1eea7897bab818d979e2be69766a50b5170442979ab17ca9d "1edfb3f43067cd96"
rollback GET p30 pin-user-12	200 2644 943ba4b4e0b775115bb544575aab6373c1c3ad97cdd41cbbc298000afe191485 "a75c520584633f31"
rollback GET p30 pin-user-13	200 2644 96f839064d69f4c1be3810cc9ec7d5c504e871e2408ffb7be448a0bdbd90096b "465fdac96c611347"
rollback GET p30 pin-user-14	200 2646 7ceecf03548b5be381318be83ee3619819bed5ab9b878ebec63ecd9ac9176529 "40f2ad42e984f96e"
rollback GET p30 pin-user-15	200 2643 41fa536c042a9a188fd3a61276a9a25ccae7e913574189bd5185314adcc4b555 "88d97d985c39d253"
rollback GET p30 pin-user-16	200 2639 d84789b067c50ec81d98aa295adff75a2e536aacacfd144874c811efafbcbf60 "229447d48475ae3d"
rollback GET p30 pin-user-17	200 2646 b11b82eee3c55c250052f7398bbda98b4315ace372b67822ecf2a1e94d932385 "05fa39da0a452c8f"
rollback GET p30 pin-user-18	200 2644 0e23d2871ab106e63e13d6311ba752c11069eca2e525ac8e770cff34dd38a574 "b2c12ec053a29f7d"
rollback GET p30 pin-user-19	200 2644 508d9f032c0cd64c4ab7ee043ede94243b9a9788cb807a59b5dd0748dfa492a7 "b25dc2e1fc0e2174"
rollback GET p30 pin-user-20	200 2641 5bf85ae02e0b9737f81b5bac6e7e49aeea068ec086e25369298891183d38befc "1359e8c1ee3bb1fa"
rollback GET p30 pin-user-21	200 2646 c3c9e59aad5856d40a35685d91c83088c58a52c141840f880c51f202b415d81a "d727228059188b1d"
rollback GET p30 pin-user-22	200 2641 33a5d880295a5b447560a905ac25e3def061c5f1a8c0946dac6d694cdc9a3ce6 "1541d312c6618368"
rollback GET p30 bench-user-7	200 2640 7ef96e09c89dc4355d923c4c69ad3382530b7b6c9cc0a84f629ebcdd69e6bd15 "f7563c1f23c64e24"
rollback GET p30 traits-only	200 2649 b00a86ef0de716f4defd0f101d33f86215c4345bcd7e9f18bde8656534f5f1eb "755aee9d53aac650"
rollback GET p30 nobody	200 2650 c8dde36fc274998edc4bf08655635a4895b17ccd34f71aebe1072039935620aa "f95db99a569bcc50"
rollback GET p1000 pin-user-1	200 86832 c804f2a17a43bdde5dee55b3cd571c329947f792643bc507fc4cf2646e7cdc98 "162788eb434a674b"
rollback GET p1000 pin-user-2	200 86799 57c6f033726c149fb3ac14bfe5d6079ced1ced99338ee6fd7671d4cd6172ea3c "a57e8c394fccc469"
rollback GET p1000 pin-user-3	200 86873 9834c0b5c38e38c398947e3470be0460e9c991a381bb93cb03f878cb7fc9e93a "2bb9d32a30ec5065"
rollback GET p1000 pin-user-4	200 86786 62b72b39ba715aba44b0712ec2c8a1e79cc6e1bc84255d3a2bdbdb3a758c86bc "bca4de946654123f"
rollback GET p1000 pin-user-5	200 86947 276cbc2dfb15d5729550ba902ab7114e55faf2443faad73359b9f6985d34670b "21662d897155bfb6"
rollback GET p1000 pin-user-6	200 86895 29ab313cc66dbe2aedfc8e2689151ab3888be94ce104857bce446fae94a09a65 "a3441940a5141123"
rollback GET p1000 pin-user-7	200 86907 7be285470e5f5e26f7037cd19074ee168381c01d2406aee8ef5c8f32bfed77f8 "2c44a594832fd8a6"
rollback GET p1000 pin-user-8	200 86810 13238254323bbeacffeb17c53e80a61633f470dda4b5c3320c2cf9f7f9dfda86 "485447c3cfa86a80"
rollback GET p1000 pin-user-9	200 86898 dce8f76d17096d4eea5e6c830699aa322cfae85ae22e15a445b8ee551acb216c "8d011f48f2fdffa5"
rollback GET p1000 pin-user-10	200 86847 630d5ac6218574d73b715cf1eb73d48df2f999c783c09cff00abc503affdb717 "65c377e2dd6f36c3"
rollback GET p1000 pin-user-11	200 86946 ba3a6e3fd273dda070214ebb74a5d6af22393b7bfb1d113c12c18e66ffde397a "73fa656f6ead28bd"
rollback GET p1000 pin-user-12	200 86898 64af5aa80f8b0bc73221ba0a10bf509ba0a831ae8dc648a839fd3e86973b1c7f "58f7d000a3ba117b"
rollback GET p1000 pin-user-13	200 86825 253367b9dd5132904e7525bfa4de3a334cb59c5746c4d8c7360b1e59e6a3249e "f03fda27cb6ec59a"
rollback GET p1000 pin-user-14	200 86853 3e05f422dadba0458a71ab7549e0503a02fc7e6c8cc94e8a6672502421d4f725 "bb12c1e52ff6679c"
rollback GET p1000 pin-user-15	200 86873 d356e1c9bbcf26828ab4ca89cb358fa2bb41b4a8a85dd890a3d13bde00ad4d2c "f70444d10104c0d1"
rollback GET p1000 pin-user-16	200 86803 73ec84d0501e77d9e1694b1b5d338f43a1838a53f9af5d6d52d6e618840ec7d2 "2fb170f8c344fea7"
rollback GET p1000 pin-user-17	200 86847 4138a69874a1a2db32235c52c437cebee93d1f313a54131e127c11ce821ce5ea "551ccfedcb3f4801"
rollback GET p1000 pin-user-18	200 86900 545adc24da88238caf02102efc5169cc051c4f1b25a10b96ffe9b9041b100108 "97cc73c57249e7b6"
rollback GET p1000 pin-user-19	200 86910 6ce6b79349e1001677d2fa182e49e0e2c0270c5c72e1e8822ce8bc5f2ab67a04 "c4c92d432a517231"
rollback GET p1000 pin-user-20	200 86871 9b659c91117efedd65783a1386dd14cb34e412b22a44558e9bbe72afc896f8cf "5b1f77b1242dbbf5"
rollback GET p1000 pin-user-21	200 86903 951ce4f2258fdf71a7f7ead3c89b692137b0e28cc6558f5c68fe90d6718210d1 "76fc44b25e313323"
rollback GET p1000 pin-user-22	200 86821 42bf073f61fd957a0fc425fb229fadb9e19cbaab6276443c122b909c67de4c4c "ab50ffc07adda091"
rollback GET p1000 bench-user-7	200 86748 79f23203fddc742edd577ea541b51172046ec6bfb875f5511ab96bed84d48e82 "934ce98379850758"
rollback GET p1000 traits-only	200 87007 a64fa1910b702391409a45d0c3bc81682f38ef13b8a3a53b82f868aecf0a9edb "b1eb684fb577fd98"
rollback GET p1000 nobody	200 87070 4f35203633104b5e281631925a1b073977bb3cf469108661c2b02888a50356b9 "295f6ac570c5d314"
rollback OFREP-bulk p30 pin-user-1	200 4558 02d10e83d5495589415891aa6300ab61ccfbddc9d0cdd51ad585ec50355f1371 "2626de8e5a04fc1d"
rollback SDK p30 pin-user-1	200 6914 2f0af751b0499907c62ff554781314d2712cddb902a599e6c720617e76a3104e -
rollback OFREP p30/ff-0000-upload pin-user-1	200 127 4ee725f2002e3711834e0bc90e6737e98351f78aca467380552f85ae98ffeed5 -
rollback OFREP p30/ff-0003-cart pin-user-1	200 122 4186be3f525a5d369b6e7b53c5e7325588ec33fac3d0006d9ff9d955af946a73 -
rollback OFREP p30/ff-0006-login pin-user-1	200 149 0908e0a987117454ffd6b48062e2a2c0ec9fa0cb4529469002ad781c50794c88 -
rollback OFREP p30/ff-0008-reports pin-user-1	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
rollback OFREP p30/ff-0025-theme pin-user-1	200 145 89846a09c335ed0f39a20802ae867acb3479d312980df7e114d54da4a213b2b7 -
rollback OFREP p30/ff-0026-upload pin-user-1	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
rollback OFREP-bulk p30 pin-user-2	200 4561 2cbb4aff4a1edd8de72417ed0021b5754e25e4298a9a284386274ca9f86b0932 "1a68bfbd8da676ae"
rollback SDK p30 pin-user-2	200 6803 8ddb90eda06d4330345f864fda71cfd3ac3501ee4e5eaacce66d5d4a4c39dff7 -
rollback OFREP p30/ff-0000-upload pin-user-2	200 127 4ee725f2002e3711834e0bc90e6737e98351f78aca467380552f85ae98ffeed5 -
rollback OFREP p30/ff-0003-cart pin-user-2	200 122 4186be3f525a5d369b6e7b53c5e7325588ec33fac3d0006d9ff9d955af946a73 -
rollback OFREP p30/ff-0006-login pin-user-2	200 160 53b19af2f023e600db599c0f30a086927fc5ed48ef0e89a6914adae899e2a5bb -
rollback OFREP p30/ff-0008-reports pin-user-2	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
rollback OFREP p30/ff-0025-theme pin-user-2	200 147 20523bf113434cd7b475f1ff428f80d3a1b03db39cc09423d155db5cd3bcb22a -
rollback OFREP p30/ff-0026-upload pin-user-2	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
rollback OFREP-bulk p30 pin-user-6	200 4612 2054c0b7b55fe2c05d5920426db9c28db0d7ec70ecedf7c935e9c81de9014ece "c26a97981c8a8398"
rollback SDK p30 pin-user-6	200 6564 493afdc53f8d34f53d3d1aec6e71c58b5627224d25816cb2fe0410bc0d010d0a -
rollback OFREP p30/ff-0000-upload pin-user-6	200 127 4ee725f2002e3711834e0bc90e6737e98351f78aca467380552f85ae98ffeed5 -
rollback OFREP p30/ff-0003-cart pin-user-6	200 122 4186be3f525a5d369b6e7b53c5e7325588ec33fac3d0006d9ff9d955af946a73 -
rollback OFREP p30/ff-0006-login pin-user-6	200 160 53b19af2f023e600db599c0f30a086927fc5ed48ef0e89a6914adae899e2a5bb -
rollback OFREP p30/ff-0008-reports pin-user-6	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
rollback OFREP p30/ff-0025-theme pin-user-6	200 147 20523bf113434cd7b475f1ff428f80d3a1b03db39cc09423d155db5cd3bcb22a -
rollback OFREP p30/ff-0026-upload pin-user-6	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
rollback OFREP-bulk p30 bench-user-7	200 4513 057a419bb40238c29388fe209d1bb7aa892d566f189335aefb83cd85608fdea3 "2fe5540e5c6fbc50"
rollback SDK p30 bench-user-7	200 6921 e6ae985e12973ec8334b45a7f2a7dcadc756765a0b2ec212eda1e5e7bf42f673 -
rollback OFREP p30/ff-0000-upload bench-user-7	200 127 4ee725f2002e3711834e0bc90e6737e98351f78aca467380552f85ae98ffeed5 -
rollback OFREP p30/ff-0003-cart bench-user-7	200 122 4186be3f525a5d369b6e7b53c5e7325588ec33fac3d0006d9ff9d955af946a73 -
rollback OFREP p30/ff-0006-login bench-user-7	200 149 0908e0a987117454ffd6b48062e2a2c0ec9fa0cb4529469002ad781c50794c88 -
rollback OFREP p30/ff-0008-reports bench-user-7	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
rollback OFREP p30/ff-0025-theme bench-user-7	200 147 20523bf113434cd7b475f1ff428f80d3a1b03db39cc09423d155db5cd3bcb22a -
rollback OFREP p30/ff-0026-upload bench-user-7	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
rollback OFREP-bulk p30 traits-only	200 4580 a3e59110783082be1002230be39ee97f22e4f188310c0e2110c2623eeaa1c656 "22c375e0ca646cf5"
rollback SDK p30 traits-only	200 6554 add241746e7ddd780a5c2e254572a89b2d30cdcb781ee10a204bc71ab5b5b90e -
rollback OFREP p30/ff-0000-upload traits-only	200 127 4ee725f2002e3711834e0bc90e6737e98351f78aca467380552f85ae98ffeed5 -
rollback OFREP p30/ff-0003-cart traits-only	200 124 d968e7c1fde9ffff176937128f7a740dc09e85c9fdbe5c91de37c643a3c09cac -
rollback OFREP p30/ff-0006-login traits-only	200 149 0908e0a987117454ffd6b48062e2a2c0ec9fa0cb4529469002ad781c50794c88 -
rollback OFREP p30/ff-0008-reports traits-only	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
rollback OFREP p30/ff-0025-theme traits-only	200 147 20523bf113434cd7b475f1ff428f80d3a1b03db39cc09423d155db5cd3bcb22a -
rollback OFREP p30/ff-0026-upload traits-only	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
rollback OFREP-bulk p30 nobody	200 4649 336259d081e4c00a4ca4e15341fed95f17d45db5eb4e3325cfe52386e7030c22 "073174ecfd547dd9"
rollback SDK p30 nobody	200 6546 e0cc2443af2f22693949d3b0572591087c89759529b8434d6e75101508bead86 -
rollback OFREP p30/ff-0000-upload nobody	200 127 4ee725f2002e3711834e0bc90e6737e98351f78aca467380552f85ae98ffeed5 -
rollback OFREP p30/ff-0003-cart nobody	200 124 d968e7c1fde9ffff176937128f7a740dc09e85c9fdbe5c91de37c643a3c09cac -
rollback OFREP p30/ff-0006-login nobody	200 160 53b19af2f023e600db599c0f30a086927fc5ed48ef0e89a6914adae899e2a5bb -
rollback OFREP p30/ff-0008-reports nobody	200 153 63ddaefed369abfb8a918a3a1805ab81764feefc7a072dddc41a0e143bc18940 -
rollback OFREP p30/ff-0025-theme nobody	200 158 9813d742b9b9b5675a1e75b79ecb6e5be568263cf8b0aea69c1d44d2f3f78cf9 -
rollback OFREP p30/ff-0026-upload nobody	200 126 ad903408dee1da16805990de0456ced35e53f5640072a8699ae86252d5770427 -
rollback OFREP-bulk p1000 pin-user-1	200 145163 d7b9a65652a06dfa49ceaf5032f3a4d212c13a10228e5efb73b4fb480604d491 "dbcea228ed19124b"
rollback SDK p1000 pin-user-1	200 224484 5f1bb5e2ee3145a3cf32f208f4ad2ffbf35a6c37fc5c9beee9239027a7c19408 -
rollback OFREP-bulk p1000 bench-user-7	200 143735 0e04997a0b21064cb5e7a9789f84b4f734d48b40c342da63174f9c18c156c81e "31dec22357b01497"
rollback SDK p1000 bench-user-7	200 224687 26a2a4229b8479ce03855554043b1181daf666438ee40cb26cc05d72b904de21 -
rollback OFREP-bulk p1000 nobody	200 147860 682bcfb2af6591a787995f26fc495415da9674bf2bf3f39178ae706c200689b8 "974d22cf3bbe259c"
rollback SDK p1000 nobody	200 214129 ba98877854d103d58afbe1f731faa8d7200ffd89a76ff4212594cdbad37b228d -
