#!/usr/bin/env bash
# bench/send-copy.sh - builds and runs bench/send-copy.c: the kernel's own
# price, second by second, for sending the 1,000-flag answer's bytes from a
# buffer (write(), as nginx sends any generated body) against sending them
# from a file (sendfile(), as the row's baseline does), with no nginx at
# all. Seconds over 1.3 x the median show whether this machine's copy into
# a socket has slow phases (docs/benchmarks.md, "The kernel's copy in
# phases").
#
#   bench/send-copy.sh [SECONDS]      SECONDS pairs of one-second runs (30)
#
# The bytes: BENCH_OUT/body1000.json (the module's answer, written by
# bench/run.sh; BENCH_OUT defaults to build/bench) when there is one,
# else 86,749 bytes made up here (the kernel's costs depend on the size).
# Everything it writes is under a temporary directory, removed at the
# end; the one connection is over 127.0.0.1 on a port the kernel picks.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${BENCH_OUT:-$ROOT/build/bench}
SECS=${1:-30}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cc -O2 -Wall -Wextra -pthread -o "$TMP/send-copy" "$ROOT/bench/send-copy.c"
if [ -s "$OUT/body1000.json" ]; then
    cp "$OUT/body1000.json" "$TMP/body"
    echo "# the bytes: $OUT/body1000.json"
else
    python3 -c 'import sys; sys.stdout.write(("{\"name\":\"ff-0000-upload\",\"enabled\":true}," * 3000)[:86749])' >"$TMP/body"
    echo "# the bytes: 86749 made up (no $OUT/body1000.json: run bench/run.sh for the real answer)"
fi
"$TMP/send-copy" "$TMP/body" "$SECS"
