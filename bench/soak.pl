#!/usr/bin/perl
# bench/soak.pl - a soak test of ngx_http_flags_module: a few million mixed
# requests over keep-alive connections against one nginx (2 workers), with
# four checkpoints (one every quarter of the requests) where it records the
# RSS of each worker, the resident pages of the shared zone in each worker
# and the module's own counters.
#
#   bench/soak.pl                   (after ./build.sh; core Perl only)
#
# Traffic: ~85% GET /flags (random userId, 0-6 traits, some percent-encoded,
# some anonymous), ~10% POST /ingest/errors (95% valid reports spread over
# the 50 flags; the rest bad JSON, an unknown flag, a missing or mistyped
# field), ~5% GET /flags-status.  The project has 50 flags and
# "flags_rollback off", except the flag "trip-me" whose own rollback policy
# trips in the first quarter and must stay the only rollback.
#
# Pass criteria (exit status 1 when one fails):
#   - every response has the status its request expects (0 unexpected), none
#     is left unanswered, bodies look right (50 flags per evaluation;
#     sampled bodies parsed with JSON::PP);
#   - the workers are the same processes at every checkpoint (no crash);
#   - worker RSS at the end <= first quarter's value + 10% and + 4 MB;
#   - resident pages of the zone in each worker flat from the first quarter
#     on (within 4 pages);
#   - flags_status counters equal what the client sent: evaluations of every
#     flag = GET /flags answered (total = GETs x 50), errors of every flag =
#     its 204s;
#   - report log lines = 204s; "trip-me" rolled back (one warn line), no
#     other flag; no alert, crit or emerg in the error log.
#
# Environment: SOAK_REQUESTS (2000000), SOAK_SECONDS (600, a time cap),
# SOAK_PORT (18181), SOAK_CONNS (32, over all client processes), SOAK_DEPTH
# (4 pipelined requests per connection), SOAK_PROCS (2 client processes),
# NGINX_BIN (/usr/sbin/nginx).  Everything is written under build/soak/.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use LoadGen qw(nginx_start nginx_stop worker_pids vmrss_kb zone_smaps http1
               count_lines read_file write_file fmt_table);
use Cwd qw(abs_path);
use File::Copy qw(copy);
use File::Path qw(make_path remove_tree);
use JSON::PP ();
use POSIX qw(floor);
use Time::HiRes qw(time);

$| = 1;

my $ROOT     = abs_path("$FindBin::Bin/..");
my $NREQ     = $ENV{SOAK_REQUESTS} // 2_000_000;
my $MAXSEC   = $ENV{SOAK_SECONDS} // 600;
my $PORT     = $ENV{SOAK_PORT} // 18181;
my $CONNS    = $ENV{SOAK_CONNS} // 32;
my $DEPTH    = $ENV{SOAK_DEPTH} // 4;
my $PROCS    = $ENV{SOAK_PROCS} // 2;
my $BIN      = $ENV{NGINX_BIN} // '/usr/sbin/nginx';
my $MODULE   = "$ROOT/build/ngx_http_flags_module.so";
my $PREFIX   = "$ROOT/build/soak";
my $ZONE_KB  = 8192;
my $TOKEN    = 'soak_tok_1';
my $NFLAGS   = 50;
my $TRIP     = 'trip-me';

die "usage: bench/soak.pl (settings in the environment, see the header)\n" if @ARGV;
-f $MODULE or die "$MODULE missing: run ./build.sh first\n";

# ---------------------------------------------------------------- flags file
my @segments = (
    ['paying',     [{trait => 'plan', op => 'in', values => ['pro', 'enterprise']}]],
    ['de',         [{trait => 'country', op => 'eq', value => 'de', ignoreCase => JSON::PP::true}]],
    ['modern-app', [{trait => 'appVersion', op => 'semver_gt', value => '2.0.0'}]],
    ['staff',      [{trait => 'email', op => 'regex', value => '^[a-z.]+@example\\.com$', ignoreCase => JSON::PP::true}]],
    ['heavy',      [{trait => 'sessions', op => 'gte', value => 40}]],
    ['internal',   [{trait => 'plan', op => 'eq', value => 'internal'}]],
    ['clean',      [{trait => 'banned', op => 'not_exists'}, {trait => 'city', op => 'neq', value => 'Atlantis'}]],
    ['beta-app',   [{trait => 'appVersion', op => 'contains', value => 'beta'}]],
    ['newcomer',   [{trait => 'sessions', op => 'lt', value => 5}, {trait => 'plan', op => 'starts_with', value => 'fr'}]],
    ['everyone',   []],
);
my @pcts = (0, 5, 10, 25.5, 50, 75, 99.999, 100, 33.333, 1);
my @flags;
for my $i (0 .. $NFLAGS - 1) {
    if ($i == 25) {
        push @flags, {name => $TRIP, enabled => JSON::PP::true, rolloutPercentage => 100,
                      segments => ['internal'],
                      rollback => {minErrors => 100, rate => 1, window => 60}};
        next;
    }
    my %f = (name => sprintf('flag-%02d', $i),
             enabled => ($i % 13 == 12 ? JSON::PP::false : JSON::PP::true),
             rolloutPercentage => $pcts[$i % @pcts]);
    my $ns = $i % 3;
    $f{segments} = [map { $segments[($i + 3 * $_) % @segments][0] } 0 .. $ns - 1] if $ns;
    $f{stickiness} = 'accountId' if $i % 7 == 3;
    push @flags, \%f;
}
my @flag_names = map { $_->{name} } @flags;
my ($TRIP_IDX) = grep { $flag_names[$_] eq $TRIP } 0 .. $#flag_names;
my $flags_json = JSON::PP->new->canonical->pretty->encode({
    flags => \@flags,
    segments => { map { $_->[0] => {rules => $_->[1]} } @segments },
});

# ----------------------------------------------------------------- the nginx
sub stop_leftover {
    # an nginx left running in our own prefix by an interrupted run
    my $pid = read_file("$PREFIX/logs/nginx.pid") // return;
    chomp $pid;
    return unless $pid =~ /^\d+$/ && kill 0, $pid;
    my $cmd = read_file("/proc/$pid/cmdline") // '';
    nginx_stop($pid) if $cmd =~ /nginx/ && $cmd =~ /\Q$PREFIX\E/;
}
stop_leftover();
remove_tree($PREFIX);
make_path("$PREFIX/conf/flags", "$PREFIX/logs", "$PREFIX/modules", "$PREFIX/client");
copy($MODULE, "$PREFIX/modules/ngx_http_flags_module.so") or die "copy module: $!\n";
write_file("$PREFIX/conf/flags/soak.json", $flags_json);
my $user = $> == 0 ? "user root;\n" : '';
write_file("$PREFIX/conf/nginx.conf", <<"_C_");
load_module $PREFIX/modules/ngx_http_flags_module.so;
${user}worker_processes 2;
error_log logs/error.log notice;
pid logs/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    flags_zone flags:8m;
    flags_project soak token=$TOKEN file=flags/soak.json;
    flags_rollback off;
    flags_error_log logs/reports.log;
    server {
        listen 127.0.0.1:$PORT;
        server_name localhost;
        location = /flags         { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status  { allow 127.0.0.1; deny all; flags_status; }
        location /flags-admin/    { allow 127.0.0.1; deny all; flags_admin; }
    }
}
_C_

my $master = nginx_start($BIN, $PREFIX, $PORT);
my @workers = worker_pids($master);
$SIG{INT} = $SIG{TERM} = sub { nginx_stop($master); exit 130 };
my $PARENT = $$;
END { nginx_stop($master) if $master && $$ == $PARENT }

# ------------------------------------------------------------------ requests
my @plans     = qw(free pro enterprise trial fr-basic);
my @countries = qw(de DE fr us br De);
my @versions  = ('1.9.0', '2.3.1', 'v3.0.0-beta.1', '2.0.0', '10.2', 'x.y');
my @cities    = ('S%C3%A3o+Paulo', 'Berlin', 'New+York', 'Atlantis', '%E6%9D%B1%E4%BA%AC');
my @emails    = ('ana.silva%40example.com', 'bob%40EXAMPLE.com', 'eve%40evil.test', 'x+y%40example.com');
my $AUTH      = "Authorization: Bearer $TOKEN\r\n";

sub get_flags {
    my $q = '';
    my $r = rand;
    $q .= 'userId=u' . int(rand 5_000_000) if $r < 0.9;           # 10% anonymous
    $q .= '&trait_plan=' . ($r < 0.005 ? 'internal' : $plans[rand @plans]) if rand() < 0.8;
    $q .= '&trait_country=' . $countries[rand @countries] if rand() < 0.7;
    $q .= '&trait_appVersion=' . $versions[rand @versions] if rand() < 0.6;
    $q .= '&trait_email=' . $emails[rand @emails] if rand() < 0.3;
    $q .= '&trait_sessions=' . int(rand 80) if rand() < 0.5;
    $q .= '&trait_accountId=acct-' . int(rand 1000) if rand() < 0.3;
    $q .= '&trait_city=' . $cities[rand @cities] if rand() < 0.2;
    $q .= '&trait_banned=' if rand() < 0.05;
    return ("GET /flags?$q HTTP/1.1\r\nHost: localhost\r\n$AUTH\r\n", ['flags', 200]);
}

my $report_seq = 0;
sub post_report {
    my $r = rand;
    my ($body, $meta);
    if ($r < 0.95) {
        my $i = rand() < 0.05 ? $TRIP_IDX : int rand $NFLAGS;   # trip-me gets ~7% of them
        $report_seq++;
        $body = qq({"flagName":"$flag_names[$i]","message":"TypeError: cannot read property 'x' of undefined #$$-$report_seq",)
              . qq("stack":"TypeError: x\\n    at render (app.js:10:5)\\n    at main (app.js:99:1)",)
              . qq("userId":"u) . int(rand 5_000_000)
              . qq(","traits":{"plan":"$plans[rand @plans]","beta":true,"sessions":) . int(rand 80) . qq(,"x":null}});
        $meta = ['report', 204, $i];
    } elsif ($r < 0.9625) {
        $body = '{"flagName":"flag-01","message":';                   # bad JSON
        $meta = ['bad_json', 400];
    } elsif ($r < 0.975) {
        $body = '{"flagName":"no-such-flag","message":"m"}';
        $meta = ['unknown_flag', 404];
    } elsif ($r < 0.9875) {
        $body = '{"flagName":"flag-02"}';                              # message missing
        $meta = ['missing_field', 400];
    } else {
        $body = '{"flagName":"flag-03","message":"m","traits":{"a":[1]}}';  # trait of a wrong type
        $meta = ['bad_field', 400];
    }
    return ("POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\n$AUTH"
            . "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n\r\n$body", $meta);
}

sub next_request {
    my $r = rand;
    return get_flags() if $r < 0.85;
    return post_report() if $r < 0.95;
    return ("GET /flags-status HTTP/1.1\r\nHost: localhost\r\n\r\n", ['status', 200]);
}

# --------------------------------------------------------- one client process
sub client {
    my ($n, $conns, $seconds, $out) = @_;
    my @acks = (0) x $NFLAGS;
    my ($bad_bodies, @bad_examples, $parsed) = (0);
    my $json = JSON::PP->new;
    my $k = 0;
    my $st = LoadGen::run(
        port => $PORT, conns => $conns, depth => $DEPTH,
        max_requests => $n, max_seconds => $seconds,
        next => \&next_request,
        on_response => sub {
            my ($m, $status, $body) = @_;
            my $kind = $m->[0];
            if ($kind eq 'report') {
                $acks[$m->[2]]++ if $status == 204;
                return;
            }
            return unless $status == 200 && ($kind eq 'flags' || $kind eq 'status');
            my $bad;
            if ($kind eq 'flags') {
                my $nf = () = $body =~ /\{"name":"/g;
                $bad = "evaluation with $nf flags" if substr($body, 0, 10) ne '{"flags":[' || $nf != $NFLAGS;
                if (!$bad && ++$k % 4000 == 0) {
                    my $d = eval { $json->decode($body) };
                    $parsed++;
                    $bad = "evaluation body: " . ($@ || 'fields') unless $d && @{ $d->{flags} } == $NFLAGS
                        && !grep { !exists $_->{enabled} || !exists $_->{rolloutPercentage}
                                   || ref $_->{segments} ne 'ARRAY' } @{ $d->{flags} };
                }
            } else {
                $bad = 'status body' if substr($body, -4) ne ']}]}' || index($body, '{"name":"soak","flags":[') < 0;
                if (!$bad && ++$k % 500 == 0) {
                    my $d = eval { $json->decode($body) };
                    $parsed++;
                    $bad = "status body: " . ($@ || 'flags') unless $d && @{ $d->{projects}[0]{flags} } == $NFLAGS;
                }
            }
            if ($bad) {
                $bad_bodies++;
                push @bad_examples, "$bad: " . substr($body, 0, 300) if @bad_examples < 5;
            }
        },
    );
    delete $st->{close_reasons} unless %{ $st->{close_reasons} };
    write_file($out, JSON::PP->new->canonical->encode({
        st => $st, acks => \@acks, bad_bodies => $bad_bodies,
        bad_examples => \@bad_examples, parsed => $parsed // 0 }));
}

# --------------------------------------------------------------- measurement
sub status_counters {
    my ($st, undef, $body) = http1($PORT, 'GET', '/flags-status', timeout => 10);
    die "GET /flags-status: $st $body\n" unless $st == 200;
    my $d = JSON::PP->new->decode($body);
    my %c;
    for my $f (@{ $d->{projects}[0]{flags} }) {
        $c{ $f->{name} } = $f;
    }
    return \%c;
}

my %tot = (sent => 0, answered => 0, unanswered => 0, unexpected => 0, resent => 0,
           closes => 0, connect_errors => 0, bad_bodies => 0, parsed => 0);
my %kinds;
my @acks = (0) x $NFLAGS;
my (@examples, @checkpoints);
my $t_start = time;
my $failed_quarters = 0;

printf "soak: %d requests (cap %d s), %d connections x %d pipelined, %d client processes, nginx %d workers (%s) on 127.0.0.1:%d\n",
    $NREQ, $MAXSEC, $CONNS, $DEPTH, $PROCS, scalar @workers, "@workers", $PORT;

for my $q (1 .. 4) {
    my $share = floor($NREQ * $q / 4) - floor($NREQ * ($q - 1) / 4);
    my $left = $MAXSEC - (time - $t_start);
    my $budget = $left / (5 - $q);
    $budget = 1 if $budget < 1;
    my $tq = time;
    my %kids;
    for my $p (0 .. $PROCS - 1) {
        my $n = floor($share * ($p + 1) / $PROCS) - floor($share * $p / $PROCS);
        my $c = floor($CONNS * ($p + 1) / $PROCS) - floor($CONNS * $p / $PROCS);
        my $out = "$PREFIX/client/q$q-p$p.json";
        unlink $out;
        my $pid = fork() // die "fork: $!\n";
        if (!$pid) {
            $SIG{INT} = $SIG{TERM} = 'DEFAULT';
            srand($$ ^ int(time * 1000));
            eval { client($n, $c, $budget, $out); 1 } or do { print STDERR "client: $@"; POSIX::_exit(1) };
            POSIX::_exit(0);
        }
        $kids{$pid} = $out;
    }
    for my $pid (keys %kids) {
        waitpid($pid, 0);
        my $r = eval { JSON::PP->new->decode(read_file($kids{$pid}) // die "no result\n") }
            or die "client process $pid failed: $@\n";
        my $st = $r->{st};
        $tot{$_} += $st->{$_} // 0 for qw(sent answered unanswered unexpected resent closes connect_errors);
        $tot{bad_bodies} += $r->{bad_bodies};
        $tot{parsed} += $r->{parsed};
        push @examples, @{ $st->{examples} }, @{ $r->{bad_examples} };
        $acks[$_] += $r->{acks}[$_] for 0 .. $NFLAGS - 1;
        for my $k (keys %{ $st->{by_kind} }) {
            my $b = $st->{by_kind}{$k};
            $kinds{$k}{$_} += $b->{$_} // 0 for qw(sent answered unexpected unanswered resent);
            $kinds{$k}{status}{$_} += $b->{status}{$_} for keys %{ $b->{status} || {} };
        }
    }
    my $dt = time - $tq;

    my @now_workers = worker_pids($master);
    my $counters = status_counters();
    my %cp = (
        q => $q, requests => $tot{sent}, seconds => $dt, rps => $share / ($dt || 1),
        workers => [@now_workers],
        rss => { map { $_ => vmrss_kb($_) } @now_workers },
        zone => { map { $_ => zone_smaps($_, $ZONE_KB) } @now_workers },
        evaluations => 0, errors => 0,
        log_lines => count_lines("$PREFIX/logs/reports.log"),
    );
    for my $f (values %$counters) {
        $cp{evaluations} += $f->{counters}{evaluations};
        $cp{errors} += $f->{counters}{errors};
    }
    push @checkpoints, \%cp;
    printf "  quarter %d: %d requests in %.1f s (%.0f req/s)\n", $q, $share, $dt, $cp{rps};
}
my $elapsed = time - $t_start;

# --------------------------------------------------------------------- report
my @fail;
my $final = status_counters();
my $gets = $kinds{flags}{status}{200} // 0;
my $reports_204 = $kinds{report}{status}{204} // 0;

print "\n";
my @head = ('checkpoint', 'requests', 'req/s');
for my $i (0 .. $#workers) {
    push @head, "w$i RSS kB", "w$i zone Rss kB";
}
push @head, 'evaluations', 'errors', 'log lines';
my @rows = (\@head);
for my $cp (@checkpoints) {
    my @r = ("Q$cp->{q}", $cp->{requests}, sprintf('%.0f', $cp->{rps}));
    for my $w (@workers) {
        push @r, $cp->{rss}{$w} // 'gone', ($cp->{zone}{$w} ? $cp->{zone}{$w}{rss} : 'n/a');
    }
    push @r, $cp->{evaluations}, $cp->{errors}, $cp->{log_lines};
    push @rows, \@r;
}
print fmt_table(@rows), "\n";

my @krows = (['request kind', 'sent', 'answered', 'statuses', 'unexpected', 'unanswered']);
for my $k (sort keys %kinds) {
    my $s = $kinds{$k}{status} || {};
    push @krows, [$k, $kinds{$k}{sent} // 0, $kinds{$k}{answered} // 0,
                  join(' ', map { "$_:$s->{$_}" } sort keys %$s),
                  $kinds{$k}{unexpected} // 0, $kinds{$k}{unanswered} // 0];
}
print fmt_table(@krows), "\n";

# workers never replaced
for my $cp (@checkpoints) {
    push @fail, "workers changed at Q$cp->{q}: @{ $cp->{workers} } (started with @workers)"
        if "@{ $cp->{workers} }" ne "@workers";
}

# RSS and zone pages
my ($q1, $q4) = @checkpoints[0, -1];
for my $w (@workers) {
    my ($r1, $r4) = ($q1->{rss}{$w}, $q4->{rss}{$w});
    if (!defined $r1 || !defined $r4) {
        push @fail, "worker $w: no RSS";
        next;
    }
    my $d = $r4 - $r1;
    printf "worker %d RSS: Q1 %d kB, Q4 %d kB (%+d kB, %+.1f%%)\n", $w, $r1, $r4, $d, 100 * $d / $r1;
    push @fail, "worker $w RSS grew by $d kB (more than 10% or 4 MB)" if $r4 > $r1 * 1.10 || $d > 4096;

    my @z = map { $_->{zone}{$w} } @checkpoints;
    if (grep { !defined } @z) {
        push @fail, "worker $w: the zone mapping (/dev/zero, $ZONE_KB kB) was not found in smaps";
        next;
    }
    my @zr = map { $_->{rss} } @z;
    my ($min, $max) = (sort { $a <=> $b } @zr)[0, -1];
    printf "worker %d zone (%d kB mapping): Rss %s kB, Shared_Dirty %s kB (Q1..Q4)\n", $w, $ZONE_KB,
        join('/', @zr), join('/', map { $_->{shared_dirty} } @z);
    push @fail, "worker $w: zone resident pages moved by " . ($max - $min) . " kB after Q1 (more than 4 pages)"
        if $max - $min > 16;
}

# responses
push @fail, "$tot{unexpected} responses with an unexpected status" if $tot{unexpected};
push @fail, "$tot{unanswered} requests got no response" if $tot{unanswered};
push @fail, "$tot{bad_bodies} malformed response bodies" if $tot{bad_bodies};
push @fail, "$tot{connect_errors} connection errors" if $tot{connect_errors};
push @fail, "only $tot{sent} of $NREQ requests sent within $MAXSEC s" if $tot{sent} < $NREQ;

# counters against what the client sent
my ($ev_total, $err_total, @ctr_bad) = (0, 0);
for my $i (0 .. $NFLAGS - 1) {
    my $f = $final->{ $flag_names[$i] } or do { push @ctr_bad, "$flag_names[$i] missing from status"; next };
    my $c = $f->{counters};
    $ev_total += $c->{evaluations};
    $err_total += $c->{errors};
    push @ctr_bad, "$flag_names[$i]: evaluations $c->{evaluations} != GETs $gets" if $c->{evaluations} != $gets;
    push @ctr_bad, "$flag_names[$i]: errors $c->{errors} != 204s $acks[$i]" if $c->{errors} != $acks[$i];
}
push @fail, @ctr_bad;
push @fail, "total evaluations $ev_total != GETs x flags " . $gets * $NFLAGS if $ev_total != $gets * $NFLAGS;

my $log_lines = count_lines("$PREFIX/logs/reports.log");
push @fail, "report log has $log_lines lines, $reports_204 reports were answered 204" if $log_lines != $reports_204;

my @rolled = grep { $final->{$_}{rolledBack} } @flag_names;
push @fail, "rolled back: [@rolled], expected only $TRIP" if "@rolled" ne $TRIP;
my $elog = read_file("$PREFIX/logs/error.log") // '';
my $warns = () = $elog =~ /flags: rolled back flag/g;
push @fail, "$warns rollback warn lines, expected 1" if $warns != 1;
my @bad_log = $elog =~ /^(.*\[(?:alert|crit|emerg)\].*)$/mg;
push @fail, "error log: $_" for @bad_log[0 .. ($#bad_log < 4 ? $#bad_log : 4)];

printf "\nrequests %d in %.1f s: %.0f req/s overall (%d GET /flags, %d reports answered 204, %d status reads)\n",
    $tot{sent}, $elapsed, $tot{sent} / ($elapsed || 1), $gets, $reports_204, $kinds{status}{status}{200} // 0;
printf "unexpected statuses %d, unanswered %d, resent %d, connections closed by server %d, bad bodies %d (%d sampled bodies parsed)\n",
    $tot{unexpected}, $tot{unanswered}, $tot{resent}, $tot{closes}, $tot{bad_bodies}, $tot{parsed};
printf "status counters: evaluations %d (expected %d = %d GETs x %d flags), errors %d (expected %d); report log lines %d (expected %d)\n",
    $ev_total, $gets * $NFLAGS, $gets, $NFLAGS, $err_total, $reports_204, $log_lines, $reports_204;
printf "rollbacks: %s (warn lines: %d)\n", (@rolled ? "@rolled" : 'none'), $warns;
if ($final->{$TRIP}{rollback}) {
    my $rb = $final->{$TRIP}{rollback};
    printf "  %s rolled back at %s with %d errors / %d enabled evaluations in the window\n",
        $TRIP, $rb->{at}, $rb->{errors}, $rb->{enabledEvaluations};
}
print "examples:\n", map { "  $_\n" } @examples[0 .. ($#examples < 9 ? $#examples : 9)] if @examples;

nginx_stop($master);
$master = undef;

if (@fail) {
    print "\nsoak: FAILED\n", map { "  - $_\n" } @fail;
    exit 1;
}
print "\nsoak: PASSED\n";
exit 0;
