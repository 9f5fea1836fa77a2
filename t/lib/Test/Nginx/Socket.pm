package Test::Nginx::Socket;

# A small, independent implementation of the part of OpenResty's
# Test::Nginx::Socket that this project's t/*.t files use.  The real module
# is not packaged in Debian and CPAN is unreachable here; ./build.sh test
# puts t/lib on @INC only when the real one cannot be loaded.  Every .t file
# must pass under both, so the semantics below follow the real module's
# (request building, which checks run, how expectations are indexed); the
# code is our own.  Known differences are listed in t/lib/README.md.
#
# Test::Nginx::Util holds the nginx side (config, start/stop, error log);
# this file is the HTTP client and the per-request checks.

use strict;
use warnings;

# Subclassing Test::Base, as the real module does, gives the .t files the
# same block syntax, filters (eval, chomp, ...), ONLY/SKIP/LAST handling and
# Test::More functions, and lets "use Test::Nginx::Socket 'no_plan'" set
# the plan.  (-base, unlike -Base, does not source-filter this file.)
use Test::Base -base;

use HTTP::Response ();
use IO::Select ();
use IO::Socket::INET ();
use List::Util qw(min);
use POSIX qw(EAGAIN EWOULDBLOCK EINTR);
use Time::HiRes qw(sleep time);

use Test::Nginx::Util;

our $VERSION = '0.01';

our @EXPORT = qw(
    env_to_nginx is_str plan run_tests repeat_each config_preamble
    worker_connections master_process_enabled no_long_string workers
    master_on master_off log_level no_shuffle no_root_location
    server_name server_addr server_root html_dir server_port
    server_port_for_client timeout check_accum_error_log
    add_block_preprocessor bail_out add_cleanup_handler
    add_test_cleanup_handler add_response_body_check
);

our @ResponseBodyChecks;
sub add_response_body_check ($) { push @ResponseBodyChecks, shift }

$Test::Nginx::Util::RunTestHelper = \&run_test_helper;
$Test::Nginx::Util::CheckErrorLog = \&check_error_log;

# ---- building requests --------------------------------------------------

# --- more_headers lines become CRLF-terminated header lines.  A chunked
# request body is the caller's business, so it is then sent untouched.
sub parse_more_headers ($) {
    my $text = shift // '';
    my ($out, $chunked) = ('', 0);
    for my $line (split /\n+/, $text) {
        next if $line =~ /^\s*(#|$)/;
        my ($k, $v) = split /:\s*/, $line, 2;
        $v //= '';
        $chunked = 1 if lc $k eq 'transfer-encoding' && $v eq 'chunked';
        $out .= "$k: $v\r\n";
    }
    return ($out, $chunked);
}

sub clamp { my ($v, $lo, $hi) = @_; $v < $lo ? $lo : $v > $hi ? $hi : $v }

# Turns "METHOD [URI [VERSION]]\n[body]" into a full HTTP request: version
# defaults to HTTP/1.1, Host and Connection are added unless more_headers
# has them, and a non-chunked body is trimmed and given a Content-Length.
# The request may come as several pieces (sent with pauses between them);
# the pieces keep their split points, with the added header lines going
# along with the request line.
sub build_request {
    my ($name, $pieces, $more, $chunked, $conn) = @_;
    my $text = join '', @$pieces;
    my ($line, $body) = $text =~ /\A([^\n]*\n?)(.*)\z/s;
    $line =~ /^(\s*)(\S+) *(?:(\S+) *)?(?:(\S+) *)?\s*$/
        or bail_out("$name - cannot parse the request line \"$line\": "
                    . "expected METHOD [URI [VERSION]]");
    my ($lead, $meth, $uri, $ver) = (length $1, $2, $3 // '/', $4 // 'HTTP/1.1');

    my $headers = '';
    $headers .= "Host: $ServerName\r\n"  unless $more =~ /^Host:/mi;
    $headers .= "Connection: $conn\r\n" unless $more =~ /^Connection/mi;
    $headers .= $more;
    my $body_lead = 0;
    if (!$chunked && $body ne '' && $more !~ /^Content-Length:/m) {
        $body_lead = length(($body =~ /\A(\s*)/)[0]);
        $body =~ s/^\s+|\s+$//g;
        $headers .= 'Content-Length: ' . length($body) . "\r\n";
    }

    my $start = "$meth $uri $ver\r\n";
    my $new = $start . $headers . "\r\n" . $body;
    return [$new] if @$pieces <= 1;

    my $body_at = length($start) + length($headers) + 2;
    my ($pos, $from, @out) = (0, 0);
    for my $p (@$pieces[0 .. $#$pieces - 1]) {
        $pos += length $p;
        my $cut = $pos < length $line
            ? clamp($pos - $lead, 0, length($start) - 2)
            : $body_at + clamp($pos - length($line) - $body_lead, 0, length $body);
        $cut = $from if $cut < $from;
        push @out, substr($new, $from, $cut - $from);
        $from = $cut;
    }
    push @out, substr($new, $from);
    return \@out;
}

sub is_head ($) { return $_[0] =~ /^\s*HEAD\s/ ? 1 : 0 }

# The connections a block makes.  Each is { packets => [{value,
# delay_before}...], heads => [one flag per expected response] }; only
# pipelined_requests expects several responses on one connection.
sub requests_from_block ($) {
    my $block = shift;
    my $name  = $block->name;

    if (defined(my $raw = $block->raw_request)) {
        my @pieces = ref $raw eq 'ARRAY' ? @$raw : ($raw);
        return { packets => [map { {value => $_} } @pieces],
                 heads   => [is_head(join '', @pieces)] };
    }

    my $more = $block->more_headers // '';
    my $headers_for = sub {
        my $i = shift;
        return parse_more_headers($more) if ref $more ne 'ARRAY';
        bail_out("$name - --- more_headers has no entry for request $i")
            unless defined $more->[$i];
        return parse_more_headers($more->[$i]);
    };

    if (defined(my $reqs = $block->pipelined_requests)) {
        bail_out("$name - --- pipelined_requests must be an array (use eval)")
            if ref $reqs ne 'ARRAY';
        my $text = '';
        for my $i (0 .. $#$reqs) {
            my $r = expand_env_in_text($reqs->[$i], $name);
            # keep-alive on all but the last, so nginx must finish each
            # request (body included) before it reads the next one
            my $conn = $i == $#$reqs ? 'close' : 'keep-alive';
            $text .= build_request($name, [$r], $headers_for->($i), $conn)->[0];
        }
        return { packets => [{value => $text}],
                 heads   => [(is_head($text)) x @$reqs] };
    }

    my $req = $block->request;
    bail_out("$name - the block has no --- request") unless defined $req;
    my @list;
    if (!ref $req) {
        1 while $req =~ s/^\s*#[^\n]*\n|^\s+//;    # leading comments/blank lines
        @list = ($req);
    } elsif (ref $req eq 'ARRAY') {
        @list = @$req;
    } else {
        bail_out("$name - --- request must be a string or an array of requests");
    }

    my @conns;
    for my $i (0 .. $#list) {
        my $one = $list[$i];
        my @pieces;
        if (!ref $one) {
            @pieces = ({value => $one});
        } elsif (ref $one eq 'ARRAY') {
            @pieces = map { ref $_ eq 'HASH' ? {%$_} : {value => $_} } @$one;
        } else {
            bail_out("$name - request $i must be a string or an array of pieces");
        }
        my $built = build_request($name, [map { $_->{value} } @pieces],
                                  $headers_for->($i), 'close');
        $pieces[$_]{value} = $built->[$_] for 0 .. $#pieces;
        push @conns, { packets => \@pieces, heads => [is_head($built->[0])] };
    }
    return @conns;
}

# ---- talking to nginx --------------------------------------------------

sub connect_server ($$) {
    my ($name, $timeout) = @_;
    my $deadline = time + slow_timeout(10);
    for (my $try = 1; ; $try++) {
        my $sock = IO::Socket::INET->new(
            PeerAddr => $ServerAddr, PeerPort => $ServerPortForClient,
            Proto => 'tcp', Timeout => $timeout);
        return $sock if $sock;
        my $err = $!;
        if (time >= $deadline) {
            fail("$name - cannot connect to $ServerAddr:$ServerPortForClient: $err");
            return undef;
        }
        my $wait = min(1, sleep_time() * $try * ($try + 1) / 2);
        warn "$name - cannot connect to $ServerAddr:$ServerPortForClient ($err), "
             . "retrying in ${wait}s\n" if $wait >= 0.5;
        sleep $wait;
    }
}

# Writes the pieces (pausing between them as asked) while reading whatever
# nginx sends, until nginx closes the connection.  $timeout is an idle
# timeout: no progress for that long ends the exchange, which is a failure
# unless the block says --- abort.
sub send_request ($$$) {
    my ($block, $packets, $timeout) = @_;
    my $name = $block->name;
    my $sock = connect_server($name, $timeout) or return '';
    $sock->blocking(0);
    local $SIG{PIPE} = 'IGNORE';    # nginx may close before we finish writing

    my @todo   = @$packets;
    my $buf    = shift(@todo)->{value} // '';
    my $off    = 0;
    my $middle = parse_time($block->raw_request_middle_delay);
    my $sel    = IO::Select->new($sock);
    my ($resp, $writing) = ('', 1);

    while (1) {
        my ($r, $w) = IO::Select->select($sel, $writing ? $sel : undef, undef, $timeout);
        if (!$r && !$w) {
            fail("$name - no progress from nginx in ${timeout}s (client timed out)")
                unless defined $block->abort;
            last;
        }
        if ($w && @$w) {
            my $n = syswrite $sock, $buf, length($buf) - $off, $off;
            if (!defined $n) {
                if ($! != EAGAIN && $! != EWOULDBLOCK && $! != EINTR) {
                    warn "$name - writing the request failed: $!\n";
                    $writing = 0;
                }
            } elsif (($off += $n) >= length $buf) {
                if (my $next = shift @todo) {
                    my $delay = $next->{delay_before} // $middle;
                    sleep $delay if $delay;
                    ($buf, $off) = ($next->{value} // '', 0);
                } else {
                    $writing = 0;
                    if (defined(my $how = $block->shutdown)) {
                        shutdown $sock, ($how =~ /^\s*$/ ? 1 : $how);
                    }
                }
            }
        }
        if ($r && @$r) {
            my $n = sysread $sock, my $chunk, 65536;
            if (!defined $n) {
                next if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
                warn "WARNING: $name - reading the response failed: $!\n";
                last;
            }
            last if $n == 0;
            $resp .= $chunk;
        }
    }
    close $sock;
    return $resp;
}

# ---- parsing responses ---------------------------------------------------

# Returns the decoded body and whatever follows the last chunk (the next
# pipelined response).
sub decode_chunked ($$) {
    my ($name, $raw) = @_;
    my $out = '';
    pos($raw) = 0;
    while (1) {
        my $at = pos($raw) // 0;
        unless ($raw =~ /\G[ \t]*([0-9A-Fa-f]+)[ \t]*(?:;[^\r\n]*)?\r\n/gc) {
            fail("$name - bad chunked body: no chunk-size line at byte $at");
            return ($out, undef);
        }
        my $size = hex $1;
        my $p = pos $raw;
        if ($size == 0) {
            1 while $raw =~ /\G[^\r\n]+\r\n/gc;    # trailer fields
            unless ($raw =~ /\G\r\n/gc) {
                fail("$name - bad chunked body: no CRLF after the last chunk");
                return ($out, undef);
            }
            return ($out, substr($raw, pos $raw));
        }
        if (length($raw) < $p + $size + 2 || substr($raw, $p + $size, 2) ne "\r\n") {
            fail("$name - bad chunked body: chunk of $size bytes at byte $p is "
                 . "truncated or not followed by CRLF");
            return ($out, undef);
        }
        $out .= substr($raw, $p, $size);
        pos($raw) = $p + $size + 2;
    }
}

# Splits one response off the front of $raw: (HTTP::Response, raw header
# text, bytes left over for the next pipelined response).  The body ends
# where the real module ends it, so a test cannot pass here and fail there:
# chunked encoding, else Content-Length, else everything up to the close
# (also for 101/304).  $is_head only silences the truncation warning; like
# the real module it is decided once per connection, which is why a HEAD
# inside --- pipelined_requests is not delimited correctly.
sub parse_response ($$$) {
    my ($name, $raw, $is_head) = @_;
    return (undef, '', undef) if !defined $raw || $raw eq '';

    my ($head, $rest) = ($raw, '');
    if ($raw =~ /\A(.*?\r?\n)\r?\n/s) {
        ($head, $rest) = ($1, substr($raw, $+[0]));
    }
    my $res  = HTTP::Response->parse($head);
    my $code = $res->code;
    if (defined $code && $code !~ /^\d+$/) {
        $res->code(undef);
        undef $code;
    }

    my $te  = $res->header('Transfer-Encoding');
    my $len = $res->header('Content-Length');
    my ($body, $left) = ($rest, undef);
    if (defined $code && ($code == 101 || $code == 304)) {
        # body stays whatever followed the header
    } elsif (defined $te && $te eq 'chunked') {
        ($body, $left) = decode_chunked($name, $rest);
    } elsif (defined $len && $len =~ /^\s*(\d+)\s*$/) {
        my $n = $1;
        if (length $rest < $n) {
            warn "WARNING: $name - response body truncated: Content-Length $n, got "
                 . length($rest) . " bytes\n" unless $is_head;
        } elsif (length $rest > $n) {
            ($body, $left) = (substr($rest, 0, $n), substr($rest, $n));
        }
    }
    $res->content($body);
    $left = undef if defined $left && $left eq '';
    return ($res, $head, $left);
}

# ---- checks ----------------------------------------------------------------

# With several requests every expectation must be an array indexed by
# request; a scalar then is a test bug (the real module bails out too).
sub indexed ($$$$) {
    my ($name, $value, $idx, $need_array) = @_;
    return $value->[$need_array ? $idx : 0] if ref $value eq 'ARRAY';
    bail_out("$name - several requests are sent, so expectations must be "
             . "arrays (use eval)") if $need_array;
    return $value;
}

sub subst_port ($) {
    my $s = shift;
    return $s if !defined $s || ref $s;
    $s =~ s/\$ServerPortForClient\b/$ServerPortForClient/g;
    $s =~ s/\$ServerPort\b/$ServerPort/g;
    return $s;
}

sub check_error_code ($$$$) {
    my ($block, $res, $idx, $need_array) = @_;
    my $name = $block->name;
    my $got  = ($res && $res->code) || '';
    if (defined(my $like = $block->error_code_like)) {
        my $pat = indexed($name, $like, $idx, $need_array);
        like($got, qr/$pat/sm, "$name - status code ok");
    } elsif (defined(my $want = $block->error_code)) {
        is($got, indexed($name, $want, $idx, $need_array), "$name - status code ok");
    } else {
        is($got, 200, "$name - status code ok");
    }
}

sub check_headers ($$$$$) {
    my ($block, $res, $raw_headers, $idx, $need_array) = @_;
    my $name = $block->name;

    for my $which (qw(raw_response_headers_like raw_response_headers_unlike)) {
        my $v = $block->$which;
        next unless defined $v;
        my $pat = indexed($name, $v, $idx, $need_array);
        if ($which =~ /unlike/) {
            unlike($raw_headers, qr/$pat/s, "$name - raw response headers do not match");
        } else {
            like($raw_headers, qr/$pat/s, "$name - raw response headers match");
        }
    }

    if (defined(my $v = $block->response_headers)) {
        for my $h (@{ parse_headers(indexed($name, $v, $idx, $need_array)) }) {
            my ($key, $want) = @$h;
            if (!defined $want) {
                # matched against the raw text, as the real module does
                unlike($raw_headers, qr/^\s*\Q$key\E\s*:/m,
                       "$name - header $key is absent");
                next;
            }
            my $got = $res ? $res->header($key) : undef;
            is($got // '', subst_port($want), "$name - header $key ok");
        }
    }

    if (defined(my $v = $block->response_headers_like)) {
        for my $h (@{ parse_headers(indexed($name, $v, $idx, $need_array)) }) {
            my ($key, $pat) = @$h;
            my $got = $res ? $res->header($key) : undef;
            like($got // '', qr/^$pat$/, "$name - header $key like ok");
        }
    }
}

sub check_body ($$$$$) {
    my ($block, $res, $idx, $rep, $need_array) = @_;
    my $name    = $block->name;
    my $content = $res ? $res->content : undef;

    if (defined $block->response_body) {
        my $want = indexed($name, $block->response_body, $idx, $need_array);
        my $desc = "$name - response body ok (repeat $rep, req $idx)";
        if (ref $want) {
            like($content, $want, $desc);
        } else {
            $want = expand_env_in_text(subst_port($want), $name);
            my $ok = is_str($content, $want, $desc);
            # is_string points at the first difference; a diff shows the rest
            if (!$ok && defined $content && defined $want
                && ($content =~ tr/\n//) > 1 && eval { require Text::Diff; 1 }) {
                diag(Text::Diff::diff(\$want, \$content,
                                      {STYLE => 'Unified', FILENAME_A => 'expected',
                                       FILENAME_B => 'got'}));
            }
        }
    } elsif (defined $block->response_body_like || defined $block->response_body_unlike) {
        my $unlike = !defined $block->response_body_like;
        my $pats = $unlike ? $block->response_body_unlike : $block->response_body_like;
        my $pat  = subst_port(indexed($name, $pats, $idx, $need_array));
        my $summary = trim($content) // '';
        $summary = substr($summary, 0, 60) . '...' if length $summary > 60;
        if ($unlike) {
            unlike($content, qr/$pat/s, "$name - response body does not match ($summary)");
        } else {
            like($content, qr/$pat/s, "$name - response body matches ($summary)");
        }
    }

    $_->($block, $content, $idx, $rep, 0) for @ResponseBodyChecks;
}

# Patterns from error_log-style sections: text gives one literal substring
# per line; eval may give qr// objects or an array of both.
sub pattern_list ($) {
    my $pats = shift;
    return ($pats) if ref $pats eq 'Regexp';
    return grep { defined } @$pats if ref $pats eq 'ARRAY';
    chomp $pats;
    return split /\n+/, $pats;
}

sub line_matches ($$) {
    my ($line, $pat) = @_;
    return ref $pat ? $line =~ $pat : index($line, $pat) >= 0;
}

sub show ($) {
    my $s = shift;
    chomp $s;
    $s =~ s/\r/\\r/g;
    $s =~ s/\n/\\n/g;
    return $s;
}

# Error log lines written since the last check: --- error_log patterns must
# all appear, --- no_error_log ones must not, --- grep_error_log collects
# matches.  Unexpected [alert]/[crit]/[emerg] lines only warn, as in the
# real module; an assertion failure in nginx fails the test.
sub check_error_log ($$$$$) {
    my ($block, undef, undef, $rep) = @_;
    my $name = $block->name;
    my $lines;
    my $log = sub { $lines //= error_log_data() };

    if (defined(my $grep = $block->grep_error_log)) {
        $grep = $grep->[$rep] if ref $grep eq 'ARRAY';
        my $want = $block->grep_error_log_out;
        bail_out("$name - --- grep_error_log needs --- grep_error_log_out")
            unless defined $want;
        $want = $want->[$rep] if ref $want eq 'ARRAY';
        $want = expand_env_in_text($want, $name);
        my $got = '';
        for my $l (@{ $log->() }) {
            my $m;
            if (ref $grep) { $m = $& if $l =~ $grep }
            else           { $m = $& if $l =~ /\Q$grep\E/ }
            $got .= "$m\n" if defined $m && $m !~ /\n/;
        }
        is_str($got, $want, "$name - grep_error_log_out (req $rep)");
    } elsif (defined $block->grep_error_log_out) {
        bail_out("$name - --- grep_error_log_out needs --- grep_error_log");
    }

    my %expected_level;
    if (defined(my $pats = $block->error_log)) {
        for my $p (pattern_list($pats)) {
            $expected_level{$1} = 1 while !ref $p && $p =~ /\[(alert|crit|emerg)/g;
            my $hit = grep { line_matches($_, $p) } @{ $log->() };
            ok($hit, "$name - error.log contains \"" . show($p) . "\" (req $rep)");
        }
    }

    if (defined(my $pats = $block->no_error_log)) {
        my $l = $log->();
        for my $p (pattern_list($pats)) {
            my @at = grep { line_matches($l->[$_], $p) } 0 .. $#$l;
            my $desc = "$name - error.log has no \"" . show($p) . "\" (req $rep)";
            if (!@at) {
                pass($desc);
                next;
            }
            fail($desc);
            my $last = min($at[0] + 5, $#$l);
            diag("matched " . @at . " line(s), first:\n" . join '', @$l[$at[0] .. $last]);
        }
    }

    for my $line (@{ $log->() }) {
        if ($line =~ /\[(alert|crit|emerg)\]/ && !$expected_level{$1}) {
            warn "WARNING: $name - " . show($line) . "\n";
        }
        if ($line =~ /\bAssertion .*?failed\b/) {
            fail("$name - " . show($line));
        }
    }
}

# ---- one run of a block's requests ---------------------------------------

sub run_test_helper ($$$) {
    my ($block, undef, $rep) = @_;
    my $name  = $block->name;
    my @conns = requests_from_block($block);
    bail_out("$name - no request to send") unless @conns;

    # a block's own --- timeout is what the test means; only the default
    # is stretched under valgrind
    my $timeout = parse_time($block->timeout) // slow_timeout(timeout());
    my $need_array = defined $block->pipelined_requests || @conns > 1;
    my $ignore  = defined $block->ignore_response;
    my $idx = 0;

    for my $c (0 .. $#conns) {
        my $raw   = send_request($block, $conns[$c]{packets}, $timeout);
        my @heads = @{ $conns[$c]{heads} };
        for my $k (0 .. $#heads) {
            unless ($ignore) {
                my ($res, $raw_headers, $left) = parse_response($name, $raw, $heads[$k]);
                check_error_code($block, $res, $idx, $need_array);
                check_headers($block, $res, $raw_headers, $idx, $need_array);
                check_body($block, $res, $idx, $rep, $need_array);
                if ($k == $#heads && defined $left) {
                    warn "WARNING: $name - unexpected bytes after the response: \""
                         . show(substr($left, 0, 200)) . "\"\n";
                }
                $raw = $left;
            }
            # Between requests too, so a log line must show up by the time
            # the request that causes it has been answered.
            if ($k < $#heads || $c < $#conns) {
                sleep parse_time($block->wait) if $block->wait;
                check_error_log($block, undef, 0, $rep, $need_array);
            }
            $idx++;
        }
    }

    sleep parse_time($block->wait) if $block->wait;
    check_error_log($block, undef, 0, $rep, $need_array);
}

1;
