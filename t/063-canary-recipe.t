# The demo's tour, run as written: nginx.conf.example as shipped (only its
# ports, the module's path and, as root, a "user root;" line are this
# test's) with examples/flags/demo.json, and the commands of the README's
# "Try it" section, run by the shell with this run's port.
#
# The page answers at the README's address, and only 127.0.0.1; the
# metrics too. The two curl commands answer the flags and 204. The loop
# that breaks the canary gets 12 500s of the broken backend and 48 old
# checkouts; the canary's ramp rolls new-checkout back by its regression
# rule (not the absolute rule, not the backstop) within a tick; from then
# on everyone gets the old backend; the flags passed on in X-Flags are
# never blamed; the page's own status and event ring show the rollback;
# and the README's DELETE sends the canary its share again.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use File::Copy qw(copy);

my $root = "$FindBin::Bin/..";
my $dir = prefix_dir('canary-recipe');

my $Old = unused_port();
my $New = unused_port();
my $Port = $FlagsTest::Port;

my $conf = read_file("$root/nginx.conf.example");
my $module = $ENV{TEST_NGINX_LOAD_MODULES};
my $n = 0;
# as root "user root;", and under valgrind "daemon off;" (the harness
# keeps nginx in the foreground)
$n += $conf =~ s{^load_module modules/ngx_http_flags_module\.so;}
                {load_module $module;${\($> == 0 ? "\nuser root;" : '')}${\($FlagsTest::Valgrind ? "\ndaemon off;" : '')}}m;
$n += $conf =~ s/127\.0\.0\.1:8081/127.0.0.1:$Old/g;
$n += $conf =~ s/127\.0\.0\.1:8082/127.0.0.1:$New/g;
$n += $conf =~ s/127\.0\.0\.1:8080;/127.0.0.1:$Port;/g;
is($n, 1 + 2 + 2 + 1, 'the example has the lines this test changes (module, 3 ports)');
unlike(join("\n", grep { !/^\s*#/ } split /\n/, $conf), qr/:808\d/,
       '... and no other port outside comments');

# the temp directories under the prefix, not nginx's compiled-in ones
# (/var/lib/nginx/body and the like, a system path)
$conf =~ s/^(http \{\n)/$1 . temp_paths($conf)/me or die 'no "http {" line in the example';

# the page's and the metrics' locations, localhost only, the page with its
# actions
like($conf, qr{location /flags-dashboard/ \{\s*allow 127\.0\.0\.1;\s*deny\s+all;\s*flags_dashboard admin=/flags-admin/;\s*\}},
     'the page: allow 127.0.0.1; deny all; admin=/flags-admin/');
like($conf, qr{location = /flags-metrics \{\s*allow 127\.0\.0\.1;\s*deny\s+all;\s*flags_metrics;\s*\}},
     'the metrics: allow 127.0.0.1; deny all');
# what the README's recipes need of it
like($conf, qr/^\s*flags_rollback min_errors=20 rate=10% window=60s min_sources=3;/m,
     'flags_rollback min_sources=3');
like($conf, qr/^\s*limit_req_zone \$binary_remote_addr zone=flag_reports:1m rate=6r\/m;/m,
     'the reports are rate-limited');
like($conf, qr{^\s*flags_state_file \.\./state/flags-state\.json;}m,
     'the state file beside the logs (build/run/state/)');

write_file("$dir/conf/nginx.conf", $conf);
mkdir "$dir/conf/flags";
mkdir "$dir/state";
copy("$root/examples/flags/demo.json", "$dir/conf/flags/demo.json") or die "copy: $!";

# glibc fills freed memory (MALLOC_PERTURB_): a read of memory nginx freed
# after the configuration (its temp pool) gets garbage, not the old bytes
local $ENV{MALLOC_PERTURB_} = 165;
my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'nginx -t accepts nginx.conf.example') or diag($out);
my $master = nginx_start($dir);

# --- the README's "Try it", and docs/demo.md's loop ------------------------

my $readme = read_file("$root/README.md");
my ($tryit) = $readme =~ /^## Try it\n(.*?)^## /ms;
ok($tryit, "the README has a Try it section");
$tryit //= '';
my @blocks = $tryit =~ /^```\n(.*?)^```$/msg;
my ($page_at) = $tryit =~ m{\*\*Open the operator's page: <(http://[^>]+)>\*\*};
is($page_at, 'http://127.0.0.1:8080/flags-dashboard/', 'it leads with opening the page');
like($tryit, qr{!\[[^\]]+\]\(docs/demo\.png\)}, '... shows docs/demo.png');
ok(-s "$root/docs/demo.png", '... which is in the tree');
my ($curls) = grep { /Bearer pub_demo_1/ } @blocks;
my ($loop) = grep { /^for i in/ } @blocks;
ok($curls && $loop, 'the two curl commands and the loop');
$curls //= '';
$loop //= '';
ok(index($tryit, $page_at // '') < index($tryit, $curls)
   && index($tryit, $curls) < index($tryit, $loop), '... in that order, after the page');
my ($seq) = $loop =~ /^for i in \$\(seq 1 (\d+)\); do$/m;
is($seq, 60, 'the loop asks for 60 users');
my $build_sh = read_file("$root/build.sh");
ok(index($build_sh, "\n$curls\n") > 0 && index($build_sh, "\n$loop\n") > 0,
   './build.sh run prints the same commands');
my ($demo_loop) = read_file("$root/docs/demo.md") =~ /^```\n(for i in .*?)^```$/ms;
is($demo_loop, $loop, 'docs/demo.md has the same loop');
my ($undo) = $tryit =~ /`curl -X DELETE (http:\/\/127\.0\.0\.1:8080\/flags-admin\/rollbacks\/demo\/new-checkout)`/;
ok($undo, "the README's undo");

# runs a block of the README with this run's port: its output
sub shell {
    my ($script) = @_;
    $script =~ s/127\.0\.0\.1:8080\b/127.0.0.1:$Port/g;
    # curl runs without the sanitizer run's LD_PRELOAD (curl itself
    # deadlocks with libasan preloaded)
    open(my $fh, '-|', 'env', '-u', 'LD_PRELOAD', '-u', 'ASAN_OPTIONS', '-u', 'UBSAN_OPTIONS',
         'bash', '-c', $script) or die "bash: $!";
    local $/;
    my $o = <$fh> // '';
    close $fh;
    return $o;
}

sub canary {
    my ($uid) = @_;
    my ($st, undef, $body) = http_request(GET => '/checkout/',
        headers => ["Cookie: uid=$uid", 'X-Plan: pro', 'X-Country: de']);
    return "$body $st";
}

sub status_flag {
    my ($name, $path) = @_;
    my (undef, undef, $body) = http_request(GET => $path // '/flags-status');
    my $j = decode_json($body);
    my ($f) = grep { $_->{name} eq $name } @{ $j->{projects}[0]{flags} };
    return $f;
}

# --- the page, the metrics, localhost only ----------------------------------

my ($st, $h, $body) = http_request(GET => '/flags-dashboard/');
is($st, 200, 'GET /flags-dashboard/: 200');
is($h->{'content-type'}, 'text/html; charset=utf-8', '... the page');
(undef, undef, $body) = http_request(GET => '/flags-dashboard/config.json');
is_deeply(decode_json($body), {admin => '/flags-admin/', status => 'status.json', events => 'events'},
          '... with its actions (admin=/flags-admin/)');

# the same request from 127.0.0.2, another address of the loopback
sub from_other {
    my ($path) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $Port,
                                  LocalAddr => '127.0.0.2', Timeout => 5);
    return "connect: $!" unless $s;
    print $s "GET $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    my $line = <$s> // '';
    close $s;
    return $line =~ m{^HTTP/1\.1 (\d+)} ? $1 : $line;
}
is(from_other('/flags-dashboard/'), 403, '... 403 to another address');
is(from_other('/flags-metrics'), 403, 'the metrics: 403 to another address');
is(from_other('/flags-admin/rollbacks/demo/new-checkout'), 403, 'the admin: 403 too');

($st, $h, $body) = http_request(GET => '/flags-metrics');
is($st, 200, 'GET /flags-metrics: 200');
like($body, qr/^flags_ramp_stage\{project="demo",flag="search-v2"\} 0$/m,
     '... with the ramps: search-v2 at stage 0');

# --- the ramp that climbs on its own ------------------------------------------

my $sv;
wait_for(sub { $sv = status_flag('search-v2'); $sv->{ramp}{state} eq 'running' }, 5);
is_deeply([@{ $sv->{ramp} }{qw(stage stages percentage state)}], [0, 5, 1, 'running'],
          'search-v2 ramps: stage 0 of 5, 1 %, running');
ok($sv->{ramp}{waitingFor}{holdSeconds} <= 60 && $sv->{ramp}{waitingFor}{holdSeconds} > 0,
   "... its next stage a minute after the start ($sv->{ramp}{waitingFor}{holdSeconds} s to go)");
my $nc = status_flag('new-checkout');
is_deeply([@{ $nc->{ramp} }{qw(stage stages percentage state tickSeconds)}], [0, 3, 25, 'running', 5],
          'new-checkout ramps: stage 0 of 3, 25 %, a tick of 5 s');

# --- the two curl commands ----------------------------------------------------

my $o = shell($curls);
like($o, qr/^\{"flags":\[\{"name":"new-checkout","enabled":true,"rolloutPercentage":25,"segments":\["beta"\]\},\{"name":"search-v2","enabled":false,"rolloutPercentage":1,/,
     'the first: user-2 gets new-checkout (25 %) and not search-v2 (1 %)');
like($o, qr{\]\}HTTP/1\.1 204 No Content\r?\n}, 'the second: the report, 204');

# --- breaking the canary --------------------------------------------------------

is(canary('u7'), "old checkout\n 200", 'u7, not in the 25 %, gets the old backend');
is(canary('u1'), "new checkout is broken\n 500", 'u1, in it, gets the broken canary\'s 500');
is(status_flag('new-checkout')->{rolledBack}, JSON::PP::false, 'one 500: not rolled back');

my $t0 = time;
$o = shell($loop);
my %got;
$got{$_}++ for split /\n/, $o;
is_deeply(\%got, {'new checkout is broken' => 12, 'old checkout' => 48},
          'the loop: 12 of the 60 get the canary\'s 500, 48 the old backend');
ok(wait_for(sub { status_flag('new-checkout')->{rolledBack} }, 10), '... and new-checkout is rolled back');
my $took = time - $t0;
ok($took < 6 + 1, sprintf('... within a tick of 5 s (%.1f s)', $took)) unless $FlagsTest::Valgrind;
$nc = status_flag('new-checkout');
is($nc->{ramp}{state}, 'rolledBack', '... its ramp is rolledBack');
is($nc->{ramp}{decision}{cause}, 'regression', '... decided by the ramp\'s regression rule');
is($nc->{rollback}{decidedBy}, 'rule', '... on this host');
ok($nc->{ramp}{evidence}{witnesses} >= 3, "... witnessed by $nc->{ramp}{evidence}{witnesses} users (min_sources=3)");
is($nc->{ramp}{evidence}{errors}{off}, 0, '... none of the off cohort\'s');
is($nc->{window}{errors}, 13, '13 errors in the window: below min_errors=20, the absolute rule has not acted');
is_deeply($nc->{errorsBySource}, {reports => 0, upstream => 13}, '"errorsBySource":{"reports":0,"upstream":13}');
for my $u (qw(u1 u3 u7 u10)) {
    is(canary($u), "old checkout\n 200", "then $u gets the old backend");
}
for my $name ('dark-mode', 'search-v2', 'mobile-nav') {
    is(status_flag($name)->{errorsBySource}{upstream}, 0,
       "$name, passed on in X-Flags, is not blamed for the canary's 500s");
    is(status_flag($name)->{rolledBack}, JSON::PP::false, "... nor rolled back");
}
is(status_flag('dark-mode')->{errorsBySource}{reports}, 1, 'dark-mode has the report');

# the page reads the same: its status and its event ring
my $page_nc = status_flag('new-checkout', '/flags-dashboard/status.json');
is($page_nc->{ramp}{decision}{cause}, 'regression', 'the page\'s status.json has the rollback');
(undef, undef, $body) = http_request(GET => '/flags-dashboard/status.json');
my ($ev) = grep { $_->{kind} eq 'rollback' } @{ decode_json($body)->{events} };
is_deeply([@{$ev}{qw(project flag by)}], ['demo', 'new-checkout', 'rule'],
          '... and its event ring');

like(read_file("$dir/logs/error.log"),
     qr/flags: rolled back flag "new-checkout" of project "demo": its ramp's regression rule at stage 0 found the on cohort failing more than the off cohort/,
     'the rollback line, at the example\'s error_log level');

# the README's undo sends the canary its share again
($st) = http_request(DELETE => '/flags-admin/rollbacks/demo/new-checkout');
is($st, 204, "the README's DELETE answers 204");
is(canary('u1'), "new checkout is broken\n 500", 'u1 is back on the canary');
is(status_flag('new-checkout')->{ramp}{state}, 'paused', '... its ramp paused at its stage');

# the page's "Resume ramp", as the browser sends it from the page's origin
# (Host as the browser sends it for a page at http://127.0.0.1:PORT/)
my $s = raw_connect();
my $resume = '{"action":"resume"}';
print $s "PUT /flags-admin/ramps/demo/new-checkout HTTP/1.1\r\nHost: 127.0.0.1:$Port\r\n"
    . "Origin: http://127.0.0.1:$Port\r\nSec-Fetch-Site: same-origin\r\n"
    . "Content-Type: application/json\r\nContent-Length: " . length($resume) . "\r\n"
    . "Connection: close\r\n\r\n$resume";
my $answer = do { local $/; <$s> } // "(read: $!)";
close $s;
like($answer, qr{^HTTP/1\.1 204 }, 'the page may act: resume from http://127.0.0.1:PORT answers 204')
    or diag($answer);
is(status_flag('new-checkout')->{ramp}{state}, 'running', '... the ramp runs again');

nginx_stop($master);
done_testing();
