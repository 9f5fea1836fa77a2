# The shared zone across configuration generations, with old workers still
# draining: a report held open across two reloads counts only into its own
# flag; a configuration nginx rejects after init_zone changes nothing; a
# committed new definition keeps its flag's rollback and override (issue
# 25) until flags_admin clears them; the state file describes the zone
# after every change, reloads included.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use Time::HiRes qw(sleep);

my $dir = prefix_dir('generations');
my $log = sub { read_file("$dir/logs/error.log") // '' };
my $state_path = "$dir/conf/state/flags-state.json";
mkdir "$dir/conf/state";

sub conf {
    my (%o) = @_;
    my $listen = $o{extra_listen} ? "        listen 127.0.0.1:$o{extra_listen};\n" : '';
    write_file("$dir/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<"_S_"));
    flags_project shop token=tok_shop file=shop.json;
    flags_project blog token=tok_blog file=blog.json;
    flags_error_log logs/reports.log;
    flags_state_file state/flags-state.json;
_H_
$listen        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /flags-status { flags_status; }
        location /flags-admin/ { flags_admin; }
_S_
}

sub flags {
    my (@f) = @_;
    return '{"flags":[' . join(',', @f) . ']}';
}

sub flag {
    my ($name, %o) = @_;
    my $rp = $o{rollout} // 100;
    my $rb = $o{rollback} // '{"minErrors": 1, "rate": 1, "window": 60}';
    return qq({"name":"$name","enabled":true,"rolloutPercentage":$rp,"rollback":$rb});
}

sub status {
    my (undef, undef, $body) = http_request(GET => '/flags-status');
    return $body;
}

sub flag_status {
    my ($project, $flag) = @_;
    my $s = status();
    my ($p) = $s =~ /\{"name":"$project","flags":\[(.*?)\],"definitions":\{[^}]*\}\}(?:,\{"name"|\],"(?:sync|events)"|\]\}$)/;
    return '' unless defined $p;
    my ($f) = $p =~ /(\{"name":"\Q$flag\E",.*?"rollback":(?:null|\{[^}]*\}),"definedAt":(?:null|"[^"]+"),"zoneFull":(?:true|false)\})/;
    return $f // '';
}

sub report {
    my ($token, $flag) = @_;
    my ($st) = http_request(POST => '/ingest/errors', body => qq({"flagName":"$flag","message":"m"}),
                            headers => ["Authorization: Bearer $token", 'Content-Type: application/json']);
    return $st;
}

sub evaluate {
    my ($token) = @_;
    my (undef, undef, $body) = http_request(GET => '/flags?userId=u1',
                                            headers => ["Authorization: Bearer $token"]);
    return $body;
}

sub reload {
    my ($master) = @_;
    my @old = serving_workers($master);
    my $n = () = $log->() =~ /reconfiguring/g;
    nginx_signal($master, 'HUP');
    wait_for(sub { (() = $log->() =~ /reconfiguring/g) > $n }, 10)
        or die 'no reload';
    # done when two new workers run and no old one accepts any more
    wait_for(sub {
        my %old = map { $_ => 1 } @old;
        my @w = worker_pids($master);
        my @new = grep { !$old{$_} } @w;
        my @old_serving = grep { $old{$_} && !is_exiting($_) } @w;
        return @new >= 2 && !@old_serving;
    }, 10) or die 'no new workers';
}

sub serving_workers {
    my ($master) = @_;
    return grep { !is_exiting($_) } worker_pids($master);
}

# A worker told to shut down: its title says so, and so does the error log
# (under valgrind the title is valgrind's).
sub is_exiting {
    my ($pid) = @_;
    my $cmd = read_file("/proc/$pid/cmdline") // '';
    return $cmd =~ /shutting down/ || $log->() =~ /\b$pid#\d+: gracefully shutting down/;
}

# A report whose last body byte is held back.
sub slow_report {
    my ($token, $flag) = @_;
    my $body = qq({"flagName":"$flag","message":"slow"});
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $FlagsTest::Port,
                                  Timeout => 10) or die "connect: $!";
    $s->autoflush(1);
    # "100 Continue" proves that a worker of this generation owns the
    # request before the reloads begin
    print $s "POST /ingest/errors HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
           . "Authorization: Bearer $token\r\nContent-Type: application/json\r\n"
           . "Expect: 100-continue\r\n"
           . "Content-Length: " . length($body) . "\r\n\r\n";
    my $cont = '';
    while ($cont !~ /\r\n\r\n/) {
        sysread($s, $cont, 1024, length $cont) or die "no 100 Continue: $cont";
    }
    die "not 100 Continue: $cont" unless $cont =~ m{^HTTP/1\.1 100 Continue\r\n};
    print $s substr($body, 0, -1);
    return [$s, substr($body, -1)];
}

sub finish_report {
    my ($r) = @_;
    my ($s, $last) = @$r;
    print $s $last;
    local $/;
    my $resp = <$s> // '';
    close $s;
    return $resp =~ m{^HTTP/1\.1 (\d+)} ? $1 : 0;
}

# --- 1. a report held open across two reloads -----------------------------------
# shop's "doomed" trips at the first error; reload 1 removes it, reload 2
# gives blog new flags that never roll back.  The held reports finish in
# the first generation's workers: they must count into doomed's memory,
# never into blog's.

write_file("$dir/conf/shop.json", flags(flag('doomed'), flag('keep', rollback => 'false')));
write_file("$dir/conf/blog.json", flags(flag('post', rollback => 'false')));
conf();
my $master = nginx_start($dir);
is(scalar(worker_pids($master)), 2, 'two workers');

my @held = map { slow_report('tok_shop', 'doomed') } 1 .. 4;
sleep 0.3;

write_file("$dir/conf/shop.json", flags(flag('keep', rollback => 'false')));
reload($master);
write_file("$dir/conf/blog.json",
           flags(flag('post', rollback => 'false'),
                 map { flag("new$_", rollback => 'false') } 1 .. 8));
reload($master);

my @sts = map { finish_report($_) } @held;
is_deeply(\@sts, [204, 204, 204, 204], 'the held reports are answered by the old workers');
sleep 0.3;

for my $f ('post', map { "new$_" } 1 .. 8) {
    like(flag_status('blog', $f),
         qr/"rolledBack":false,"override":null,"counters":\{"evaluations":0,"enabledEvaluations":0,"errors":0\}.*"rollback":null,"definedAt":"[^"]+","zoneFull":false\}$/,
         "blog's $f is untouched by shop's held reports");
}
like(evaluate('tok_blog'), qr/^\{"flags":\[\{"name":"post","enabled":true,"rolloutPercentage":100,/,
     'blog still serves its flags');
unlike(evaluate('tok_blog'), qr/"enabled":false/, 'no blog flag is off');
my $state = read_file($state_path) // '';
unlike($state, qr/doomed|"project":"blog"/, 'the state file holds neither the removed flag nor blog');

# --- 2. a reload nginx rejects after init_zone changes nothing -----------------
write_file("$dir/conf/shop.json", flags(flag('risky', rollback => '{"minErrors": 2, "rate": 1, "window": 60}'),
                                        flag('tuned', rollback => 'false'),
                                        flag('keep', rollback => 'false')));
conf();
reload($master);
is(report('tok_shop', 'risky'), 204, 'report 1') for 1 .. 2;
like(evaluate('tok_shop'), qr/"name":"risky","enabled":false,"rolloutPercentage":0,/, 'risky rolled back');
my ($st) = http_request(PUT => '/flags-admin/overrides/shop/tuned', body => '{"rolloutPercentage": 12.5}');
is($st, 204, 'override set');
my $state_before = read_file($state_path);
like($state_before, qr/"flag":"risky".*"flag":"tuned"|"flag":"tuned".*"flag":"risky"/s,
     'the state file holds the rollback and the override');

# the new configuration changes both definitions, and cannot bind a port
my $blocker = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1, ReuseAddr => 0)
    or die "listen: $!";
my $busy = $blocker->sockport;
write_file("$dir/conf/shop.json", flags(flag('risky', rollout => 90, rollback => '{"minErrors": 2, "rate": 1, "window": 60}'),
                                        flag('tuned', rollout => 80, rollback => 'false'),
                                        flag('keep', rollback => 'false')));
conf(extra_listen => $busy);
my @workers = serving_workers($master);
# the operator's command: it reads the new configuration itself, into a
# zone of its own, before it signals the master
my $bin = $ENV{TEST_NGINX_BINARY} || 'nginx';
system("$bin -p $dir/ -c conf/nginx.conf -s reload 2>/dev/null");
ok(wait_for(sub { $log->() =~ /bind\(\) to 127\.0\.0\.1:$busy failed/ && $log->() =~ /reconfiguring/ }, 15),
   'the new configuration fails to bind');
sleep 3;    # nginx retries the bind for a while
is_deeply([serving_workers($master)], \@workers, 'the old workers keep serving');
like(evaluate('tok_shop'), qr/"name":"risky","enabled":false,"rolloutPercentage":0,.*"name":"tuned","enabled":(?:true|false),"rolloutPercentage":12\.5,/,
     'the rejected configuration left the rollback and the override in force');
like(flag_status('shop', 'risky'), qr/"rolledBack":true,.*"rollback":\{"at":"[^"]+","errors":2,"enabledEvaluations":\d+,"sources":1,"decidedBy":"rule"\},"definedAt":"[^"]+","zoneFull":false\}$/,
     'the rollback record is intact');
is(read_file($state_path), $state_before, 'the state file is unchanged');
unlike($log->(), qr/new definition/, 'no definition change was logged');
close $blocker;

# the same definitions without the extra listen: now they take effect, and
# a new definition keeps its flag's rollback and override (issue 25)
my ($rb_at) = flag_status('shop', 'risky') =~ /"rollback":\{"at":"([^"]+)"/;
my %hash_before = $state_before =~ /"flag":"(\w+)","definitionHash":"([0-9a-f]+)"/g;
conf();
reload($master);
like(evaluate('tok_shop'), qr/"name":"risky","enabled":false,"rolloutPercentage":0,.*"name":"tuned","enabled":(?:true|false),"rolloutPercentage":12\.5,/,
     'the committed definitions keep the rollback and the override');
like(flag_status('shop', 'risky'),
     qr/^\{"name":"risky","enabled":true,"rolloutPercentage":90,"segments":\[\],"effectiveRolloutPercentage":0,"rolledBack":true,"override":null,.*"rollback":\{"at":"\Q$rb_at\E","errors":2,"enabledEvaluations":\d+,"sources":1,"decidedBy":"rule"\},/,
     'risky: the new definition (90 %), rolled back with the record decided before the reload');
like(flag_status('shop', 'tuned'),
     qr/^\{"name":"tuned","enabled":true,"rolloutPercentage":80,"segments":\[\],"effectiveRolloutPercentage":12\.5,"rolledBack":false,"override":\{"rolloutPercentage":12\.5\},/,
     'tuned: the new definition (80 %), the override in force');
like($log->(), qr/\[notice\] [^\n]*flags: flag "risky" of project "shop" has a new definition: its rollback is kept/,
     'the kept rollback is logged, at notice: a reload is routine');
like($log->(), qr/\[notice\] [^\n]*flags: flag "tuned" of project "shop" has a new definition: its override \(rolloutPercentage 12\.5\) is kept/,
     'and the kept override, with its value');
unlike($log->(), qr/\[error\] [^\n]*has a new definition/, '... neither at error');
unlike($log->(), qr/were cleared/, 'nothing says they were cleared');
$state = read_file($state_path);
my %hash_after = $state =~ /"flag":"(\w+)","definitionHash":"([0-9a-f]+)"/g;
ok($hash_after{risky} && $hash_after{tuned} && $hash_after{risky} ne $hash_before{risky} && $hash_after{tuned} ne $hash_before{tuned},
   'the state file was rewritten at the reload (item 4): both under their new definitions');
like($state, qr/"flag":"risky","definitionHash":"[0-9a-f]+","rollback":\{"at":\d+,"errors":2,/, '... risky with its rollback');
like($state, qr/"flag":"tuned","definitionHash":"[0-9a-f]+","rollback":null,"override":\{"rolloutPercentage":12\.5\}/, '... tuned with its override');

# only flags_admin clears them
($st) = http_request(DELETE => '/flags-admin/rollbacks/shop/risky');
is($st, 204, 'flags_admin clears the kept rollback');
($st) = http_request(DELETE => '/flags-admin/overrides/shop/tuned');
is($st, 204, '... and removes the kept override');
like(evaluate('tok_shop'), qr/"name":"risky","enabled":true,"rolloutPercentage":90,.*"name":"tuned","enabled":(?:true|false),"rolloutPercentage":80,/,
     'both flags answer with their new definitions');

# --- 3. removed, then re-added unchanged: zone and file agree -------------------
is(report('tok_shop', 'risky'), 204, "report $_ on the new definition") for 1 .. 2;
like(evaluate('tok_shop'), qr/"name":"risky","enabled":false/, 'risky rolled back again');
# the rollback's write is posted to a thread pool; the report does not wait
ok(wait_for(sub { (read_file($state_path) // '') =~ /"flag":"risky"/ }, 5), 'in the file');
my $risky = flag('risky', rollout => 90, rollback => '{"minErrors": 2, "rate": 1, "window": 60}');
write_file("$dir/conf/shop.json", flags(flag('keep', rollback => 'false')));
reload($master);
unlike(read_file($state_path), qr/"flag":"risky"/, 'removing the flag removes it from the file');
write_file("$dir/conf/shop.json", flags($risky, flag('keep', rollback => 'false')));
reload($master);
my $zone_view = evaluate('tok_shop') =~ /"name":"risky","enabled":(true|false)/ ? $1 : '?';
my $file_view = read_file($state_path) =~ /"flag":"risky"/ ? 'false' : 'true';
is($zone_view, 'true', 'a flag removed by a committed reload comes back fresh');
is($file_view, $zone_view, 'the state file agrees with the zone');
nginx_stop($master);
$master = nginx_start($dir);
like(evaluate('tok_shop'), qr/"name":"risky","enabled":$zone_view/, 'and a restart agrees with both');

unlike($log->(), qr/\[(alert|crit)\]/, 'no alert or crit');
nginx_stop($master);
done_testing();
