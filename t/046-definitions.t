# definitions=runtime on one host (issue 25): flags_admin's definitions
# routes change a project's flags without a reload.  Two workers, each
# with a keep-alive connection: a 200 means both serve the new version.
# The file seeds version 1; a version is validated as nginx -t validates
# the file; If-Match is a compare-and-set; a dry run changes nothing; an
# unchanged flag keeps its counters, a changed one its override; a flag
# added at runtime answers and its $flag_NAME reads it; history and old
# versions; a revert; the version survives a reload, a kill -9 right
# after its 200, and a seed file edited later.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use FlagsPush;
use JSON::PP;
use MIME::Base64 ();

my $dir = prefix_dir('definitions');
my $log = sub { read_file("$dir/logs/error.log") // '' };
mkdir "$dir/conf/state";
my $versions = "$dir/conf/state/flags-state.json.definitions/shop";

my $Seed = <<'_J_';
{"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": 25, "segments": ["beta"]},
  {"name": "steady", "enabled": true, "rolloutPercentage": 100},
  {"name": "dark-mode", "enabled": true, "rolloutPercentage": 50}
 ],
 "segments": {"beta": {"rules": [{"trait": "plan", "op": "eq", "value": "pro"}]}}}
_J_
write_file("$dir/conf/shop.json", $Seed);
# auth_basic's {PLAIN} scheme: no crypt() needed to write the file
write_file("$dir/conf/htpasswd", "alice:{PLAIN}secret\n");
write_file("$dir/conf/blog.json", '{"flags": [{"name": "comments", "enabled": true, "rolloutPercentage": 100}]}');

my %conf = (log_level => 'notice', http => <<'_H_', server => <<'_S_');
    flags_project shop token=tok_shop file=shop.json definitions=runtime;
    flags_project blog token=tok_blog file=blog.json;
    flags_state_file state/flags-state.json;
    flags_definitions_max_size 64k;
    flags_rollback min_errors=1 rate=1% window=60;
_H_
        keepalive_requests 100000;
        location = /flags { add_header X-Worker $pid; flags_evaluate; }
        location = /flags-status { flags_status; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /metrics { flags_metrics; }
        location /flags-admin/ { flags_admin; }
        location /ofrep/ { flags_ofrep; }
        location /basic-admin/ { flags_admin; auth_basic admin; auth_basic_user_file htpasswd; }
        location = /var {
            add_header X-Worker $pid;
            flags_context shop user=$arg_u;
            return 200 "new-one=$flag_new_one dark=$flag_dark_mode";
        }
_S_

# --- nginx -t ----------------------------------------------------------------
{
    my $t = prefix_dir('definitions-t');
    write_file("$t/conf/shop.json", $Seed);
    write_file("$t/conf/nginx.conf", nginx_conf(http => <<'_H_'));
    flags_project shop token=tok_shop file=shop.json definitions=runtime;
_H_
    my ($rc, $out) = nginx_test($t);
    isnt($rc, 0, 'nginx -t: a runtime project without flags_state_file fails');
    like($out, qr/\[emerg\] (?:\d+#\d+: )?project "shop" has definitions=runtime, which keeps its versions beside flags_state_file, but flags_state_file is not set in \S+nginx\.conf:\d+/,
         '... naming the project, the file and the line');
    write_file("$t/conf/nginx.conf", nginx_conf(http => <<'_H_'));
    flags_project shop token=tok_shop file=shop.json definitions=sometimes;
    flags_state_file state.json;
_H_
    ($rc, $out) = nginx_test($t);
    isnt($rc, 0, 'nginx -t: definitions=sometimes fails');
    like($out, qr/flags_project: invalid "definitions=sometimes": expected definitions=file or definitions=runtime/, '... with what it takes');
}

write_file("$dir/conf/nginx.conf", nginx_conf(%conf));
my $master = nginx_start($dir);
is(scalar(worker_pids($master)), 2, 'two workers');

sub admin {
    my ($method, $path, $body, @h) = @_;
    my ($st, $h, $b) = http_request($method, "/flags-admin/$path", body => $body // '',
                                    headers => ['Content-Type: application/json', @h]);
    return ($st, $h, $b);
}

sub status_project {
    my ($name) = @_;
    my (undef, undef, $b) = http_request(GET => '/flags-status');
    my ($p) = grep { $_->{name} eq $name } @{ decode_json($b)->{projects} };
    return $p;
}

# the answer of flag $name for user $u on the keep-alive connection $s
sub answer {
    my ($s, $name, $u, $plan) = @_;
    my ($st, $body) = worker_request($s, GET => "/flags?userId=$u" . ($plan ? "&trait_plan=$plan" : ''));
    return "status $st" unless $st == 200;
    my ($f) = grep { $_->{name} eq $name } @{ decode_json($body)->{flags} };
    return $f ? ($f->{enabled} ? 'on' : 'off') . " $f->{rolloutPercentage}" : 'absent';
}

sub on_both {
    my ($ka, $name, $u, $plan) = @_;
    my @a = map { answer($ka->{$_}, $name, $u, $plan) } sort keys %$ka;
    return $a[0] eq $a[1] ? $a[0] : "workers differ: @a";
}

my $ka = worker_connections('/flags?userId=u1');
is(scalar keys %$ka, 2, 'a keep-alive connection on each worker');

# --- version 1: the file ---------------------------------------------------------
my ($st, $h, $b) = admin(GET => 'definitions/shop');
is($st, 200, 'GET the definitions: 200');
is($h->{etag}, '"v1"', '... ETag "v1"');
is($b, $Seed, '... the seed file, byte for byte');
is(status_project('shop')->{definitions}{source}, 'runtime', 'flags_status: source runtime');
is(status_project('shop')->{definitions}{version}, 1, 'flags_status: version 1');
is(status_project('blog')->{definitions}{source}, 'file', 'blog: source file');
($st, undef, $b) = admin(GET => 'definitions/shop/history');
is($st, 200, 'history: 200');
my $hist = decode_json($b)->{versions};
is(scalar @$hist, 1, 'history: one version');
is_deeply([@{ $hist->[0] }{qw(version by added changed removed)}],
          [1, undef, ['risky', 'steady', 'dark-mode'], [], []], '... version 1, by nobody, every flag added');
like($hist->[0]{at}, qr/^20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, '... with its time');

($st, undef, $b) = admin(GET => 'definitions/blog');
is($st, 409, 'a file project: 409');
is(decode_json($b)->{error}, 'definitions_in_file', '... definitions_in_file');
($st, undef, $b) = admin(PUT => 'definitions/blog', '{"flags": []}');
is($st, 409, 'a write to a file project: 409');
($st, undef, $b) = admin(GET => 'definitions/nope');
is($st, 404, 'an unknown project: 404');
is(decode_json($b)->{error}, 'unknown_project', '... unknown_project');

# --- counters before any change ------------------------------------------------
answer($ka->{$_}, 'steady', "c$_") for sort keys %$ka;
my $evals = sub {
    my ($f) = grep { $_->{name} eq 'steady' } @{ status_project('shop')->{flags} };
    return $f->{counters}{evaluations};
};
my $before = $evals->();
cmp_ok($before, '>=', 4, "steady counted $before evaluations");

# --- a dry run ----------------------------------------------------------------
($st, $h, $b) = admin(PUT => 'definitions/shop/flags/dark-mode?dryRun=1', '{"enabled": true, "rolloutPercentage": 80}');
is($st, 200, 'dry run: 200');
is($b, '{"version":2,"added":[],"changed":["dark-mode"],"removed":[],"kept":[],"dryRun":true}', '... the difference it would make');
is($h->{etag}, undef, '... no ETag: nothing was written');
like(on_both($ka, 'dark-mode', 'u1'), qr/ 50$/, '... at 50 %: nothing applied');
(undef, $h) = admin(GET => 'definitions/shop');
is($h->{etag}, '"v1"', '... still version 1');

# --- one flag changed, with If-Match -----------------------------------------------
($st, $h, $b) = admin(PUT => 'definitions/shop/flags/dark-mode', '{"enabled": true, "rolloutPercentage": 80}', 'If-Match: "v1"');
is($st, 200, 'PUT one flag with If-Match "v1": 200');
is($h->{etag}, '"v2"', '... ETag "v2"');
is($b, '{"version":2,"added":[],"changed":["dark-mode"],"removed":[],"kept":[]}', '... version 2, dark-mode changed');
like(on_both($ka, 'dark-mode', 'u1'), qr/ 80$/, '... and answer 80 %');
like($log->(), qr/\[notice\] [^\n]*flags: project "shop" has definitions version 2 by "127\.0\.0\.1": 0 flags added, 1 changed, 0 removed/,
     'one notice line names the version, who and what');
cmp_ok($evals->(), '>=', $before, 'steady (unchanged) kept its counters');
is(status_project('shop')->{definitions}{version}, 2, 'flags_status: version 2');

($st, undef, $b) = admin(PUT => 'definitions/shop/flags/dark-mode', '{"enabled": true, "rolloutPercentage": 10}', 'If-Match: "v1"');
is($st, 412, 'a write on version 1 now: 412');
is(decode_json($b)->{error}, 'version_conflict', '... version_conflict');
like(on_both($ka, 'dark-mode', 'u1'), qr/ 80$/, '... and nothing applied');
($st) = admin(PUT => 'definitions/shop/flags/dark-mode', '{"enabled": true, "rolloutPercentage": 10}', 'If-Match: v2');
is($st, 412, 'If-Match without quotes names no version: 412');

# --- invalid versions ------------------------------------------------------------
($st, undef, $b) = admin(PUT => 'definitions/shop/flags/dark-mode', '{"enabled": true, "rolloutPercentage": 101}');
is($st, 400, 'a percentage of 101: 400');
my $e = decode_json($b);
is($e->{error}, 'invalid_definitions', '... invalid_definitions');
like($e->{message}, qr{^\S+/conf/shop\.json: flag "dark-mode": }, '... the message names the file and the flag, as nginx -t does');
($st, undef, $b) = admin(PUT => 'definitions/shop', '{"flags": [{"name": "x", "enabled": true, "rolloutPercentage": 5, "segments": ["nope"]}]}');
is($st, 400, 'an unknown segment: 400');
like(decode_json($b)->{message}, qr/flag "x": .*nope/, '... naming the flag and the segment');
($st, undef, $b) = admin(PUT => 'definitions/shop', '{"flags": [');
is($st, 400, 'invalid JSON: 400');
is(decode_json($b)->{error}, 'invalid_definitions', '... invalid_definitions');
($st, undef, $b) = admin(PUT => 'definitions/shop', '{"flags": []}' . (' ' x 70000));
is($st, 413, 'over flags_definitions_max_size: 413');
is(decode_json($b)->{error}, 'payload_too_large', '... payload_too_large');
(undef, $h) = admin(GET => 'definitions/shop');
is($h->{etag}, '"v2"', 'still version 2 after the refusals');
(undef, undef, $b) = http_request(GET => '/metrics');
like($b, qr/^flags_definitions_version\{project="shop"\} 2$/m, 'metrics: shop at version 2');
like($b, qr/^flags_definitions_rejected_total\{project="shop",reason="invalid"\} 3$/m, 'metrics: three invalid versions refused');
like($b, qr/^flags_definitions_rejected_total\{project="shop",reason="too_large"\} 1$/m, 'metrics: one too large');
like($b, qr/^flags_definitions_rejected_total\{project="shop",reason="conflict"\} 2$/m, 'metrics: two conflicts');

# --- a changed flag keeps its override ----------------------------------------------
($st) = admin(PUT => 'overrides/shop/risky', '{"rolloutPercentage": 5}');
is($st, 204, 'risky overridden to 5 %');
my $risky5 = on_both($ka, 'risky', 'u3', 'pro');
like($risky5, qr/^o(?:n|ff) 5$/, "risky at 5 % for a pro user ($risky5)");
($st, $h, $b) = admin(PUT => 'definitions/shop/flags/risky?dryRun=1', '{"enabled": true, "rolloutPercentage": 30, "segments": ["beta"]}');
is($b, '{"version":3,"added":[],"changed":["risky"],"removed":[],"kept":[{"flag":"risky","rolledBack":false,"override":{"rolloutPercentage":5}}],"dryRun":true}',
   'the dry run names the override that stays in force');
($st, $h, $b) = admin(PUT => 'definitions/shop/flags/risky', '{"enabled": true, "rolloutPercentage": 30, "segments": ["beta"]}');
is($st, 200, 'risky changed: 200');
is($b, '{"version":3,"added":[],"changed":["risky"],"removed":[],"kept":[{"flag":"risky","rolledBack":false,"override":{"rolloutPercentage":5}}]}',
   '... the answer names the kept override');
is(on_both($ka, 'risky', 'u3', 'pro'), $risky5, '... both workers still answer the 5 % override');
my ($rf) = grep { $_->{name} eq 'risky' } @{ status_project('shop')->{flags} };
is($rf->{rolloutPercentage}, 30, 'flags_status: the new definition (30 %)');
is_deeply($rf->{override}, { rolloutPercentage => 5 }, '... with the override in force');
like($log->(), qr/flags: flag "risky" of project "shop" has a new definition: its override \(rolloutPercentage 5\) is kept/, 'the log names the kept override');
($st) = admin(DELETE => 'overrides/shop/risky');
is($st, 204, 'flags_admin removes the override');
like(on_both($ka, 'risky', 'u3', 'pro'), qr/ 30$/, '... and risky answers its new 30 %');

# --- a changed flag keeps its rollback ----------------------------------------------------
($st) = http_request(POST => '/ingest/errors', body => '{"flagName":"dark-mode","message":"m"}',
                     headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
is($st, 204, 'a report of dark-mode');
like(on_both($ka, 'dark-mode', 'u1'), qr/^off 0$/, '... rolls it back on both workers');
($st, undef, $b) = admin(PUT => 'definitions/shop/flags/dark-mode', '{"enabled": true, "rolloutPercentage": 90}');
is($b, '{"version":4,"added":[],"changed":["dark-mode"],"removed":[],"kept":[{"flag":"dark-mode","rolledBack":true,"override":null}]}',
   'dark-mode changed: the answer names the kept rollback');
like(on_both($ka, 'dark-mode', 'u1'), qr/^off 0$/, '... both workers still answer it rolled back');
my ($df) = grep { $_->{name} eq 'dark-mode' } @{ status_project('shop')->{flags} };
is("$df->{rolloutPercentage} $df->{rolledBack} $df->{rollback}{decidedBy}", '90 1 rule', 'flags_status: the new 90 %, rolled back by the rule');
($st) = admin(DELETE => 'rollbacks/shop/dark-mode');
is($st, 204, 'flags_admin clears the rollback');
like(on_both($ka, 'dark-mode', 'u1'), qr/ 90$/, '... dark-mode serves its new 90 %');
my @ev = grep { $_->{kind} eq 'definition' && $_->{flag} eq '' } @{ decode_json((http_request(GET => '/flags-status'))[2])->{events} };
is_deeply([map { "$_->{by} $_->{who} $_->{detail}" } @ev[0, 1]],
          ['admin 127.0.0.1 version 4: 0 added, 1 changed, 0 removed', 'admin 127.0.0.1 version 3: 0 added, 1 changed, 0 removed'],
          'the event ring: one definition event a version, by the admin');

# --- a flag added, its variable; a flag deleted -----------------------------------------
my ($vst, $vbody) = worker_request($ka->{(sort keys %$ka)[0]}, GET => '/var?u=u1');
like($vbody, qr/^new-one=0 dark=[01]$/, '$flag_new_one: 0');
($st, undef, $b) = admin(PUT => 'definitions/shop/flags/new-one', '{"enabled": true, "rolloutPercentage": 100}');
is($st, 200, 'a flag added: 200');
is($b, '{"version":5,"added":["new-one"],"changed":[],"removed":[],"kept":[]}', '... version 5 adds new-one');
is(on_both($ka, 'new-one', 'u9'), 'on 100', 'both workers answer the new flag, on');
for my $w (sort keys %$ka) {
    my ($s2, $b2) = worker_request($ka->{$w}, GET => '/var?u=u1');
    like($b2, qr/^new-one=1 /, "worker $w: \$flag_new_one reads 1");
}
($st, undef, $b) = http_request(DELETE => '/basic-admin/definitions/shop/flags/steady',
                                headers => ['Authorization: Basic ' . MIME::Base64::encode_base64('alice:secret', '')]);
is($st, 200, 'a flag deleted (by alice, through auth_basic): 200');
is($b, '{"version":6,"added":[],"changed":[],"removed":["steady"],"kept":[]}', '... version 6 removes steady');
is(on_both($ka, 'steady', 'u1'), 'absent', 'both workers: steady is gone');
ok(!grep({ $_->{name} eq 'steady' } @{ status_project('shop')->{flags} }), '... and from flags_status');
unlike((http_request(GET => '/metrics'))[2], qr/flag="steady"/, '... and from the metrics');
($st, undef, $b) = admin(DELETE => 'definitions/shop/flags/steady');
is($st, 404, 'deleting it again: 404');
is(decode_json($b)->{error}, 'unknown_flag', '... unknown_flag');

# --- history, old versions, a revert --------------------------------------------------
(undef, undef, $b) = admin(GET => 'definitions/shop/history');
$hist = decode_json($b)->{versions};
is_deeply([map { $_->{version} } @$hist], [6, 5, 4, 3, 2, 1], 'history: newest first');
is_deeply([@{ $hist->[0] }{qw(by added changed removed)}], ['alice', [], [], ['steady']], '... version 6: by the auth_basic user, what');
is_deeply([@{ $hist->[1] }{qw(by added changed removed)}], ['127.0.0.1', ['new-one'], [], []], '... version 5: by the address, what');
like($log->(), qr/flags: project "shop" has definitions version 6 by "alice": 0 flags added, 0 changed, 1 removed/, '... the log names alice');
($st, $h, $b) = admin(GET => 'definitions/shop/versions/1');
is($st, 200, 'version 1: 200');
is($h->{etag}, '"v1"', '... ETag "v1"');
is($b, $Seed, '... the seed, byte for byte');
($st, undef, $b) = admin(GET => 'definitions/shop/versions/99');
is($st, 404, 'a version never written: 404');
is(decode_json($b)->{error}, 'no_version', '... no_version');
($st, $h, $b) = admin(PUT => 'definitions/shop', $Seed, 'If-Match: "v6"');
is($st, 200, 'revert: version 1 PUT on version 6: 200');
is($b, '{"version":7,"added":["steady"],"changed":["risky","dark-mode"],"removed":["new-one"],"kept":[]}', '... version 7, what changed back');
like(on_both($ka, 'dark-mode', 'u1'), qr/ 50$/, 'dark-mode back at 50 % on both workers');
($st, $h, $b) = admin(PUT => 'definitions/shop', $Seed, 'If-Match: "v7"');
is($b, '{"version":7,"added":[],"changed":[],"removed":[],"kept":[]}', 'the same document again: no new version');
ok(-f "$versions/v7.json" && !-e "$versions/v8.json", 'version 7 is the newest file');

# --- push: an OFREP event stream is told --------------------------------------------------
{
    my $sse = Sse->open('/ofrep/v1/events?token=tok_shop');
    is($sse->{status}, 200, 'an OFREP event stream');
    is($sse->event(0.3), undef, '... quiet before a change');
    ($st) = admin(PUT => 'definitions/shop/flags/dark-mode', '{"enabled": true, "rolloutPercentage": 55}');
    is($st, 200, 'version 8 written');
    like($sse->event(2) // '', qr/^data: \{"type":"refetchEvaluation","etag":"\d+"\}$/, '... the stream is told at its next tick');
    close $sse->{s};
}

# --- reload, seed edited, kill -9, restart ------------------------------------------------
admin(PUT => 'definitions/shop/flags/dark-mode', '{"enabled": true, "rolloutPercentage": 70}');
write_file("$dir/conf/shop.json", $Seed =~ s/"rolloutPercentage": 50/"rolloutPercentage": 20/r);
# a reload is done when two new workers run and no old one accepts
sub is_exiting {
    my ($pid) = @_;
    return (read_file("/proc/$pid/cmdline") // '') =~ /shutting down/
        || $log->() =~ /\b$pid#\d+: gracefully shutting down/;
}
my @old = worker_pids($master);
my $n = () = $log->() =~ /reconfiguring/g;
nginx_signal($master, 'HUP');
ok(wait_for(sub { (() = $log->() =~ /reconfiguring/g) > $n }, 10), 'reloaded');
ok(wait_for(sub {
    my %old = map { $_ => 1 } @old;
    my @w = worker_pids($master);
    return (grep { !$old{$_} } @w) >= 2 && !grep { $old{$_} && !is_exiting($_) } @w;
}, 10), 'two new workers, the old ones shutting down');
like($log->(), qr/project "shop" serves its stored version 9; "\S+shop\.json" differs from it and is not read/, 'a notice: the edited seed is not read');
ok(wait_for(sub { my (undef, $hh) = admin(GET => 'definitions/shop'); ($hh->{etag} // '') eq '"v9"' }, 10), 'after the reload: version 9');
$ka = worker_connections('/flags?userId=u1');
like(on_both($ka, 'dark-mode', 'u1'), qr/ 70$/, 'both new workers answer 70 %');

($st, undef, $b) = admin(PUT => 'definitions/shop/flags/dark-mode', '{"enabled": true, "rolloutPercentage": 35}');
is("$st $b", '200 {"version":10,"added":[],"changed":["dark-mode"],"removed":[],"kept":[]}', 'version 10 written');
my @pids = ($master, worker_pids($master));
kill 'KILL', @pids;
ok(wait_for(sub { !grep { kill 0, $_ } @pids }, 10), 'kill -9 of every nginx process right after the 200');
unlink "$dir/logs/nginx.pid";
$master = nginx_start($dir);
(undef, $h) = admin(GET => 'definitions/shop');
is($h->{etag}, '"v10"', 'after the restart: version 10');
$ka = worker_connections('/flags?userId=u1');
like(on_both($ka, 'dark-mode', 'u1'), qr/ 35$/, '... served by both workers');

nginx_stop($master);
done_testing();
