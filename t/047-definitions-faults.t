# Runtime definitions (definitions=runtime, flags_admin's definitions
# routes) under hostile input and faults, with two workers and keep-alive:
# every invalid document is refused with the words nginx -t gives for the
# same file and changes nothing served; an oversized body is refused before
# it is read; a client that vanishes mid-body applies nothing and holds no
# lock; two admins racing on two workers with the same If-Match get one
# 200 and one 412; writes racing reloads, a killed worker, kill -9 of every
# process and a full disk never serve an older version after a 200 and
# never lose one.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use JSON::PP ();
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);

my $dir = prefix_dir('definitions-faults');

my $log = sub { read_file("$dir/logs/error.log") // '' };
my $json = JSON::PP->new->canonical;
mkdir "$dir/state";
$SIG{PIPE} = 'IGNORE';                  # a killed worker's connection

# Document number $i: a flag "gen_$i" says which document a worker serves
# (GET /flags names it); pad => N adds N flags (a bigger version).
sub doc {
    my ($i, %o) = @_;
    my @flags = ({name => 'base', enabled => JSON::PP::true, rolloutPercentage => 50,
                  segments => ['beta']},
                 {name => "gen_$i", enabled => JSON::PP::true, rolloutPercentage => 100});
    push @flags, map { {name => sprintf('pad_%04d_%s', $_, 'p' x 40), enabled => JSON::PP::false,
                        rolloutPercentage => 0} } 1 .. ($o{pad} // 0);
    return $json->encode({flags => \@flags,
                          segments => {beta => {rules => [{trait => 'sessions', op => 'gte',
                                                           value => 10}]}}});
}

write_file("$dir/conf/shop.json", doc(0));

sub conf {
    my (%o) = @_;
    my $zone = $o{zone} ? "flags_zone flags:$o{zone};" : '';
    write_file("$dir/conf/nginx.conf", nginx_conf(log_level => $o{log_level}, http => <<"_H_", server => <<'_S_'));
    $zone
    flags_state_file $dir/state/state.json;
    flags_project shop token=tok_shop file=shop.json definitions=runtime;
_H_
        add_header X-Worker $pid always;
        location = /flags { flags_evaluate; }
        location = /flags-status { flags_status; }
        # nginx's own limits would answer first (an HTML 413 from 1m on, a
        # body spooled to a file): the module's flags_definitions_max_size
        # (4m) is the limit here, and a version is read into memory
        location /flags-admin/ {
            client_max_body_size 64m;
            client_body_buffer_size 4m;
            flags_admin;
        }
_S_
}

# One request on the keep-alive socket $s: (status, \%headers, body).
sub ka {
    my ($s, $method, $path, $body, @headers) = @_;
    $body //= '';
    my $req = "$method $path HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer tok_shop\r\n";
    $req .= "$_\r\n" for @headers;
    $req .= "Content-Type: application/json\r\nContent-Length: " . length($body) . "\r\n\r\n$body";
    print $s $req;
    return ka_read($s);
}

sub ka_read {
    my ($s) = @_;
    my $buf = '';
    while ($buf !~ /\r\n\r\n/) {
        my $n = sysread($s, $buf, 65536, length $buf);
        return (0, {}, '') unless $n;
    }
    my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
    my ($st, @lines) = split /\r\n/, $head;
    ($st) = $st =~ m{^HTTP/1\.1 (\d+)};
    my %h = map { my ($k, $v) = split /:\s*/, $_, 2; (lc $k, $v) } @lines;
    my $len = $h{'content-length'} // 0;
    while (length $rest < $len) {
        my $n = sysread($s, $rest, $len - length $rest, length $rest);
        last unless $n;
    }
    return ($st, \%h, $rest);
}

# Keep-alive sockets, one on each worker: [$socket, $pid] x 2.
sub two_workers {
    my %by;
    for (1 .. 100) {
        my $s = raw_connect();
        my ($st, $h) = ka($s, GET => '/flags?userId=u1');
        my $pid = $h->{'x-worker'};
        if ($st == 200 && $pid && !$by{$pid}) { $by{$pid} = $s } else { close $s }
        last if keys %by == 2;
    }
    die "could not reach two workers" unless keys %by == 2;
    return map { [$by{$_}, $_] } sort keys %by;
}

my $A = '/flags-admin/definitions/shop';

# What the worker behind $s serves: its admin ETag's version, GET /flags'
# ETag and the document number named by gen_N.
sub served {
    my ($s) = @_;
    # GET /flags first: the admin route takes a newer version itself
    my ($st2, $h2, $b2) = ka($s, GET => '/flags?userId=u1');
    my ($gen) = $st2 == 200 ? $b2 =~ /"name":"gen_(\d+)"/ : ();
    my ($st, $h) = ka($s, GET => $A);
    my ($v) = ($st == 200 ? $h->{etag} // '' : '') =~ /^"v(\d+)"$/;
    return {version => $v, etag => $h2->{etag}, body => $b2, gen => $gen};
}

# One PUT of document $i on a connection of its own: (status, decoded body).
sub put_doc {
    my ($i, @headers) = @_;
    my ($st, undef, $b) = http_request(PUT => $A, body => doc($i),
        headers => ['Content-Type: application/json', @headers]);
    my $d = eval { JSON::PP->new->decode($b) } // {};
    return ($st, $d);
}

# The message nginx -t gives for a flags file holding $text: the words
# after the file's path (and its ": "), before " in <conf>:<line>".
sub nginx_t_message {
    my ($text) = @_;
    write_file("$dir/conf/check.json", $text);
    write_file("$dir/conf/check.conf", nginx_conf(http => "    flags_project check token=tok_c file=check.json;\n",
                                                  server => "        location = /flags { flags_evaluate; }\n"));
    my ($rc, $out) = nginx_test($dir, 'conf/check.conf');
    return undef unless $rc;
    my ($msg) = $out =~ m{\[emerg\] (?:\d+#\d+: )?\Q$dir\E/conf/check\.json:? ?(.*?) in \Q$dir\E/conf/check\.conf:\d+\n};
    return $msg;
}

conf();
my $master = nginx_start($dir);
my @w = two_workers();

# --- invalid documents: 400 with nginx -t's words, nothing served changes ---
{
    my $before = [map { served($_->[0]) } @w];
    ok(defined $before->[0]{version} && $before->[0]{version} == $before->[1]{version},
       "both workers serve one version ($before->[0]{version})");
    is($before->[0]{gen}, 0, 'the seed document');

    my $ok = doc(1);
    my %bad = (
        'invalid JSON' => substr($ok, 0, 40) . ',,' . substr($ok, 40),
        'a regex that does not compile' =>
            $ok =~ s/\{"op":"gte","trait":"sessions","value":10\}/{"op":"regex","trait":"email","value":"(["}/r,
        'an unknown segment' => $ok =~ s/"segments":\["beta"\]/"segments":["nosuch"]/r,
        'a duplicate flag name' => $ok =~ s/"gen_1"/"base"/r,
        'a percentage of 101' => $ok =~ s/"rolloutPercentage":100/"rolloutPercentage":101/r,
    );
    for my $case (sort keys %bad) {
        isnt($bad{$case}, $ok, "$case: the document differs from a valid one");
        my $expected = nginx_t_message($bad{$case});
        ok(defined $expected && length $expected, "$case: nginx -t refuses the file: " . ($expected // 'accepted'));
        for my $i (0, 1) {
            my ($st, $h, $b) = ka($w[$i][0], PUT => $A, $bad{$case});
            is($st, 400, "$case: PUT on worker $i is 400");
            my $d = eval { JSON::PP->new->decode($b) } // {};
            is($d->{error}, 'invalid_definitions', "$case: invalid_definitions");
            # after the path: the 400 names the seed file, nginx -t the file it read
            (my $m = $d->{message} // '') =~ s{^\Q$dir\E/conf/shop\.json:? ?}{};
            is($m, $expected, "$case: the message nginx -t gives");
            is($h->{etag}, undef, "$case: no version's ETag");
        }
    }
    # one flag, through its own route: the same words, the flag named
    {
        my $expected = nginx_t_message(doc(1) =~ s/"name":"gen_1","rolloutPercentage":100/"name":"gen_1","rolloutPercentage":101/r);
        like($expected, qr/gen_1/, 'nginx -t names the flag');
        my ($st, undef, $b) = ka($w[1][0], PUT => "$A/flags/gen_1", '{"name":"gen_1","enabled":true,"rolloutPercentage":101}');
        is($st, 400, 'one flag at 101 %: 400');
        is(eval { JSON::PP->new->decode($b)->{message} =~ s{^\Q$dir\E/conf/shop\.json:? ?}{}r }, $expected,
           'with the message nginx -t gives for that file');
    }
    my $after = [map { served($_->[0]) } @w];
    for my $i (0, 1) {
        is($after->[$i]{version}, $before->[$i]{version}, "worker $i: the served version did not change");
        is($after->[$i]{etag}, $before->[$i]{etag}, "worker $i: GET /flags' ETag did not change");
        is($after->[$i]{body}, $before->[$i]{body}, "worker $i: GET /flags' body did not change");
    }
    my ($st, undef, $b) = ka($w[0][0], GET => "$A/history");
    my $hist = eval { JSON::PP->new->decode($b)->{versions} } // [];
    ok($st == 200 && @$hist <= 1, 'no version was stored for a refused document')
        or diag "history: $st $b";
    unlike($log->(), qr/\[(alert|crit)\]/, 'no alert in the error log');
}

my $version = served($w[0][0])->{version};
my $docno = 0;

# A valid write on a worker's connection: checks the 200 and its version.
sub write_ok {
    my ($s, $what) = @_;
    $docno++;
    my ($st, $h, $b) = ka($s, PUT => $A, doc($docno));
    is($st, 200, "$what: 200") or diag $b;
    my $v = eval { JSON::PP->new->decode($b)->{version} } // 0;
    is($v, $version + 1, "$what: version " . ($version + 1));
    $version = $v if $v;
    return $st;
}

write_ok($w[0][0], 'a valid write after the refused ones');

# --- a 200 means both workers serve the version -----------------------------
{
    my @late;
    for my $i (1 .. 20) {
        my ($by, $other) = $i % 2 ? @w : reverse @w;
        $docno++;
        my ($st, undef, $b) = ka($by->[0], PUT => $A, doc($docno));
        $version = eval { JSON::PP->new->decode($b)->{version} } // $version if $st == 200;
        my (undef, undef, $fb) = ka($other->[0], GET => '/flags?userId=u1');
        my ($g) = $fb =~ /"name":"gen_(\d+)"/;
        push @late, "doc $docno: $st, the other worker served gen " . ($g // '-') if $st != 200 || ($g // -1) != $docno;
    }
    is("@late", '', 'after each 200 the other worker serves the new document at once');
}

# --- a 20 MB body: 413 before it is read, without 100 Continue --------------
{
    my $s = raw_connect();
    print $s "PUT $A HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
           . "Content-Length: 20971520\r\nExpect: 100-continue\r\n\r\n";
    my ($st, $h, $b) = ka_read($s);
    is($st, 413, '20 MB announced with Expect: 100-continue: 413 at once');
    is(eval { JSON::PP->new->decode($b)->{error} }, 'payload_too_large', 'payload_too_large')
        or diag explain [$h, $b];
    close $s;

    $s = raw_connect();
    print $s "PUT $A HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
           . "Content-Length: 20971520\r\n\r\n" . ('{' x 65536);
    my $t0 = time;
    ($st, $h, $b) = ka_read($s);
    is($st, 413, '20 MB without Expect, 64 KB of it sent: 413 without the rest');
    ok(time - $t0 < 2, 'answered without waiting for the body');
    close $s;
    is(served($w[1][0])->{version}, $version, 'the version served is unchanged');
}

# --- a slow body, then the client vanishes ----------------------------------
{
    my $body = doc(900);
    my $s = raw_connect();
    print $s "PUT $A HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
           . "Content-Length: " . length($body) . "\r\n\r\n" . substr($body, 0, 30);
    sleep 0.3;
    write_ok($w[1][0], 'a write while another body is half read');
    print $s substr($body, 30, 20);
    sleep 0.2;
    close $s;                                   # gone, the body incomplete
    sleep 0.3;
    my @now = map { served($_->[0]) } @w;
    is($now[$_]{version}, $version, "worker $_: the vanished write applied nothing") for 0, 1;
    isnt($now[$_]{gen}, 900, "worker $_: its document is not served") for 0, 1;
    my $t0 = time;
    write_ok($w[0][0], 'a write after the client vanished');
    ok(time - $t0 < 1, 'without waiting for a lock');
}

# --- two admins on two workers, the same If-Match: one 200, one 412 ---------
for my $round (1 .. 5) {
    my $tag = qq("v$version");
    my ($da, $db) = (doc(1000 + 2 * $round), doc(1001 + 2 * $round));
    for ([$w[0][0], $da], [$w[1][0], $db]) {
        my ($s, $d) = @$_;
        print $s "PUT $A HTTP/1.1\r\nHost: localhost\r\nIf-Match: $tag\r\nContent-Type: application/json\r\n"
               . "Content-Length: " . length($d) . "\r\n\r\n$d";
    }
    my @r = map { [ka_read($_->[0])] } @w;
    my @st = sort map { $_->[0] } @r;
    is("@st", '200 412', "round $round: exactly one 200 and one 412");
    my ($lose) = grep { $_->[0] == 412 } @r;
    is(eval { JSON::PP->new->decode($lose->[2])->{error} }, 'version_conflict', "round $round: the 412 is version_conflict")
        if $lose;
    my ($win) = grep { $_->[0] == 200 } @r;
    my $i = $win && $win == $r[0] ? 0 : 1;
    $version++;
    my $want = 1000 + 2 * $round + $i;
    for my $k (0, 1) {
        my $sv = served($w[$k][0]);
        is($sv->{version}, $version, "round $round: worker $k serves version $version");
        is($sv->{gen}, $want, "round $round: worker $k serves the winner's document");
    }
}
unlike($log->(), qr/\[(alert|crit)\]/, 'no alert in the error log');
$docno = 2000;

# --- PUTs racing reloads: no 200 lost, versions increasing, the last served -
{
    my $killer = fork // die "fork: $!";
    if (!$killer) {
        for (1 .. 4) { sleep 0.25; kill 'HUP', $master }
        POSIX::_exit(0);
    }
    my (@ok, @other);
    my $t0 = time;
    while (time - $t0 < 1.6 && @ok + @other < 40) {
        $docno++;
        my ($st, $d) = put_doc($docno);
        if ($st == 200) { push @ok, [$docno, $d->{version}] } else { push @other, "$st " . ($d->{error} // '') }
        sleep 0.035;
    }
    waitpid($killer, 0);
    ok(@ok >= 5, scalar(@ok) . ' writes answered 200 during four reloads');
    my @bad = grep { !/^503 (reloading|definitions_busy)$/ } @other;
    is("@bad", '', 'the others were 503 reloading or definitions_busy (' . scalar(@other) . ')');
    my @vs = map { $_->[1] } @ok;
    is_deeply(\@vs, [sort { $a <=> $b } @vs], 'versions strictly increasing') and
        is(scalar(keys %{{ map { $_ => 1 } @vs }}), scalar @vs, 'none repeated');
    is($vs[0], $version + 1, 'the first follows the version before');
    $version = $vs[-1];
    ok(wait_for(sub { worker_pids($master) == 2 }, 10), 'the reloads are over');
    sleep 0.5;
    @w = two_workers();
    for my $k (0, 1) {
        my $sv = served($w[$k][0]);
        is($sv->{version}, $version, "worker $k serves the last 200's version after the reloads");
        is($sv->{gen}, $ok[-1][0], "worker $k: its document");
    }
    my (undef, undef, $h) = ka($w[0][0], GET => "$A/history");
    my %hist = map { $_->{version} => 1 } @{ JSON::PP->new->decode($h)->{versions} };
    is(join(',', grep { !$hist{$_} } @vs), '', 'every 200 is in the history')
        or diag "history: $h";
    my @docs = map { my (undef, undef, $b) = ka($w[1][0], GET => "$A/versions/$_->[1]");
                     ($b =~ /"gen_(\d+)"/)[0] // -1 } @ok;
    is_deeply(\@docs, [map { $_->[0] } @ok], 'each stored version is the document answered 200');
    unlike($log->(), qr/\[(alert|crit)\]/, 'no alert in the error log');
}

# --- a worker killed while writes stream -----------------------------------
{
    my $killer = fork // die "fork: $!";
    if (!$killer) {
        for (1 .. 3) {
            sleep 0.4;
            my @p = worker_pids($master);
            kill 'KILL', $p[$_ % @p] if @p;
        }
        POSIX::_exit(0);
    }
    my (@ok, @other, @older);
    my $t0 = time;
    while (time - $t0 < 1.8 && @ok + @other < 45) {
        sleep 0.03;
        $docno++;
        my ($st, $d) = put_doc($docno);
        if ($st == 200) {
            push @ok, [$docno, $d->{version}];
            # a 200 is never followed by an older version, on any worker
            for (1 .. 2) {
                my ($fs, undef, $fb) = http_request(GET => '/flags?userId=u1', headers => ['Authorization: Bearer tok_shop']);
                my ($g) = $fb =~ /"name":"gen_(\d+)"/;
                push @older, "after doc $docno: $fs gen " . ($g // '-') if $fs == 200 && (!defined $g || $g < $docno);
            }
        } else {
            push @other, "$st " . ($d->{error} // '');
        }
    }
    waitpid($killer, 0);
    ok(@ok >= 5, scalar(@ok) . ' writes answered 200 while three workers were killed');
    is("@older", '', 'no GET /flags after a 200 served an older document');
    my @bad = grep { !/^(0 |503 definitions_busy)$/ } @other;
    is("@bad", '', 'the others lost their connection or were 503 definitions_busy (' . scalar(@other) . ')');
    my @vs = map { $_->[1] } @ok;
    is_deeply(\@vs, [sort { $a <=> $b } @vs], 'versions increasing');
    ok(wait_for(sub { worker_pids($master) == 2 }, 10), 'the master respawned the workers');
    sleep 0.3;
    @w = two_workers();
    my (undef, undef, $h) = ka($w[0][0], GET => "$A/history");
    my $newest = JSON::PP->new->decode($h)->{versions}[0]{version};
    ok($newest >= $vs[-1], "the newest stored version ($newest) is at least the last 200's ($vs[-1])");
    my (undef, undef, $nb) = ka($w[0][0], GET => "$A/versions/$newest");
    my ($ngen) = $nb =~ /"gen_(\d+)"/;
    for my $k (0, 1) {
        my $sv = served($w[$k][0]);
        is($sv->{version}, $newest, "worker $k (respawned or not) serves the newest version");
        is($sv->{gen}, $ngen, "worker $k: its document");
    }
    $version = $newest;
    $docno = $ngen if $ngen > $docno;
    unlike($log->(), qr/\[(alert|crit)\] (?!.*worker process \d+ exited on signal 9)/, 'no other alert in the error log');
}

# --- kill -9 of every process right after a 200, then a restart -------------
{
    write_ok($w[1][0], 'the write before kill -9');
    my $want = $docno;
    my @pids = ($master, worker_pids($master));
    kill 'KILL', @pids;
    ok(wait_for(sub { !grep { kill 0, $_ } @pids }, 5), 'every nginx process is gone');
    FlagsTest::nginx_stop($master);           # forgets it (already gone)
    $master = nginx_start($dir);
    @w = two_workers();
    for my $k (0, 1) {
        my $sv = served($w[$k][0]);
        is($sv->{version}, $version, "after the restart worker $k serves version $version");
        is($sv->{gen}, $want, "worker $k: that document");
    }
    my ($st, undef, $b) = ka($w[0][0], GET => '/flags-status');
    is(JSON::PP->new->decode($b)->{projects}[0]{definitions}{version}, $version, 'flags_status says so');
    nginx_stop($master);
}

# --- a full disk: 507, the old version served, a smaller one then stored ----
SKIP: {
    skip 'prlimit is not installed', 12 unless -x '/usr/bin/prlimit';
    skip 'not under valgrind', 12 if $FlagsTest::Valgrind;

    # every file nginx writes is limited to 8000 bytes: the error log (a
    # new one, at warn), the state file and each version's file
    rename "$dir/logs/error.log", "$dir/logs/error.log.before";
    conf(log_level => 'warn');
    local $SIG{XFSZ} = 'IGNORE';
    $master = nginx_start($dir, wrap => '/usr/bin/prlimit --fsize=8000');
    @w = two_workers();
    my $before = [map { served($_->[0]) } @w];
    is($before->[0]{version}, $version, 'the newest version is served under the limit');

    my $big = doc(5000, pad => 200);
    ok(length($big) > 8000, 'a version of ' . length($big) . ' bytes');
    my ($st, $h, $b) = ka($w[0][0], PUT => $A, $big);
    is($st, 507, 'a version larger than the file size limit: 507');
    is(eval { JSON::PP->new->decode($b)->{error} }, 'insufficient_storage', 'insufficient_storage');
    sleep 0.2;
    for my $k (0, 1) {
        my $sv = served($w[$k][0]);
        is($sv->{version}, $version, "worker $k still serves version $version");
        is($sv->{body}, $before->[$k]{body}, "worker $k: the same answer");
    }
    my @tmp = glob("$dir/state/state.json.definitions/shop/*.tmp");
    is("@tmp", '', 'no temporary file is left');
    ok(!-e "$dir/state/state.json.definitions/shop/v" . ($version + 1) . '.json', 'no file of the refused version');
    my @fails = $log->() =~ /storing version \d+ of project "shop"/g;
    is(scalar @fails, 1, 'the write was tried once');
    unlike($log->(), qr/\[alert\]/, 'no alert (nothing answered twice)');

    write_ok($w[1][0], 'a smaller version then');
    is(served($w[1][0])->{gen}, $docno, 'and it is served');
    is(served($w[0][0])->{gen}, $docno, 'by the other worker too');
    nginx_stop($master);
}

# --- a zone without room for the version: 503 once, the old one served -------
{
    rename "$dir/logs/error.log", "$dir/logs/error.log.disk";
    conf(zone => '128k');
    $master = nginx_start($dir);
    @w = two_workers();
    my $before = served($w[0][0]);
    is($before->{version}, $version, 'a restart with a small zone serves the newest version');

    my $big = doc(6000, pad => 3000);
    my ($st, $h, $b) = ka($w[0][0], PUT => $A, $big);
    is($st, 503, 'a version of ' . length($big) . ' bytes in a 128 KB zone: 503');
    is(eval { JSON::PP->new->decode($b)->{error} }, 'zone_full', 'zone_full');
    my $after = served($w[0][0]);
    is($after->{version}, $version, 'the version served is unchanged');
    is($after->{body}, $before->{body}, 'the same answer');
    my @v = glob("$dir/state/state.json.definitions/shop/v" . ($version + 1) . '.json*');
    is("@v", '', 'nothing of it stored');
    unlike($log->(), qr/\[alert\]/, 'no alert (answered once)');
    write_ok($w[0][0], 'a small version then');
    nginx_stop($master);
}

done_testing();
