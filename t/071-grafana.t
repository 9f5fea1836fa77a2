# The Grafana dashboard grafana/flags-dashboard.json (docs/metrics.md,
# *Grafana*) against the module it shows: the JSON is an importable
# dashboard whose datasource is a variable; every PromQL expression in it
# (panel targets, the annotation, the variables' label_values selectors),
# with Grafana's variables replaced by concrete values, passes
# `promtool check rules` as a recording rule; every metric name it uses is
# one this build's flags_metrics exports (an nginx with a ramped flag and
# flags_sync to a real redis-server, so the sync families are there too)
# and one of src/core/metrics.cpp's families, so a renamed metric fails;
# and a real Prometheus scraping that nginx answers every expression
# without error and with at least one series once traffic, a rollback, an
# override and a ramp's stage change happened while it watched.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IPC::Open3;
use JSON::PP;
use Symbol qw(gensym);
use Time::HiRes qw(sleep time);
use URI::Escape qw(uri_escape);

skip_without(qw(promtool prometheus redis-server));

my $root = "$FindBin::Bin/..";
my $file = "$root/grafana/flags-dashboard.json";
my $dash = eval { JSON::PP->new->decode(read_file($file) // '') };
ok($dash, 'the dashboard is JSON') or BAIL_OUT("cannot read $file: $@");

# ---- the JSON: importable, the datasource a variable ----------------------

ok($dash->{schemaVersion} >= 39, "schemaVersion $dash->{schemaVersion} (Grafana 11 or later)");
ok(!defined $dash->{id}, 'no database id: Grafana assigns one on import');
ok(length($dash->{uid} // '') && length($dash->{uid}) <= 40, "a uid ($dash->{uid})");
ok(length($dash->{title} // ''), 'a title');

my %var = map { $_->{name} => $_ } @{ $dash->{templating}{list} || [] };
my $ds = $var{DS_PROMETHEUS};
is($ds && "$ds->{type} $ds->{query}", 'datasource prometheus',
   'DS_PROMETHEUS: a datasource variable of type prometheus');
for my $v (qw(instance project flag)) {
    is($var{$v} && $var{$v}{type}, 'query', "variable $v: a query variable");
    is($var{$v} && $var{$v}{allValue}, '.+', "variable $v: All is .+");
}

# every datasource reference in the document: the variable, or Grafana's
# own annotations
my @bad_ds;
sub check_ds {
    my ($node, $where) = @_;
    if (ref $node eq 'HASH') {
        if (exists $node->{datasource}) {
            my $d = $node->{datasource};
            push @bad_ds, $where unless ref $d eq 'HASH'
                && (($d->{type} eq 'prometheus' && $d->{uid} eq '${DS_PROMETHEUS}')
                    || ($d->{type} eq 'grafana' && $node->{builtIn}));
        }
        check_ds($node->{$_}, $node->{title} // $node->{name} // $where) for sort keys %$node;
    } elsif (ref $node eq 'ARRAY') {
        check_ds($_, $where) for @$node;
    }
}
check_ds($dash, 'dashboard');

# the expressions: each panel's targets (rows may hold panels), the
# annotations
my (@panels, @targets);     # @targets: [where, expr]
for my $p (map { $_, @{ $_->{panels} || [] } } @{ $dash->{panels} }) {
    next if $p->{type} eq 'row';
    push @panels, $p;
    push @targets, ["panel \"$p->{title}\" $_->{refId}", $_->{expr}] for @{ $p->{targets} || [] };
}
for my $a (@{ $dash->{annotations}{list} || [] }) {
    push @targets, ["annotation \"$a->{name}\"", $a->{expr}] if defined $a->{expr};
}
is("@bad_ds", '', 'every datasource is ${DS_PROMETHEUS} (or Grafana\'s own annotations)');

# the panels: unique ids, on the 24-column grid, with what the issue asks
my (%id, @grid);
for my $p (map { $_, @{ $_->{panels} || [] } } @{ $dash->{panels} }) {
    $id{ $p->{id} }++;
    my $g = $p->{gridPos};
    push @grid, $p->{title} unless $g && $g->{x} >= 0 && $g->{w} > 0 && $g->{x} + $g->{w} <= 24;
}
is(scalar(grep { $_ > 1 } values %id), 0, 'panel ids are unique');
is("@grid", '', 'every panel fits the 24-column grid');
for my $p (@panels) {
    my %ref;
    $ref{ $_->{refId} }++ for @{ $p->{targets} || [] };
    ok(@{ $p->{targets} || [] } && !grep({ $_ > 1 } values %ref)
       && !grep({ !length($_->{expr} // '') } @{ $p->{targets} }),
       "panel \"$p->{title}\": expressions with distinct refIds");
}
cmp_ok(scalar @targets, '>=', 25, scalar(@targets) . ' expressions');

# how old each host's view of the fleet is, against the FlagsFleetStale
# alert's line (t/prometheus/flags-alerts.yml: 3 intervals)
{
    my ($age) = grep { $_->{title} eq 'Fleet view age' } @panels;
    ok($age, 'a panel "Fleet view age"');
    is_deeply([map { $_->{expr} } @{ $age ? $age->{targets} : [] }],
              ['max by (instance) (flags_sync_stale_seconds{instance=~"$instance"})',
               '3 * max by (instance) (flags_sync_interval_seconds{instance=~"$instance"})'],
              'Fleet view age: the staleness and its threshold, 3 intervals');
    is($age && $age->{fieldConfig}{defaults}{unit}, 's', 'Fleet view age: in seconds');
    my $alerts = read_file("$root/t/prometheus/flags-alerts.yml") // '';
    like($alerts, qr/flags_sync_stale_seconds\s*>\s*3\s*\*\s*flags_sync_interval_seconds/,
         'the alert uses the same line (3 intervals)');
}

# ---- Grafana's variables replaced --------------------------------------------

# as Grafana would send them with "All" selected; the ranges are Grafana's
# own ($__rate_interval is at least four scrape intervals)
my %value = (instance => '.+', project => '.+', flag => '.+',
             __rate_interval => '1m', __interval => '15s', __range => '1h');
my @unknown;
sub substitute {
    my ($expr, $where) = @_;
    $expr =~ s/\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]/
        my $n = $1 \/\/ $2 \/\/ $3;
        exists $value{$n} ? $value{$n} : do { push @unknown, "$where: \$$n"; "\$$n" }/ge;
    return $expr;
}

# the variables' queries: label_values(SELECTOR, LABEL) is Grafana's, not
# PromQL; its selector is checked as count by (LABEL) (SELECTOR)
my @exprs;        # [where, PromQL]
for my $v (qw(instance project flag)) {
    my $q = $var{$v}{definition} // '';
    my $qq = ref $var{$v}{query} ? $var{$v}{query}{query} : $var{$v}{query};
    is($qq, $q, "variable $v: query and definition agree");
    if ($q =~ /^label_values\((.+),\s*(\w+)\)$/) {
        push @exprs, ["variable $v", substitute("count by ($2) ($1)", "variable $v")];
    } else {
        fail("variable $v: not label_values(SELECTOR, LABEL): $q");
    }
}
push @exprs, [$_->[0], substitute($_->[1], $_->[0])] for @targets;
is("@unknown", '', 'every variable in an expression is the dashboard\'s or Grafana\'s');

# ---- promtool check rules -------------------------------------------------------

sub run_cmd {
    my ($input, @cmd) = @_;
    my $err = gensym;
    local $ENV{LD_PRELOAD};
    delete $ENV{LD_PRELOAD};
    my $pid = open3(my $in, my $out, $err, @cmd);
    print $in $input if defined $input;
    close $in;
    local $/;
    my $o = <$out> // '';
    my $e = <$err> // '';
    waitpid($pid, 0);
    return ($? >> 8, $o . $e);
}

sub rules_yaml {
    my (@e) = @_;
    my $y = "groups:\n  - name: grafana-flags-dashboard\n    rules:\n";
    my $n = 0;
    for (@e) {
        (my $q = $_->[1]) =~ s/'/''/g;
        $y .= sprintf "      # %s\n      - record: grafana:expr_%02d\n        expr: '%s'\n",
                      $_->[0], ++$n, $q;
    }
    return $y;
}

my $dir = prefix_dir('grafana');
write_file("$dir/dashboard-rules.yml", rules_yaml(@exprs));
my ($rc, $out) = run_cmd(undef, 'promtool', 'check', 'rules', "$dir/dashboard-rules.yml");
is($rc, 0, 'promtool check rules: exit 0') or diag($out);
like($out, qr/SUCCESS: ${\ scalar @exprs} rules found/,
     'promtool check rules: every expression is a valid rule');

# the check sees a broken expression (so the one above means something)
write_file("$dir/broken-rules.yml",
           rules_yaml(['broken', 'sum by (flag) (rate(flags_evaluations_total[1m])']));
($rc, $out) = run_cmd(undef, 'promtool', 'check', 'rules', "$dir/broken-rules.yml");
isnt($rc, 0, 'promtool check rules refuses an unbalanced expression');

# ---- the metric names ------------------------------------------------------------

# What stays of an expression once strings, label matchers, ranges and
# label lists are gone: functions (before "("), operators' keywords,
# numbers and metric names.
my %keyword = map { $_ => 1 } qw(and or unless bool offset by without on ignoring
                                 group_left group_right);
my (%used, @foreign);
for my $e (@exprs) {
    (my $s = $e->[1]) =~ s/"(?:[^"\\]|\\.)*"//g;
    $s =~ s/\{[^}]*\}//g;
    $s =~ s/\[[^\]]*\]//g;
    $s =~ s/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)//g;
    while ($s =~ /\b([A-Za-z_:][A-Za-z0-9_:]*)\b(\s*\()?/g) {
        my ($name, $call) = ($1, $2);
        next if $call || $keyword{$name};
        if ($name =~ /^flags_/) { $used{$name}{ $e->[0] } = 1 }
        else { push @foreign, "$e->[0]: $name" }
    }
}
is("@foreign", '', 'every metric the dashboard reads is a flags_ metric');

# the families the issue names are all shown
for my $m (qw(flags_rollbacks_total flags_rolled_back flags_cohort_errors_total
              flags_cohort_requests_total flags_evaluations_total flags_rollout_ratio
              flags_configured_rollout_ratio flags_ramp_stage flags_ramp_rollout_ratio
              flags_ramp_state flags_ramp_evidence_ratio flags_ramp_stage_changes_total
              flags_sync_connected flags_sync_lag_seconds
              flags_sync_last_success_timestamp_seconds flags_sync_failures_total
              flags_reports_refused_total flags_zone_bytes)) {
    ok($used{$m}, "the dashboard shows $m");
}

# the families src/core/metrics.cpp writes
my $src = read_file("$root/src/core/metrics.cpp") // '';
my %family = map { $_ => 1 } $src =~ /^\s*\{"(flags_[a-z_]+)", "(?:counter|gauge)",/mg;
cmp_ok(scalar keys %family, '>=', 30, scalar(keys %family) . ' families in metrics.cpp');
my @not_family = grep { !$family{$_} } sort keys %used;
is("@not_family", '', 'every metric the dashboard reads is a family of metrics.cpp');

# ---- the module: an nginx with a ramp, a rollback rule and flags_sync -----------------

my $rport = unused_port();
my $pport = unused_port();
my ($redis, $prom);

END { local $?; reap($prom); reap($redis); }

$redis = spawn("$dir/redis.log", 'redis-server', '--port', $rport, '--bind', '127.0.0.1',
               '--save', '', '--appendonly', 'no', '--dir', $dir);
ok(wait_port($rport), 'redis-server listens');

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "checkout", "enabled": true, "rolloutPercentage": 100,
   "rollback": {"minErrors": 3, "rate": 10, "window": 60}},
  {"name": "search", "enabled": true, "rolloutPercentage": 100,
   "ramp": {"stages": [{"percentage": 10, "hold": 3600},
                       {"percentage": 50, "hold": 3600},
                       {"percentage": 100}],
            "regression": {"tick": 1}}},
  {"name": "dark", "enabled": true, "rolloutPercentage": 0},
  {"name": "legacy", "enabled": false, "rolloutPercentage": 100}
]}
_J_
write_file("$dir/conf/blog.json",
           '{"flags": [{"name": "comments", "enabled": true, "rolloutPercentage": 50}]}');
write_file("$dir/conf/nginx.conf", nginx_conf(http => <<"_H_", server => <<'_S_'));
    flags_project shop token=tok_shop file=shop.json;
    flags_project blog token=tok_blog file=blog.json;
    flags_error_log off;
    flags_sync redis://127.0.0.1:$rport/5 interval=200ms prefix=t071: host=h0;
_H_
        location = /flags { flags_evaluate; }
        location = /ingest/errors { flags_ingest_errors; }
        location = /metrics { flags_metrics; }
        location /flags-admin/ { flags_admin; allow 127.0.0.1; deny all; }
_S_
my $master = nginx_start($dir);

# ---- a real Prometheus: every expression answers --------------------------------

write_file("$dir/prometheus.yml", <<"_Y_");
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $dir/dashboard-rules.yml
scrape_configs:
  - job_name: nginx-flags
    metrics_path: /metrics
    static_configs:
      - targets: ['127.0.0.1:$FlagsTest::Port']
_Y_
$prom = spawn("$dir/prometheus.log", 'prometheus', "--config.file=$dir/prometheus.yml",
              "--storage.tsdb.path=$dir/prometheus-data",
              "--web.listen-address=127.0.0.1:$pport");

sub query {
    my ($q) = @_;
    return prometheus_api($pport, '/api/v1/query?query=' . uri_escape($q));
}

# two scrapes before the traffic, so that rate() and increase() see it
ok(wait_for(sub {
    my $j = query('count_over_time(flags_zone_bytes{state="used"}[1m]) >= 2');
    return $j && $j->{status} eq 'success' && @{ $j->{data}{result} };
}, 30), 'Prometheus scraped the module twice')
    or diag(read_file("$dir/prometheus.log"));

sub req_ok {
    my ($want, $what, @args) = @_;
    my ($s) = http_request(@args);
    is($s, $want, $what);
}
for my $u (1 .. 20) {
    my ($s1) = http_request(GET => "/flags?userId=u$u", headers => ['Authorization: Bearer tok_shop']);
    my ($s2) = http_request(GET => "/flags?userId=u$u", headers => ['Authorization: Bearer tok_blog']);
    die "GET /flags: $s1 $s2" unless $s1 == 200 && $s2 == 200;
}
req_ok(204, "a report on checkout $_", POST => '/ingest/errors',
       body => qq({"flagName":"checkout","message":"m","userId":"u$_"}),
       headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json'])
    for 1 .. 3;
req_ok(400, 'a refused report', POST => '/ingest/errors', body => '{"flagName":',
       headers => ['Authorization: Bearer tok_shop', 'Content-Type: application/json']);
req_ok(204, 'a percent override on dark', PUT => '/flags-admin/overrides/shop/dark',
       body => '{"rolloutPercentage": 12.5}', headers => ['Content-Type: application/json']);
req_ok(204, 'the ramp advanced a stage', PUT => '/flags-admin/ramps/shop/search',
       body => '{"action": "advance"}', headers => ['Content-Type: application/json']);

# after the rollback and the override: their families exist only then
my ($st, undef, $exposition) = http_request(GET => '/metrics');
is($st, 200, 'GET /metrics');
my %exported = map { $_ => 1 } $exposition =~ /^(flags_[a-z_]+)(?:\{| )/mg;
my @missing = grep { !$exported{$_} } sort keys %used;
is("@missing", '', 'every metric the dashboard reads is in this build\'s exposition')
    or diag(join "\n", map { "$_ used by " . join(', ', sort keys %{ $used{$_} }) } @missing);

my (%error, %empty);
my $all = wait_for(sub {
    %error = %empty = ();
    for my $e (@exprs) {
        my $j = query($e->[1]);
        if (!$j || $j->{status} ne 'success') {
            $error{ $e->[0] } = $j ? "$j->{errorType}: $j->{error}" : 'no answer';
        } elsif (!@{ $j->{data}{result} }) {
            $empty{ $e->[0] } = 1;
        }
    }
    return 1 unless %error || %empty;
    sleep 0.5;
    return 0;
}, 30);
is(join('; ', map { "$_: $error{$_}" } sort keys %error), '',
   'Prometheus answers every expression without error');
is(join('; ', sort keys %empty), '', 'every expression has a series');
ok($all, scalar(@exprs) . ' expressions answered by a real Prometheus');

# the same expressions as Prometheus's own recording rules: all healthy
my $rules_ok = wait_for(sub {
    my $j = prometheus_api($pport, '/api/v1/rules') or return 0;
    my @r = map { @{ $_->{rules} } } @{ $j->{data}{groups} || [] };
    return 0 unless @r == @exprs && !grep { !$_->{lastEvaluation} || $_->{lastEvaluation} =~ /^0001/ } @r;
    return [grep { $_->{health} ne 'ok' } @r];
}, 10);
ok($rules_ok, 'Prometheus evaluated every rule');
is(join('; ', map { "$_->{name}: $_->{lastError}" } @{ $rules_ok || [] }), '',
   'every rule is healthy');

nginx_stop($master);
my $errlog = read_file("$dir/logs/error.log") // '';
unlike($errlog, qr/\[(?:alert|crit|emerg)\]/, 'no alert in the error log');

done_testing();
