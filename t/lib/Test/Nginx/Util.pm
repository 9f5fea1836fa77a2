package Test::Nginx::Util;

# The nginx side of the project's small stand-in for OpenResty's
# Test::Nginx: server-root layout, nginx.conf generation, starting and
# stopping nginx, reading the error log, and the loop over test blocks.
# The HTTP client and the response checks live in Test::Nginx::Socket.
#
# Why this exists: the real Test::Nginx is not packaged in Debian and CPAN
# is out of reach, so ./build.sh test puts t/lib on @INC only when the real
# module is missing.  The .t files must behave the same under both, so the
# behaviour here follows the real module's documented semantics; it is an
# independent implementation of the subset the suite uses.

use strict;
use warnings;

use base 'Exporter';

use File::Path qw(make_path remove_tree);
use File::Spec ();
use IO::Socket::INET ();
use List::Util qw(shuffle);
use POSIX qw(SIGQUIT SIGTERM SIGKILL WNOHANG);
use Scalar::Util qw(looks_like_number);
use Test::More ();
use Test::LongString ();
use Text::ParseWords qw(shellwords);
use Time::HiRes qw(sleep time);

our $VERSION = '0.01';

our @EXPORT = qw(
    $ServerPort $ServerPortForClient $ServerAddr $ServerName $ServRoot
    $PidFile $ConfFile $HtmlDir $ErrLogFile $NginxVersion $RepeatEach
    $NoLongString $RunTestHelper $CheckErrorLog
    run_tests bail_out is_str expand_env_in_text parse_time parse_headers
    error_log_data trim sleep_time timeout
    repeat_each workers worker_connections master_on master_off
    master_process_enabled no_shuffle no_long_string log_level
    no_root_location env_to_nginx add_block_preprocessor config_preamble
    server_port server_port_for_client server_addr server_name server_root
    html_dir check_accum_error_log add_cleanup_handler
    add_test_cleanup_handler slow_timeout
);

# ---- settings (env first, then the helper functions below) -------------

our $NginxBinary         = $ENV{TEST_NGINX_BINARY} || 'nginx';
our $LoadModules         = $ENV{TEST_NGINX_LOAD_MODULES} // '';
our $ServerPort          = $ENV{TEST_NGINX_SERVER_PORT} || $ENV{TEST_NGINX_PORT} || 1984;
our $ServerPortForClient = $ENV{TEST_NGINX_CLIENT_PORT} || $ServerPort;
our $ServerAddr          = '127.0.0.1';
our $ServerName          = 'localhost';
our $Timeout             = $ENV{TEST_NGINX_TIMEOUT} || 3;
our $LogLevel            = $ENV{TEST_NGINX_LOG_LEVEL} || 'debug';
our $MasterProcessEnabled = $ENV{TEST_NGINX_MASTER_PROCESS} || 'off';
our $Workers             = 1;
our $WorkerConnections   = 64;
our $WorkerUser          = $ENV{TEST_NGINX_WORKER_USER};
our $RepeatEach          = 1;
our $NoShuffle           = $ENV{TEST_NGINX_NO_SHUFFLE} || 0;
our $NoRootLocation      = 0;
our $NoLongString;
our $CheckAccumErrLog    = $ENV{TEST_NGINX_CHECK_ACCUM_ERR_LOG};
our $Verbose             = $ENV{TEST_NGINX_VERBOSE};
# The basic pause used around nginx start-up and before reading logs
# (nginx writes some lines after it has already answered the client).
our $TestNginxSleep      = $ENV{TEST_NGINX_SLEEP} || 0.015;
our $ConfigPreamble      = '';

# TEST_NGINX_USE_VALGRIND: a number (1) runs nginx under memcheck with the
# real module's options; any other value is the valgrind option string
# itself.  As in the real module nginx then stays in the foreground
# (daemon off, our child, in a process group of its own); master_process
# keeps its setting, so workers are forked under valgrind and checked too.
# Must_die blocks run without valgrind.  Unlike the real module (which only
# lets valgrind print to stderr), valgrind writes to logs/valgrind.PID.log
# and every block whose nginx produced a report fails.
our $UseValgrind         = $ENV{TEST_NGINX_USE_VALGRIND};
our $ValgrindExitOnFirstErr = $ENV{TEST_NGINX_VALGRIND_EXIT_ON_FIRST_ERR};
# Ours, not the real module's: how much slower nginx is under valgrind.
# The runner's own waits (start, stop, client idle timeout, connect retries)
# are multiplied by it; what a test asserts is never changed.
our $ValgrindSlowdown    = $ENV{TEST_NGINX_VALGRIND_SLOWDOWN} || 10;
our $DaemonEnabled       = $UseValgrind ? 'off' : 'on';
our $ChildPid;            # under valgrind: the foreground nginx we forked
our (@EnvToNginx, @BlockPreprocessors, @CleanupHandlers, @TestCleanupHandlers);

# Hooks filled in by Test::Nginx::Socket (it knows how to talk HTTP).
our ($RunTestHelper, $CheckErrorLog);

our $NginxVersion;        # canonical, e.g. 1.022001 for 1.22.1
our $RandPorts = {};      # $TEST_NGINX_RAND_PORT_N values of the current block
our $ErrLogFilePos = 0;   # where the next error_log_data() starts reading
our $StartedPid;          # the nginx master this run started (for END)
our $PrevConfig;          # a block without --- config reuses the running nginx

our $ServRoot = File::Spec->rel2abs($ENV{TEST_NGINX_SERVROOT} || 't/servroot');
$ENV{TEST_NGINX_SERVER_ROOT} = $ServRoot;    # the real module exports this one

our $LogDir     = "$ServRoot/logs";
our $ErrLogFile = "$LogDir/error.log";
our $AccLogFile = "$LogDir/access.log";
our $HtmlDir    = "$ServRoot/html";
our $ConfDir    = "$ServRoot/conf";
our $ConfFile   = "$ConfDir/nginx.conf";
our $PidFile    = "$LogDir/nginx.pid";

# Getter/setter helpers used by .t files.
sub repeat_each (@)       { $RepeatEach = shift if @_; $RepeatEach }
sub workers (@)           { $Workers = shift if @_; $Workers }
sub worker_connections (@) { $WorkerConnections = shift if @_; $WorkerConnections }
sub log_level (@)         { $LogLevel = shift if @_; $LogLevel }
sub timeout (@)           { $Timeout = shift if @_; $Timeout }
sub server_port (@)       { $ServerPort = shift if @_; $ServerPort }
sub server_port_for_client (@) { $ServerPortForClient = shift if @_; $ServerPortForClient }
sub server_addr (@)       { $ServerAddr = shift if @_; $ServerAddr }
sub server_name (@)       { $ServerName = shift if @_; $ServerName }
sub server_root ()        { $ServRoot }
sub html_dir ()           { $HtmlDir }
sub sleep_time ()         { $TestNginxSleep }
# A wait of the runner itself (never a test's expectation), stretched when
# nginx runs under valgrind.
sub slow_timeout ($)      { $UseValgrind ? $_[0] * $ValgrindSlowdown : $_[0] }
sub master_on ()          { $MasterProcessEnabled = 'on' }
sub master_off ()         { $MasterProcessEnabled = 'off' }
sub no_shuffle ()         { $NoShuffle = 1 }
sub no_long_string ()     { $NoLongString = 1 }
sub no_root_location ()   { $NoRootLocation = 1 }
sub check_accum_error_log () { $CheckAccumErrLog = 1 }
sub config_preamble ($)   { $ConfigPreamble = shift }
sub add_block_preprocessor (&) { unshift @BlockPreprocessors, shift }
sub add_cleanup_handler ($)    { unshift @CleanupHandlers, shift }
sub add_test_cleanup_handler ($) { unshift @TestCleanupHandlers, shift }

sub master_process_enabled (@) {
    $MasterProcessEnabled = $_[0] ? 'on' : 'off' if @_;
    return $MasterProcessEnabled;
}

sub env_to_nginx (@) {
    die "env_to_nginx: no variable names given\n" unless @_;
    for my $v (@_) {
        die "env_to_nginx: bad variable name: $v\n"
            if $v !~ /^[A-Za-z_]/ || $v =~ /\n/;
        push @EnvToNginx, $v;
    }
}

sub bail_out (@) {
    cleanup();
    Test::More::BAIL_OUT(join '', @_);
}

# String comparison with a readable diff for long bodies, or a regex match
# when the expectation came out of an eval as qr//.
sub is_str (@) {
    my ($got, $want, $desc) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    return Test::More::like($got, $want, $desc) if ref $want eq 'Regexp';
    return Test::More::is($got, $want, $desc) if $NoLongString;
    return Test::LongString::is_string($got, $want, $desc);
}

# "500ms", "2s" or a plain number of seconds.
sub parse_time ($) {
    my $t = shift;
    return undef unless defined $t;
    $t =~ s/^\s+|\s+$//g;
    return $1 / 1000 if $t =~ /^([\d.]+)ms$/;
    return $1 if $t =~ /^([\d.]+)s$/;
    return $t;
}

sub trim ($) {
    my $s = shift;
    return undef unless defined $s;
    $s =~ s/^\s+|\s+$//g;
    $s =~ s/\s+/ /g;
    return $s;
}

# "Name: value" lines; "!Name" means the header must be absent (undef).
# Returns an ordered list of [name, value] pairs.
sub parse_headers ($) {
    my @out;
    for my $line (split /\n/, shift // '') {
        $line =~ s/^\s+|\s+$//g;
        next if $line eq '';
        if ($line =~ s/^!\s*//) {
            push @out, [$line, undef];
        } else {
            my ($k, $v) = split /\s*:\s*/, $line, 2;
            push @out, [$k, $v // ''];
        }
    }
    return \@out;
}

# $TEST_NGINX_FOO in config text comes from the environment; a missing
# variable is a broken test, so stop rather than write a bad config.
sub expand_env_in_text ($$;$) {
    my ($text, $name) = @_;
    return $text unless defined $text && !ref $text;
    $text =~ s{\$(TEST_NGINX_[_A-Z0-9]+)}{ env_value($1, $name) }ge;
    return $text;
}

my %warned_unportable;

sub env_value {
    my ($var, $name) = @_;
    if ($var =~ /^TEST_NGINX_RAND_PORT_\d+$/) {
        return $RandPorts->{$var} //= free_port($name);
    }
    return $ENV{$var} if defined $ENV{$var};
    # Conveniences the real module does not offer: with it these names make
    # the test bail out unless exported by the caller, so say so once.
    my %extra = (TEST_NGINX_HTML_DIR => $HtmlDir, TEST_NGINX_SERVROOT => $ServRoot);
    if (exists $extra{$var}) {
        Test::More::diag("WARNING: \$$var is not set by the real Test::Nginx; "
                         . "use \$TEST_NGINX_SERVER_ROOT instead")
            unless $warned_unportable{$var}++;
        return $extra{$var};
    }
    bail_out("$name - environment variable $var is not defined");
}

sub free_port {
    my $name = shift;
    my %taken = ($ServerPort => 1, map { $_ => 1 } values %$RandPorts);
    for (1 .. 1000) {
        my $p = 10000 + int rand 50000;
        next if $taken{$p};
        my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $p,
                                      Proto => 'tcp', Listen => 1, ReuseAddr => 1)
            or next;
        close $s;
        return $p;
    }
    bail_out("$name - no free port found for \$TEST_NGINX_RAND_PORT_*");
}

# ---- process handling ---------------------------------------------------

# kill(0) alone says yes for a zombie; nginx daemons are reparented, and in
# containers the new parent may not reap them promptly.
sub is_running ($) {
    my $pid = shift;
    return 0 unless $pid && kill 0, $pid;
    if (open my $st, '<', "/proc/$pid/stat") {
        my $line = <$st> // '';
        return 0 if $line =~ /^\d+ \(.*\) Z/s;
    }
    return 1;
}

# A stale pid file may name an unrelated process by now: only signal
# processes that look like nginx.
sub looks_like_nginx ($) {
    my $pid = shift;
    open my $in, '<', "/proc/$pid/cmdline" or return 1;   # no /proc: trust it
    local $/;
    my $cmd = <$in> // '';
    return $cmd =~ /nginx/;
}

sub read_pid_file () {
    open my $in, '<', $PidFile or return undef;
    my $pid = <$in> // '';
    $pid =~ s/\s+//g;
    return $pid =~ /^\d+$/ ? $pid : undef;
}

# Graceful stop (QUIT lets workers finish, and the module's exit hooks run),
# then TERM, then KILL if nginx does not go away in time.
# Under valgrind the wait covers the leak check of every process (the
# master exits after its workers), and the forced steps signal the whole
# process group, so no worker is left behind.
sub stop_nginx ($$) {
    my ($pid, $name) = @_;
    my $child = defined $ChildPid && $ChildPid == $pid;
    if (is_running($pid)) {
        for my $step ([SIGQUIT, slow_timeout($Timeout)], [SIGTERM, slow_timeout(2)],
                      [SIGKILL, 2]) {
            my ($sig, $wait) = @$step;
            if ($sig != SIGQUIT) {
                warn "$name - nginx $pid did not exit, sending signal $sig\n";
            }
            kill $sig, ($child && $sig != SIGQUIT ? -$pid : $pid);
            my $deadline = time + $wait;
            while (is_running($pid) && time < $deadline) {
                waitpid($pid, WNOHANG);
                sleep 0.02;
            }
            last unless is_running($pid);
        }
    }
    if ($child) {
        waitpid($pid, WNOHANG);
        undef $ChildPid;
    }
    undef $StartedPid if defined $StartedPid && $StartedPid == $pid;
}

sub stop_previous_nginx ($) {
    my $name = shift;
    my $pid = read_pid_file();
    stop_nginx($pid, $name) if $pid && is_running($pid) && looks_like_nginx($pid);
    unlink $PidFile;
}

sub nginx_version () {
    my $out = `$NginxBinary -v 2>&1`;
    return undef unless defined $out && $out =~ m{nginx/(\d+)\.(\d+)\.(\d+)};
    return canon_version($1, $2, $3);
}

sub canon_version { sprintf "%d.%03d%03d", @_[0 .. 2] }

# ---- server root and configuration -------------------------------------

sub setup_server_root () {
    # Only the directories we create are removed, so a mistyped
    # TEST_NGINX_SERVROOT cannot wipe someone's data.
    remove_tree($ConfDir, $HtmlDir, $LogDir, "$ServRoot/cache",
                glob("$ServRoot/*_temp"), glob("$ServRoot/*_cache"));
    make_path($ServRoot, $LogDir, $HtmlDir, $ConfDir);
    open my $out, '>', "$HtmlDir/index.html"
        or bail_out("cannot write $HtmlDir/index.html: $!");
    print $out '<html><head><title>It works!</title></head><body>It works!</body></html>';
    close $out;
}

sub write_user_files ($) {
    my $block = shift;
    my $name  = $block->name;
    my $files = $block->user_files;
    return unless $files;

    unless (ref $files) {
        # ">>> path [touch -t date]" starts a file, the lines below are its body
        my @list;
        for my $line (split /^/, $files) {
            if ($line =~ /^>>> (\S+)(?:\s+(.+))?/) {
                push @list, [$1, '', $2];
            } elsif (@list) {
                $list[-1][1] .= $line;
            }
        }
        $files = \@list;
    }
    bail_out("$name - --- user_files must be text or an array") if ref $files ne 'ARRAY';

    for my $f (@$files) {
        my ($fname, $body, $date) = @$f;
        my $path = $fname =~ m{^/} ? $fname : "$HtmlDir/$fname";
        (my $dir = $path) =~ s{/[^/]*$}{};
        make_path($dir) if length $dir && !-d $dir;
        open my $out, '>', $path or bail_out("$name - cannot write $path: $!");
        binmode $out;
        print $out expand_env_in_text($body // '', $name);
        close $out;
        if ($date) {
            local $ENV{TZ} = 'GMT';
            system('touch', '-t', $date, $path) == 0
                or bail_out("$name - touch -t $date $path failed");
        }
    }
}

sub write_config_file ($$) {
    my ($block, $config) = @_;
    my $name = $block->name;

    my $http_config = expand_env_in_text($block->http_config // '', $name);
    my $main_config = expand_env_in_text($block->main_config // '', $name);
    my $post_main   = expand_env_in_text($block->post_main_config // '', $name);
    my $server_name = $block->server_name // $ServerName;
    $server_name =~ s/(['\\])/\\$1/g;

    my @lines;
    push @lines, "load_module $_;" for grep { length } split /\s+/, $LoadModules;
    # nginx drops privileges to "nobody" when started as root; the workers
    # would then be unable to write the logs under the test server root.
    if (defined $WorkerUser) {
        push @lines, "user $WorkerUser;";
    } elsif ($> == 0) {
        push @lines, 'user root;';
    }
    push @lines,
        "worker_processes $Workers;",
        "daemon $DaemonEnabled;",
        "master_process $MasterProcessEnabled;",
        "error_log $ErrLogFile $LogLevel;",
        "pid $PidFile;";
    push @lines, map { "env $_;" } qw(LD_PRELOAD LD_LIBRARY_PATH ASAN_OPTIONS UBSAN_OPTIONS);
    push @lines, map { /\s/ ? "env '$_';" : "env $_;" } @EnvToNginx;

    # Temp paths under the server root: the packaged defaults point into
    # /var/lib/nginx, which a non-root test run cannot write.
    my $built = `$NginxBinary -V 2>&1` // '';
    my @temp;
    for my $kind (qw(client_body proxy fastcgi scgi uwsgi)) {
        next if $built =~ /--without-http_${kind}_module/;
        next if $http_config =~ /\b${kind}_temp_path\b/;
        push @temp, "${kind}_temp_path $ServRoot/${kind}_temp;";
    }

    my $root_location = $NoRootLocation ? '' : <<"EOT";
        location / {
            root $HtmlDir;
            index index.html index.htm;
        }
EOT

    my $conf = join("\n", @lines) . "\n\n" . <<"EOT";
$main_config

events {
    accept_mutex off;
    worker_connections $WorkerConnections;
}

http {
    access_log $AccLogFile;
    @temp
    default_type text/plain;
    keepalive_timeout 68000ms;

$http_config

    server {
        listen $ServerPort;
        server_name '$server_name';
        client_max_body_size 30M;

$ConfigPreamble
        # the block's --- config
$config

$root_location    }
}

$post_main
EOT

    open my $out, '>', $ConfFile or bail_out("cannot write $ConfFile: $!");
    print $out $conf;
    close $out;
}

# ---- starting nginx ------------------------------------------------------

sub nginx_command () {
    my @cmd = ($NginxBinary, '-p', "$ServRoot/", '-c', $ConfFile);
    # -e (1.19.5+) sends start-up errors to the test's error.log too, which
    # is where --- must_die + --- error_log look for them.
    splice @cmd, 1, 0, '-e', $ErrLogFile
        if defined $NginxVersion && $NginxVersion >= 1.019005;
    return @cmd;
}

# Runs the nginx command line and returns its wait status.  stdout goes to
# /dev/null like the real module; stderr passes through to the test output.
sub run_nginx_command () {
    my @cmd = nginx_command();
    warn "running: @cmd\n" if $Verbose;
    my $pid = fork;
    bail_out("fork failed: $!") unless defined $pid;
    if ($pid == 0) {
        open STDOUT, '>', '/dev/null';
        { no warnings 'exec'; exec { $cmd[0] } @cmd; }
        print STDERR "cannot run $cmd[0]: $!\n";
        POSIX::_exit(127);           # no END blocks in the child
    }
    waitpid($pid, 0);
    return $?;
}

# ---- valgrind --------------------------------------------------------------

# The suppression file: ./valgrind.suppress as the real module looks for
# it, else the project's t/valgrind.suppress.
sub valgrind_suppressions () {
    my $here = File::Spec->catfile((File::Spec->splitpath(File::Spec->rel2abs(__FILE__)))[0, 1]);
    for my $f ('valgrind.suppress', 't/valgrind.suppress',
               File::Spec->catfile($here, '..', '..', '..', 'valgrind.suppress')) {
        return File::Spec->rel2abs($f) if -f $f;
    }
    return undef;
}

my $ValgrindHelp;

sub valgrind_options () {
    my @opts;
    if ($UseValgrind =~ /^\d+$/) {
        # the real module's memcheck defaults
        @opts = qw(--num-callers=100 -q --tool=memcheck --leak-check=full
                   --keep-debuginfo=yes --show-possibly-lost=no);
        if ($ValgrindExitOnFirstErr) {
            $ValgrindHelp //= `valgrind --help 2>&1` // '';
            if ($ValgrindHelp =~ /exit-on-first-error/) {
                push @opts, qw(--exit-on-first-error=yes --error-exitcode=1);
            } else {
                warn "WARNING: valgrind does not support --exit-on-first-error\n";
            }
        }
        push @opts, '--gen-suppressions=all';
        my $supp = valgrind_suppressions();
        push @opts, "--suppressions=$supp" if defined $supp;
    } else {
        @opts = ('-q', shellwords($UseValgrind));
    }
    # one file per process (forked workers get their own), read after the block
    push @opts, "--log-file=$LogDir/valgrind.%p.log"
        unless grep { /^--log-(?:file|fd|socket)\b/ } @opts;
    return @opts;
}

# Starts nginx under valgrind as our child, in the foreground.
sub spawn_valgrind_nginx ($) {
    my $name = shift;
    bail_out("$name - TEST_NGINX_USE_VALGRIND is set but valgrind is not in PATH")
        unless can_run('valgrind');
    my @cmd = ('valgrind', valgrind_options(), nginx_command());
    warn "running: @cmd\n" if $Verbose;
    my $pid = fork;
    bail_out("fork failed: $!") unless defined $pid;
    if ($pid == 0) {
        setpgrp(0, 0);       # so a forced stop can take the workers along
        open STDOUT, '>', '/dev/null';
        { no warnings 'exec'; exec { $cmd[0] } @cmd; }
        print STDERR "cannot run $cmd[0]: $!\n";
        POSIX::_exit(127);
    }
    $ChildPid = $pid;
    return $pid;
}

# The reports in a valgrind log: each is a header line ("Invalid read of
# size 4", "N bytes in M blocks are definitely lost ...", "Process
# terminating with ...") with at least one stack, plus the suppression
# that --gen-suppressions printed for it.  Lines without a stack (warnings
# about ioctls, large address ranges) come back as notes.
sub parse_valgrind_log ($) {
    my $text = shift;
    my (@reports, @notes, $cur);
    my $close = sub {
        return unless $cur;
        if ($cur->{text} =~ /^==\d+==\s+(?:at|by) 0x/m) { push @reports, $cur }
        else { push @notes, $cur->{text} }
        undef $cur;
    };
    my $in_supp = 0;
    for my $line (split /^/, $text) {
        # a generated suppression follows its report's closing blank line
        if ($in_supp || $line =~ /^\{\s*$/) {
            $close->();
            $reports[-1]{text} .= $line if @reports;
            $in_supp = $line !~ /^\}/;
            next;
        }
        if ($line =~ /^==(\d+)== (\S.*)$/) {
            $close->();
            $cur = { pid => $1, header => $2, text => $line };
        } elsif ($line =~ /^==\d+==\s*$/) {
            $close->();
        } elsif ($cur) {
            $cur->{text} .= $line;
        } elsif ($line =~ /\S/) {
            push @notes, $line;      # valgrind's own complaints, unprefixed
        }
    }
    $close->();
    return (\@reports, \@notes);
}

# After the block's nginx has exited: fail the block if valgrind reported
# anything (invalid accesses, uninitialised values, definite leaks, ...).
sub check_valgrind_logs ($) {
    my $name = shift;
    my (@reports, @notes);
    for my $f (sort glob "$LogDir/valgrind.*.log") {
        my ($r, $n) = parse_valgrind_log(slurp($f));
        push @reports, @$r;
        push @notes, @$n;
    }
    Test::More::diag("$name - valgrind notes:\n" . join '', @notes) if @notes && $Verbose;
    return unless @reports;
    Test::More::fail("$name - valgrind: " . @reports . " report(s) from nginx");
    Test::More::diag(join "\n", map { $_->{text} } @reports);
}

# The master binds the listening socket before it daemonizes, so once the
# pid file exists the port accepts.  Look at /proc/net/tcp rather than
# connecting, so the probe leaves no lines in the error log.  With $child
# (nginx in the foreground under valgrind) give up as soon as it exits; its
# wait status is then in $?.
sub wait_for_nginx ($;$) {
    my ($name, $child) = @_;
    my $deadline = time + slow_timeout($Timeout);
    my $gone = sub {
        return 0 unless defined $child;
        return 0 unless waitpid($child, WNOHANG) == $child;
        undef $ChildPid if defined $ChildPid && $ChildPid == $child;
        return 1;
    };
    my $pid;
    until (($pid = read_pid_file()) || time > $deadline) {
        return undef if $gone->();
        sleep 0.01;
    }
    return undef unless $pid;
    my $hexport = sprintf '%04X', $ServerPort;
    while (time < $deadline) {
        return undef if $gone->();
        my ($found, $have_proc) = (0, 0);
        for my $f ('/proc/net/tcp', '/proc/net/tcp6') {
            open my $in, '<', $f or next;
            $have_proc = 1;
            while (my $l = <$in>) {
                # columns: slot, local "ADDR:PORT" in hex, remote, state (0A = LISTEN)
                my @c = split ' ', $l;
                $found = 1 if @c > 3 && $c[1] =~ /:\Q$hexport\E$/ && $c[3] eq '0A';
            }
        }
        last if $found || !$have_proc;
        sleep 0.01;
    }
    return $pid;
}

# Starts nginx for a block; returns only when it runs (or bails out).
sub start_nginx ($) {
    my $name = shift;
    my $deadline = time + 10;
    while (1) {
        my $status;
        if ($UseValgrind) {
            my $child = spawn_valgrind_nginx($name);
            my $pid = wait_for_nginx($name, $child);
            $status = $?;
            if ($pid && is_running($child)) {
                $StartedPid = $pid;
                sleep $TestNginxSleep;
                return;
            }
            if (is_running($child)) {
                stop_nginx($child, $name);
                bail_out("$name - nginx under valgrind did not listen on port "
                         . "$ServerPort within " . slow_timeout($Timeout) . " s");
            }
            $status ||= 1 << 8;
        } else {
            $status = run_nginx_command();
            if ($status == 0) {
                my $pid = wait_for_nginx($name)
                    or bail_out("$name - nginx started but wrote no pid file $PidFile");
                $StartedPid = $pid;
                sleep $TestNginxSleep;
                return;
            }
        }
        # A port still held by an nginx that is shutting down is worth a
        # retry; any other start-up failure is a broken test.
        my $log = slurp($ErrLogFile);
        if ($log =~ /Address already in use/ && time < $deadline) {
            sleep 0.2;
            next;
        }
        my @lines = split /\n/, $log;
        Test::More::diag(join "\n", 'error.log:', @lines[($#lines > 9 ? $#lines - 9 : 0) .. $#lines]);
        bail_out("$name - nginx failed to start (wait status $status), see error.log above");
    }
}

sub slurp ($) {
    open my $in, '<', shift or return '';
    local $/;
    return <$in> // '';
}

# Under valgrind the pause above is too short for nginx to finish logging:
# wait until the log has not grown for a while (at most a few seconds).
sub wait_for_quiet_log () {
    my $quiet    = 0.2;
    my $deadline = time + slow_timeout(0.3);
    my ($size, $since) = (-s $ErrLogFile // 0, time);
    while (time < $deadline) {
        sleep 0.05;
        my $now = -s $ErrLogFile // 0;
        if ($now != $size) {
            ($size, $since) = ($now, time);
        } elsif (time - $since >= $quiet) {
            last;
        }
    }
}

# Lines of the error log written since the previous call (or since the
# start of the block's requests), after a pause: nginx logs some things
# (log phase, connection close) after the client already has its response.
sub error_log_data () {
    sleep $TestNginxSleep * 3;
    wait_for_quiet_log() if $UseValgrind;
    open my $in, '<', $ErrLogFile or return [];
    seek $in, $ErrLogFilePos, 0 if !$CheckAccumErrLog && $ErrLogFilePos > 0;
    my @lines = <$in>;
    $ErrLogFilePos = tell $in unless $CheckAccumErrLog;
    close $in;
    return \@lines;
}

# ---- the per-block driver ----------------------------------------------

sub run_tests () {
    $NginxVersion = nginx_version();
    $ENV{TEST_NGINX_SERVER_PORT} //= $ServerPort;

    my @blocks = Test::Base::blocks();
    @blocks = shuffle @blocks unless $NoShuffle;
    for my $block (@blocks) {
        $_->($block) for @BlockPreprocessors;
        $block->set_value(name => "$0 " . $block->name);
        run_test($block);
        $_->($block) for @TestCleanupHandlers;
    }
    cleanup();
}

# Works out whether skip_eval / skip_nginx ask to skip this block.
sub skip_spec ($) {
    my $block = shift;
    my $name  = $block->name;
    if (defined(my $spec = $block->skip_eval)) {
        $spec =~ /^\s*(\d+)\s*:\s*(.*)/s
            or bail_out("$name - bad --- skip_eval: $spec");
        my ($n, $code) = ($1, $2);
        my $yes = eval $code;
        bail_out("$name - --- skip_eval code failed: $@") if $@;
        return ($n, 'skip_eval') if $yes;
    }
    if (defined(my $spec = $block->skip_nginx)) {
        $spec =~ /^\s*(\d+)\s*:\s*([<>]=?)\s*(\d+)\.(\d+)\.(\d+)\s*(?::\s*(.*?))?\s*$/
            or bail_out("$name - bad --- skip_nginx: $spec");
        my ($n, $op, $reason) = ($1, $2, $6);
        my $want = canon_version($3, $4, $5);
        my $have = $NginxVersion // 0;
        my $hit = $op eq '<'  ? $have < $want  : $op eq '<=' ? $have <= $want
                : $op eq '>'  ? $have > $want  : $have >= $want;
        return ($n, $reason || "nginx version $op $3.$4.$5") if $hit;
    }
    return;
}

# Sections this runner understands.  Anything else would be ignored
# silently and pass here while the real module checks it, so say so.
my %Known = map { $_ => 1 } qw(
    config http_config main_config post_main_config user_files init
    ONLY SKIP LAST timeout wait must_die no_check_leak log_level server_name
    skip_eval skip_nginx request pipelined_requests raw_request
    raw_request_middle_delay more_headers abort shutdown ignore_response
    error_code error_code_like response_body response_body_like
    response_body_unlike response_headers response_headers_like
    raw_response_headers_like raw_response_headers_unlike
    error_log no_error_log grep_error_log grep_error_log_out
);
my %WarnedSection;

sub run_test ($) {
    my $block = shift;
    my $name  = $block->name;
    return if defined $block->SKIP;

    for my $sec (@{ $block->{_section_order}[0] || [] }) {
        next if $Known{$sec} || $WarnedSection{$sec}++;
        Test::More::diag("WARNING: --- $sec is not supported by the t/lib runner "
                         . "and is ignored (only the real Test::Nginx checks it)");
    }

    local $LogLevel = $block->log_level || $LogLevel;
    local $RandPorts = {};

    my ($skip_n, $skip_why) = skip_spec($block);
    if (defined $skip_n) {
        SKIP: { Test::More::skip("$name - $skip_why", $skip_n) }
        return;
    }

    my $config = expand_env_in_text($block->config, $name);

    # As in the real module, a block that must not start nginx is run
    # without valgrind (and so with nginx as a daemon again).
    local $UseValgrind   = $UseValgrind;
    local $DaemonEnabled = $DaemonEnabled;
    if (defined $block->must_die) {
        undef $UseValgrind;
        $DaemonEnabled = 'on';
    }

    # Under valgrind every block ends by stopping nginx (so valgrind checks
    # its exit): a block without --- config gets a fresh nginx with the
    # previous block's configuration.
    $config = $PrevConfig if !defined $config && $UseValgrind;

    if (defined $config) {
        # Every block with a config gets a fresh nginx and fresh logs.
        $PrevConfig = $config;
        stop_previous_nginx($name);
        setup_server_root();
        write_user_files($block);
        write_config_file($block, $config);
        bail_out("$name - cannot find the nginx binary '$NginxBinary'")
            unless can_run($NginxBinary);

        if (defined $block->must_die) {
            run_must_die($block);
            return;
        }
        start_nginx($name);
    } elsif (!defined $PrevConfig) {
        bail_out("$name - no --- config section and no earlier block to reuse");
    }

    if (defined(my $init = $block->init)) {
        eval $init;
        bail_out("$name - --- init failed: $@") if $@;
    }

    $ErrLogFilePos = 0;
    for my $i (1 .. $RepeatEach) {
        write_user_files($block) if $i > 1;
        $RunTestHelper->($block, 0, $i - 1);
    }

    if ($UseValgrind) {
        # leaks are reported when the processes exit
        my $pid = $StartedPid // read_pid_file();
        stop_nginx($pid, $name) if $pid;
        unlink $PidFile;
        check_valgrind_logs($name);
    }
}

# --- must_die: nginx has to refuse the configuration.
sub run_must_die ($) {
    my $block = shift;
    my $name  = $block->name;
    my $want  = $block->must_die;
    for my $i (0 .. $RepeatEach - 1) {
        $ErrLogFilePos = 0;
        my $status = run_nginx_command();
        my $code = $status == -1 ? undef : $status >> 8;
        if (!defined $code) {
            Test::More::fail("$name - could not execute nginx");
        } elsif ($status & 127) {
            Test::More::fail("$name - nginx was killed by signal " . ($status & 127));
        } elsif (looks_like_number($want)) {
            Test::More::is($code, $want, "$name - nginx exits with the expected status");
        } else {
            Test::More::isnt($status, 0, "$name - nginx refuses to start");
        }
        $CheckErrorLog->($block, undef, 0, $i, 0);
        if ($status == 0) {
            warn "WARNING: $name - nginx should have failed but started; stopping it\n";
            my $pid = wait_for_nginx($name);
            stop_nginx($pid, $name) if $pid;
        }
    }
}

sub can_run ($) {
    my $cmd = shift;
    return -f $cmd && -x _ if $cmd =~ m{/};
    return grep { -f "$_/$cmd" && -x _ } split /:/, $ENV{PATH} // '';
}

sub cleanup () {
    $_->() for @CleanupHandlers;
}

END {
    # Only the nginx this run started, and only if it is still the one in
    # the pid file (a later run may own the server root by now).
    local $?;
    if (defined $ChildPid) {
        # our foreground nginx under valgrind: stopped even with
        # TEST_NGINX_NO_CLEAN, as the real module does
        stop_nginx($ChildPid, 'END');
    } elsif (defined $StartedPid && !$ENV{TEST_NGINX_NO_CLEAN}) {
        my $pid = read_pid_file();
        if (defined $pid && $pid == $StartedPid) {
            stop_nginx($pid, 'END');
        }
    }
}

1;
