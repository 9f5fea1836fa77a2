# Evaluations counted in the worker first (issue 27): each worker adds
# its evaluations to memory of its own and folds them into the zone at
# the end of its event cycle (at most one fold a millisecond: a timer
# folds what waits), and before anything reads them; flags_status waits
# for the other workers' folds.  Two
# workers, keep-alive, distinct users (no memo answer): the counts in
# flags_status are exact, whichever worker answered and whichever worker
# is asked, one by one and pipelined; and a
# rollback decision on one worker sees the evaluations another worker
# answered just before (without them a 5 % error rate would read as
# 5 errors of 0 evaluations and roll back).  A worker that holds counts
# but does not run (SIGSTOP here, a busy machine in CI) is waited for
# until it folds, up to a second past its due time.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use JSON::PP;
use Time::HiRes qw(time);
use POSIX ();

my $dir = prefix_dir('counts-fold');

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "half", "enabled": true, "rolloutPercentage": 50},
  {"name": "all", "enabled": true, "rolloutPercentage": 100},
  {"name": "risky", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 5, "rate": 50, "window": 60}}
 ]}
_J_

write_file("$dir/conf/nginx.conf", nginx_conf(http => <<'_H_', server => <<'_S_'));
    flags_project shop token=tok_shop file=shop.json;
_H_
        keepalive_requests 10000000;
        location = /flags { add_header X-Worker $pid; flags_evaluate; }
        location = /ingest/errors { add_header X-Worker $pid; flags_ingest_errors; }
        location = /flags-status {
            add_header X-Worker $pid;
            flags_status;
            allow 127.0.0.1;
            deny all;
        }
_S_

my $master = nginx_start($dir);
my ($ka, $asked) = worker_connections('/flags?userId=probe');
my @w = sort keys %$ka;
is(scalar @w, 2, 'a keep-alive connection on each worker');

# The probes that found the workers were evaluations too.  The last one
# was answered by the other worker, which adds it to the zone when its
# cycle ends, right after writing the answer: a worker descheduled in
# between (a busy machine) lets this read come first, so it waits for
# the count (at most 5 s) and then holds it to the probes made.
my $probes;
{
    my ($st, $f);
    for (1 .. 500) {
        ($st, my $body) = worker_request($ka->{ $w[0] }, GET => '/flags-status');
        last unless $st == 200;
        ($f) = grep { $_->{name} eq 'all' } @{ decode_json($body)->{projects}[0]{flags} };
        last if $f->{counters}{evaluations} >= $asked;
        select(undef, undef, undef, 0.01);
    }
    is($st, 200, 'flags_status: 200');
    $probes = $f->{counters}{evaluations};
    is($probes, $asked, "the $asked probes counted, no more");
}

sub counters {
    my ($s) = @_;
    my ($st, $body, $pid) = worker_request($s, GET => '/flags-status');
    die "flags_status: $st" unless $st == 200;
    my %c = map { $_->{name} => $_->{counters} } @{ decode_json($body)->{projects}[0]{flags} };
    return (\%c, $pid);
}

# Requests written at once and read after: many answers in one cycle.
sub pipelined {
    my ($s, @paths) = @_;
    send_requests($s, @paths);
    return read_answers($s, scalar @paths);
}

sub send_requests {
    my ($s, @paths) = @_;
    print $s join '', map {
        "GET $_ HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer tok_shop\r\n\r\n"
    } @paths;
}

# $n answers read from $s: [status, body] each
sub read_answers {
    my ($s, $n) = @_;
    my @answers;
    my $buf = '';
    while (@answers < $n) {
        if ($buf =~ /\A(.*?\r\n\r\n)/s) {
            my $h = $1;
            my ($len) = $h =~ /^Content-Length: (\d+)/mi;
            if (length($buf) >= length($h) + $len) {
                my $body = substr($buf, length $h, $len);
                substr($buf, 0, length($h) + $len) = '';
                my ($st) = $h =~ m{^HTTP/1\.1 (\d+)};
                push @answers, [$st, $body];
                next;
            }
        }
        my $n = sysread($s, $buf, 65536, length $buf);
        die "connection closed" unless $n;
    }
    return @answers;
}

# whether $s has something to read within $secs
sub readable {
    my ($s, $secs) = @_;
    my $rin = '';
    vec($rin, fileno($s), 1) = 1;
    return select(my $rout = $rin, undef, undef, $secs) > 0;
}

sub evaluations_in {
    my ($answer) = @_;
    die "flags_status: $answer->[0]" unless $answer->[0] == 200;
    my ($f) = grep { $_->{name} eq 'all' } @{ decode_json($answer->[1])->{projects}[0]{flags} };
    return $f->{counters}{evaluations};
}

# Two pipelines of 5 on the first worker, the second within a millisecond
# of the first one's fold, so that the worker holds its counts (for up to
# a millisecond, until its timer), and the worker stopped at once.
sub answer_then_stop {
    my ($tag) = @_;
    for my $p (1, 2) {
        my @a = pipelined($ka->{ $w[0] }, map { "/flags?userId=$tag-$p-$_" } 1 .. 5);
        die "status $_->[0]" for grep { $_->[0] != 200 } @a;
    }
    kill 'STOP', $w[0] or die "SIGSTOP $w[0]: $!";
    return 10;
}

my ($total, $half_on) = (0, 0);

# 150 users one by one on the first worker, 250 pipelined on the second
for my $i (1 .. 150) {
    my ($st, $body) = worker_request($ka->{ $w[0] }, GET => "/flags?userId=seq-$i");
    die "status $st" unless $st == 200;
    my ($h) = grep { $_->{name} eq 'half' } @{ decode_json($body)->{flags} };
    $half_on++ if $h->{enabled};
    $total++;
}
# the last request of the pipeline reads flags_status right after the
# evaluations before it (nginx runs a pipelined request from a posted
# event, after the fold posted by the one before it)
my @answers = pipelined($ka->{ $w[1] }, (map { "/flags?userId=pipe-$_" } 1 .. 250),
                        '/flags-status');
my $in_cycle = pop @answers;
for my $a (@answers) {
    die "status $a->[0]" unless $a->[0] == 200;
    my ($h) = grep { $_->{name} eq 'half' } @{ decode_json($a->[1])->{flags} };
    $half_on++ if $h->{enabled};
    $total++;
}
is(evaluations_in($in_cycle), $probes + $total,
   'flags_status pipelined after 250 evaluations counts them all');
cmp_ok($half_on, '>', 100, "half: $half_on of $total users on");
cmp_ok($half_on, '<', 300, '... and not all of them');

for my $w (@w) {
    my ($c, $pid) = counters($ka->{$w});
    is($pid, $w, "flags_status answered by worker $w");
    is($c->{all}{evaluations}, $probes + $total,
       "worker $w reads every evaluation of both workers: " . ($probes + $total));
    is($c->{all}{enabledEvaluations}, $probes + $total, '... all of them enabled for "all"');
    is($c->{half}{evaluations}, $probes + $total, '... "half" evaluated as often');
    # the probes are one user: "probe"'s answer of "half" counts in each
    my ($pst, $pbody) = worker_request($ka->{$w}, GET => '/flags?userId=probe');
    my ($ph) = grep { $_->{name} eq 'half' } @{ decode_json($pbody)->{flags} };
    my $probe_on = $ph->{enabled} ? $probes : 0;
    is($c->{half}{enabledEvaluations}, $half_on + $probe_on,
       '... and "half" enabled exactly as answered');
    $probes++;          # the request just made
}

# The rollback decision reads the other worker's evaluations: 100 on the
# second worker, pipelined, then 5 errors on the first: 5 % < 50 %.
my ($before) = counters($ka->{ $w[0] });
my $risky_before = $before->{risky}{enabledEvaluations};
# (the pipeline ends with flags_status on the second worker, so its
# cycle has ended and its counts are in the zone before the first reads)
pipelined($ka->{ $w[1] }, (map { "/flags?userId=r-$_" } 1 .. 100), '/flags-status');
for (1 .. 5) {
    my ($st) = worker_request($ka->{ $w[0] }, POST => '/ingest/errors',
                              '{"flagName":"risky","message":"m"}');
    is($st, 204, 'a report on the first worker: 204');
}
my ($after) = counters($ka->{ $w[0] });
is($after->{risky}{enabledEvaluations}, $risky_before + 100,
   'the first worker counts the second one\'s 100 evaluations');
is($after->{risky}{errors}, 5, '5 errors');
my ($st, $body) = worker_request($ka->{ $w[0] }, GET => '/flags?userId=r-1');
my ($r) = grep { $_->{name} eq 'risky' } @{ decode_json($body)->{flags} };
is($r->{enabled} ? 1 : 0, 1, 'risky is not rolled back: 5 errors of more than 100 evaluations');

# Folds are paced (at most one a millisecond): a worker that answers five
# requests in one cycle holds some of their counts back for up to a
# millisecond, and a timer folds them.  flags_status on the other worker
# right after waits until the zone has them (the zone says until when),
# so it counts every one: 50 times, each a pipeline of 5 answers on one
# worker, then flags_status at once on the other, the sides alternating.
{
    my ($c0) = counters($ka->{ $w[0] });
    my $base = $c0->{all}{evaluations};
    my ($n, $exact, @off) = (0, 0);
    for my $i (1 .. 50) {
        my ($from, $to) = $i % 2 ? @w : reverse @w;
        my @a = pipelined($ka->{$from}, map { "/flags?userId=pace-$i-$_" } 1 .. 5);
        die "status $_->[0]" for grep { $_->[0] != 200 } @a;
        $n += 5;
        my ($c, $pid) = counters($ka->{$to});
        die "flags_status answered by $pid, not $to" unless $pid == $to;
        if ($c->{all}{evaluations} == $base + $n) { $exact++ }
        else { push @off, $c->{all}{evaluations} - $base - $n }
    }
    is($exact, 50, 'the other worker\'s flags_status, right after 5 answers, counts them: 50 times of 50'
                   . (@off ? " (off by @off)" : ''));
    $probes += $n;
}

# A worker slow to fold (descheduled on a busy machine: here stopped by
# SIGSTOP while it holds counts): flags_status on the other worker waits
# until it runs again and folds them, past the time the zone said, and
# counts every answer.  Not every round catches the worker holding (its
# timer may fold before the signal lands); those that do, wait.
{
    my ($c0) = counters($ka->{ $w[0] });
    my $base = $c0->{all}{evaluations};
    my ($n, $exact, $waited, @off) = (0, 0, 0);
    for my $i (1 .. 20) {
        $n += answer_then_stop("stop-$i");
        send_requests($ka->{ $w[1] }, '/flags-status');
        # no answer while the first worker is stopped holding counts
        my $early = readable($ka->{ $w[1] }, 0.2);
        kill 'CONT', $w[0] or die "SIGCONT $w[0]: $!";
        $waited++ unless $early;
        my ($a) = read_answers($ka->{ $w[1] }, 1);
        my $got = evaluations_in($a);
        if ($got == $base + $n) { $exact++ } else { push @off, $got - $base - $n }
    }
    is($exact, 20, 'flags_status beside a stopped worker counts its held answers: 20 times of 20'
                   . (@off ? " (off by @off)" : ''));
    cmp_ok($waited, '>=', 1, "... and waited for the stopped worker's fold ($waited of 20 rounds)");
    $probes += $n;
}

# A worker stopped for longer than a second past its due time is taken for
# killed or stuck: flags_status answers without the counts it holds, after
# about a second and not when it runs again, and counts them once it has.
{
    my ($c0) = counters($ka->{ $w[0] });
    my $base = $c0->{all}{evaluations};
    my ($n, $caught, @took) = (0, 0);
    for my $i (1 .. 5) {
        $n += answer_then_stop("stuck-$i");
        my $t0 = time;
        send_requests($ka->{ $w[1] }, '/flags-status');
        my $in_time = readable($ka->{ $w[1] }, 3);
        my $took = time - $t0;
        kill 'CONT', $w[0] or die "SIGCONT $w[0]: $!";
        my ($a) = read_answers($ka->{ $w[1] }, 1);
        my $got = evaluations_in($a);
        if ($took < 0.5) {
            # it had folded before the signal: no wait
            die "a quick answer is short: $got of " . ($base + $n) if $got != $base + $n;
            next;
        }
        $caught++;
        push @took, sprintf('%.2f', $took);
        ok($in_time && $took < 1.5, "a worker stopped past its due time: answered in " . sprintf("%.2f", $took) . " s, not at its SIGCONT");
        cmp_ok($got, '<', $base + $n, '... without the counts the stopped worker holds');
        # once it runs, its fold comes (its time is over a second old, so
        # a reader does not wait for it: asked until it has come)
        my $later;
        ok(wait_for(sub { my ($c) = counters($ka->{ $w[1] });
                          $later = $c->{all}{evaluations};
                          $later == $base + $n }, 5),
           '... and counts them once it has run: ' . ($later // 'none'));
        last;
    }
    is($caught, 1, 'a round caught the worker holding counts' . (@took ? " (@took s)" : ''));
    $probes += $n;
}

# A worker that keeps answering folds and holds counts again every
# millisecond: a reader waits only for the counts held when it came, one
# fold, and is not kept waiting by the ones that follow.  A child keeps
# the first worker busy with pipelines for 2 s while flags_status asks the
# other worker.
{
    my $child = fork // die "fork: $!";
    if ($child == 0) {
        my $until = time + 2;
        my $k = 0;
        while (time < $until) {
            $k++;
            pipelined($ka->{ $w[0] }, map { "/flags?userId=busy-$k-$_" } 1 .. 5);
        }
        POSIX::_exit(0);
    }
    select(undef, undef, undef, 0.3);
    my @took;
    for (1 .. 5) {
        my $t0 = time;
        my ($c, $pid) = counters($ka->{ $w[1] });
        push @took, time - $t0;
        select(undef, undef, undef, 0.05);
    }
    my $still = waitpid($child, POSIX::WNOHANG()) == 0;
    waitpid($child, 0);
    is($? >> 8, 0, 'the busy child ended well');
    ok($still, 'the first worker was kept busy throughout');
    my ($slowest) = sort { $b <=> $a } @took;
    cmp_ok($slowest, '<', 0.5, 'flags_status beside a busy worker answers at once: slowest '
                               . sprintf('%.3f', $slowest) . ' s of 5');
}

# A reload while a worker holds counts back: the old worker folds them as
# it exits (its fold timer does not keep it alive), and the new workers
# count every one.
{
    my ($c0) = counters($ka->{ $w[0] });
    my $base = $c0->{all}{evaluations};
    my @a = pipelined($ka->{ $w[0] }, map { "/flags?userId=reload-$_" } 1 .. 5);
    is(scalar(grep { $_->[0] == 200 } @a), 5, 'five answers just before the reload');
    nginx_signal($master, 'HUP');
    close $_ for values %$ka;
    ok(wait_for(sub { my %old = map { $_ => 1 } @w;
                      my @p = worker_pids($master);
                      @p == 2 && !grep { $old{$_} } @p }, 10),
       'the old workers exited, two new ones run');
    my ($st, undef, $body) = http_request(GET => '/flags-status');
    is($st, 200, 'flags_status of a new worker: 200');
    my ($f) = grep { $_->{name} eq 'all' } @{ decode_json($body)->{projects}[0]{flags} };
    is($f->{counters}{evaluations}, $base + 5,
       'the 5 answers held back at the reload are counted: ' . ($base + 5));
}

nginx_stop($master);
done_testing();
