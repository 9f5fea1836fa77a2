# Flags as nginx variables (docs/variables.md): flags_context, $flag_NAME and
# $flags_enabled in return, map, if, add_header and proxy_set_header (to a
# second server block that echoes the headers), the same answers as
# GET /flags, one evaluation per request and flag read, subrequests and
# internal redirects, keep-alive, two workers, and what nginx -t refuses.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;
use IO::Socket::INET;
use JSON::PP;

my $dir = prefix_dir('variables');

# a free port for the upstream server block
sub free_port {
    my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0,
                                  Listen => 1, ReuseAddr => 1) or die "port: $!";
    my $p = $s->sockport;
    close $s;
    return $p;
}
my $Up = free_port();
$Up = free_port() while $Up == $FlagsTest::Port;

write_file("$dir/conf/shop.json", <<'_J_');
{"flags": [
  {"name": "a", "enabled": true, "rolloutPercentage": 100},
  {"name": "new-checkout", "enabled": true, "rolloutPercentage": 50},
  {"name": "off.flag", "enabled": false, "rolloutPercentage": 100},
  {"name": "pro-only", "enabled": true, "rolloutPercentage": 100, "segments": ["pro"]},
  {"name": "Half:DE", "enabled": true, "rolloutPercentage": 50, "segments": ["de"]}
 ],
 "segments": {
  "pro": {"rules": [{"trait": "plan", "op": "eq", "value": "pro"}]},
  "de": {"rules": [{"trait": "country", "op": "eq", "value": "de"}]}
 }}
_J_
write_file("$dir/conf/blog.json",
    '{"flags":[{"name":"b","enabled":true,"rolloutPercentage":100}]}');

my $http = <<"_C_";
    flags_project shop token=tok_shop file=$dir/conf/shop.json;
    flags_project blog token=tok_blog file=$dir/conf/blog.json;
    flags_error_log off;
    flags_context shop user=\$arg_uid trait_plan=\$http_x_plan trait_country=\$cookie_country;

    map \$flag_new_checkout \$checkout {
        1        new;
        default  old;
    }

    server {
        listen 127.0.0.1:$Up;
        location / {
            return 200 "a=\$http_x_flag_a enabled=\$http_x_enabled\\n";
        }
    }
_C_

my $server = <<'_C_';
        location = /flags { flags_evaluate; }
        location = /status { flags_status; }
        location = /v {
            return 200 "$flag_a $flag_new_checkout $flag_off_flag $flag_pro_only $flag_half_de|$flags_enabled\n";
        }
        location = /a { return 200 "$flag_a\n"; }
        location = /enabled { return 200 "$flags_enabled\n"; }
        location = /many { return 200 "$flag_a$flag_a$flag_A$flag_new_checkout$flags_enabled$flags_enabled\n"; }
        location = /map { return 200 "$checkout\n"; }
        location = /if {
            if ($flag_pro_only) {
                return 200 "pro\n";
            }
            return 200 "not pro\n";
        }
        location = /if0 {
            if ($flag_pro_only = 0) {
                return 200 "zero\n";
            }
            return 200 "one\n";
        }
        location = /hdr {
            add_header X-Pro $flag_pro_only;
            add_header X-Enabled $flags_enabled;
            return 204;
        }
        location = /proxy {
            proxy_set_header X-Flag-A $flag_a;
            proxy_set_header X-Enabled $flags_enabled;
            proxy_pass http://127.0.0.1:__UP__/;
        }
        location = /blog {
            flags_context blog user=$arg_uid;
            return 200 "b=$flag_b a=$flag_a e=$flags_enabled\n";
        }
        location = /ssi {
            ssi on;
            ssi_types text/plain;
            default_type text/plain;
            return 200 'main=$flag_pro_only <!--# include virtual="/a?uid=other" --> <!--# include virtual="/enabled" --> <!--# include virtual="/blog?uid=x" -->';
        }
        location = /ssi-only {
            ssi on;
            ssi_types text/plain;
            default_type text/plain;
            return 200 'sub=<!--# include virtual="/a" -->';
        }
        location = /redirect {
            set $seen $flag_new_checkout;
            error_page 418 = /a;
            return 418;
        }
        location = /self {
            flags_context shop user=$flag_a;
            return 200 "[$flag_a]\n";
        }
        location = /nocontext {
            flags_context blog user=x;
            return 200 "[$flag_new_checkout][$flags_enabled]\n";
        }
_C_
$server =~ s/__UP__/$Up/;

write_file("$dir/conf/nginx.conf", nginx_conf(http => $http, server => $server));

my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'the configuration is valid') or diag($out);

my $master = nginx_start($dir);

sub get {
    my ($path, @h) = @_;
    my ($st, $h, $body) = http_request(GET => $path, headers => \@h);
    if (($h->{'transfer-encoding'} // '') =~ /chunked/i) {
        my $raw = $body;
        $body = '';
        while ($raw =~ s/^([0-9a-fA-F]+)\r\n//) {
            my $n = hex $1;
            last if $n == 0;
            $body .= substr($raw, 0, $n, '');
            $raw =~ s/^\r\n//;
        }
    }
    return wantarray ? ($st, $body, $h) : $body;
}

sub status_flag {
    my ($project, $name) = @_;
    my $s = decode_json(scalar get('/status'));
    for my $p (@{ $s->{projects} }) {
        next unless $p->{name} eq $project;
        for my $f (@{ $p->{flags} }) {
            return $f if $f->{name} eq $name;
        }
    }
    return undef;
}

# --- exact answers ---------------------------------------------------------

# u1's buckets: GET /flags decides new-checkout and Half:DE, the test
# compares with it below; here only flags whose answer is not a split
my ($st, $body) = get('/v?uid=u1', 'X-Plan: pro');
is($st, 200, '$flag_ in return: 200');
like($body, qr/^1 [01] 0 1 0\|a,(new-checkout,)?pro-only\n$/,
     'return "$flag_a ... | $flags_enabled": on, off, segments, file order');

is(get('/v?uid=u1', 'X-Plan: free'), get('/v?uid=u1', 'X-Plan: free'),
   'the same user, the same answer');
like(get('/v?uid=u1', 'X-Plan: free'), qr/^1 [01] 0 0 0\|a(,new-checkout)?\n$/,
     'a trait from a header decides the segment');

is(get('/if?uid=u1', 'X-Plan: pro'), "pro\n", 'if ($flag_pro_only): on');
is(get('/if?uid=u1', 'X-Plan: free'), "not pro\n", 'if ($flag_pro_only): off ("0")');
is(get('/if0?uid=u1'), "zero\n", 'if ($flag_pro_only = 0) with no plan header');

my ($hst, undef, $hh) = get('/hdr?uid=u1', 'X-Plan: pro');
is($hst, 204, 'add_header: 204');
is($hh->{'x-pro'}, '1', 'add_header X-Pro $flag_pro_only');
like($hh->{'x-enabled'}, qr/^a,(new-checkout,)?pro-only$/, 'add_header X-Enabled $flags_enabled');

like(get('/proxy?uid=u1', 'X-Plan: pro'), qr/^a=1 enabled=a,(new-checkout,)?pro-only\n$/,
     'proxy_set_header to another server block: the upstream sees the answers');

# the map follows $flag_new_checkout for every user
my %seen;
for my $i (1 .. 40) {
    my $v = get("/v?uid=m$i");
    my ($nc) = $v =~ /^\d (\d)/;
    my $m = get("/map?uid=m$i");
    $seen{$m}++;
    is($m, $nc ? "new\n" : "old\n", "map for m$i follows \$flag_new_checkout") or last;
}
ok($seen{"new\n"} && $seen{"old\n"}, 'the 50% split gives both backends among 40 users');

# a cookie trait
like(get('/v?uid=c1', 'Cookie: country=de'), qr/^1 [01] 0 0 [01]\|/, 'a trait from a cookie');

# another project's context in one location; an unknown flag there is empty
like(get('/blog?uid=u1'), qr/^b=1 a= e=b\n$/,
     'flags_context blog: $flag_b on, $flag_a (not blog\'s) empty, $flags_enabled of blog');

# no project answer: a context that reads $flag_ itself, a flag of no such name
is(get('/self?uid=u1'), "[1]\n",
   'user=$flag_a: empty while the context is computed (anonymous), then a answers');
is(get('/nocontext'), "[][b]\n", '$flag_new_checkout is empty where the project has no such flag');

# a caller over the limits of GET /flags: every flag 0, nothing counted
{
    my $f0 = status_flag('shop', 'a')->{counters}{evaluations};
    my $long = 'x' x 1025;
    is(get("/v?uid=$long"), "0 0 0 0 0|\n", 'a userId over 1024 bytes: every $flag_ reads 0, $flags_enabled empty');
    is(status_flag('shop', 'a')->{counters}{evaluations}, $f0, '... and nothing is counted');
    like(read_file("$dir/logs/error.log"),
         qr/\[info\] .*flags: the values of flags_context "shop" are refused \(userId is longer than 1024 bytes\): every \$flag_ reads 0/,
         '... an info line says why');
    is(get('/v?uid=' . ('y' x 1024), 'X-Plan: pro') =~ /^1 [01] 0 1 [01]\|/ ? 1 : 0, 1,
       'a userId of exactly 1024 bytes is evaluated');
}

# --- the same answer as GET /flags ------------------------------------------

my @plans = ('pro', 'free', '');
my @countries = ('de', 'fr', '');
my $same = 0;
my $users = 150;
for my $i (1 .. $users) {
    my $plan = $plans[$i % 3];
    my $country = $countries[int($i / 3) % 3];
    my $q = "userId=user-$i" . ($plan ? "&trait_plan=$plan" : '')
          . ($country ? "&trait_country=$country" : '');
    my $json = decode_json(scalar get("/flags?$q", 'Authorization: Bearer tok_shop'));
    my @on = map { $_->{name} } grep { $_->{enabled} } @{ $json->{flags} };
    my %on = map { $_ => 1 } @on;
    my $want = join(' ', map { $on{$_} ? 1 : 0 } 'a', 'new-checkout', 'off.flag', 'pro-only', 'Half:DE')
             . '|' . join(',', @on) . "\n";
    my @h = ($plan ? ("X-Plan: $plan") : (), $country ? ("Cookie: country=$country") : ());
    my $got = get("/v?uid=user-$i", @h);
    if ($got eq $want) { $same++ } else { diag("user-$i: got $got want $want"); last }
}
is($same, $users, "$users users: \$flag_ and \$flags_enabled answer as GET /flags");

# --- counting ----------------------------------------------------------------

sub counts {
    my $f = status_flag('shop', $_[0]);
    return join ' ', $f->{counters}{evaluations}, $f->{counters}{enabledEvaluations},
        $f->{cohorts}{on}{evaluations}, $f->{cohorts}{off}{evaluations};
}
my ($a0) = counts('a') =~ /^(\d+)/;
my ($n0, $ne0, $non0, $noff0) = split ' ', counts('new-checkout');
my $off0 = counts('off.flag');

# /many reads $flag_a three times and $flags_enabled twice: one evaluation
# of each flag of the project
for my $i (1 .. 20) {
    get("/many?uid=k$i");
}
my ($ae, $aee, $aon, $aoff) = split ' ', counts('a');
is($ae - $a0, 20, '20 requests reading $flag_a 3 times and $flags_enabled twice: 20 evaluations of a');
my ($n1, $ne1, $non1, $noff1) = split ' ', counts('new-checkout');
is($n1 - $n0, 20, '... 20 evaluations of new-checkout');
is(($non1 - $non0) + ($noff1 - $noff0), 20, '... 20 in its on and off cohorts together');
is($non1 - $non0, $ne1 - $ne0, '... the on cohort is its enabled evaluations');
my ($o1, $oe1, $oon1, $ooff1) = split ' ', counts('off.flag');
my ($o0, $oe0, $oon0, $ooff0) = split ' ', $off0;
is("@{[$o1 - $o0]} @{[$oe1 - $oe0]} @{[$oon1 - $oon0]} @{[$ooff1 - $ooff0]}", '20 0 0 20',
   '... off.flag: 20 evaluations, all in the off cohort');

# a flag never read is not counted
my $bf = status_flag('blog', 'b');
my $b0 = $bf->{counters}{evaluations};
get('/a?uid=z');
is(status_flag('blog', 'b')->{counters}{evaluations}, $b0, 'reading $flag_a of shop does not count blog');
($ae) = split ' ', counts('a');
($n1) = split ' ', counts('new-checkout');
get('/a?uid=z');
is((split ' ', counts('a'))[0], $ae + 1, '/a counts a once');
is((split ' ', counts('new-checkout'))[0], $n1, '... and not new-checkout, which it does not read');

# an internal redirect keeps the answers and what was read: /redirect reads
# new-checkout, then error_page sends it to /a, which reads a
($ae) = split ' ', counts('a');
($n1) = split ' ', counts('new-checkout');
is(get('/redirect?uid=r1'), "1\n", 'an internal redirect to /a answers $flag_a');
is((split ' ', counts('a'))[0], $ae + 1, '... a counted once');
is((split ' ', counts('new-checkout'))[0], $n1 + 1, '... new-checkout counted once');

# subrequests share the main request's answers and read set: /ssi reads
# pro-only, then includes /a?uid=other (a subrequest: the main request's
# caller answers, a counted once), /enabled (every flag; pro-only and a not
# again) and /blog (another project: its own answer)
($ae) = split ' ', counts('a');
my ($p0) = split ' ', counts('pro-only');
($n1) = split ' ', counts('new-checkout');
$b0 = status_flag('blog', 'b')->{counters}{evaluations};
my $ssi = get('/ssi?uid=u1', 'X-Plan: pro');
like($ssi, qr/^main=1 1\n a,(new-checkout,)?pro-only\n b=1 a= e=b\n$/,
     'SSI subrequests: the main request\'s answers, another project\'s own');
is((split ' ', counts('a'))[0], $ae + 1, '... a counted once for the request');
is((split ' ', counts('pro-only'))[0], $p0 + 1, '... pro-only counted once (main, then $flags_enabled)');
is((split ' ', counts('new-checkout'))[0], $n1 + 1, '... new-checkout once ($flags_enabled)');
is(status_flag('blog', 'b')->{counters}{evaluations}, $b0 + 1, '... blog\'s b once');

# a subrequest that reads first decides with its own values: /ssi-only has
# no uid, its subrequest /a has none either: anonymous, a is 100% on
is(get('/ssi-only'), "sub=1\n", 'a subrequest reading first evaluates');

# --- keep-alive: each request its own answers and counts -------------------

{
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $FlagsTest::Port,
                                  Timeout => 10) or die "connect: $!";
    my ($ke) = split ' ', counts('pro-only');
    my $resp = '';
    my @want;
    for my $i (1 .. 6) {
        my $plan = $i % 2 ? 'pro' : 'free';
        my $last = $i == 6 ? "Connection: close\r\n" : '';
        print $s "GET /if?uid=ka$i HTTP/1.1\r\nHost: localhost\r\nX-Plan: $plan\r\n$last\r\n";
        push @want, $plan eq 'pro' ? 'pro' : 'not pro';
    }
    local $/;
    $resp = <$s> // '';
    close $s;
    my @got = $resp =~ /\r\n\r\n(pro|not pro)\n/g;
    is("@got", "@want", 'six requests on one keep-alive connection: each its own answer');
    is((split ' ', counts('pro-only'))[0], $ke + 6, '... and six evaluations of pro-only');
}

# --- two workers: exact counts over many connections -------------------------

{
    my ($x0) = split ' ', counts('a');
    get("/a?uid=w$_") for 1 .. 60;
    is((split ' ', counts('a'))[0], $x0 + 60, '60 connections over 2 workers: 60 evaluations of a');
}

nginx_stop($master);

# --- nginx -t: what is refused -------------------------------------------------

write_file("$dir/conf/dup.json", <<'_J_');
{"flags": [
  {"name": "x", "enabled": true, "rolloutPercentage": 100},
  {"name": "new-checkout", "enabled": true, "rolloutPercentage": 100},
  {"name": "New.Checkout", "enabled": true, "rolloutPercentage": 100}
 ]}
_J_

write_file("$dir/conf/other.json",
    '{"flags":[{"name":"x","enabled":true,"rolloutPercentage":100}]}');

my $base = "    flags_project shop token=tok_shop file=$dir/conf/shop.json;\n"
         . "    flags_project dup token=tok_dup file=$dir/conf/dup.json;\n"
         . "    flags_project other token=tok_other file=$dir/conf/other.json;\n"
         . "    flags_error_log off;\n";

# [name, http, server, expected pattern, 0 if nginx -t passes]
my @cases = (
    ['unknown flag variable, with file:line of the context',
     "$base    flags_context shop user=\$arg_uid;\n",
     "        location / { return 200 \$flag_nope; }\n",
     qr{\[emerg\] \d+#\d+: unknown flag variable "\$flag_nope": project "shop" of flags_context in \Q$dir\E/conf/nginx\.conf:LINE_ctx has no such flag}],
    ['unknown in every context\'s project',
     "$base    flags_context shop user=\$arg_uid;\n",
     "        location / { flags_context other user=x; return 200 \$flag_a\$flag_b; }\n",
     qr{\[emerg\] \d+#\d+: unknown flag variable "\$flag_b": project "shop" of flags_context in .*nginx\.conf:LINE_ctx has no such flag, nor has any other flags_context's project}],
    ['known in one context\'s project is enough',
     "$base    flags_context shop user=\$arg_uid;\n",
     "        location / { flags_context other user=x; return 200 \$flag_a\$flag_x; }\n",
     undef, 0],
    ['collisions where a context names the project',
     $base,
     "        location / { flags_context dup user=\$arg_uid; return 200 ok; }\n",
     qr{\[emerg\] \d+#\d+: flags "new-checkout" and "New\.Checkout" of project "dup" are both read as one variable \(\$flag_ lowercases and writes '-', '\.' and ':' as '_'\) in .*nginx\.conf:LINE_dupctx}],
    ['collisions of a project no context names are allowed',
     "$base    flags_context shop user=\$arg_uid;\n", "        location / { return 200 \$flag_a; }\n", undef, 0],
    ['an empty user= is an anonymous context',
     "$base    flags_context shop user=;\n", "        location / { return 200 \$flag_a; }\n", undef, 0],
    ['no flags_context: a warning, the variable is empty',
     $base, "        location / { return 200 \$flag_a; }\n",
     qr{\[warn\] \d+#\d+: variable "\$flag_a" is read but no flags_context names a project: it is always empty}, 0],
    ['unknown project',
     "$base    flags_context nope user=\$arg_uid;\n", '',
     qr{\[emerg\] \d+#\d+: flags_context names unknown project "nope" \(no flags_project of that name\) in .*nginx\.conf:LINE_ctx}],
    ['no user=',
     "$base    flags_context shop trait_plan=\$http_x_plan;\n", '',
     qr{\[emerg\] \d+#\d+: "flags_context" directive needs "user=" in .*nginx\.conf:LINE_ctx}],
    ['bad parameter',
     "$base    flags_context shop user=\$arg_uid plan=\$http_x_plan;\n", '',
     qr{\[emerg\] \d+#\d+: invalid parameter "plan=\$http_x_plan" in flags_context, expected user=VALUE or trait_NAME=VALUE in .*nginx\.conf:LINE_ctx}],
    ['empty trait name',
     "$base    flags_context shop user=\$arg_uid trait_=x;\n", '',
     qr{\[emerg\] \d+#\d+: invalid trait name in "trait_=x": 1 to 128 bytes after "trait_"}],
    ['duplicate trait',
     "$base    flags_context shop user=\$arg_uid trait_p=a trait_p=b;\n", '',
     qr{\[emerg\] \d+#\d+: duplicate trait "p" in flags_context}],
    ['duplicate directive',
     "$base    flags_context shop user=a;\n    flags_context shop user=b;\n", '',
     qr{\[emerg\] \d+#\d+: "flags_context" directive is duplicate in .*nginx\.conf:LINE_ctx2}],
    ['more traits than flags_max_traits',
     "$base    flags_max_traits 1;\n    flags_context shop user=a trait_p=1 trait_q=2;\n", '',
     qr{\[emerg\] \d+#\d+: flags_context has 2 traits, more than flags_max_traits 1, in .*nginx\.conf:LINE_ctx}],
    ['an unknown variable in a value',
     "$base    flags_context shop user=\$nosuchvar;\n", '',
     qr{\[emerg\] \d+#\d+: unknown "nosuchvar" variable}],
);

# the line of the first (LINE_ctx), second (LINE_ctx2) flags_context and of
# the one naming dup (LINE_dupctx) in the written file
sub lines_of {
    my ($conf) = @_;
    my @l = split /\n/, $conf;
    my (@ctx, $dup);
    for my $i (0 .. $#l) {
        next unless $l[$i] =~ /flags_context/;
        push @ctx, $i + 1;
        $dup = $i + 1 if $l[$i] =~ /flags_context dup/;
    }
    return (ctx => $ctx[0] // 0, ctx2 => $ctx[1] // 0, dupctx => $dup // 0);
}

for my $c (@cases) {
    my ($name, $h, $s, $re, $want_rc) = @$c;
    my $conf = nginx_conf(http => $h, server => $s);
    write_file("$dir/conf/nginx.conf", $conf);
    if ($re) {
        my %line = lines_of($conf);
        my $src = "$re";
        $src =~ s/LINE_(\w+)/$line{$1}/g;
        $re = qr/$src/;
    }
    my ($rc, $out) = nginx_test($dir);
    if (defined $want_rc && $want_rc == 0) {
        is($rc, 0, "nginx -t passes: $name") or diag($out);
    } else {
        isnt($rc, 0, "nginx -t fails: $name");
    }
    like($out, $re, "... $name: the message") or diag($out) if $re;
}

done_testing();
