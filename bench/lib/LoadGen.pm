package LoadGen;

# Shared code of bench/soak.pl and bench/faults.pl (core Perl only):
#
#   LoadGen::run(%opt)     a non-blocking HTTP/1.1 load generator: many
#                          keep-alive connections, a few pipelined requests on
#                          each, responses parsed by Content-Length (or
#                          chunked), every response checked against the
#                          status its request expects.
#   nginx_start/stop, worker_pids, vmrss_kb, zone_smaps, http1, count_lines,
#   read_file, write_file   the small tools around it.
#
# Only 127.0.0.1 is ever contacted.  Every loop is bounded by a request count
# and a deadline.  nginx processes are ended by PID, never by name.

use strict;
use warnings;

use Exporter 'import';
use File::Basename qw(dirname);
use lib dirname(__FILE__) . '/../../t/helper';
use NginxProc ();
use Errno ();
use IO::Socket::INET;
use POSIX ();
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(time sleep);

our @EXPORT_OK = qw(nginx_start nginx_stop nginx_signal worker_pids vmrss_kb
                    zone_smaps http1 count_lines read_file write_file wait_for
                    fmt_table);

# --------------------------------------------------------------------------
# The load generator.
#
# A request is a pair (bytes, meta) where meta is an array reference
# [kind, expected_status, anything...].  Options:
#
#   port          TCP port on 127.0.0.1
#   conns         number of keep-alive connections (32)
#   depth         requests in flight per connection (pipelining, 4)
#   max_requests  new requests to issue (resends are not counted)
#   max_seconds   deadline for issuing new requests
#   next          sub () -> (bytes, meta): the next request; () to stop
#   on_response   sub (meta, status, body, head) for every response (optional)
#   resend        sub (meta, reason) -> bool: whether a request that got no
#                 response (the server closed the connection before answering
#                 it) is sent again on a new connection; default: never
#   on_unanswered sub (meta, reason) for a request given up on (optional)
#   tick          sub (elapsed, stats) called every tick_every seconds (0.1)
#   drain_seconds how long to wait for the last responses (10)
#
# Returns a hash of figures: sent (new requests), resent, answered,
# unanswered, unexpected (a status other than the expected one), by_kind
# {kind => {sent, answered, unexpected, unanswered, status => {code => n}}},
# closes (connections closed by the server), connect_errors, examples (the
# first unexpected responses), elapsed.
# --------------------------------------------------------------------------

sub run {
    my (%o) = @_;

    my $port       = $o{port} or die "LoadGen::run: no port\n";
    my $nconn      = $o{conns} // 32;
    my $depth      = $o{depth} // 4;
    my $max_req    = $o{max_requests} // 1e15;
    my $max_sec    = $o{max_seconds} // 60;
    my $next       = $o{next} or die "LoadGen::run: no next\n";
    my $on_resp    = $o{on_response};
    my $can_resend = $o{resend} || sub { 0 };
    my $on_unans   = $o{on_unanswered};
    my $tick       = $o{tick};
    my $tick_every = $o{tick_every} // 0.1;
    my $drain      = $o{drain_seconds} // 10;

    local $SIG{PIPE} = 'IGNORE';

    my %st = (sent => 0, resent => 0, answered => 0, unanswered => 0,
              unexpected => 0, closes => 0, connect_errors => 0,
              by_kind => {}, examples => [], close_reasons => {});
    my $bk = $st{by_kind};

    my $t0 = time;
    my $deadline = $t0 + $max_sec;
    my $next_tick = $t0 + $tick_every;
    my $stop = 0;
    my $drain_until = 0;
    my $issued = 0;
    my $retry_connect_at = 0;
    my @resend;                      # [bytes, meta] waiting for a connection
    my @conns = (undef) x $nconn;

    my $connect = sub {
        my $now = time;
        return undef if $now < $retry_connect_at;
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                      Proto => 'tcp', Timeout => 2);
        if (!$s) {
            $st{connect_errors}++;
            $retry_connect_at = $now + 0.01;
            return undef;
        }
        setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
        $s->blocking(0);
        return { s => $s, fn => fileno($s), w => '', r => '', p => [], q => [] };
    };

    # The server closed the connection (or it broke): what was not answered
    # is sent again or given up on.
    my $close = sub {
        my ($i, $reason) = @_;
        my $c = $conns[$i];
        $conns[$i] = undef;
        $st{closes}++;
        $st{close_reasons}{$reason}++;
        close $c->{s};
        my $p = $c->{p};
        my $q = $c->{q};
        for my $k (0 .. $#$p) {
            my $m = $p->[$k];
            if ($can_resend->($m, $reason)) {
                push @resend, [$q->[$k], $m];
            } else {
                $st{unanswered}++;
                ($bk->{$m->[0]} //= {})->{unanswered}++;
                $on_unans->($m, $reason) if $on_unans;
            }
        }
    };

    my $flush = sub {
        my ($i) = @_;
        my $c = $conns[$i];
        my $n = syswrite($c->{s}, $c->{w});
        if (!defined $n) {
            return 1 if $!{EAGAIN} || $!{EINTR};
            $close->($i, "write: $!");
            return 0;
        }
        substr($c->{w}, 0, $n, '');
        return 1;
    };

    # Parses the complete responses in the connection's buffer; returns
    # false when the connection is to be closed after them.
    my $parse = sub {
        my ($c, $eof) = @_;
        my $r = \$c->{r};
        while (@{ $c->{p} }) {
            my $he = index($$r, "\r\n\r\n");
            last if $he < 0;
            my $head = substr($$r, 0, $he);
            my $status = substr($head, 9, 3) + 0;
            my $m = $c->{p}[0];
            my $bstart = $he + 4;
            my ($blen, $body);
            if ($status == 204 || $status == 304 || $status < 200 || $m->[0] eq 'head') {
                $blen = 0;
                $body = '';
            } elsif ($head =~ /\r\ncontent-length:[ \t]*(\d+)/i) {
                $blen = $1;
                last if length($$r) < $bstart + $blen;
                $body = substr($$r, $bstart, $blen);
            } elsif ($head =~ /\r\ntransfer-encoding:[ \t]*chunked/i) {
                my $pos = $bstart;
                $body = '';
                my $done = 0;
                while (1) {
                    my $le = index($$r, "\r\n", $pos);
                    last if $le < 0;
                    my $size = hex(substr($$r, $pos, $le - $pos));
                    if ($size == 0) {
                        # no trailers from nginx here: "0\r\n\r\n"
                        last if length($$r) < $le + 4;
                        $pos = $le + 4;
                        $done = 1;
                        last;
                    }
                    last if length($$r) < $le + 2 + $size + 2;
                    $body .= substr($$r, $le + 2, $size);
                    $pos = $le + 2 + $size + 2;
                }
                last unless $done;
                $blen = $pos - $bstart;
            } else {
                last unless $eof;        # body up to the end of the connection
                $blen = length($$r) - $bstart;
                $body = substr($$r, $bstart);
            }
            substr($$r, 0, $bstart + $blen, '');
            shift @{ $c->{p} };
            shift @{ $c->{q} };
            $st{answered}++;
            my $k = ($bk->{ $m->[0] } //= {});
            $k->{answered}++;
            $k->{status}{$status}++;
            if (defined $m->[1] && $status != $m->[1]) {
                $st{unexpected}++;
                $k->{unexpected}++;
                push @{ $st{examples} }, "$m->[0]: expected $m->[1], got $status: "
                    . substr($body, 0, 200) if @{ $st{examples} } < 10;
            }
            $on_resp->($m, $status, $body, $head) if $on_resp;
            return 0 if $head =~ /\r\nconnection:[ \t]*close/i;
        }
        return 1;
    };

    while (1) {
        my $now = time;
        if ($tick && $now >= $next_tick) {
            $tick->($now - $t0, \%st);
            $next_tick = $now + $tick_every;
            $now = time;
        }
        if (!$stop && ($issued >= $max_req || $now >= $deadline)) {
            $stop = 1;
            $drain_until = $now + $drain;
        }

        my $in_flight = 0;
        for my $i (0 .. $#conns) {
            my $c = $conns[$i];
            if (!$c) {
                next if $stop && !@resend;
                $c = $conns[$i] = $connect->() or next;
            }
            my $p = $c->{p};
            while (@$p < $depth) {
                my ($b, $m);
                if (@resend) {
                    ($b, $m) = @{ shift @resend };
                    $st{resent}++;
                    ($bk->{ $m->[0] } //= {})->{resent}++;
                } elsif (!$stop && $issued < $max_req) {
                    ($b, $m) = $next->();
                    if (!defined $b) {
                        $stop = 1;
                        $drain_until = time + $drain;
                        last;
                    }
                    $issued++;
                    $st{sent}++;
                    ($bk->{ $m->[0] } //= {})->{sent}++;
                } else {
                    last;
                }
                push @$p, $m;
                push @{ $c->{q} }, $b;
                $c->{w} .= $b;
                last if $issued >= $max_req && !@resend;
            }
            if (length $c->{w}) {
                $flush->($i) or next;
            }
            $in_flight += @$p;
        }

        if ($stop) {
            last if !$in_flight && !@resend;
            if (time > $drain_until) {
                for my $i (0 .. $#conns) {
                    next unless $conns[$i];
                    my $save = $can_resend;
                    $can_resend = sub { 0 };
                    $close->($i, 'drain timeout') if @{ $conns[$i]{p} };
                    $can_resend = $save;
                }
                for my $rq (@resend) {
                    $st{unanswered}++;
                    ($bk->{ $rq->[1][0] } //= {})->{unanswered}++;
                    $on_unans->($rq->[1], 'drain timeout') if $on_unans;
                }
                @resend = ();
                last;
            }
        }

        my ($rin, $win) = ('', '');
        my $any = 0;
        for my $c (@conns) {
            next unless $c;
            vec($rin, $c->{fn}, 1) = 1;
            vec($win, $c->{fn}, 1) = 1 if length $c->{w};
            $any = 1;
        }
        if (!$any) {
            sleep 0.005;
            next;
        }
        my ($rout, $wout) = ($rin, $win);
        my $n = select($rout, $wout, undef, 0.05);
        next if !defined $n || $n <= 0;

        for my $i (0 .. $#conns) {
            my $c = $conns[$i] or next;
            if (length $c->{w} && vec($wout, $c->{fn}, 1)) {
                $flush->($i) or next;
            }
            next unless vec($rout, $c->{fn}, 1);
            my $got = sysread($c->{s}, $c->{r}, 262144, length $c->{r});
            if (!defined $got) {
                next if $!{EAGAIN} || $!{EINTR};
                my $err = "$!";
                $parse->($c, 0);
                $close->($i, "read: $err");
                next;
            }
            my $eof = $got == 0;
            my $keep = $parse->($c, $eof);
            if ($eof || !$keep) {
                if ($eof && !@{ $c->{p} } && !$keep) {
                    $close->($i, 'connection: close');
                } elsif ($eof) {
                    $close->($i, @{ $c->{p} } ? 'eof with requests pending' : 'eof idle');
                } else {
                    $close->($i, 'connection: close');
                }
            }
        }
    }

    for my $c (@conns) {
        close $c->{s} if $c;
    }
    $st{elapsed} = time - $t0;
    return \%st;
}

# --------------------------------------------------------------------------
# Small tools.
# --------------------------------------------------------------------------

# read_file, write_file, wait_for, worker_pids, nginx_signal and
# nginx_stop are t/helper/NginxProc.pm's: one place starts and stops nginx
# for the tests and the benchmarks.
BEGIN {
    *read_file = \&NginxProc::read_file;
    *write_file = \&NginxProc::write_file;
    *wait_for = \&NginxProc::wait_for;
    *worker_pids = \&NginxProc::worker_pids;
    *nginx_signal = \&NginxProc::nginx_signal;
    *nginx_stop = \&NginxProc::nginx_stop;
}

# Starts nginx (daemon on) with <prefix>/conf/nginx.conf; returns the master
# PID once 127.0.0.1:port answers.
sub nginx_start {
    my ($bin, $prefix, $port) = @_;
    return NginxProc::nginx_start($bin, $prefix, port => $port);
}

sub vmrss_kb {
    my ($pid) = @_;
    my $s = read_file("/proc/$pid/status") // return undef;
    return $s =~ /^VmRSS:\s+(\d+) kB/m ? $1 + 0 : undef;
}

# The shared zone's mapping in a process: the anonymous shared mapping
# ("/dev/zero (deleted)" or "SYSV...") of exactly $size_kb.  Returns
# {size, rss, pss, shared_clean, shared_dirty, private_dirty} in kB, or undef.
sub zone_smaps {
    my ($pid, $size_kb) = @_;
    open my $fh, '<', "/proc/$pid/smaps" or return undef;
    my ($cur, @found);
    while (my $l = <$fh>) {
        if ($l =~ /^[0-9a-f]+-[0-9a-f]+\s+(\S+)\s+\S+\s+\S+\s+\d+\s*(.*)$/) {
            my ($perms, $name) = ($1, $2);
            $cur = ($perms =~ /s/ && $name =~ m{^/dev/zero|^/SYSV|^\[?SYSV}) ? {} : undef;
            push @found, $cur if $cur;
            next;
        }
        next unless $cur;
        $cur->{size} = $1 if $l =~ /^Size:\s+(\d+)/;
        $cur->{rss} = $1 if $l =~ /^Rss:\s+(\d+)/;
        $cur->{pss} = $1 if $l =~ /^Pss:\s+(\d+)/;
        $cur->{shared_clean} = $1 if $l =~ /^Shared_Clean:\s+(\d+)/;
        $cur->{shared_dirty} = $1 if $l =~ /^Shared_Dirty:\s+(\d+)/;
        $cur->{private_dirty} = $1 if $l =~ /^Private_Dirty:\s+(\d+)/;
    }
    close $fh;
    my @z = grep { ($_->{size} // 0) == $size_kb } @found;
    return $z[0];
}

# One request on its own connection (Connection: close), bounded by
# $o{timeout} seconds (2).  Returns (status, head, body, seconds); status 0
# with the reason in body when it fails or times out.
sub http1 {
    my ($port, $method, $path, %o) = @_;
    my $t0 = time;
    my $timeout = $o{timeout} // 2;
    local $SIG{PIPE} = 'IGNORE';
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port,
                                  Proto => 'tcp', Timeout => $timeout)
        or return (0, '', "connect: $!", time - $t0);
    my $body = $o{body} // '';
    my $req = "$method $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    $req .= "$_\r\n" for @{ $o{headers} || [] };
    $req .= "Content-Length: " . length($body) . "\r\n" if length $body || $method =~ /^(POST|PUT)$/;
    $req .= "\r\n$body";
    $s->blocking(0);
    my $resp = '';
    my $until = $t0 + $timeout;
    my $w = $req;
    while (1) {
        my $left = $until - time;
        return (0, '', 'timeout', time - $t0) if $left <= 0;
        my ($rin, $win) = ('', '');
        vec($rin, fileno($s), 1) = 1;
        vec($win, fileno($s), 1) = 1 if length $w;
        my $n = select(my $rout = $rin, my $wout = $win, undef, $left);
        next if !defined $n || $n <= 0;
        if (length $w && vec($wout, fileno($s), 1)) {
            my $k = syswrite($s, $w);
            return (0, '', "write: $!", time - $t0) if !defined $k && !$!{EAGAIN};
            substr($w, 0, $k, '') if $k;
        }
        if (vec($rout, fileno($s), 1)) {
            my $k = sysread($s, $resp, 65536, length $resp);
            next if !defined $k && ($!{EAGAIN} || $!{EINTR});
            return (0, '', "read: $!", time - $t0) if !defined $k;
            last if $k == 0;
        }
    }
    close $s;
    my ($head, $rbody) = split /\r\n\r\n/, $resp, 2;
    return (0, '', "bad response: $resp", time - $t0) unless defined $head && $head =~ m{^HTTP/1\.\d (\d{3})};
    return ($1 + 0, $head, $rbody // '', time - $t0);
}

# Lines in a file (a missing file has 0), read in 1 MB blocks.
sub count_lines {
    my ($path) = @_;
    open my $fh, '<', $path or return 0;
    my ($n, $buf) = (0, '');
    while (sysread($fh, $buf, 1 << 20)) {
        $n += ($buf =~ tr/\n//);
    }
    close $fh;
    return $n;
}

# A plain text table: first row is the header.
sub fmt_table {
    my (@rows) = @_;
    my @w;
    for my $r (@rows) {
        for my $i (0 .. $#$r) {
            my $l = length($r->[$i] // '');
            $w[$i] = $l if !defined $w[$i] || $l > $w[$i];
        }
    }
    my $out = '';
    for my $k (0 .. $#rows) {
        my $r = $rows[$k];
        $out .= join('  ', map {
            my $v = $r->[$_] // '';
            $_ == 0 ? sprintf("%-*s", $w[$_], $v) : sprintf("%*s", $w[$_], $v)
        } 0 .. $#$r) . "\n";
        $out .= join('  ', map { '-' x $_ } @w) . "\n" if $k == 0;
    }
    return $out;
}

1;
