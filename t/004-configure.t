# ./configure checks the module's libraries (config, auto/feature): with
# the real nginx source tree, a library whose headers are missing stops it
# with the library's name and the Debian package to install, before any
# compilation. The headers are hidden in a private mount namespace
# (unshare -m, an empty tmpfs over the header directory), so nothing on
# the machine changes; root and unshare are needed, else the test skips.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use FindBin;

my $src = $ENV{NGINX_SRC} || '/usr/share/nginx/src';
my $root = "$FindBin::Bin/..";
plan skip_all => 'needs root (a private mount namespace)' if $> != 0;
plan skip_all => "no nginx source tree at $src" unless -x "$src/configure";
plan skip_all => 'no unshare' unless `command -v unshare 2>/dev/null`;
plan skip_all => 'unshare -m does not work here'
    if system('unshare -m true >/dev/null 2>&1') != 0;

sub configure {
    my ($hide) = @_;
    my $build = tempdir(CLEANUP => 1);
    open my $fh, '>', "$build/run.sh" or die "$build/run.sh: $!";
    print $fh <<"_SH_";
set -e
${\($hide ? "mount -t tmpfs flags-test $hide" : ':')}
cd $src
NGX_CONF_FLAGS=()
[ -f ./conf_flags ] && . ./conf_flags
./configure "\${NGX_CONF_FLAGS[@]}" --with-compat \\
    --add-dynamic-module=$root --builddir=$build
_SH_
    close $fh;
    my $out = `unshare -m bash $build/run.sh 2>&1`;
    return ($? >> 8, $out);
}

my ($rc, $out) = configure(undef);
is($rc, 0, 'with every library, ./configure succeeds') or diag($out);
for my $lib ('yajl', 'PCRE2', 'wslay', 'hiredis') {
    like($out, qr/^checking for \Q$lib\E library \(ngx_http_flags_module\) \.\.\. found$/m,
         "... and checks $lib");
}
like($out, qr/^checking for a C\+\+17 compiler for ngx_http_flags_module \.\.\. found/m,
     '... and the C++17 compiler');

for my $case (['/usr/include/yajl', 'yajl', 'libyajl-dev'],
              ['/usr/include/hiredis', 'hiredis', 'libhiredis-dev'],
              ['/usr/include/wslay', 'wslay', 'libwslay-dev']) {
    my ($dir, $lib, $pkg) = @$case;
    ($rc, $out) = configure($dir);
    isnt($rc, 0, "$lib headers hidden: ./configure fails");
    like($out, qr/^checking for \Q$lib\E library \(ngx_http_flags_module\) \.\.\. not found$/m,
         '... at its check');
    like($out, qr/error: ngx_http_flags_module needs the \Q$lib\E library and its\nheaders; on Debian: apt-get install \Q$pkg\E/,
         "... naming $lib and $pkg");
}

done_testing();
