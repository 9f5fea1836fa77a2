# flags_admin as an operator meets it: the nginx -t warning for a location
# nothing protects, the audit lines of every change (value, user, client)
# and the messages of its refusals.  Driven directly: the point is what
# nginx -t prints and the exact lines of the error log.  A user is named
# (log line and event ring) only where nginx must have checked the
# password: not with auth_basic off under an inherited user file, nor
# with "satisfy any" and an allow rule (issue 23).
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP ();

my $dir = prefix_dir('admin');

write_file("$dir/conf/shop.json", <<'_J_');
{"flags":[
  {"name":"a","enabled":true,"rolloutPercentage":100,
   "rollback":{"minErrors":1,"rate":1,"window":60}},
  {"name":"b","enabled":true,"rolloutPercentage":50}
]}
_J_
# auth_basic's {PLAIN} scheme: no crypt() needed to write the file
write_file("$dir/conf/htpasswd", "alice:{PLAIN}secret\no\"hara:{PLAIN}pw\n");

my $Warning = 'has no access control (allow/deny, auth_basic, auth_request): '
            . 'anyone who reaches it can clear rollbacks and set overrides';
my $AnyWarning = 'has "satisfy any" and an "allow" for every address: '
               . 'anyone who reaches it can clear rollbacks and set overrides';

# nginx -t for an http block and a server block: the flags_admin warnings
# it prints, as "[file:line] text" with the prefix of the line cut.
sub admin_warnings {
    my ($http, $server) = @_;
    write_file("$dir/conf/nginx.conf", nginx_conf(
        http => "    flags_project shop token=tok file=shop.json;\n"
              . "    flags_error_log logs/reports.log;\n$http",
        server => $server));
    my ($rc, $out) = nginx_test($dir);
    is($rc, 0, 'nginx -t passes') or diag $out;
    return [map { s{^.*?\[warn\] \d+#\d+: }{}r } grep { /\[warn\].*flags_admin/ } split /\n/, $out];
}

# The line of nginx.conf that holds the n-th (from 1) "flags_admin;".
sub admin_line {
    my ($n) = @_;
    my @lines = split /\n/, read_file("$dir/conf/nginx.conf");
    my $seen = 0;
    for my $i (0 .. $#lines) {
        return $i + 1 if $lines[$i] =~ /\bflags_admin;/ && ++$seen == $n;
    }
    die "no flags_admin number $n";
}

my $conf = "$dir/conf/nginx.conf";

# --- 1. nginx -t ------------------------------------------------------------

# [name, http, server, how many warnings (each of the plain kind unless
#  'any'), which flags_admin they name]
my @cases = (
    ['nothing around it', '',
     "        location /flags-admin/ { flags_admin; }\n", ['plain', 1]],
    ['deny all', '',
     "        location /flags-admin/ { flags_admin; deny all; }\n", []],
    ['allow 127.0.0.1; deny all;', '',
     "        location /flags-admin/ { flags_admin; allow 127.0.0.1; deny all; }\n", []],
    ['allow alone denies nobody', '',
     "        location /flags-admin/ { flags_admin; allow 127.0.0.1; }\n", ['plain', 1]],
    ['a deny of some addresses lets the rest in', '',
     "        location /flags-admin/ { flags_admin; deny 10.0.0.0/8; }\n", ['plain', 1]],
    ['allow all before deny all', '',
     "        location /flags-admin/ { flags_admin; allow all; deny all; }\n", ['plain', 1]],
    ['auth_basic', '',
     "        location /flags-admin/ { flags_admin; auth_basic admin; auth_basic_user_file htpasswd; }\n", []],
    ['auth_basic off', '',
     "        location /flags-admin/ { flags_admin; auth_basic off; auth_basic_user_file htpasswd; }\n", ['plain', 1]],
    ['auth_basic without a user file checks nothing', '',
     "        location /flags-admin/ { flags_admin; auth_basic admin; }\n", ['plain', 1]],
    ['auth_request', '',
     "        location /flags-admin/ { flags_admin; auth_request /auth; }\n"
     . "        location = /auth { internal; return 204; }\n", []],
    ['auth_request off', "    auth_request /auth;\n",
     "        location /flags-admin/ { flags_admin; auth_request off; }\n"
     . "        location = /auth { internal; return 204; }\n", ['plain', 1]],
    ['inherited from the server', '',
     "        allow 127.0.0.1;\n        deny all;\n"
     . "        location /flags-admin/ { flags_admin; }\n", []],
    ['inherited from http', "    auth_basic admin;\n    auth_basic_user_file htpasswd;\n",
     "        location /flags-admin/ { flags_admin; }\n", []],
    ['inherited by a nested location', '',
     "        location /ops/ { deny all; location /ops/admin/ { flags_admin; } }\n", []],
    ['satisfy any with a password and a network', '',
     "        location /flags-admin/ { flags_admin; satisfy any; allow 127.0.0.1; deny all;\n"
     . "            auth_basic admin; auth_basic_user_file htpasswd; }\n", []],
    ['satisfy any with an allow for every address', '',
     "        location /flags-admin/ { flags_admin; satisfy any; allow all;\n"
     . "            auth_basic admin; auth_basic_user_file htpasswd; }\n", ['any', 1]],
    ['limit_except GET covers PUT and DELETE', '',
     "        location /flags-admin/ { flags_admin; limit_except GET { deny all; } }\n", []],
    ['limit_except that lets DELETE through', '',
     "        location /flags-admin/ { flags_admin; limit_except GET DELETE { deny all; } }\n",
     ['plain', 1]],
    ['two locations, the second open', '',
     "        location /flags-admin/ { flags_admin; deny all; }\n"
     . "        location /other-admin/ {\n            flags_admin;\n        }\n", ['plain', 2]],
);

for my $c (@cases) {
    my ($name, $http, $server, $want) = @$c;
    my $got = admin_warnings($http, $server);
    my @expect;
    if (@$want) {
        my ($kind, $n) = @$want;
        push @expect, "flags_admin in $conf:" . admin_line($n) . ' '
                      . ($kind eq 'any' ? $AnyWarning : $Warning);
    }
    is_deeply($got, \@expect, "nginx -t: $name");
}

# --- 2. the audit lines -----------------------------------------------------

write_file("$dir/conf/nginx.conf", nginx_conf(
    http => <<'_H_', server => <<'_S_'));
    flags_project shop token=tok file=shop.json;
    flags_error_log logs/reports.log;
_H_
        auth_basic_user_file htpasswd;
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /status { flags_status; }
        location /flags-admin/ {
            flags_admin;
            auth_basic admin;
        }
        location /net-admin { flags_admin; allow 127.0.0.1; deny all; }
        location = /exact-admin/ { flags_admin; allow 127.0.0.1; deny all; }
        location /off-admin/ { flags_admin; auth_basic off; allow 127.0.0.1; deny all; }
        location /any-admin/ {
            flags_admin;
            satisfy any;
            allow 127.0.0.1;
            deny all;
            auth_basic admin;
        }
        location /pw-admin/ { flags_admin; satisfy any; auth_basic admin; deny all; }
_S_

my $pid = nginx_start($dir);
my $logged = 0;

# The module's lines of the error log written since the last call, from
# "flags:" to the end of the line, after their level: an operator's
# changes are routine, at notice (flags_log_level's routine= default),
# below the rollbacks' error.
sub new_lines {
    my $log = read_file("$dir/logs/error.log") // '';
    my $new = substr($log, $logged);
    $logged = length $log;
    return [map { s{^.*? \[(\w+)\] \d+#\d+: \*\d+ }{[$1] }r } grep { /: \*\d+ flags: / } split /\n/, $new];
}

my $alice = 'Authorization: Basic ' . 'YWxpY2U6c2VjcmV0';     # alice:secret
my $json = 'Content-Type: application/json';
my $tail = 'client: 127.0.0.1, server: localhost, request:';

new_lines();

my ($st) = http_request(PUT => '/flags-admin/overrides/shop/b', body => '{"enabled": false}');
is($st, 401, 'auth_basic asks for a password');

($st) = http_request(PUT => '/flags-admin/overrides/shop/b', body => '{"enabled": false}',
                     headers => [$alice, $json]);
is($st, 204, 'kill switch with a password');
is_deeply(new_lines(), ['[notice] flags: override set for flag "b" of project "shop": enabled false, '
                        . qq(by user "alice", $tail "PUT /flags-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          'override set: the value, the user and the client');

($st) = http_request(PUT => '/flags-admin/overrides/shop/b', body => '{"rolloutPercentage": 12.5}',
                     headers => [$alice, $json]);
is($st, 204, 'a percentage');
is_deeply(new_lines(), ['[notice] flags: override set for flag "b" of project "shop": rolloutPercentage 12.5, '
                        . qq(by user "alice", $tail "PUT /flags-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          'override set: the percentage as written');

($st) = http_request(PUT => '/net-admin/overrides/shop/b', body => '{"rolloutPercentage": 25}',
                     headers => [$json]);
is($st, 204, 'a percentage, no user');
is_deeply(new_lines(), ['[notice] flags: override set for flag "b" of project "shop": rolloutPercentage 25, '
                        . qq($tail "PUT /net-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          'override set without auth_basic: no user');

# a Basic header where no auth_basic checks it names nobody
($st) = http_request(DELETE => '/net-admin/overrides/shop/b', headers => ['Authorization: Basic bWFsbG9yeTp4']);
is($st, 204, 'override removed');
is_deeply(new_lines(), ['[notice] flags: override removed for flag "b" of project "shop", '
                        . qq($tail "DELETE /net-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          'override removed: an unchecked user name is not logged');

($st) = http_request(DELETE => '/flags-admin/overrides/shop/b', headers => [$alice]);
is($st, 204, 'override removed by alice');
is_deeply(new_lines(), ['[notice] flags: override removed for flag "b" of project "shop", '
                        . qq(by user "alice", $tail "DELETE /flags-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          'override removed: the user');

# a name is written as a JSON string would be
($st) = http_request(DELETE => '/flags-admin/overrides/shop/b',
                     headers => ['Authorization: Basic ' . 'byJoYXJhOnB3']);   # o"hara:pw
is($st, 204, 'override removed by o"hara');
is_deeply(new_lines(), ['[notice] flags: override removed for flag "b" of project "shop", '
                        . qq(by user "o\\"hara", $tail "DELETE /flags-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          'override removed: a quote in the name is escaped');

# who a change of the event ring names (flags_status "events", newest first)
sub last_who {
    my (undef, undef, $b) = http_request(GET => '/status');
    return JSON::PP::decode_json($b)->{events}[0]{who};
}
is(last_who(), 'o"hara', 'the event ring names the user auth_basic checked');

# a user file inherited from the server, auth_basic off: the header is
# checked by nobody, whatever it says (issue 23)
my $wrong = 'Authorization: Basic ' . 'YWxpY2U6d3JvbmdwYXNz';   # alice:wrongpass
($st) = http_request(PUT => '/off-admin/overrides/shop/b', body => '{"enabled": false}',
                     headers => [$wrong, $json]);
is($st, 204, 'auth_basic off: a wrong password is not checked');
is_deeply(new_lines(), ['[notice] flags: override set for flag "b" of project "shop": enabled false, '
                        . qq($tail "PUT /off-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          '... and the user it names is not logged');
is(last_who(), undef, '... nor kept in the event ring');

# "satisfy any" with an allow rule: the address let the request in, the
# password was never checked
($st) = http_request(DELETE => '/any-admin/overrides/shop/b', headers => [$wrong]);
is($st, 204, 'satisfy any: the allowed address is let in with a wrong password');
is_deeply(new_lines(), ['[notice] flags: override removed for flag "b" of project "shop", '
                        . qq($tail "DELETE /any-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          '... no user logged');
is(last_who(), undef, '... none in the event ring');
($st) = http_request(PUT => '/any-admin/overrides/shop/b', body => '{"enabled": false}',
                     headers => [$alice, $json]);
is($st, 204, 'satisfy any, the right password');
is_deeply(new_lines(), ['[notice] flags: override set for flag "b" of project "shop": enabled false, '
                        . qq($tail "PUT /any-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          '... still no user: nginx may not have checked it');

# "satisfy any" where only auth_basic can let anyone in: the user is checked
($st) = http_request(DELETE => '/pw-admin/overrides/shop/b', headers => [$wrong]);
is($st, 401, 'satisfy any with no allow rule: a wrong password is refused');
($st) = http_request(DELETE => '/pw-admin/overrides/shop/b', headers => [$alice]);
is($st, 204, '... the right one is let in');
is_deeply(new_lines(), ['[notice] flags: override removed for flag "b" of project "shop", '
                        . qq(by user "alice", $tail "DELETE /pw-admin/overrides/shop/b HTTP/1.1", host: "localhost")],
          '... and named');
is(last_who(), 'alice', '... in the event ring too');

# roll "a" back (minErrors 1), then clear it
($st) = http_request(GET => '/flags', headers => ['Authorization: Bearer tok']);
is($st, 200, 'one evaluation');
($st) = http_request(POST => '/ingest/errors', body => '{"flagName":"a","message":"m"}',
                     headers => ['Authorization: Bearer tok', $json]);
is($st, 204, 'one report');
like(join("\n", @{ new_lines() }), qr/^\[error\] flags: rolled back flag "a" of project "shop"/m, 'a is rolled back, at error');

($st) = http_request(DELETE => '/flags-admin/rollbacks/shop/a', headers => [$alice]);
is($st, 204, 'rollback cleared');
is_deeply(new_lines(), ['[notice] flags: rollback cleared for flag "a" of project "shop", '
                        . qq(by user "alice", $tail "DELETE /flags-admin/rollbacks/shop/a HTTP/1.1", host: "localhost")],
          'rollback cleared: the user and the client');

# --- 3. the messages ----------------------------------------------------------

my @messages = (
    ['unknown flag', PUT => '/net-admin/overrides/shop/nope', '{"enabled":false}', 404,
     '{"error":"unknown_flag","message":"project \"shop\" has no flag \"nope\""}'],
    ['unknown flag, DELETE', DELETE => '/net-admin/rollbacks/shop/n%22x', '', 404,
     '{"error":"unknown_flag","message":"project \"shop\" has no flag \"n\"x\""}'],
    ['unknown project', DELETE => '/net-admin/overrides/nope/a', '', 404,
     '{"error":"unknown_project","message":"there is no project \"nope\""}'],
    ['unknown route, location with a slash', DELETE => '/flags-admin/other/shop/a', '', 404,
     '{"error":"not_found","message":"expected /flags-admin/rollbacks/<project>/<flag>, /flags-admin/overrides/<project>/<flag> or /flags-admin/ramps/<project>/<flag>"}'],
    ['unknown route, location without a slash', DELETE => '/net-admin/rollbacks/shop', '', 404,
     '{"error":"not_found","message":"expected /net-admin/rollbacks/<project>/<flag>, /net-admin/overrides/<project>/<flag> or /net-admin/ramps/<project>/<flag>"}'],
    ['exact location', DELETE => '/exact-admin/', '', 404,
     '{"error":"not_found","message":"expected /exact-admin/rollbacks/<project>/<flag>, /exact-admin/overrides/<project>/<flag> or /exact-admin/ramps/<project>/<flag>"}'],
);

for my $m (@messages) {
    my ($name, $method, $path, $body, $status, $want) = @$m;
    my ($st, $h, $got) = http_request($method => $path, body => $body,
                                      headers => [$alice, $body ne '' ? $json : ()]);
    is($st, $status, "$name: $status");
    is($got, $want, "$name: the message");
}

nginx_stop($pid);

my $errors = join "\n", grep { /\[(?:alert|crit|emerg)\]/ } split /\n/, read_file("$dir/logs/error.log");
is($errors, '', 'no alert, crit or emerg');

done_testing();
