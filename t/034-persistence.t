# Persistence that says when it fails: nginx -t checks that the worker user
# can write the state directory; an admin change that could not be saved is
# not answered 204; special files are refused; a full disk never tears a
# report line; events are logged at the flags_log_level.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use File::Temp qw(tempdir);
use JSON::PP ();
use POSIX qw(mkfifo);
use Time::HiRes qw(sleep);

my $dir = prefix_dir('persistence');
my $log = sub { read_file("$dir/logs/error.log") // '' };
my $root = $> == 0;

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 2, "rate": 1, "window": 60}},
  {"name": "tuned", "enabled": true, "rolloutPercentage": 100}
]}
_J_

sub conf {
    my (%o) = @_;
    my $conf = nginx_conf(http => <<"_H_", server => <<'_S_');
    flags_project shop token=tok_1 file=shop.json;
    flags_error_log $o{report_log};
    ${\($o{state} // '')}
    ${\($o{extra} // '')}
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_
    $conf =~ s/^user root;$/user $o{user};/m if $o{user};
    write_file("$dir/conf/nginx.conf", $conf);
}

sub report {
    my ($flag, $msg) = @_;
    my ($st, undef, $body) = http_request(POST => '/ingest/errors',
        body => qq({"flagName":"$flag","message":"$msg"}),
        headers => ['Authorization: Bearer tok_1', 'Content-Type: application/json']);
    return wantarray ? ($st, $body) : $st;
}

# --- special files are refused by nginx -t, fast -----------------------------
{
    my $fifo = "$dir/conf/state-fifo";
    mkfifo($fifo, 0600) or die "mkfifo: $!";
    conf(report_log => 'off', state => "flags_state_file $fifo;");
    my $t0 = time;
    my ($rc, $out) = nginx_test($dir);
    isnt($rc, 0, 'a FIFO as the state file fails nginx -t');
    like($out, qr/\[emerg\] .*flags_state_file "\Q$fifo\E" is not a regular file in \Q$dir\E\/conf\/nginx\.conf:\d+/,
         'the message names the file and the directive');
    ok(time - $t0 < 5, 'without hanging');
    unlink $fifo;

    conf(report_log => 'off', state => 'flags_state_file /dev/zero;');
    ($rc, $out) = nginx_test($dir);
    isnt($rc, 0, '/dev/zero as the state file fails nginx -t');
    like($out, qr/flags_state_file "\/dev\/zero" is not a regular file/, 'and says why');
}

# --- the worker user must be able to write the state directory ---------------
SKIP: {
    skip 'needs root to run workers as another user', 8 unless $root;

    my $sd = tempdir('flags-state-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    chmod 0755, $sd;
    # root-owned, as Debian's /var/lib/nginx: the worker user cannot write
    my $group = getgrgid((getpwnam('nobody'))[3]);
    conf(report_log => 'off', state => "flags_state_file $sd/state.json;", user => "nobody $group");
    my ($rc, $out) = nginx_test($dir);
    isnt($rc, 0, 'a state directory the worker user cannot write fails nginx -t');
    like($out, qr/\[emerg\] .*flags_state_file "\Q$sd\E\/state\.json": the worker user "nobody" cannot create files in "\Q$sd\E" in \Q$dir\E\/conf\/nginx\.conf:\d+/,
         'the message names the user, the directory and the line');

    # writable by the worker user: nginx starts; then the directory is
    # taken away while nginx runs
    my ($uid, $gid) = (getpwnam('nobody'))[2, 3];
    chown $uid, $gid, $sd;
    ($rc, $out) = nginx_test($dir);
    is($rc, 0, 'writable by the worker user: nginx -t passes') or diag $out;
    chmod 0755, "$dir", "$dir/logs";
    my $master = nginx_start($dir);
    my ($st, undef, $body) = http_request(PUT => '/flags-admin/overrides/shop/tuned',
                                          body => '{"rolloutPercentage": 10}');
    is($st, 204, 'a saved override is answered 204');
    like(read_file("$sd/state.json"), qr/"flag":"tuned"/, 'and is in the file');

    chown 0, 0, $sd;
    ($st, undef, $body) = http_request(PUT => '/flags-admin/overrides/shop/tuned',
                                       body => '{"enabled": false}');
    is($st, 500, 'an override that cannot be saved is not answered 204');
    like($body, qr/^\{"error":"state_not_saved","message":"the change is in effect on every worker but was not saved to flags_state_file, so a restart would lose it: cannot (?:open|create) \\"\Q$sd\E\/state\.json\.(?:lock|tmp\.\d+)\\": Permission denied"\}$/,
         'the answer says it is in effect but not saved, and why');
    my (undef, undef, $flags) = http_request(GET => '/flags?userId=u', headers => ['Authorization: Bearer tok_1']);
    like($flags, qr/"name":"tuned","enabled":false,"rolloutPercentage":0,/, 'the override is in effect');
    chown $uid, $gid, $sd;
    nginx_stop($master);
}

# --- a full disk never tears a report line ------------------------------------
SKIP: {
    skip 'prlimit is not installed', 12 unless -x '/usr/bin/prlimit';
    # valgrind's own logs would hit the limit, and it runs nginx itself
    skip 'not under valgrind', 12 if $FlagsTest::Valgrind;

    unlink "$dir/logs/error.log";
    conf(report_log => 'logs/reports.log', state => '', extra => 'flags_log_level warn;');
    # every file nginx writes is limited to 3000 bytes: the report log
    # fills up; SIGXFSZ must not kill nginx (ignored across exec)
    local $SIG{XFSZ} = 'IGNORE';
    my $master = nginx_start($dir, wrap => '/usr/bin/prlimit --fsize=3000');

    my (%acked, $failed, $fail_body);
    for my $i (1 .. 40) {
        my $msg = sprintf('report %02d %s', $i, 'x' x 120);
        my ($st, $body) = report('tuned', $msg);
        if ($st == 204) { $acked{$msg} = 1; next }
        ($failed, $fail_body) = ($st, $body);
        last;
    }
    is($failed, 500, 'a report that cannot be written is answered 500');
    is($fail_body, '{"error":"internal_error","message":"the report could not be stored"}', 'with a JSON error');

    my $content = read_file("$dir/logs/reports.log");
    like($content, qr/\n\z/, 'the log ends with a complete line');
    my @lines = split /\n/, $content;
    my @parsed = grep { defined } map { eval { JSON::PP->new->decode($_) } } @lines;
    is(scalar @parsed, scalar @lines, 'every line is whole JSON');
    is_deeply([sort map { $_->{message} } @parsed], [sort keys %acked],
              'exactly the acknowledged reports are in the log');
    like($log->(), qr/\[alert\] .*flags: writing a report to "[^"]*reports\.log" failed: only \d+ of \d+ bytes were written \(file system full or file size limit reached\)/,
         'the short write is logged without a stale errno');

    # the log is rotated: writes go to the new file, complete lines again
    rename "$dir/logs/reports.log", "$dir/logs/reports.log.1";
    nginx_signal($master, 'USR1');
    ok(wait_for(sub { -e "$dir/logs/reports.log" }, 5), 'USR1 reopened the log');
    sleep 0.3;
    is(scalar(report('tuned', 'after rotation')), 204, 'reports are accepted again');
    like(read_file("$dir/logs/reports.log"), qr/\A\{"time":"[^"]+","project":"shop","flagName":"tuned","message":"after rotation"\}\n\z/,
         'as one complete line');

    # flags_log_level warn: the rollback is logged at warn
    is(scalar(report('risky', 'r1')), 204, 'risky report 1');
    is(scalar(report('risky', 'r2')), 204, 'risky report 2');
    nginx_stop($master);
    like($log->(), qr/\[warn\] .*flags: rolled back flag "risky" of project "shop": 2 errors/,
         'flags_log_level warn: the rollback is logged at warn');
}

done_testing();
