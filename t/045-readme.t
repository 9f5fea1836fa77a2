# What README.md, the docs and nginx.conf.example show holds: the README is
# the front door (its sections, its minimal configuration passes nginx -t),
# every directive is in docs/directives.md, every source file is in the
# code map of docs/code.md, the report log has the module's file name, the
# alert rules are the tested file, and the canary's example user is one
# the flag sends to the new backend (asked of the module itself).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;

my $root = "$FindBin::Bin/..";
my $readme = read_file("$root/README.md");
my $guide = read_file("$root/docs/guide.md");
my $example = read_file("$root/nginx.conf.example");

# --- the README is the front door ---------------------------------------------

my @sections = $readme =~ /^## (.+)$/mg;
is_deeply(\@sections, ['Why it is different', 'Try it', 'Install',
                       'A minimal configuration', 'The documentation'],
          'the README has its five sections and no reference chapters');
my $lines = () = $readme =~ /\n/g;
cmp_ok($lines, '<=', 220, "the README is short ($lines lines)");
like($readme, qr{^\./build\.sh run\s}m, 'the README shows ./build.sh run');
like($readme, qr{^\./build\.sh test\s}m, '... and ./build.sh test');
for my $page (glob("$root/docs/*.md")) {
    (my $name = $page) =~ s{.*/}{};
    next if $name eq 'README.md';
    like($readme, qr{\(docs/\Q$name\E\)}, "the README's map links docs/$name");
}

# --- the directive table lists every directive -----------------------------

my ($commands) = read_file("$root/src/ngx_http_flags_module.c")
    =~ /ngx_http_flags_commands\[\] = \{(.*?)ngx_null_command/s;
my @directives = $commands =~ /ngx_string\("(\w+)"\)/g;
ok(@directives > 10, 'the module\'s directives are read');
my $reference = read_file("$root/docs/directives.md") // '';
my @rows = $reference =~ /^### `?(\w+)`?\s*$/mg;
for my $d (@directives) {
    ok((grep { $_ eq $d } @rows), "docs/directives.md has a section for $d");
    like($reference, qr/^Syntax:.*\b\Q$d\E\b/m, "... and its Syntax line");
}

# --- the code map names every source file -------------------------------------

my ($map) = read_file("$root/docs/code.md") =~ /## How it is built\n\n```\n(.*?)```/s;
ok($map, 'docs/code.md has the code map');
my @files = map { s{^\Q$root\E/}{}r }
            grep { -f } glob("$root/src/*.[ch] $root/src/core/* $root/src/dashboard/*");
cmp_ok(scalar @files, '>', 60, scalar(@files) . ' source files');
for my $f (@files) {
    (my $base = $f) =~ s{.*/}{};
    (my $stem = $base) =~ s/\.[a-z]+$//;
    ok($map =~ /(?:^|[\s,])\Q$base\E(?:[\s,]|$)/m
       || $map =~ /(?:^|\s)\Q$stem\E\.[a-z]+\/\./m
       || $map =~ /^\Q$f\E\s/m,
       "the code map names $f");
}

# --- the README's minimal configuration passes nginx -t -------------------------

my ($mini) = $readme =~ /## A minimal configuration.*?```\n(http \{.*?\n\})\n```/s;
my ($mini_json) = $readme =~ /with `flags\/shop\.json`[^\n]*\n\n```json\n(.*?)```/s;
ok($mini && $mini_json, "the README's minimal configuration and its flags file");
my $mdir = prefix_dir('readme-minimal');
mkdir "$mdir/conf/flags";
mkdir "$mdir/state";
write_file("$mdir/conf/flags/shop.json", $mini_json // '');
(my $mconf = $mini // '') =~ s{/var/lib/nginx/flags/state\.json}{$mdir/state/state.json};
$mconf =~ s/^http \{\n//;
$mconf =~ s/\}\s*\z//;
$mconf =~ s/^(\s*server \{)/$1\n        listen 127.0.0.1:$FlagsTest::Port;/m;
my $full = nginx_conf(http => '', server => '');
# the report log and the temp directories under the test's prefix (the
# README's default is Debian's /var/log/nginx, a system path)
$full =~ s/^http \{.*\z/http {\n    access_log off;\n    flags_error_log logs\/flags-errors.log;\n${\temp_paths('')}$mconf}\n/ms;
write_file("$mdir/conf/nginx.conf", $full);
my ($mrc, $mout) = nginx_test($mdir);
is($mrc, 0, "nginx -t accepts the README's minimal configuration") or diag($mout);


# --- one name for the report log --------------------------------------------

my ($name) = read_file("$root/src/ngx_http_flags_module.h")
    =~ /#define NGX_HTTP_FLAGS_ERROR_LOG\s+"([^"]+)"/;
is($name, 'flags-errors.log', 'the default report log name');
for my $doc (['README.md', $readme], ['docs/guide.md', $guide],
             ['nginx.conf.example', $example]) {
    my %other = map { $_ => 1 } grep { $_ ne $name } $doc->[1] =~ /\b(flags?[-_]errors?\.log)\b/g;
    is_deeply([sort keys %other], [], "$doc->[0] calls the report log $name only");
}

# --- the alert rules are the tested file, with a real path ------------------

my $rules = read_file("$root/t/prometheus/flags-alerts.yml");
(my $bare = $rules) =~ s/^\s*#.*\n//mg;
my ($shown) = $guide =~ /```yaml\n# flags-alerts\.yml\n(.*?)```/s;
is($shown, $bare, 'docs/guide.md shows t/prometheus/flags-alerts.yml without its comments');
my @placeholders = $rules =~ /(?<!\{)(\{[a-z_]+\})/g;
is_deeply(\@placeholders, [], 'no placeholder path in the alerts (only {{ $labels }})');
like($rules, qr{DELETE /flags-admin/rollbacks/\{\{ \$labels\.project \}\}/\{\{ \$labels\.flag \}\}},
     'the alert names a path to clear the rollback');

# --- the canary's example user is in new-checkout's 25 % --------------------

my ($readme_uid) = $guide =~ /curl -b uid=(\w+) -H 'X-Plan: pro' -H 'X-Country: de'/;
my ($example_uid) = $example =~ /curl -b uid=(\w+) -H 'X-Plan: pro' -H 'X-Country: de'/;
ok(defined $readme_uid && defined $example_uid, 'both show a curl for the canary');
is($example_uid, $readme_uid, 'the same user in both');

my $dir = prefix_dir('readme');
write_file("$dir/conf/demo.json", read_file("$root/examples/flags/demo.json"));
write_file("$dir/conf/nginx.conf", nginx_conf(http => <<'_H_', server => <<'_S_'));
    flags_project demo token=tok file=demo.json;
    flags_error_log off;
    flags_context demo user=$cookie_uid trait_plan=$http_x_plan
                       trait_country=$http_x_country;
_H_
        location /checkout/ { return 200 "$flag_new_checkout"; }
_S_
my $pid = nginx_start($dir);

sub canary {
    my ($uid) = @_;
    my (undef, undef, $body) = http_request(GET => '/checkout/',
        headers => ["Cookie: uid=$uid", 'X-Plan: pro', 'X-Country: de']);
    return $body;
}

is(canary($readme_uid), '1', "uid=$readme_uid gets the new backend");
# what the README says of the others it names
my ($in, $out) = $guide =~ /so\s+are\s+(`u\d+`(?:,\s+`u\d+`)*\s+and\s+`u\d+`);\s+`(u\d+)`,\s+say,\s+is\s+not/;
ok(defined $in, 'docs/guide.md names others in and one out');
for my $uid (($in // '') =~ /`(u\d+)`/g) {
    is(canary($uid), '1', "uid=$uid gets the new backend");
}
is(canary($out // 'none'), '0', "uid=" . ($out // '?') . " does not");

nginx_stop($pid);

done_testing();
