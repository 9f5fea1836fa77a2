package FlagsPush;

# The clients of live push (docs/push.md) for the scenario tests, each on
# its own raw connection to the test server (FlagsTest's raw_connect):
#
#   Sse->open($path, headers => "...")     OFREP's event stream: its
#                                          events, comments, its end
#   Ws->open($path, key => ..., ...)       a WebSocket: frames, messages,
#   Ws->from($socket)                      pings and pongs, close codes
#
# Both read the answer's head first ({head}, {status}, {h}); an answer
# with a Content-Length (a refusal) has its {body} read too.  {status} is
# 0 when no answer came.  read_until (exported) is the one read loop.

use strict;
use warnings;

use Exporter 'import';
use IO::Select;
use MIME::Base64 ();
use Time::HiRes ();
use FlagsTest ();

our @EXPORT = qw(read_until);

# Reads from $s into $$buf until $cond->() holds or $timeout passes;
# returns whether it held.  EOF ends the wait too (*eof set).
sub read_until {
    my ($s, $buf, $cond, $timeout, $eof) = @_;
    my $end = Time::HiRes::time() + $timeout;
    my $sel = IO::Select->new($s);
    until ($cond->()) {
        my $left = $end - Time::HiRes::time();
        return 0 if $left <= 0;
        next unless $sel->can_read($left);
        my $n = sysread($s, my $chunk, 65536);
        if (!$n) { $$eof = 1 if $eof; return $cond->() }
        $$buf .= $chunk;
    }
    return 1;
}

# The answer's head on $self->{s}, and the body of an answer that has a
# Content-Length (not a 101); what follows stays in {buf}.
sub answer {
    my ($self) = @_;
    my $s = $self->{s};
    read_until($s, \$self->{buf}, sub { $self->{buf} =~ /\r\n\r\n/ }, 5, \$self->{eof});
    my ($head, $rest) = split /\r\n\r\n/, $self->{buf}, 2;
    $self->{head} = $head // '';
    $self->{buf} = $rest // '';
    ($self->{status}) = $self->{head} =~ m{^HTTP/1\.1 (\d+)};
    $self->{status} //= 0;
    for (split /\r\n/, $self->{head}) {
        my ($k, $v) = split /:\s*/, $_, 2;
        $self->{h}{lc $k} = $v if defined $v;
    }
    if ($self->{status} != 101 && $self->{head} =~ /\r\nContent-Length: (\d+)/i) {
        my $n = $1;
        read_until($s, \$self->{buf}, sub { length $self->{buf} >= $n }, 5);
        $self->{body} = substr($self->{buf}, 0, $n, '');
    }
    return $self;
}

# ---- SSE client ------------------------------------------------------------

package Sse;

sub open {
    my ($class, $path, %o) = @_;
    my $s = FlagsTest::raw_connect();
    my $req = "GET $path HTTP/1.1\r\nHost: localhost\r\n" . ($o{headers} // '') . "\r\n";
    print $s $req;
    my $self = bless { s => $s, buf => '', text => '', eof => 0 }, $class;
    return FlagsPush::answer($self);
}

# decodes the chunks that arrived into text (the terminal chunk sets done)
sub decode {
    my ($self) = @_;
    while ($self->{buf} =~ /^([0-9a-fA-F]+)\r\n/) {
        my $len = hex $1;
        my $hl = length($1) + 2;
        last if length($self->{buf}) < $hl + $len + 2;
        if ($len == 0) { $self->{done} = 1; $self->{buf} = substr($self->{buf}, $hl + 2); last }
        $self->{text} .= substr($self->{buf}, $hl, $len);
        $self->{buf} = substr($self->{buf}, $hl + $len + 2);
    }
}

# the next event ("data: ..." lines up to a blank line), comments counted
# apart; undef on timeout or the end of the stream
sub event {
    my ($self, $timeout) = @_;
    my $got;
    my $cond = sub {
        $self->decode;
        while ($self->{text} =~ s/^(.*?)\n\n//s) {
            my $block = $1;
            if ($block =~ /^:/) { $self->{comments}++; next }
            $got = $block;
            return 1;
        }
        return $self->{done};
    };
    FlagsPush::read_until($self->{s}, \$self->{buf}, $cond, $timeout, \$self->{eof});
    return $got;
}

# true when the stream ended (terminal chunk or EOF) within $timeout
sub ended {
    my ($self, $timeout) = @_;
    FlagsPush::read_until($self->{s}, \$self->{buf}, sub { $self->decode; $self->{done} }, $timeout,
                          \$self->{eof});
    return $self->{done} || $self->{eof};
}

# ---- WebSocket client ---------------------------------------------------------

package Ws;

sub open {
    my ($class, $path, %o) = @_;
    my $s = FlagsTest::raw_connect();
    my $key = $o{key} // MIME::Base64::encode_base64(join('', map { chr int rand 256 } 1 .. 16), '');
    my $req = $o{request} // ("GET $path HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
        . "Connection: Upgrade\r\nSec-WebSocket-Key: $key\r\nSec-WebSocket-Version: 13\r\n"
        . ($o{headers} // '') . "\r\n");
    print $s $req . ($o{after} // '');
    return $class->from($s, %o);
}

# the answer to a handshake already written on $s
sub from {
    my ($class, $s, %o) = @_;
    my $self = bless { s => $s, buf => '', eof => 0, pings => 0 }, $class;
    return FlagsPush::answer($self);
}

sub frame_bytes {
    my ($op, $payload, %o) = @_;
    my $fin = $o{fin} // 1;
    my $mask = $o{mask} // 1;
    my $b = chr(($fin ? 0x80 : 0) | $op);
    my $len = length $payload;
    my $m = $mask ? 0x80 : 0;
    if ($len < 126) { $b .= chr($m | $len) }
    elsif ($len < 65536) { $b .= chr($m | 126) . pack('n', $len) }
    else { $b .= chr($m | 127) . pack('Q>', $len) }
    return $b . $payload unless $mask;
    my @k = map { int rand 256 } 1 .. 4;
    my $i = 0;
    my $masked = join '', map { chr(ord($_) ^ $k[$i++ % 4]) } split //, $payload;
    return $b . pack('C4', @k) . $masked;
}

sub send {
    my ($self, $op, $payload, %o) = @_;
    my $s = $self->{s};
    local $SIG{PIPE} = 'IGNORE';
    print $s frame_bytes($op, $payload, %o);
}

sub text { $_[0]->send(1, $_[1]) }

# the next frame as [fin, opcode, payload], undef on timeout or EOF
sub frame {
    my ($self, $timeout) = @_;
    my $f;
    my $cond = sub {
        my $b = $self->{buf};
        return 0 if length $b < 2;
        my ($b0, $b1) = unpack 'C2', $b;
        my $len = $b1 & 0x7f;
        my $off = 2;
        if ($len == 126) { return 0 if length $b < 4; $len = unpack 'n', substr($b, 2, 2); $off = 4 }
        elsif ($len == 127) { return 0 if length $b < 10; $len = unpack 'Q>', substr($b, 2, 8); $off = 10 }
        return 0 if length $b < $off + $len;
        $f = [$b0 >> 7, $b0 & 0x0f, substr($b, $off, $len), $b1 & 0x80];
        substr($self->{buf}, 0, $off + $len, '');
        return 1;
    };
    FlagsPush::read_until($self->{s}, \$self->{buf}, $cond, $timeout, \$self->{eof});
    return $f;
}

# the next data or close frame: pings are answered (unless pong => 0)
# and counted, pongs counted; returns [opcode, payload]
sub message {
    my ($self, $timeout, %o) = @_;
    my $end = Time::HiRes::time() + $timeout;
    while (1) {
        my $left = $end - Time::HiRes::time();
        my $f = $self->frame($left > 0 ? $left : 0) or return undef;
        if ($f->[1] == 9) {
            $self->{pings}++;
            $self->send(10, $f->[2]) if $o{pong} // 1;
            next;
        }
        if ($f->[1] == 10) { $self->{pongs}++; push @{ $self->{pong_data} }, $f->[2]; next }
        # a close is answered with its code, as clients do
        $self->send(8, substr($f->[2], 0, 2)) if $f->[1] == 8 && ($o{echo_close} // 1);
        return [$f->[1], $f->[2]];
    }
}

# the close code of the next message, which must be a close frame
sub close_code {
    my ($self, $timeout) = @_;
    my $m = $self->message($timeout // 3) or return 'none';
    return "opcode $m->[0]: $m->[1]" unless $m->[0] == 8;
    return length $m->[1] >= 2 ? unpack('n', $m->[1]) : 'empty';
}

# the server closed the TCP connection within $timeout
sub closed {
    my ($self, $timeout) = @_;
    FlagsPush::read_until($self->{s}, \$self->{buf}, sub { 0 }, $timeout, \$self->{eof});
    return $self->{eof};
}

1;
