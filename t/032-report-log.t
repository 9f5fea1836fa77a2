# The report log (flags_error_log): created 0640 because reports hold
# personal data, at start and when USR1 reopens a rotated log; an existing
# file keeps its mode; a file that cannot be opened fails nginx -t naming
# the directive and its line; without the directive the log goes beside
# nginx's compiled-in access log, so a prefix without logs/ is fine.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use File::Basename qw(dirname);
use File::Path qw(remove_tree);

umask 022;

my $dir = prefix_dir('report-log');
write_file("$dir/conf/p.json", '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100}]}');

sub mode {
    my @st = stat $_[0];
    return @st ? sprintf('%04o', $st[2] & 07777) : 'missing';
}

sub line_of {
    my ($conf, $re) = @_;
    my @lines = split /\n/, $conf;
    my ($n) = grep { $lines[$_ - 1] =~ $re } 1 .. @lines;
    return $n;
}

sub report {
    my ($msg) = @_;
    my ($st) = http_request(POST => '/ingest/errors', body => qq({"flagName":"a","message":"$msg"}),
                            headers => ['Authorization: Bearer tok', 'Content-Type: application/json']);
    return $st;
}

my $log = "$dir/logs/reports.log";
my $errlog = sub { read_file("$dir/logs/error.log") // '' };

# --- a new report log is 0640: at nginx -t, at start, after USR1 -----------
write_file("$dir/conf/nginx.conf", nginx_conf(
    http => "    flags_project p token=tok file=p.json;\n    flags_error_log logs/reports.log;\n",
    server => "        location = /ingest/errors { flags_ingest_errors; }"));

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'nginx -t passes') or diag $out;
is(mode($log), '0640', 'nginx -t creates a missing report log 0640');

unlink $log;
my $pid = nginx_start($dir);
is(mode($log), '0640', 'a start creates it 0640');
is(report('before'), 204, 'a report is accepted');

rename $log, "$log.1" or die "rename: $!";
my $reopened = () = $errlog->() =~ /reopening logs/g;
nginx_signal($pid, 'USR1');
ok(wait_for(sub { (() = $errlog->() =~ /reopening logs/g) >= $reopened + 3 }, 10),
   'master and both workers reopened the logs');
is(mode($log), '0640', 'the log created at reopen is 0640');
is(report('after'), 204, 'a report after the reopen is accepted');
like(read_file($log) // '', qr/\A\{[^\n]*"message":"after"\}\n\z/, 'and lands in the new file');
like(read_file("$log.1") // '', qr/"message":"before"/, 'the rotated file kept the earlier one');
unlike($errlog->(), qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg');
nginx_stop($pid);

# --- an existing file keeps its mode -----------------------------------------
unlink $log, "$log.1";
write_file($log, '');
chmod 0644, $log;
($rc, $out) = nginx_test($dir);
is($rc, 0, 'nginx -t passes with an existing log') or diag $out;
is(mode($log), '0644', 'an existing log keeps the mode its owner gave it');

# --- a log that cannot be opened fails nginx -t at the directive ------------
my $conf = nginx_conf(
    http => "    flags_project p token=tok file=p.json;\n    flags_error_log no/such/dir/reports.log;\n",
    server => '');
write_file("$dir/conf/nginx.conf", $conf);
my $line = line_of($conf, qr/^\s*flags_error_log /);
($rc, $out) = nginx_test($dir);
isnt($rc, 0, 'a report log in a missing directory fails nginx -t');
like($out, qr{\[emerg\] (?:\d+#\d+: )?flags_error_log "\Q$dir\E/no/such/dir/reports\.log" cannot be opened: No such file or directory \(set flags_error_log to a writable file or "off"\) in \Q$dir\E/conf/nginx\.conf:$line\n},
     'the message names the file, the reason, the way out and the line') or diag $out;

# --- the default: beside the compiled-in access log, no logs/ needed ---------
# The default is a system path (on Debian /var/log/nginx/flags-errors.log),
# where a test must not write: nginx -t runs in a mount namespace of its
# own, with a directory of this test's bound over the default's directory.
# Where no namespace can be made (not root, no unshare), the check that
# creates the file is skipped; a missing directory is checked as it is.
my $default = default_report_log();
my $default_dir = dirname($default);
my $ns_ok = $> == 0 && system('env -u LD_PRELOAD unshare -m true >/dev/null 2>&1') == 0;
SKIP: {
    skip "nginx's compiled-in access log is relative ($default)", 3 unless $default =~ m{^/};
    skip "$default_dir exists and no mount namespace can hide it (not root or no unshare)", 3
        if -d $default_dir && !$ns_ok;
    $conf = nginx_conf(http => "\n    flags_project p token=tok file=p.json;\n", server => '',
                       default_report_log => 1);
    unlike($conf, qr/flags_error_log/, 'the configuration has no flags_error_log');
    $conf =~ s{error_log logs/error\.log}{error_log stderr};
    $conf =~ s{pid logs/nginx\.pid}{pid nginx.pid};
    write_file("$dir/conf/nginx.conf", $conf);
    remove_tree("$dir/logs");
    if (-d $default_dir) {
        # the default's directory, as this test's own: an empty one
        my $own = "$dir/default-log-dir";
        remove_tree($own);
        mkdir $own or die "mkdir $own: $!";
        my $preload = $ENV{LD_PRELOAD} // '';
        $out = `env -u LD_PRELOAD unshare -m sh -c 'mount --bind "\$1" "\$2" && exec env \${5:+LD_PRELOAD=\$5} "\$3" -p "\$4/" -c conf/nginx.conf -t' sh '$own' '$default_dir' '$FlagsTest::Binary' '$dir' '$preload' 2>&1`;
        $rc = $? >> 8;
        is($rc, 0, 'no flags_error_log and no logs/ in the prefix: nginx -t passes') or diag $out;
        (my $name = $default) =~ s{.*/}{};
        is(mode("$own/$name"), '0640', "the default report log is $default, created 0640");
    } else {
        $line = line_of($conf, qr/^\s*flags_project /);
        ($rc, $out) = nginx_test($dir);
        isnt($rc, 0, "the default's directory is missing: nginx -t fails");
        like($out, qr{the default flags_error_log "\Q$default\E" cannot be opened: No such file or directory \(set flags_error_log to a writable file or "off"\) in \Q$dir\E/conf/nginx\.conf:$line\n},
             'the message points at the first flags_project') or diag $out;
    }
}

done_testing();
