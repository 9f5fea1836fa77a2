# flags_log_level's two levels (issue 24): a rollback, by this host's rule
# or a ramp's, is logged at the level (error by default), where a log
# alert on [error] pages; every routine change (a ramp's start, stages
# and end, a stage that holds short of its minRequests, a pause, a
# resume, a cleared rollback, an override set or removed) at routine=
# (notice by default), below Debian's default error_log level.  Two error
# logs at once, as an operator has them: logs/error.log at info (every
# line, with its level) and logs/alerts.log at error (what pages).  Then
# routine= per location, and what nginx -t refuses.  Two workers.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;

my $dir = prefix_dir('log-levels');

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "climb", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 10, "hold": 1}, {"percentage": 50, "hold": 1},
                       {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "manual", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 10, "hold": 3600}, {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "starve", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 10, "hold": 1, "minRequests": 1000}, {"percentage": 100}],
            "maxExtend": 0, "onInsufficient": "rollback", "regression": {"tick": 1}}},
  {"name": "holdit", "enabled": true, "rolloutPercentage": 0,
   "ramp": {"stages": [{"percentage": 10, "hold": 1, "minRequests": 1000}, {"percentage": 100}],
            "maxExtend": 0, "onInsufficient": "hold", "regression": {"tick": 1}}},
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 1, "rate": 1, "window": 60}},
  {"name": "plain", "enabled": true, "rolloutPercentage": 50},
  {"name": "tuned", "enabled": true, "rolloutPercentage": 50}
 ]}
_J_

my $http = <<'_H_';
    flags_project shop token=tok file=shop.json;
    flags_error_log off;
_H_

my $server = <<'_S_';
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /status { flags_status; }
        location /admin/ { flags_admin; allow 127.0.0.1; deny all; }
        location /admin-info/ {
            flags_admin;
            flags_log_level warn routine=info;
            allow 127.0.0.1;
            deny all;
        }
        location /admin-old/ {
            flags_admin;
            flags_log_level error routine=error;
            allow 127.0.0.1;
            deny all;
        }
_S_

# --- 1. what nginx -t takes and refuses --------------------------------------

sub conf_with {
    my ($directive) = @_;
    my $c = nginx_conf(http => $http . ($directive ? "    $directive\n" : ''),
                       server => $server, log_level => 'info');
    # a second log at error: what an alert on [error] reads
    $c =~ s{^(error_log logs/error\.log info;\n)}{$1error_log logs/alerts.log error;\n}m
        or die 'no error_log line in the generated configuration';
    return $c;
}

for my $t (['flags_log_level error routine=notice;', undef, 'the default, written out'],
           ['flags_log_level info;', undef, 'info alone (routine= follows it down)'],
           ['flags_log_level warn routine=warn;', undef, 'routine= as high as the level'],
           ['flags_log_level warn routine=error;',
            qr/\[emerg\] [^\n]*"routine=error" is above the rollbacks' level "warn": routine changes would log above rollbacks in \S+nginx\.conf:\d+/,
            'routine= above the level'],
           ['flags_log_level error routine=debug;',
            qr/\[emerg\] [^\n]*invalid value "routine=debug" \(expected info, notice, warn or error\) in /,
            'routine= of another level name'],
           ['flags_log_level error notice;',
            qr/\[emerg\] [^\n]*invalid parameter "notice" \(expected routine=level\) in /,
            'a second level without routine='],
           ['flags_log_level crit;',
            qr/\[emerg\] [^\n]*invalid value "crit" \(expected info, notice, warn or error\) in /,
            'a level above error'],
           ["flags_log_level warn;\n    flags_log_level error;",
            qr/\[emerg\] [^\n]*"flags_log_level" directive is duplicate in /, 'twice in one block'])
{
    my ($directive, $refused, $name) = @$t;
    write_file("$dir/conf/nginx.conf", conf_with($directive));
    my ($rc, $out) = nginx_test($dir);
    if ($refused) {
        isnt($rc, 0, "nginx -t refuses $name");
        like($out, $refused, '... and says why');
    } else {
        is($rc, 0, "nginx -t takes $name") or diag $out;
    }
}

# --- 2. the default: rollbacks at error, the rest at notice -------------------

write_file("$dir/conf/nginx.conf", conf_with(''));
my $master = nginx_start($dir);

sub status {
    my (undef, undef, $b) = keepalive_request(GET => '/status');
    my $j = eval { decode_json($b) } or return {};
    return { map { $_->{name} => $_ } @{ $j->{projects}[0]{flags} } };
}

sub admin {
    my ($method, $path, $body) = @_;
    my ($st) = keepalive_request($method, $path, body => $body,
                                 headers => [$body ? 'Content-Type: application/json' : ()]);
    return $st;
}

ok(wait_for(sub { my $s = status();
                  ($s->{climb}{ramp}{state} // '') eq 'done'
                  && $s->{starve}{rolledBack}
                  && $s->{holdit}{ramp}{stalled} }, 15),
   'climb ramped to 100 %, starve was rolled back by its ramp, holdit holds');

my ($st) = keepalive_request(GET => '/flags?userId=u1', headers => ['Authorization: Bearer tok']);
is($st, 200, 'an evaluation');
($st) = keepalive_request(POST => '/ingest/errors', body => '{"flagName":"risky","message":"m"}',
                          headers => ['Authorization: Bearer tok', 'Content-Type: application/json']);
is($st, 204, 'a report of risky');
ok(wait_for(sub { status()->{risky}{rolledBack} }, 5), 'risky is rolled back by the rule');

is(admin(DELETE => '/admin/rollbacks/shop/risky'), 204, 'its rollback cleared');
is(admin(PUT => '/admin/overrides/shop/plain', '{"enabled": false}'), 204, 'an override set');
is(admin(DELETE => '/admin/overrides/shop/plain'), 204, '... and removed');
is(admin(PUT => '/admin/ramps/shop/manual', '{"action":"pause"}'), 204, 'a ramp paused');
is(admin(PUT => '/admin/ramps/shop/manual', '{"action":"resume"}'), 204, '... and resumed');
is(admin(PUT => '/admin-info/overrides/shop/tuned', '{"rolloutPercentage": 20}'), 204,
   'an override where routine=info');
is(admin(DELETE => '/admin-old/overrides/shop/tuned'), 204, 'one where routine=error');

nginx_stop($master);

# "[level] flags: ..." of each of the module's lines, its request's
# context cut
sub flags_lines {
    my ($file) = @_;
    return map { s{^\S+ \S+ \[(\w+)\] \d+#\d+: (?:\*\d+ )?(flags: .*?)(?:, client: .*)?$}{[$1] $2}r }
           grep { /\] \d+#\d+: (?:\*\d+ )?flags: / } split /\n/, read_file("$dir/logs/$file") // '';
}
my @all = flags_lines('error.log');
my @alerts = flags_lines('alerts.log');

my @expect = (
    [notice => 'ramp of flag "climb" of project "shop" started at stage 0 of 3 (10%)', 'a ramp\'s start'],
    [notice => 'ramp of flag "climb" of project "shop" advanced to stage 1 of 3 (50%)', 'a ramp\'s step'],
    [notice => 'ramp of flag "climb" of project "shop" is done at stage 2 of 3 (100%)', 'a ramp\'s end'],
    [notice => 'ramp of flag "holdit" of project "shop" holds at stage 0: 0 of its 1000 on evaluations after hold and maxExtend (onInsufficient "hold")',
     'a stage that holds short of its minRequests'],
    [error => 'rolled back flag "starve" of project "shop": its ramp\'s stage 0 had 0 of its 1000 on evaluations after hold and maxExtend (onInsufficient "rollback")',
     'a ramp\'s rollback'],
    [error => 'rolled back flag "risky" of project "shop": 1 errors and 1 enabled evaluations in 60 s from 1 distinct sources (min_errors=1 rate=1% min_sources=1; decided by this host\'s rule)',
     'a rollback by this host\'s rule'],
    [notice => 'rollback cleared for flag "risky" of project "shop"', 'a cleared rollback'],
    [notice => 'override set for flag "plain" of project "shop": enabled false', 'an override set'],
    [notice => 'override removed for flag "plain" of project "shop"', 'an override removed'],
    [notice => 'ramp of flag "manual" of project "shop" paused at stage 0 of 2 (10%)', 'a pause'],
    [notice => 'ramp of flag "manual" of project "shop" resumed at stage 0 of 2 (10%)', 'a resume'],
    [info => 'override set for flag "tuned" of project "shop": rolloutPercentage 20', 'routine=info: an override at info'],
    [error => 'override removed for flag "tuned" of project "shop"', 'routine=error: an override at error, as before issue 24'],
);

for my $e (@expect) {
    my ($level, $text, $name) = @$e;
    my @got = grep { /^\[\w+\] flags: \Q$text\E$/ } @all;
    is_deeply(\@got, ["[$level] flags: $text"], "$name: one line, at $level")
        or diag explain [grep { index($_, substr($text, 0, 30)) >= 0 } @all];
}

# what an alert on [error] sees: the two rollbacks and the one location
# that asked for routine=error, nothing of the ramps' steps, the resume,
# the clear or the overrides
is_deeply(\@alerts,
          [map { "[error] flags: $expect[$_][1]" } 4, 5, 12],
          'the log at error holds the rollbacks only (and routine=error\'s line)')
    or diag explain \@alerts;

unlike(read_file("$dir/logs/error.log") // '', qr/\[(?:alert|crit|emerg)\]/, 'no alert in the log');

done_testing();
