# The README's self-healing canary, run as written: nginx.conf.example as
# shipped (only its ports, the module's path and, as root, a "user root;"
# line are this test's) with the demo project, and the README's own curl
# command. The canary's users get the broken backend's 500 until the fifth
# rolls new-checkout back; from then on everyone gets the old backend; the
# flags passed on in X-Flags ($flags_enabled) are never blamed; the admin
# DELETE of the README sends the canary its share again.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;
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
write_file("$dir/conf/nginx.conf", $conf);
mkdir "$dir/conf/flags";
mkdir "$dir/state";
copy("$root/examples/flags/demo.json", "$dir/conf/flags/demo.json") or die "copy: $!";

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'nginx -t accepts nginx.conf.example') or diag($out);
my $master = nginx_start($dir);

# the README's command, with this run's port
my $readme = read_file("$root/docs/guide.md");
my ($cmd) = $readme =~ /With `\.\/build\.sh run`, ask a few times with different `uid`s:\n`(curl [^`]+)`/;
ok($cmd, "the README's canary command: " . ($cmd // 'missing'));
$cmd =~ s/\s+/ /g;
$cmd =~ s/127\.0\.0\.1:8080/127.0.0.1:$Port/;
my ($in_users) = $readme =~ /`u1` is one of them \(of `u1` to `u20`, so\s+are `u3`, `u10`, `u11` and `u14`/;

sub canary {
    my ($uid) = @_;
    (my $c = $cmd) =~ s/uid=u1\b/uid=$uid/;
    # curl runs without the sanitizer run's LD_PRELOAD (curl itself
    # deadlocks with libasan preloaded)
    my $body = `env -u LD_PRELOAD -u ASAN_OPTIONS -u UBSAN_OPTIONS $c -s -w ' %{http_code}' 2>&1`;
    return $body;
}

sub status_flag {
    my ($name) = @_;
    my (undef, undef, $body) = http_request(GET => '/flags-status');
    my $j = decode_json($body);
    my ($f) = grep { $_->{name} eq $name } @{ $j->{projects}[0]{flags} };
    return $f;
}

is(canary('u7'), "old checkout\n 200", 'u7, not in the 25 %, gets the old backend');
my @canary_users = qw(u1 u3 u10 u11 u14);
for my $i (0 .. 3) {
    is(canary($canary_users[$i]), "new checkout is broken\n 500",
       "$canary_users[$i], in the 25 %, gets the broken canary's 500");
}
is(status_flag('new-checkout')->{rolledBack}, JSON::PP::false, 'four 500s: not yet rolled back (minErrors 5)');
is(canary('u14'), "new checkout is broken\n 500", 'the fifth 500 (u14) ...');
my $nc = status_flag('new-checkout');
is($nc->{rolledBack}, JSON::PP::true, '... rolls new-checkout back');
is_deeply($nc->{errorsBySource}, {reports => 0, upstream => 5}, '"errorsBySource":{"reports":0,"upstream":5}, as the README says');
is_deeply([@{ $nc->{rollback} }{qw(errors sources decidedBy)}], [5, 5, 'rule'],
          '... 5 errors of 5 users (min_sources=3), decided by the rule');
for my $u (qw(u1 u3 u7 u10)) {
    is(canary($u), "old checkout\n 200", "then $u gets the old backend");
}
for my $name ('dark-mode', 'search-v2', 'mobile-nav') {
    is_deeply(status_flag($name)->{errorsBySource}, {reports => 0, upstream => 0},
              "$name, passed on in X-Flags, is not blamed for the canary's 500s");
    is(status_flag($name)->{rolledBack}, JSON::PP::false, "... nor rolled back");
}

# step 6: the README's DELETE sends the canary its share again
my ($del) = $readme =~ /`(DELETE \/flags-admin\/rollbacks\/demo\/new-checkout)` sends the canary its/;
is($del, 'DELETE /flags-admin/rollbacks/demo/new-checkout', "the README's undo");
my ($st) = http_request(DELETE => '/flags-admin/rollbacks/demo/new-checkout');
is($st, 204, '... answers 204');
is(canary('u1'), "new checkout is broken\n 500", 'u1 is back on the canary');

like(read_file("$dir/logs/error.log"),
     qr/flags: rolled back flag "new-checkout" of project "demo": 5 errors and \d+ enabled evaluations in 60 s from 5 distinct sources \(min_errors=5 rate=5% min_sources=3; decided by this host's rule\)/,
     'the rollback line, at the example\'s error_log level');

nginx_stop($master);
done_testing();
