#!/usr/bin/perl
# bench/faults.pl - fault injection under load for ngx_http_flags_module.
# Five scenarios, each with its own nginx (2 workers) under build/faults/:
#
#   kill     kill -9 of a worker, FAULTS_KILLS times (3), spread over the
#            load (evaluations + reports with a unique id each).  After each
#            kill: a GET /flags, an admin PUT override and a status read on
#            new connections must answer within 1 s; the master must start a
#            new worker, and the new worker must answer.  At the end every
#            report answered 204 is in the report log (lines for reports
#            whose connection died with the worker may be there too), no id
#            is logged twice, and every flag's "errors" counter equals its
#            log lines.
#   reload   nginx -s reload (HUP) every second under load.  A flag rolled
#            back before the loop stays rolled back (checked twice a second
#            and at the end); the lifetime evaluation counter never goes down
#            and ends >= the evaluations answered; no request fails (a
#            request the server closed the connection on without answering
#            is resent on a new connection and counted as "resent"); every
#            204 is in the log; "errors" counters equal the log lines.
#   reopen   the report log renamed to .1, .2, ... and nginx -s reopen
#            (USR1) every second while reports are posted: every id answered
#            204 is in exactly one line across all the files, every line is
#            whole JSON, nothing else is there.
#   window   the configuration rewritten and reloaded (HUP) every 0.5 s under
#            a load of reports: the http-level flags_rollback swaps between
#            window=60s and window=61s, and "search" gets its own rollback
#            window swapping between 61 and 60 (min_errors out of reach, so
#            nothing rolls back).  Old workers keep counting into the window
#            they know while new ones count into the new length; no count may
#            be lost.  At the end, old workers gone, per flag: errors counter
#            == 204 answers == report log lines, and the window's errors (read
#            with the last configuration) == the same number; the run is
#            shorter than the window.  "search"'s definition changes at every
#            reload, which starts its window fresh (docs/rollback.md): only its lifetime
#            counter is compared.  For the other flags the window's enabled
#            evaluations must also equal the lifetime ones.
#   slowpost FAULTS_HELD (8) reports for "doomed" (project faults, minErrors
#            1) held open with the last body byte unsent, across two reloads:
#            the first removes doomed, the second adds 20 flags to project
#            blog.  Then the last bytes: every held report is answered 204 by
#            a first-generation worker and logged; afterwards every blog flag
#            is not rolled back, with errors 0 (lifetime and window), blog's
#            GET /flags lists them all enabled at 100 %, and the state file
#            mentions neither doomed nor blog nor any blog flag.  Memory of a
#            removed flag may be reused only once no worker that can reach it
#            is alive.
#
#   bench/faults.pl [kill] [reload] [reopen] [window] [slowpost]
#                                                      (default: all five)
#
# Prints a table per scenario and a summary; exits 1 when a scenario lost
# a report, failed a request or broke one of its checks.
#
# Environment: FAULTS_PORT (18182), FAULTS_CONNS (16), FAULTS_DEPTH (2),
# FAULTS_KILL_SECONDS (12), FAULTS_KILLS (3), FAULTS_RELOAD_SECONDS (15),
# FAULTS_REOPEN_SECONDS (10), FAULTS_WINDOW_SECONDS (15), FAULTS_HELD (8),
# FAULTS_MAX_REQUESTS (1000000 per scenario), NGINX_BIN (/usr/sbin/nginx),
# FAULTS_MODULE (the module to load; build/ngx_http_flags_module.so), e.g.
# a copy, so that a rebuild does not change the module under a run, or an
# older build to show what a scenario catches.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use LoadGen qw(nginx_start nginx_stop nginx_signal worker_pids http1
               read_file write_file wait_for fmt_table);
use Cwd qw(abs_path);
use File::Copy qw(copy);
use File::Path qw(make_path remove_tree);
use IO::Select;
use IO::Socket::INET;
use JSON::PP ();
use Time::HiRes qw(time sleep);

$| = 1;

my $ROOT    = abs_path("$FindBin::Bin/..");
my $PORT    = $ENV{FAULTS_PORT} // 18182;
my $CONNS   = $ENV{FAULTS_CONNS} // 16;
my $DEPTH   = $ENV{FAULTS_DEPTH} // 2;
my $MAXREQ  = $ENV{FAULTS_MAX_REQUESTS} // 1_000_000;
my $BIN     = $ENV{NGINX_BIN} // '/usr/sbin/nginx';
my $MODULE  = $ENV{FAULTS_MODULE} // "$ROOT/build/ngx_http_flags_module.so";
my $BASE    = "$ROOT/build/faults";
my $TOKEN   = 'faults_tok_1';
my $AUTH    = "Authorization: Bearer $TOKEN";
my @LOAD_FLAGS = qw(checkout search banner payments);
my @ALL_FLAGS  = (@LOAD_FLAGS, 'trip');

my %SECONDS = (kill   => $ENV{FAULTS_KILL_SECONDS} // 12,
               reload => $ENV{FAULTS_RELOAD_SECONDS} // 15,
               reopen => $ENV{FAULTS_REOPEN_SECONDS} // 10,
               window => $ENV{FAULTS_WINDOW_SECONDS} // 15);
my $KILLS = $ENV{FAULTS_KILLS} // 3;
my $HELD = $ENV{FAULTS_HELD} // 8;
my $NEW_FLAGS = 20;
my $BLOG_TOKEN = 'faults_tok_blog';

my @scenarios = @ARGV ? @ARGV : qw(kill reload reopen window slowpost);
for (@scenarios) {
    die "usage: bench/faults.pl [kill] [reload] [reopen] [window] [slowpost]\n"
        unless /^(kill|reload|reopen|window|slowpost)$/;
}
-f $MODULE or die "$MODULE missing: run ./build.sh first\n";

my $json = JSON::PP->new;
my $master;                      # the nginx of the running scenario
my $PARENT = $$;
END { nginx_stop($master) if $master && $$ == $PARENT }
$SIG{INT} = $SIG{TERM} = sub { nginx_stop($master) if $master; exit 130 };

# -------------------------------------------------------------------- setup

my $FAULTS_JSON = <<'_J_';
{"flags": [
  {"name": "checkout", "enabled": true, "rolloutPercentage": 50},
  {"name": "search", "enabled": true, "rolloutPercentage": 100},
  {"name": "banner", "enabled": true, "rolloutPercentage": 10, "segments": ["paying"]},
  {"name": "payments", "enabled": false, "rolloutPercentage": 100},
  {"name": "trip", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 20, "rate": 1, "window": 60}}
],
 "segments": {"paying": {"rules": [{"trait": "plan", "op": "in", "values": ["pro", "enterprise"]}]}}}
_J_

# A file replaced by rename: a reload never reads it half written.
sub replace_file {
    my ($path, $content) = @_;
    write_file("$path.tmp", $content);
    rename "$path.tmp", $path or die "rename $path: $!\n";
}

# nginx.conf: project "faults" (faults.json) plus the projects in
# $o{projects} ([name, token, file], the file under conf/), and the
# http-level flags_rollback $o{rollback} ("off" unless given; undef in the
# hash leaves the directive out, so the default policy applies).
sub write_conf {
    my ($prefix, %o) = @_;
    my $user = $> == 0 ? "user root;\n" : '';
    my $rollback = exists $o{rollback} ? $o{rollback} : 'off';
    my $rb_line = defined $rollback ? "flags_rollback $rollback;" : '';
    my $projects = join '', map { "    flags_project $_->[0] token=$_->[1] file=$_->[2];\n" } @{ $o{projects} || [] };
    replace_file("$prefix/conf/nginx.conf", <<"_C_");
load_module $prefix/modules/ngx_http_flags_module.so;
${user}worker_processes 2;
error_log logs/error.log notice;
pid logs/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 100000;
    flags_project faults token=$TOKEN file=faults.json;
$projects    $rb_line
    flags_error_log logs/reports.log;
    flags_state_file state/flags-state.json;
    server {
        listen 127.0.0.1:$PORT;
        server_name localhost;
        location = /flags         { add_header X-Worker \$pid; flags_evaluate; }
        location = /ingest/errors { add_header X-Worker \$pid; flags_ingest_errors; }
        location = /flags-status  { allow 127.0.0.1; deny all; flags_status; }
        location /flags-admin/    { allow 127.0.0.1; deny all; flags_admin; }
    }
}
_C_
}

# A fresh prefix build/faults/<name> and its nginx.  $o{faults_json}
# replaces the flags of project "faults", $o{files} ({name => content})
# adds files under conf/; the rest goes to write_conf.
sub setup {
    my ($name, %o) = @_;
    my $prefix = "$BASE/$name";
    my $old = read_file("$prefix/logs/nginx.pid");
    if ($old && $old =~ /^(\d+)/ && kill 0, $1) {
        # an nginx left in our own prefix by an interrupted run
        my $cmd = read_file("/proc/$1/cmdline") // '';
        nginx_stop($1) if $cmd =~ /nginx/ && $cmd =~ /\Q$prefix\E/;
    }
    remove_tree($prefix);
    make_path("$prefix/conf/state", "$prefix/logs", "$prefix/modules");
    copy($MODULE, "$prefix/modules/ngx_http_flags_module.so") or die "copy module: $!\n";
    write_file("$prefix/conf/faults.json", $o{faults_json} // $FAULTS_JSON);
    write_file("$prefix/conf/$_", $o{files}{$_}) for keys %{ $o{files} || {} };
    write_conf($prefix, %o);
    $master = nginx_start($BIN, $prefix, $PORT);
    return $prefix;
}

sub teardown {
    nginx_stop($master);
    $master = undef;
}

# ------------------------------------------------------------------ traffic

# A load of GET /flags and reports (a unique id in "message"); $report_share
# of the requests are reports.  Returns the generator and the book it keeps.
sub traffic {
    my ($tag, $report_share) = @_;
    my %book = (seq => 0, flag_of => {}, sent_ids => 0);
    my $gen = sub {
        if (rand() < $report_share) {
            my $id = sprintf '%s-%d', $tag, ++$book{seq};
            my $flag = $LOAD_FLAGS[$book{seq} % @LOAD_FLAGS];
            $book{flag_of}{$id} = $flag;
            # a stack of 100 B to 2 KB: lines long enough to tear if writes were split
            my $stack = join '\n', map { "    at fn$_ (bundle.js:$_:" . ($book{seq} % 97) . ')' } 1 .. 3 + int(rand 70);
            my $body = qq({"flagName":"$flag","message":"$id","stack":"$stack","userId":"u)
                     . int(rand 100000) . qq(","traits":{"plan":"pro","n":) . int(rand 9) . '}}';
            return ("POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\n$AUTH\r\n"
                    . "Content-Type: application/json\r\nContent-Length: " . length($body)
                    . "\r\n\r\n$body", ['report', 204, $id, $flag]);
        }
        my $q = 'userId=u' . int(rand 100000) . (rand() < 0.5 ? '&trait_plan=pro' : '');
        return ("GET /flags?$q HTTP/1.1\r\nHost: localhost\r\n$AUTH\r\n\r\n", ['flags', 200]);
    };
    return ($gen, \%book);
}

# A whole JSON text (RFC 8259) followed by one newline: a torn or merged
# line does not match.  Much faster than JSON::PP on long lines.
my $JSON_LINE = qr~
    \A (?&obj) \n \z
    (?(DEFINE)
        (?<ws>  [ \t\r\n]*+ )
        (?<str> " (?: [^"\\\x00-\x1f]++ | \\ (?: ["\\/bfnrt] | u[0-9a-fA-F]{4} ) )*+ " )
        (?<num> -?+ (?: 0 | [1-9][0-9]*+ ) (?: \.[0-9]++ )?+ (?: [eE][+-]?+[0-9]++ )?+ )
        (?<val> (?&str) | (?&num) | (?&obj) | (?&arr) | true | false | null )
        (?<mem> (?&ws) (?&str) (?&ws) : (?&ws) (?&val) (?&ws) )
        (?<obj> \{ (?: (?&mem) (?: , (?&mem) )*+ | (?&ws) ) \} )
        (?<arr> \[ (?: (?&ws) (?&val) (?&ws) (?: , (?&ws) (?&val) (?&ws) )*+ | (?&ws) ) \] )
    )
~x;

# Reads report log files: every line must be one JSON object starting with
# "time" (UTC, milliseconds), "project", "flagName" and "message" (docs/rollback.md, the report log);
# returns {ids => {id => count}, by_flag => {flag => lines}, lines, torn,
# torn_examples, per_file => [[file, lines]]}.
sub read_logs {
    my (@files) = @_;
    my %r = (ids => {}, by_flag => {}, lines => 0, torn => 0, torn_examples => [], per_file => []);
    for my $f (@files) {
        open my $fh, '<', $f or do { push @{ $r{per_file} }, [$f =~ s{.*/}{}r, 'missing']; next };
        my $n = 0;
        while (my $l = <$fh>) {
            $n++;
            $r{lines}++;
            if ($l =~ $JSON_LINE
                && $l =~ /\A\{"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","project":"faults","flagName":"([^"\\]*)","message":"([^"\\]*)"[,}]/)
            {
                $r{ids}{$2}++;
                $r{by_flag}{$1}++;
                next;
            }
            $r{torn}++;
            push @{ $r{torn_examples} }, substr($l, 0, 200) if @{ $r{torn_examples} } < 3;
        }
        close $fh;
        push @{ $r{per_file} }, [$f =~ s{.*/}{}r, $n];
    }
    return \%r;
}

sub status {
    my ($timeout) = @_;
    my ($st, undef, $body, $dt) = http1($PORT, 'GET', '/flags-status', timeout => $timeout // 5);
    return (undef, $dt, "$st $body") unless $st == 200;
    my $d = eval { $json->decode($body) } or return (undef, $dt, "bad status JSON: $@");
    return ({ map { $_->{name} => $_ } @{ $d->{projects}[0]{flags} } }, $dt);
}

# The whole status: {project => {flag => status object}}.
sub status_all {
    my ($timeout) = @_;
    my ($st, undef, $body) = http1($PORT, 'GET', '/flags-status', timeout => $timeout // 5);
    return (undef, "$st $body") unless $st == 200;
    my $d = eval { $json->decode($body) } or return (undef, "bad status JSON: $@");
    return ({ map { my $p = $_; ($p->{name} => { map { $_->{name} => $_ } @{ $p->{flags} } }) } @{ $d->{projects} } });
}

sub is_exiting {
    my ($pid) = @_;
    return (read_file("/proc/$pid/cmdline") // '') =~ /shutting down/;
}

# Waits up to $timeout s until the master has exactly 2 workers and none
# of them is shutting down (the old generations are gone); returns the
# workers left when it gives up.
sub wait_old_workers_gone {
    my ($timeout) = @_;
    my @w;
    my $ok = wait_for(sub { @w = worker_pids($master); @w == 2 && !grep { is_exiting($_) } @w }, $timeout);
    return $ok ? () : @w;
}

# HUP, then waits until the master logged one more "reconfiguring" and two
# workers of the new generation serve (the old ones may still be draining).
sub reload_and_wait {
    my ($prefix) = @_;
    my $count = sub { my $l = read_file("$prefix/logs/error.log") // ''; scalar(() = $l =~ /: reconfiguring$/mg) };
    my @old = grep { !is_exiting($_) } worker_pids($master);
    my $n = $count->();
    nginx_signal($master, 'HUP');
    wait_for(sub { $count->() > $n }, 10) or return 'no "reconfiguring" in the error log 10 s after HUP';
    my %old = map { $_ => 1 } @old;
    wait_for(sub {
        my @w = worker_pids($master);
        (grep { !$old{$_} } @w) >= 2 && !grep { $old{$_} && !is_exiting($_) } @w;
    }, 10) or return 'no new generation of workers 10 s after HUP';
    return '';
}

sub total_evaluations {
    my ($s) = @_;
    my $n = 0;
    $n += $_->{counters}{evaluations} for values %$s;
    return $n;
}

sub error_log_problems {
    my ($prefix, $allowed) = @_;
    my $log = read_file("$prefix/logs/error.log") // '';
    return grep { !$allowed || !/$allowed/ } $log =~ /^(.*\[(?:alert|crit|emerg)\].*)$/mg;
}

# Checks shared by the scenarios: acknowledged reports against the log, the
# per-flag error counters against the log lines.
sub check_reports {
    my ($res, $book, $acked, $logs, $status, %o) = @_;
    my @lost = grep { !$logs->{ids}{$_} } keys %$acked;
    my @dups = grep { $logs->{ids}{$_} > 1 } keys %{ $logs->{ids} };
    my @unknown = grep { !exists $book->{flag_of}{$_} && !($o{extra_ids} && $o{extra_ids}{$_}) }
                  keys %{ $logs->{ids} };
    my @extra = grep { !$acked->{$_} } keys %{ $logs->{ids} };
    $res->{lost} = @lost;
    $res->{duplicates} = @dups;
    $res->{torn} = $logs->{torn};
    $res->{log_lines} = $logs->{lines};
    $res->{extra_lines} = @extra;
    push @{ $res->{fail} }, sprintf('%d acknowledged reports missing from the log (e.g. %s)',
                                   scalar @lost, join(' ', (sort @lost)[0 .. ($#lost < 4 ? $#lost : 4)])) if @lost;
    my @bad_dups = $o{dups_ok} ? grep { !$o{dups_ok}->($_) } @dups : @dups;
    push @{ $res->{fail} }, sprintf('%d ids logged more than once (e.g. %s)', scalar @bad_dups,
                                   join(' ', (sort @bad_dups)[0 .. ($#bad_dups < 4 ? $#bad_dups : 4)])) if @bad_dups;
    push @{ $res->{fail} }, "$logs->{torn} torn or invalid lines in the log: @{ $logs->{torn_examples} }"
        if $logs->{torn};
    push @{ $res->{fail} }, scalar(@unknown) . " log lines for ids never sent" if @unknown;
    if ($o{extra_ok}) {
        my @bad_extra = grep { !$o{extra_ok}->($_) } @extra;
        push @{ $res->{fail} }, scalar(@bad_extra) . " log lines for reports that were not acknowledged and not in flight"
            if @bad_extra;
    }
    my @ctr;
    for my $f (@ALL_FLAGS) {
        my $c = $status->{$f}{counters}{errors};
        my $l = $logs->{by_flag}{$f} // 0;
        push @ctr, "$f $c/$l";
        push @{ $res->{fail} }, "flag $f: errors counter $c != $l log lines" if !defined $c || $c != $l;
    }
    $res->{counters_vs_log} = join(', ', @ctr);
}

sub load_figures {
    my ($res, $st) = @_;
    $res->{sent} = $st->{sent};
    $res->{answered} = $st->{answered};
    $res->{reports_sent} = $st->{by_kind}{report}{sent} // 0;
    $res->{acknowledged} = $st->{by_kind}{report}{status}{204} // 0;
    $res->{evaluations_ok} = $st->{by_kind}{flags}{status}{200} // 0;
    $res->{unexpected} = $st->{unexpected};
    $res->{unanswered} = $st->{unanswered};
    $res->{resent} = $st->{resent};
    $res->{closes} = $st->{closes};
    $res->{seconds} = $st->{elapsed};
    push @{ $res->{fail} }, "$st->{unexpected} responses with an unexpected status: @{ $st->{examples} }"
        if $st->{unexpected};
    push @{ $res->{fail} }, "$st->{connect_errors} connection errors" if $st->{connect_errors};
}

# LoadGen::run with what every scenario shares: the port, the connection
# count, the pipelining depth and the bounds; the rest is the scenario's.
sub run_load {
    my ($gen, $seconds, %o) = @_;
    return LoadGen::run(port => $PORT, conns => $CONNS, depth => $DEPTH,
                        max_requests => $MAXREQ, max_seconds => $seconds,
                        next => $gen, %o);
}

# A resend callback that remembers the ids of resent reports.
sub resend_into {
    my ($ids) = @_;
    return sub {
        my ($m) = @_;
        $ids->{ $m->[2] } = 1 if $m->[0] eq 'report';
        return 1;
    };
}

# ---------------------------------------------------------- 1. kill -9

sub scenario_kill {
    my %res = (name => 'kill -9 worker', fail => []);
    my $prefix = setup('kill');
    my @start_workers = worker_pids($master);
    my ($gen, $book) = traffic('kill', 0.5);
    my %acked;
    my %in_flight;                       # report ids whose connection died unanswered
    my %served_by;                       # worker pid -> responses
    my %recent;                          # the same since the last kill
    my $seconds = $SECONDS{kill};
    my @kill_at = map { $seconds * $_ / ($KILLS + 1) } 1 .. $KILLS;
    my (@kills, $waiting);

    my $probe = sub {
        my ($k) = @_;
        my $t = $k->{t};
        # 1. an evaluation on a new connection, retried until 1 s after the kill
        my ($st, $dt);
        while (1) {
            my $left = $t + 1 - time;
            last if $left <= 0;
            ($st) = http1($PORT, 'GET', '/flags?userId=probe', headers => [$AUTH], timeout => $left);
            last if $st == 200;
        }
        $k->{get} = $st == 200 ? sprintf('%.0f ms', 1000 * (time - $t)) : "FAILED ($st)";
        push @{ $res{fail} }, "kill of $k->{pid}: no GET /flags answered within 1 s" if $st != 200;
        # 2. the admin PUT and 3. a status read, each within 1 s
        my $pct = 10 + @kills;
        ($st, undef, undef, $dt) = http1($PORT, 'PUT', '/flags-admin/overrides/faults/banner',
                                         body => qq({"rolloutPercentage": $pct}), timeout => 1);
        $k->{put} = $st == 204 ? sprintf('%.0f ms', 1000 * $dt) : "FAILED ($st)";
        push @{ $res{fail} }, "kill of $k->{pid}: admin PUT answered $st (not 204 within 1 s)" if $st != 204;
        my ($s, $sdt, $err) = status(1);
        $k->{status} = $s ? sprintf('%.0f ms', 1000 * $sdt) : "FAILED ($err)";
        push @{ $res{fail} }, "kill of $k->{pid}: status read failed: $err" unless $s;
    };

    my $st = run_load($gen, $seconds,
        on_response => sub {
            my ($m, $status, $body, $head) = @_;
            $acked{ $m->[2] } = 1 if $m->[0] eq 'report' && $status == 204;
            if ($head =~ /\r\nX-Worker: (\d+)/) {
                $served_by{$1}++;
                $recent{$1}++;
            }
        },
        on_unanswered => sub {
            my ($m) = @_;
            $in_flight{ $m->[2] } = 1 if $m->[0] eq 'report';
        },
        tick_every => 0.02,
        tick => sub {
            my ($el) = @_;
            if ($waiting) {
                my @w = worker_pids($master);
                if (@w == 2 && !grep { $_ == $waiting->{pid} } @w) {
                    $waiting->{respawn} = sprintf '%.0f ms', 1000 * (time - $waiting->{t});
                    ($waiting->{new}) = grep { my $p = $_; !grep { $_ == $p } @{ $waiting->{before} } } @w;
                    $waiting = undef;
                } elsif (time - $waiting->{t} > 5) {
                    $waiting->{respawn} = 'none within 5 s';
                    push @{ $res{fail} }, "no new worker 5 s after killing $waiting->{pid}";
                    $waiting = undef;
                }
            }
            if (@kill_at && $el >= $kill_at[0] && !$waiting) {
                shift @kill_at;
                # the worker that answered the most since the last kill: it
                # holds the connections, so it dies with requests in hand
                my @w = worker_pids($master);
                my ($victim) = sort { ($recent{$b} // 0) <=> ($recent{$a} // 0) || $a <=> $b } @w;
                my $k = { pid => $victim, t => time, at => sprintf('%.1f s', $el), before => [@w],
                          busy => $recent{$victim} // 0 };
                kill 'KILL', $victim;
                %recent = ();
                push @kills, $k;
                $probe->($k);
                $waiting = $k;
            }
        },
    );
    load_figures(\%res, $st);

    # the last new worker answers too (connections spread over the workers)
    if ($waiting) {
        wait_for(sub { my @w = worker_pids($master); @w == 2 && !grep { $_ == $waiting->{pid} } @w }, 5);
        my @w = worker_pids($master);
        ($waiting->{new}) = grep { my $p = $_; !grep { $_ == $p } @{ $waiting->{before} } } @w;
        $waiting->{respawn} = $waiting->{new} ? 'after the load' : 'none';
        push @{ $res{fail} }, "no new worker after killing $waiting->{pid}" unless $waiting->{new};
    }
    my @final_workers = worker_pids($master);
    push @{ $res{fail} }, "workers at the end: @final_workers (want 2)" if @final_workers != 2;
    for my $k (@kills) {
        next unless $k->{new};
        my $seen = $served_by{ $k->{new} } ? 1 : 0;
        for (1 .. 200) {
            last if $seen || !grep { $_ == $k->{new} } @final_workers;
            my ($s, $h) = http1($PORT, 'GET', '/flags?userId=after', headers => [$AUTH], timeout => 1);
            $seen = 1 if $s == 200 && $h =~ /\r\nX-Worker: $k->{new}\b/;
        }
        $k->{new_answered} = $seen ? 'yes' : (grep { $_ == $k->{new} } @final_workers) ? 'no' : 'killed later';
        push @{ $res{fail} }, "the new worker $k->{new} never answered" if !$seen && grep { $_ == $k->{new} } @final_workers;
    }
    my ($s) = status(5);
    push @{ $res{fail} }, "status read at the end failed" unless $s;
    my ($dst) = http1($PORT, 'DELETE', '/flags-admin/overrides/faults/banner', timeout => 2);
    push @{ $res{fail} }, "admin DELETE at the end answered $dst" if $dst != 204;
    my $logs = read_logs("$prefix/logs/reports.log");
    check_reports(\%res, $book, \%acked, $logs, $s // {},
                  extra_ok => sub { $in_flight{ $_[0] } });
    my $acked_in_log = grep { $logs->{ids}{$_} } keys %acked;
    my $inflight_in_log = grep { $logs->{ids}{$_} } keys %in_flight;
    $res{in_flight} = keys %in_flight;
    $res{in_flight_logged} = $inflight_in_log;
    $res{lines_unacked} = $res{extra_lines};

    print "\n== kill -9 of a worker during load ($KILLS kills over ${seconds} s)\n";
    print fmt_table(['kill', 'at', 'worker', 'new worker', 'respawned in', 'GET ok after', 'PUT override', 'status read', 'new worker answers'],
                    map { ["#" . ($_ + 1), $kills[$_]{at}, $kills[$_]{pid} . " ($kills[$_]{busy} answers)", $kills[$_]{new} // '-',
                           $kills[$_]{respawn} // '-', $kills[$_]{get}, $kills[$_]{put}, $kills[$_]{status},
                           $kills[$_]{new_answered} // '-'] } 0 .. $#kills);
    printf "workers: %s at the start, %s at the end; responses by worker: %s\n", "@start_workers", "@final_workers",
        join(', ', map { "$_:$served_by{$_}" } sort keys %served_by);
    printf "reports: %d sent, %d acknowledged (all %d in the log), %d unanswered when their worker died (%d of them logged)\n",
        $res{reports_sent}, $res{acknowledged}, $acked_in_log, $res{in_flight}, $inflight_in_log;
    printf "errors counter / log lines per flag: %s\n", $res{counters_vs_log};
    my @el = error_log_problems($prefix, qr/exited on signal 9|was locked by/);
    push @{ $res{fail} }, "error log: $_" for @el[0 .. ($#el < 4 ? $#el : 4)];
    teardown();
    return \%res;
}

# ---------------------------------------------------------- 2. reload

sub scenario_reload {
    my %res = (name => 'reload every 1 s', fail => []);
    my $prefix = setup('reload');
    my $seconds = $SECONDS{reload};

    # trip the rollback of "trip" before the loop
    my %acked;
    my %pre_ids;
    for my $i (1 .. 20) {
        my $id = "reload-trip-$i";
        my ($st) = http1($PORT, 'POST', '/ingest/errors', body => qq({"flagName":"trip","message":"$id"}),
                         headers => [$AUTH, 'Content-Type: application/json']);
        push @{ $res{fail} }, "trip report $i answered $st" if $st != 204;
        $acked{$id} = 1 if $st == 204;
        $pre_ids{$id} = 1;
    }
    my ($s0) = status(5);
    die "reload: no status\n" unless $s0;
    push @{ $res{fail} }, "the trip flag did not roll back before the loop" unless $s0->{trip}{rolledBack};
    my $rollback_at = $s0->{trip}{rollback}{at} // '';

    my ($gen, $book) = traffic('reload', 0.4);
    my ($reloads, $last_hup, $samples, $last_eval, $decreases, $not_rolled_back, $status_fail) = (0, 0, 0, 0, 0, 0, 0);
    my %resent_ids;
    my $t0 = time;
    my $st = run_load($gen, $seconds,
        resend => resend_into(\%resent_ids),
        on_response => sub {
            my ($m, $status) = @_;
            $acked{ $m->[2] } = 1 if $m->[0] eq 'report' && $status == 204;
        },
        tick_every => 0.25,
        tick => sub {
            my ($el) = @_;
            if ($el - $last_hup >= 1 && $el < $seconds - 0.5) {
                nginx_signal($master, 'HUP');
                $reloads++;
                $last_hup = $el;
            }
            my ($s) = status(2);
            if (!$s) {
                $status_fail++;
                return;
            }
            $samples++;
            my $ev = total_evaluations($s);
            $decreases++ if $ev < $last_eval;
            $last_eval = $ev if $ev > $last_eval;
            $not_rolled_back++ unless $s->{trip}{rolledBack};
        },
    );
    load_figures(\%res, $st);
    push @{ $res{fail} }, "$st->{unanswered} requests unanswered" if $st->{unanswered};

    # let the last reload settle: 2 workers left, the old ones gone
    my @w;
    wait_for(sub { @w = worker_pids($master); @w == 2 }, 15)
        or push @{ $res{fail} }, "old workers still there 15 s after the last reload: @w";
    my ($gst, undef, $gbody) = http1($PORT, 'GET', '/flags?userId=u1', headers => [$AUTH]);
    my ($s) = status(5);
    die "reload: no status at the end\n" unless $s;
    my $trip_eval = $gbody =~ /"name":"trip","enabled":(\w+),"rolloutPercentage":([\d.]+)/ ? "$1/$2" : "?";
    push @{ $res{fail} }, "trip not rolled back after the reloads (status)" unless $s->{trip}{rolledBack};
    push @{ $res{fail} }, "trip rollback record changed: $rollback_at -> " . ($s->{trip}{rollback}{at} // 'null')
        if ($s->{trip}{rollback}{at} // '') ne $rollback_at;
    push @{ $res{fail} }, "trip evaluates as $trip_eval after the reloads, want false/0" if $trip_eval ne 'false/0';
    push @{ $res{fail} }, "$not_rolled_back status samples showed trip not rolled back" if $not_rolled_back;
    push @{ $res{fail} }, "the lifetime evaluation counter went down $decreases times" if $decreases;
    push @{ $res{fail} }, "$status_fail status reads failed during the reloads" if $status_fail;
    push @{ $res{fail} }, "only $reloads reloads" if $reloads < $seconds - 2;

    # each flag is evaluated once per answered GET (+1 for the final GET above);
    # a resent GET may have been counted twice
    my $gets = $res{evaluations_ok} + ($gst == 200 ? 1 : 0);
    my $resent_gets = $st->{by_kind}{flags}{resent} // 0;
    my @ev;
    for my $f (@ALL_FLAGS) {
        my $e = $s->{$f}{counters}{evaluations};
        push @ev, "$f $e";
        push @{ $res{fail} }, "flag $f: $e lifetime evaluations, $gets GETs answered (+$resent_gets resent)"
            if $e < $gets || $e > $gets + $resent_gets;
    }
    my $final_eval = total_evaluations($s);
    push @{ $res{fail} }, "lifetime evaluations at the end $final_eval < $last_eval seen during the loop"
        if $final_eval < $last_eval;

    my $logs = read_logs("$prefix/logs/reports.log");
    check_reports(\%res, $book, \%acked, $logs, $s, extra_ids => \%pre_ids,
                  dups_ok => sub { $resent_ids{ $_[0] } }, extra_ok => sub { $resent_ids{ $_[0] } });

    print "\n== nginx -s reload (HUP) every second during load (${seconds} s)\n";
    printf "reloads: %d; status samples: %d (lifetime evaluations %d at the end, never decreased: %s)\n",
        $reloads, $samples, $final_eval, $decreases ? 'NO' : 'yes';
    printf "trip rolled back before the loop at %s; after: status rolledBack=%s, evaluates as %s\n",
        $rollback_at, $s->{trip}{rolledBack} ? 'true' : 'false', $trip_eval;
    printf "requests: %d sent, %d answered, %d failed, %d resent after a close without answer (%d reports), connections closed by nginx %d\n",
        $res{sent}, $res{answered}, $res{unexpected} + $res{unanswered}, $res{resent}, scalar keys %resent_ids, $res{closes};
    printf "close reasons: %s\n", join(', ', map { "$_: $st->{close_reasons}{$_}" } sort keys %{ $st->{close_reasons} }) || 'none';
    printf "evaluations per flag: %s (GETs answered %d)\n", join(', ', @ev), $gets;
    printf "errors counter / log lines per flag: %s\n", $res{counters_vs_log};
    my @el = error_log_problems($prefix);
    push @{ $res{fail} }, "error log: $_" for @el[0 .. ($#el < 4 ? $#el : 4)];
    $res{acknowledged} += keys %pre_ids;
    $res{reports_sent} += keys %pre_ids;
    teardown();
    return \%res;
}

# ---------------------------------------------------------- 3. reopen

sub scenario_reopen {
    my %res = (name => 'reopen every 1 s', fail => []);
    my $prefix = setup('reopen');
    my $seconds = $SECONDS{reopen};
    my ($gen, $book) = traffic('reopen', 0.8);
    my %acked;
    my ($rotations, $last, @rename_fail) = (0, 0);
    my $st = run_load($gen, $seconds,
        on_response => sub {
            my ($m, $status) = @_;
            $acked{ $m->[2] } = 1 if $m->[0] eq 'report' && $status == 204;
        },
        tick_every => 0.1,
        tick => sub {
            my ($el) = @_;
            return unless $el - $last >= 1 && $el < $seconds - 0.3;
            $last = $el;
            my $n = $rotations + 1;
            if (rename "$prefix/logs/reports.log", "$prefix/logs/reports.log.$n") {
                $rotations = $n;
                nginx_signal($master, 'USR1');
            } else {
                push @rename_fail, "$n: $!";
            }
        },
    );
    load_figures(\%res, $st);
    push @{ $res{fail} }, "$st->{unanswered} requests unanswered" if $st->{unanswered};
    push @{ $res{fail} }, "renaming the log failed (not reopened?): @rename_fail" if @rename_fail;
    push @{ $res{fail} }, "only $rotations rotations" if $rotations < $seconds - 2;
    my ($s) = status(5);
    die "reopen: no status at the end\n" unless $s;
    my @files = ((map { "$prefix/logs/reports.log.$_" } 1 .. $rotations), "$prefix/logs/reports.log");
    my $logs = read_logs(@files);
    check_reports(\%res, $book, \%acked, $logs, $s, extra_ok => sub { 0 });
    my @empty = grep { !$_->[1] || $_->[1] eq 'missing' } @{ $logs->{per_file} };
    push @{ $res{fail} }, "empty or missing log files: " . join(' ', map { $_->[0] } @empty) if @empty;

    print "\n== nginx -s reopen (USR1) with the log renamed every second (${seconds} s)\n";
    printf "rotations: %d; lines per file: %s\n", $rotations,
        join(', ', map { "$_->[0]=$_->[1]" } @{ $logs->{per_file} });
    printf "reports: %d sent, %d acknowledged, %d lines in %d files, %d ids exactly once\n",
        $res{reports_sent}, $res{acknowledged}, $logs->{lines}, scalar @files,
        scalar grep { $_ == 1 } values %{ $logs->{ids} };
    printf "errors counter / log lines per flag: %s\n", $res{counters_vs_log};
    my @el = error_log_problems($prefix);
    push @{ $res{fail} }, "error log: $_" for @el[0 .. ($#el < 4 ? $#el : 4)];
    teardown();
    return \%res;
}

# ---------------------------------------------------------- 4. window

# Configuration $k of the window storm: the http-level policy's window and
# the per-flag window of "search" swap between 60 s and 61 s at every
# reload; min_errors is out of reach, so nothing rolls back.
sub window_config {
    my ($k) = @_;
    my %c = (http => $k % 2 ? 61 : 60, flag => $k % 2 ? 60 : 61);
    ($c{json} = $FAULTS_JSON) =~ s/("name": "search", "enabled": true, "rolloutPercentage": 100)/$1, "rollback": {"minErrors": 100000000, "rate": 100, "window": $c{flag}}/
        or die "window: no search flag to give a window\n";
    $c{rollback} = "min_errors=100000000 rate=100% window=$c{http}s";
    return %c;
}

sub scenario_window {
    my %res = (name => 'window-changing reloads', fail => []);
    my $seconds = $SECONDS{window};
    my $version = 0;
    my %cur = window_config($version);
    my $prefix = setup('window', faults_json => $cur{json}, rollback => $cur{rollback});
    my ($gen, $book) = traffic('window', 0.8);
    my (%acked, %acked_by_flag, %resent_ids);
    my ($reloads, $last_hup) = (0, 0);
    my $t0 = time;
    my $st = run_load($gen, $seconds,
        resend => resend_into(\%resent_ids),
        on_response => sub {
            my ($m, $status) = @_;
            return unless $m->[0] eq 'report' && $status == 204;
            $acked{ $m->[2] } = 1;
            $acked_by_flag{ $m->[3] }++;
        },
        tick_every => 0.05,
        tick => sub {
            my ($el) = @_;
            return unless $el - $last_hup >= 0.5 && $el < $seconds - 0.5;
            %cur = window_config(++$version);
            replace_file("$prefix/conf/faults.json", $cur{json});
            write_conf($prefix, rollback => $cur{rollback});
            nginx_signal($master, 'HUP');
            $reloads++;
            $last_hup = $el;
        },
    );
    load_figures(\%res, $st);
    push @{ $res{fail} }, "$st->{unanswered} requests unanswered" if $st->{unanswered};
    push @{ $res{fail} }, "only $reloads reloads" if $reloads < 2 * $seconds - 3;

    # the window is read with the last configuration, its old workers gone
    my @left = wait_old_workers_gone(30);
    push @{ $res{fail} }, "old workers still there 30 s after the last reload: @left" if @left;
    my $master_reloads = () = (read_file("$prefix/logs/error.log") // '') =~ /: reconfiguring$/mg;
    my ($all, $err) = status_all(5);
    die "window: no status at the end: $err\n" unless $all;
    my $s = $all->{faults};
    my $age = time - $t0;
    push @{ $res{fail} }, sprintf('the run took %.0f s, not shorter than the window: the check is void', $age)
        if $age >= 59;

    my $logs = read_logs("$prefix/logs/reports.log");
    check_reports(\%res, $book, \%acked, $logs, $s, extra_ok => sub { 0 });

    my @rows;
    for my $f (@ALL_FLAGS) {
        my $fs = $s->{$f} // {};
        my ($a, $l) = ($acked_by_flag{$f} // 0, $logs->{by_flag}{$f} // 0);
        my ($c, $w) = ($fs->{counters}{errors}, $fs->{window}{errors});
        my ($ee, $we) = ($fs->{counters}{enabledEvaluations}, $fs->{window}{enabledEvaluations});
        my $own = $f eq 'search';
        my $want_seconds = $own ? $cur{flag} : $f eq 'trip' ? 60 : $cur{http};
        my @bad;
        push @bad, "$l log lines" if $l != $a;
        push @bad, 'errors counter ' . ($c // 'missing') if !defined $c || $c != $a;
        push @bad, "window $fs->{window}{seconds} s, want $want_seconds s"
            if ($fs->{window}{seconds} // -1) != $want_seconds;
        if (!$own) {
            push @bad, 'window errors ' . ($w // 'missing') if !defined $w || $w != $a;
            push @bad, 'window enabledEvaluations ' . ($we // 'missing') . " != lifetime " . ($ee // 'missing')
                if !defined $we || !defined $ee || $we != $ee;
        }
        push @{ $res{fail} }, "flag $f: $a acknowledged but " . join(', ', @bad) if @bad;
        push @rows, [$f, ($fs->{window}{seconds} // '?') . ' s' . ($own ? ' (own)' : ''), $a, $l, $c // '-', $w // '-',
                     ($ee // '-') . ' / ' . ($we // '-'),
                     $own ? 'lifetime only (*)' : 'lifetime and window',
                     @bad ? 'FAIL' : 'ok'];
    }

    print "\n== reload (HUP) every 0.5 s swapping the window between 60 s and 61 s during load (${seconds} s)\n";
    printf "reloads: %d sent, %d logged by the master; last configuration: http window %d s, search's own window %d s\n",
        $reloads, $master_reloads, $cur{http}, $cur{flag};
    printf "requests: %d sent, %d answered, %d failed, %d resent after a close without answer (%d reports), connections closed by nginx %d\n",
        $res{sent}, $res{answered}, $res{unexpected} + $res{unanswered}, $res{resent}, scalar keys %resent_ids, $res{closes};
    printf "status read %.1f s after the load started (every report is inside the window)\n", $age;
    print fmt_table(['flag', 'window', 'acked (204)', 'logged', 'errors counter', 'window errors',
                     'enabled evals lifetime / window', 'compared', 'result'], @rows);
    print "(*) search's own window changed its definition at every reload, and a definition change starts\n",
          "    the window fresh (docs/rollback.md): only its lifetime counter must equal the acknowledged reports\n";
    my @el = error_log_problems($prefix);
    push @{ $res{fail} }, "error log: $_" for @el[0 .. ($#el < 4 ? $#el : 4)];
    teardown();
    return \%res;
}

# ---------------------------------------------------------- 5. slowpost

sub flag_json {
    my ($name, $rollback) = @_;
    return qq({"name": "$name", "enabled": true, "rolloutPercentage": 100, "rollback": $rollback});
}

sub flags_json { return '{"flags": [' . join(",\n  ", @_) . "]}\n" }

# Reads the answer to a held report after its last byte (Connection:
# close): (status, worker pid), status 0 on a timeout or a broken answer.
sub finish_held {
    my ($h, $timeout) = @_;
    my $s = $h->{s};
    my $resp = '';
    if (defined syswrite($s, $h->{last})) {
        my $sel = IO::Select->new($s);
        my $until = time + $timeout;
        while ((my $left = $until - time) > 0) {
            last unless $sel->can_read($left);
            my $n = sysread($s, $resp, 65536, length $resp);
            last unless $n;
        }
    }
    close $s;
    my $status = $resp =~ m{^HTTP/1\.1 (\d{3})} ? $1 + 0 : 0;
    my $worker = $resp =~ /\r\nX-Worker: (\d+)/ ? $1 : '-';
    return ($status, $worker);
}

sub scenario_slowpost {
    my %res = (name => 'report held over 2 reloads', fail => []);
    my $t0 = time;
    my $doomed = flag_json('doomed', '{"minErrors": 1, "rate": 1, "window": 60}');
    my $keep = flag_json('keep', 'false');
    my @blog = ('blog-post');
    my $prefix = setup('slowpost', faults_json => flags_json($doomed, $keep), rollback => undef,
                       projects => [['blog', $BLOG_TOKEN, 'blog.json']],
                       files => { 'blog.json' => flags_json(map { flag_json($_, 'false') } @blog) });
    my @gen1 = worker_pids($master);

    # reports for "doomed", each on its own connection, all but the last byte sent
    my @held;
    local $SIG{PIPE} = 'IGNORE';
    for my $i (1 .. $HELD) {
        my $id = "slowpost-held-$i";
        my $body = qq({"flagName":"doomed","message":"$id"});
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $PORT, Proto => 'tcp', Timeout => 2);
        if (!$s) {
            push @{ $res{fail} }, "held report $i: connect: $!";
            next;
        }
        my $req = "POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n$AUTH\r\n"
                . "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n\r\n$body";
        syswrite($s, substr($req, 0, -1)) == length($req) - 1
            or push @{ $res{fail} }, "held report $i: short write";
        push @held, { id => $id, s => $s, last => substr($req, -1) };
    }
    sleep 0.3;

    # reload 1 removes doomed; reload 2 gives blog 20 more flags
    replace_file("$prefix/conf/faults.json", flags_json($keep));
    my $e = reload_and_wait($prefix);
    push @{ $res{fail} }, "reload 1: $e" if $e;
    my @gen2 = grep { !is_exiting($_) } worker_pids($master);
    push @blog, map { "blog-new-$_" } 1 .. $NEW_FLAGS;
    replace_file("$prefix/conf/blog.json", flags_json(map { flag_json($_, 'false') } @blog));
    $e = reload_and_wait($prefix);
    push @{ $res{fail} }, "reload 2: $e" if $e;
    my @gen3 = grep { !is_exiting($_) } worker_pids($master);
    my @gen1_alive = grep { my $p = $_; grep { $_ == $p } worker_pids($master) } @gen1;
    push @{ $res{fail} }, 'no worker of the first generation left to answer the held reports' unless @gen1_alive;

    # the last bytes: the first generation's workers answer
    my (%acked, @answers);
    my %gen1 = map { $_ => 1 } @gen1;
    for my $h (@held) {
        my ($st, $w) = finish_held($h, 10);
        push @answers, "$st by $w";
        $acked{ $h->{id} } = 1 if $st == 204;
        push @{ $res{fail} }, "held report $h->{id} answered " . ($st || 'nothing') . ', want 204' if $st != 204;
        push @{ $res{fail} }, "held report $h->{id} answered by $w, not by a first-generation worker (@gen1)"
            if $st && !$gen1{$w};
    }
    my @left = wait_old_workers_gone(15);
    push @{ $res{fail} }, "old workers still there 15 s after the held reports: @left" if @left;

    # blog is untouched: status first (the GET below counts evaluations)
    my ($all, $err) = status_all(5);
    die "slowpost: no status at the end: $err\n" unless $all;
    my (@rows, @bad_flags);
    for my $f (@blog) {
        my $fs = $all->{blog}{$f};
        my @bad;
        if (!$fs) {
            @bad = ('missing from the status');
        } else {
            push @bad, 'rolled back' if $fs->{rolledBack} || defined $fs->{rollback};
            push @bad, "errors $fs->{counters}{errors}" if ($fs->{counters}{errors} // -1) != 0;
            push @bad, "window errors $fs->{window}{errors}" if ($fs->{window}{errors} // -1) != 0;
            push @bad, "effective rollout $fs->{effectiveRolloutPercentage}" if ($fs->{effectiveRolloutPercentage} // -1) != 100;
        }
        push @bad_flags, "blog flag $f: " . join(', ', @bad) if @bad;
        push @rows, [$f, $fs ? ($fs->{rolledBack} ? 'yes' : 'no', $fs->{counters}{errors}, $fs->{window}{errors},
                                $fs->{effectiveRolloutPercentage}) : ('-') x 4, @bad ? 'FAIL' : 'ok'];
    }
    push @{ $res{fail} }, @bad_flags;
    push @{ $res{fail} }, 'doomed still in the status of project faults' if $all->{faults}{doomed};

    my ($gst, undef, $gbody) = http1($PORT, 'GET', '/flags?userId=u1', headers => ["Authorization: Bearer $BLOG_TOKEN"]);
    my $ev = $gst == 200 ? eval { $json->decode($gbody) } : undef;
    my @got = $ev ? map { $_->{name} } @{ $ev->{flags} } : ();
    my @off = $ev ? map { $_->{name} } grep { !$_->{enabled} || $_->{rolloutPercentage} != 100 } @{ $ev->{flags} } : ();
    if (!$ev) {
        push @{ $res{fail} }, "GET /flags for blog answered $gst: " . substr($gbody // '', 0, 200);
    } else {
        push @{ $res{fail} }, "GET /flags for blog lists @got, want @blog" if "@got" ne "@blog";
        push @{ $res{fail} }, scalar(@off) . " blog flags off in GET /flags: @off" if @off;
    }

    my $state = read_file("$prefix/conf/state/flags-state.json");
    my @in_state = defined $state ? grep { $state =~ /"\Q$_\E"/ } 'doomed', 'blog', @blog : ();
    push @{ $res{fail} }, "the state file mentions @in_state" if @in_state;

    my $logs = read_logs("$prefix/logs/reports.log");
    my $doomed_lines = $logs->{by_flag}{doomed} // 0;
    my @lost = grep { !$logs->{ids}{$_} } keys %acked;
    push @{ $res{fail} }, scalar(@lost) . " acknowledged held reports missing from the log" if @lost;
    push @{ $res{fail} }, "$logs->{lines} report log lines, $doomed_lines for doomed; want " . scalar(keys %acked) . ' for doomed only'
        if $logs->{lines} != keys %acked || $doomed_lines != keys %acked;
    push @{ $res{fail} }, "$logs->{torn} torn lines in the report log" if $logs->{torn};
    my $elog = read_file("$prefix/logs/error.log") // '';
    my $doomed_rolled = $elog =~ /rolled back flag "doomed"/ ? 'yes' : 'no';

    %res = (%res, sent => scalar @held, answered => scalar(grep { !/^0 / } @answers), reports_sent => scalar @held,
            acknowledged => scalar keys %acked, log_lines => $logs->{lines}, lost => scalar @lost,
            duplicates => scalar(grep { $_ > 1 } values %{ $logs->{ids} }), torn => $logs->{torn},
            unexpected => scalar(grep { !/^204 / } @answers), unanswered => 0, seconds => time - $t0);

    print "\n== a report held open across two reloads ($HELD reports for doomed, then doomed removed, then $NEW_FLAGS flags added to blog)\n";
    printf "workers: generation 1 %s (%s still draining at the last byte), generation 2 %s, generation 3 %s\n",
        "@gen1", "@gen1_alive", "@gen2", "@gen3";
    printf "held reports answered: %s\n", join(', ', @answers);
    printf "report log: %d lines, %d for doomed; doomed rolled back by the old workers (error log): %s\n",
        $logs->{lines}, $doomed_lines, $doomed_rolled;
    printf "blog GET /flags: %d flags, %d off; state file: %s\n", scalar @got, scalar @off,
        !defined $state ? 'absent' : @in_state ? "mentions @in_state" : length($state) . ' bytes, mentions neither doomed nor blog';
    print fmt_table(['blog flag', 'rolled back', 'errors', 'window errors', 'effective %', 'result'], @rows);
    my @el = error_log_problems($prefix);
    push @{ $res{fail} }, "error log: $_" for @el[0 .. ($#el < 4 ? $#el : 4)];
    teardown();
    return \%res;
}

# -------------------------------------------------------------------- main

my %run = (kill => \&scenario_kill, reload => \&scenario_reload, reopen => \&scenario_reopen,
           window => \&scenario_window, slowpost => \&scenario_slowpost);
my @results;
my $t0 = time;
printf "faults: nginx %s, 2 workers on 127.0.0.1:%d, %d connections x %d pipelined; scenarios: %s\n",
    $BIN, $PORT, $CONNS, $DEPTH, "@scenarios";
for my $sc (@scenarios) {
    my $r = eval { $run{$sc}->() };
    if (!$r) {
        my $err = $@ || 'unknown error';
        teardown() if $master;
        $r = { name => $sc, fail => ["scenario aborted: $err"] };
    }
    push @results, $r;
}

print "\n== summary (", sprintf('%.0f s', time - $t0), ")\n";
print fmt_table(
    ['scenario', 'requests', 'req/s', 'reports', 'acknowledged', 'log lines', 'lost', 'duplicates', 'torn',
     'failed requests', 'resent', 'unanswered (killed)', 'time', 'result'],
    map {
        my $r = $_;
        [$r->{name}, $r->{sent} // '-', $r->{seconds} ? sprintf('%.0f', $r->{sent} / $r->{seconds}) : '-',
         $r->{reports_sent} // '-', $r->{acknowledged} // '-', $r->{log_lines} // '-', $r->{lost} // '-',
         $r->{duplicates} // '-', $r->{torn} // '-',
         defined $r->{unexpected} ? $r->{unexpected} + ($r->{name} =~ /kill/ ? 0 : $r->{unanswered}) : '-',
         $r->{resent} // '-', $r->{name} =~ /kill/ ? $r->{unanswered} // '-' : '-',
         defined $r->{seconds} ? sprintf('%.1f s', $r->{seconds}) : '-',
         @{ $r->{fail} } ? 'FAIL' : 'ok']
    } @results);

my $failed = 0;
for my $r (@results) {
    next unless @{ $r->{fail} };
    $failed = 1;
    print "\n$r->{name}: FAILED\n", map { "  - $_\n" } @{ $r->{fail} };
}
print $failed ? "\nfaults: FAILED\n" : "\nfaults: PASSED\n";
exit $failed;
