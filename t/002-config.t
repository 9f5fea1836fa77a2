# nginx -t names the file and the flag at fault; a reload with a bad file
# keeps the running configuration.  These drive nginx directly, since the
# point is what "nginx -t" prints.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;

my $dir = prefix_dir('config');

my $good = '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100}]}';

# [name, flags file content or undef for none, extra http directives,
#  expected pattern in nginx -t output]
my @cases = (
    ['invalid JSON with line and column',
     qq({"flags":[\n  {"name":"a",\n   "enabled":tru}]}), '',
     qr{\[emerg\].*conf/bad\.json:3:\d+: invalid JSON}],
    ['duplicate flag',
     '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":1},'
     . '{"name":"a","enabled":true,"rolloutPercentage":1}]}', '',
     qr{\[emerg\].*conf/bad\.json: flag "a": duplicate flag name in .*nginx\.conf:\d+}],
    ['unknown segment',
     '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":1,"segments":["nope"]}]}', '',
     qr{conf/bad\.json: flag "a": unknown segment "nope"}],
    ['unknown operator',
     '{"flags":[],"segments":{"s":{"rules":[{"trait":"x","op":"like","value":"y"}]}}}', '',
     qr{conf/bad\.json: segment "s": rule 1: unknown operator "like"}],
    ['percentage over 100',
     '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100.5}]}', '',
     qr{conf/bad\.json: flag "a": "rolloutPercentage" must be between 0 and 100}],
    ['percentage with 4 decimals',
     '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":1.2345}]}', '',
     qr{conf/bad\.json: flag "a": "rolloutPercentage" has more than 3 decimals}],
    ['bad regex',
     '{"flags":[],"segments":{"s":{"rules":[{"trait":"x","op":"regex","value":"a(b"}]}}}', '',
     qr{conf/bad\.json: segment "s": rule 1: invalid regex at offset 3: missing closing parenthesis}],
    ['missing enabled',
     '{"flags":[{"name":"x","rolloutPercentage":5}]}', '',
     qr{conf/bad\.json: flag "x": .*enabled}],
    ['missing file', undef, '',
     qr{\[emerg\].*conf/bad\.json}],
    ['token shared by two projects', $good,
     "flags_project other token=t1 file=good.json;",
     qr{token 1 of project "other" is already used by project "p"}],
    ['bad project name', $good,
     "flags_project 'a b' token=z file=good.json;",
     qr{invalid project name "a b"}],
    ['project without a file', $good, "flags_project q token=z;",
     qr{project "q" has no "file="}],
    ['unknown parameter holding a secret', $good,
     "flags_project q Token=SuperSecret123 file=good.json;",
     qr{\[emerg\] (?:\d+#\d+: )?flags_project: unknown parameter "Token=" \(parameter 2\); expected token=, file= or definitions= in \S+/nginx\.conf:\d+\n}],
    ['a bare word may be a secret', $good,
     "flags_project q SuperSecret123 file=good.json;",
     qr{\[emerg\] (?:\d+#\d+: )?flags_project: unknown parameter \(parameter 2\); expected token=, file= or definitions= in \S+/nginx\.conf:\d+\n}],
    ['a long or odd parameter name is not shown', $good,
     "flags_project q file=good.json secret-key=SuperSecret123;",
     qr{\[emerg\] (?:\d+#\d+: )?flags_project: unknown parameter \(parameter 3\); expected token=, file= or definitions= in }],
    ['a token where the name goes', $good,
     "flags_project token=SuperSecret123 file=good.json;",
     qr{\[emerg\] (?:\d+#\d+: )?flags_project: invalid project name "token=" \(parameter 1\); the name comes first in }],
    ['bad rollback rate', $good, "flags_rollback min_errors=5 rate=101%;",
     qr{invalid rate "rate=101%"}],
    ['bad rollback window', $good, "flags_rollback window=2h;",
     qr{invalid window "window=2h"}],
    ['unknown rollback parameter', $good, "flags_rollback speed=3;",
     qr{invalid parameter "speed=3"}],
    ['bad zone', $good, "", qr{invalid zone "flags"}, "flags_zone flags;"],
    ['state file in a missing directory', $good, "flags_state_file no/such/dir/state.json;",
     qr{flags_state_file ".*conf/no/such/dir/state\.json": directory ".*conf/no/such/dir" does not exist}],
);

# The line of nginx.conf that holds text.
sub nginx_conf_line {
    my ($d, $text) = @_;
    my @lines = split /\n/, read_file("$d/conf/nginx.conf");
    for my $i (0 .. $#lines) {
        return $i + 1 if index($lines[$i], $text) >= 0;
    }
    return 0;
}

for my $c (@cases) {
    my ($name, $content, $extra, $re, $before) = @$c;
    unlink "$dir/conf/bad.json";
    write_file("$dir/conf/bad.json", $content) if defined $content;
    write_file("$dir/conf/good.json", $good);
    my $main = defined $content && $extra ne '' ? 'good.json' : 'bad.json';
    write_file("$dir/conf/nginx.conf", nginx_conf(
        http => ($before // '') . "\n    flags_project p token=t1 file=$main;\n    $extra\n",
        server => ''));
    my ($rc, $out) = nginx_test($dir);
    isnt($rc, 0, "$name: nginx -t fails");
    like($out, $re, "$name: the message names what is wrong");
    unlike($out, qr{t1}, "$name: no token in the output") if $name =~ /token/;
    unlike($out, qr{Secret}, "$name: nothing of the secret in the output") if $extra =~ /Secret/;
}

# A content handler of ours and another one (proxy_pass) in one location:
# whichever comes second would win in silence, so both orders fail, naming
# our directive and where it is.
for my $c (['flags_evaluate', 'proxy_pass http://127.0.0.1:9;'],
           ['flags_status', 'proxy_pass http://127.0.0.1:9;'],
           ['flags_ingest_errors', 'stub_status;']) {
    my ($ours, $other) = @$c;
    for my $order ('ours first', 'ours second') {
        my $loc = $order eq 'ours first' ? "location /x {\n            $ours;\n            $other\n        }"
                                          : "location /x {\n            $other\n            $ours;\n        }";
        write_file("$dir/conf/good.json", $good);
        my $conf = nginx_conf(http => "    flags_project p token=t1 file=good.json;\n",
                              server => "        $loc");
        write_file("$dir/conf/nginx.conf", $conf);
        my @lines = split /\n/, $conf;
        my ($line) = grep { $lines[$_ - 1] =~ /^\s*\Q$ours\E;/ } 1 .. @lines;
        my ($rc, $out) = nginx_test($dir);
        isnt($rc, 0, "$ours with $other, $order: nginx -t fails");
        like($out, qr{\[emerg\] (?:\d+#\d+: )?"\Q$ours\E" conflicts with another content handler \(such as proxy_pass\) in this location in \Q$dir\E/conf/nginx\.conf:$line\n},
             "$ours with $other, $order: the message names the directive and its line") or diag $out;
    }
}

# Every setting that has a default works without being written.
write_file("$dir/conf/good.json", $good);
write_file("$dir/conf/nginx.conf", nginx_conf(
    http => "    flags_project p token=t1 file=good.json;\n",
    server => "location = /flags { flags_evaluate; }"));
my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'defaults only: nginx -t succeeds') or diag $out;

# A reload with a broken file keeps serving the old flags.
my $pid = nginx_start($dir);
my ($st, $h, $body) = http_request(GET => '/flags', headers => ['Authorization: Bearer t1']);
is($st, 200, 'serving');
is($body, '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100,"segments":[]}]}',
   'first configuration');
write_file("$dir/conf/good.json", '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100},');
nginx_signal($pid, 'HUP');
ok(wait_for(sub { (read_file("$dir/logs/error.log") // '') =~ /good\.json:1:\d+: invalid JSON/ }, 5),
   'the reload error names the file and position');
($st, $h, $body) = http_request(GET => '/flags', headers => ['Authorization: Bearer t1']);
is($st, 200, 'still serving after the failed reload');
is($body, '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100,"segments":[]}]}',
   'still the old configuration');
nginx_stop($pid);

# A FIFO named as the flags file fails nginx -t at once, naming the file,
# instead of waiting for a writer forever.
unlink "$dir/conf/fifo.json";
system('mkfifo', "$dir/conf/fifo.json") == 0 or die "mkfifo: $?";
write_file("$dir/conf/nginx.conf", nginx_conf(
    http => "    flags_project p token=t1 file=fifo.json;\n",
    server => "location = /flags { flags_evaluate; }"));
{
    my $t0 = time;
    local $SIG{ALRM} = sub { die "nginx -t hangs on a FIFO\n" };
    alarm 30;
    ($rc, $out) = nginx_test($dir);
    alarm 0;
    isnt($rc, 0, 'FIFO as flags file: nginx -t fails');
    like($out, qr{\[emerg\].*\Q$dir/conf/fifo.json: not a regular file\E in \S+nginx\.conf:\d+},
         'FIFO as flags file: the message names the file');
    cmp_ok(time - $t0, '<', 5, 'FIFO as flags file: at once');
}
unlink "$dir/conf/fifo.json";

# Unknown fields load, but nginx -t names each one (docs/flags-file.md), with the place of
# the flags_project directive, and still succeeds.
write_file("$dir/conf/warn.json",
    '{"flags":[{"name":"new-checkout","enabled":true,"rolloutPercentage":5,'
    . '"stickyness":"plan","rollback":{"windw":30}}],'
    . '"segments":{"beta":{"rules":[{"trait":"p","op":"eq","valeu":"x","value":"y"}]}}}');
write_file("$dir/conf/nginx.conf", nginx_conf(
    http => "    flags_project p token=t1 file=warn.json;\n",
    server => "location = /flags { flags_evaluate; }"));
($rc, $out) = nginx_test($dir);
is($rc, 0, 'unknown fields: nginx -t succeeds') or diag $out;
# "2026/11/22 13:05:09 [warn] 123#123: " comes first (error_log is set)
my @warn = map { s{^.*?\[warn\] \d+#\d+: }{}r } grep { /\[warn\]/ } split /\n/, $out;
is_deeply(\@warn, [map { "$dir/conf/warn.json: $_ in $dir/conf/nginx.conf:"
                          . nginx_conf_line($dir, 'flags_project p ') }
    'segment "beta": rule 1: unknown field "valeu" ignored',
    'flag "new-checkout": unknown field "stickyness" ignored',
    'flag "new-checkout": rollback: unknown field "windw" ignored'],
    'unknown fields: one warning line each, naming file, flag or rule, and field')
    or diag $out;

done_testing();
