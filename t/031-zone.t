# A full zone: evaluation goes on, the log says so once; flags removed by a
# reload give their memory back at the first reload after the workers that
# could still use it have exited.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;

my $dir = prefix_dir('zone');

sub flags_file {
    my ($prefix, $n) = @_;
    return '{"flags":[' . join(',', map {
        qq({"name":"$prefix$_","enabled":true,"rolloutPercentage":100})
    } 1 .. $n) . ']}';
}

sub conf {
    write_file("$dir/conf/nginx.conf", nginx_conf(http => <<'_H_', server => <<'_S_'));
    flags_zone small:32k;
    flags_project p token=tok file=p.json;
    flags_error_log off;
_H_
        location = /flags { flags_evaluate; }
        location = /flags-status { flags_status; }
_S_
}

my $log = sub { read_file("$dir/logs/error.log") // '' };
my $full_re = qr/flags: zone "small" is full: (\d+) flags are evaluated but not counted/;

# --- 100 flags do not fit in 32k --------------------------------------------
write_file("$dir/conf/p.json", flags_file('a', 100));
conf();
my $master = nginx_start($dir);
my @full = $log->() =~ /$full_re/g;
is(scalar @full, 1, 'the full zone is logged once');
my $unbound = $full[0] // 0;
ok($unbound > 0 && $unbound < 100, "some flags did not fit ($unbound)");
my $capacity = 100 - $unbound;

my ($st, $h, $body) = http_request(GET => '/flags?userId=u', headers => ['Authorization: Bearer tok']);
is($st, 200, 'evaluation keeps working');
my @names = $body =~ /"name":"(a\d+)","enabled":true/g;
is(scalar @names, 100, 'all 100 flags are evaluated');
(undef, undef, $body) = http_request(GET => '/flags-status');
my @counted = $body =~ /"counters":\{"evaluations":1,/g;
is(scalar @counted, $capacity, "the $capacity flags with room were counted");
my @objs = $body =~ /(\{"name":"a\d+".*?"zoneFull":(?:true|false)\})/g;
is(scalar @objs, 100, 'every flag has a status object that ends in zoneFull');
my @nofit = grep { /"zoneFull":true\}$/ } @objs;
is(scalar @nofit, $unbound, "the $unbound flags without room say zoneFull: true");
is(scalar(grep { /"counters":\{"evaluations":0,/ } @nofit), $unbound,
   'and they are the ones not counted');
is(scalar(grep { /"zoneFull":false\}$/ && /"counters":\{"evaluations":1,/ } @objs), $capacity,
   "the $capacity counted flags say zoneFull: false");
nginx_stop($master);

# --- removed flags release their memory ---------------------------------------
unlink "$dir/logs/error.log";
write_file("$dir/conf/p.json", flags_file('a', $capacity));
$master = nginx_start($dir);
unlike($log->(), $full_re, "$capacity flags fit");

write_file("$dir/conf/p.json", flags_file('b', $capacity));
my $before = () = $log->() =~ /reconfiguring/g;
nginx_signal($master, 'HUP');
ok(wait_for(sub { (() = $log->() =~ /start worker process \d+/g) >= 4 }, 10), 'first reload done');
like($log->(), $full_re, 'first reload: the old flags still hold the zone');

# their memory is given back at the first reload after the workers that
# could use it have exited
ok(wait_for(sub { worker_pids($master) == 2 }, 10), 'the first generation has exited');
nginx_signal($master, 'HUP');
ok(wait_for(sub { (() = $log->() =~ /start worker process \d+/g) >= 6 }, 10), 'second reload done');
my @after = $log->() =~ /$full_re/g;
is(scalar @after, 1, 'second reload: the removed flags were freed, every new flag has room');
ok(wait_for(sub { worker_pids($master) == 2 }, 10), "old workers are gone");
sleep 0.5;
http_request(GET => '/flags?userId=u', headers => ['Authorization: Bearer tok']);
(undef, undef, $body) = http_request(GET => '/flags-status');
@counted = $body =~ /"name":"b\d+"[^}]*?"counters":\{"evaluations":1,/g;
is(scalar @counted, $capacity, 'every new flag is counted');
unlike($body, qr/"zoneFull":true/, 'no flag is left without room');

unlike($log->(), qr/\[(alert|crit|emerg)\]/, 'no alert, crit or emerg');
nginx_stop($master);
done_testing();
