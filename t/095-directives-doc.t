# docs/directives.md, the directives reference in nginx's format, against
# the module's own command table (src/ngx_http_flags_module.c): every
# directive has its section, once, with Syntax, Default and Context lines;
# the contexts are those the code accepts; the syntax starts with the
# directive's name; the page documents no directive the module lacks; and
# nginx -t takes every default the page writes as a whole directive.
use strict;
use warnings;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/helper";
use FlagsTest;

my $root = "$FindBin::Bin/..";
my $src = read_file("$root/src/ngx_http_flags_module.c");
my $doc = read_file("$root/docs/directives.md");

# name => [contexts] from the command table
my ($table) = $src =~ /ngx_http_flags_commands\[\] = \{(.*?)ngx_null_command/s
    or die 'no command table';
my %code;
while ($table =~ /ngx_string\("(flags_\w+)"\),\s*([A-Z_|]+)/g) {
    my ($name, $mask) = ($1, $2);
    $code{$name} = [grep { defined } ($mask =~ /MAIN_CONF/ ? 'http' : undef),
                                     ($mask =~ /SRV_CONF/ ? 'server' : undef),
                                     ($mask =~ /LOC_CONF/ ? 'location' : undef)];
}
cmp_ok(scalar keys %code, '>=', 24, 'the command table has its directives (' . scalar(keys %code) . ')');

my (%sections, @http, @location);
for my $part (split /^### /m, $doc) {
    my ($name) = $part =~ /\A(\S+)\n/ or next;
    $sections{$name}++ and fail("$name: two sections");
    # "Syntax:  `...`\" (a hard line break), as nginx's reference has it
    my ($syntax) = $part =~ /^Syntax: +(.*?)\\?$/m;
    my ($default) = $part =~ /^Default: +(.*?)\\?$/m;
    my ($context) = $part =~ /^Context: +(.*?)\\?$/m;
    ok(defined $syntax && $syntax =~ /^`\Q$name\E[ ;]/, "$name: a Syntax line that names it");
    ok(defined $default, "$name: a Default line");
    my @ctx = map { s/`//gr } split /,\s*/, ($context // '') =~ s/ \(a prefix\)//r;
    is_deeply(\@ctx, $code{$name} // [], "$name: the contexts the code takes ("
              . join(', ', @{ $code{$name} // ['none: not a directive'] }) . ')');
    ok(length(($part =~ /^Context: .*\n\n(.+)/ms)[0] // '') > 40, "$name: a description");
    # a default written as the whole directive, for nginx -t below
    if (($default // '') =~ /^`(\Q$name\E [^`]*;)`/) {
        push @{ ($code{$name}[0] // '') eq 'http' ? \@http : \@location }, $1;
    }
}
is_deeply([sort keys %sections], [sort keys %code], 'every directive has a section, and no other');

# the defaults as written, all at once: nginx -t takes them
cmp_ok(scalar @http, '>=', 8, 'defaults written as directives: ' . scalar(@http) . ' of http, '
       . scalar(@location) . ' of location');
my $dir = prefix_dir('directives-doc');
write_file("$dir/conf/shop.json", '{"flags":[{"name":"a","enabled":true,"rolloutPercentage":100}]}');
mkdir "$dir/state";
write_file("$dir/conf/nginx.conf", nginx_conf(
    http => join('', map { "    $_\n" } @http)
          . "    flags_project shop token=t file=shop.json;\n    flags_error_log off;\n",
    server => "        location = /x {\n" . join('', map { "            $_\n" } @location)
            . "            return 204;\n        }\n"));
my ($rc, $out) = nginx_test($dir);
is($rc, 0, 'nginx -t takes every default as the page writes it') or diag $out;

done_testing();
