# What README.md and nginx.conf.example show holds: every directive is in
# the table, the report log has the module's file name, the alert rules
# are the tested file, and the canary's example user is one the flag
# sends to the new backend (asked of the module itself).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;

my $root = "$FindBin::Bin/..";
my $readme = read_file("$root/README.md");
my $example = read_file("$root/nginx.conf.example");

# --- the directive table lists every directive -----------------------------

my ($commands) = read_file("$root/src/ngx_http_flags_module.c")
    =~ /ngx_http_flags_commands\[\] = \{(.*?)ngx_null_command/s;
my @directives = $commands =~ /ngx_string\("(\w+)"\)/g;
ok(@directives > 10, 'the module\'s directives are read');
my @rows = $readme =~ /^\| `(\w+)[ ;]/mg;
for my $d (@directives) {
    ok((grep { $_ eq $d } @rows), "README's directive table has $d");
}

# --- one name for the report log --------------------------------------------

my ($name) = read_file("$root/src/ngx_http_flags_module.h")
    =~ /#define NGX_HTTP_FLAGS_ERROR_LOG\s+"([^"]+)"/;
is($name, 'flags-errors.log', 'the default report log name');
for my $doc (['README.md', $readme], ['nginx.conf.example', $example]) {
    my %other = map { $_ => 1 } grep { $_ ne $name } $doc->[1] =~ /\b(flags?[-_]errors?\.log)\b/g;
    is_deeply([sort keys %other], [], "$doc->[0] calls the report log $name only");
}

# --- the alert rules are the tested file, with a real path ------------------

my $rules = read_file("$root/t/prometheus/flags-alerts.yml");
(my $bare = $rules) =~ s/^\s*#.*\n//mg;
my ($shown) = $readme =~ /```yaml\n# flags-alerts\.yml\n(.*?)```/s;
is($shown, $bare, 'README shows t/prometheus/flags-alerts.yml without its comments');
my @placeholders = $rules =~ /(?<!\{)(\{[a-z_]+\})/g;
is_deeply(\@placeholders, [], 'no placeholder path in the alerts (only {{ $labels }})');
like($rules, qr{DELETE /flags-admin/rollbacks/\{\{ \$labels\.project \}\}/\{\{ \$labels\.flag \}\}},
     'the alert names a path to clear the rollback');

# --- the canary's example user is in new-checkout's 25 % --------------------

my ($readme_uid) = $readme =~ /curl -b uid=(\w+) -H 'X-Plan: pro' -H 'X-Country: de'/;
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
my ($in, $out) = $readme =~ /so\s+are\s+(`u\d+`(?:,\s+`u\d+`)*\s+and\s+`u\d+`);\s+`(u\d+)`,\s+say,\s+is\s+not/;
ok(defined $in, 'README names others in and one out');
for my $uid (($in // '') =~ /`(u\d+)`/g) {
    is(canary($uid), '1', "uid=$uid gets the new backend");
}
is(canary($out // 'none'), '0', "uid=" . ($out // '?') . " does not");

nginx_stop($pid);

done_testing();
