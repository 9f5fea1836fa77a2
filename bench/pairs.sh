#!/usr/bin/env bash
# bench/pairs.sh - two builds of the module side by side, one second each
# in turn: the comparison of a change that bench/run.sh's five-second
# rounds cannot tell from the machine's slow phases (docs/benchmarks.md,
# "The kernel's copy in phases").
#
#   bench/pairs.sh A.so B.so [PAIRS]          (PAIRS: 40 by default)
#
# Needs a finished bench/run.sh in BENCH_OUT (default build/bench): its
# nginx prefix (configuration, generated projects, baselines) is reused.
# Two nginx run from it at once, each with one worker pinned to CPU 0 as
# bench/run.sh runs it, A's and B's module each, on ports the kernel
# picks on 127.0.0.1. wrk, pinned to CPU 1 with -c32, asks the row's
# BENCH_DISTINCT_USERS users (100,000, report.lua's prebuilt requests):
# for each pair one second of A's module, one of B's, then one of the
# row's baseline on B's nginx. A second's figure is the worker's CPU
# (utime + stime from /proc) over the answers wrk received.
#
# PAIRS_ROW: flags1000 (default; baseline the static file) or flags30
# (baseline return 200 of the same body).
#
# Output: each pair's µs a request (A, B, baseline), then the medians,
# the median of the pairs' A / B (above 1: B costs less), the baseline's
# ratio to each, and how many seconds of each were slow (over 1.3 times
# its median). Writes only under a temporary directory of BENCH_OUT, which
# it removes; stops only the two nginx it started.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${BENCH_OUT:-$ROOT/build/bench}
USERS=${BENCH_DISTINCT_USERS:-100000}
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
LUA=$ROOT/bench/report.lua
say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'pairs: FAILED: %s\n' "$*" >&2; exit 1; }

[ $# -ge 2 ] || die "usage: bench/pairs.sh A.so B.so [PAIRS]"
SO_A=$(realpath "$1"); SO_B=$(realpath "$2"); PAIRS=${3:-40}
[ -f "$SO_A" ] && [ -f "$SO_B" ] || die "no such module: $1 or $2"
[[ "$PAIRS" =~ ^[1-9][0-9]*$ ]] || die "PAIRS: a positive number"
for tool in wrk taskset python3 perl; do
    command -v "$tool" >/dev/null || die "$tool not found"
done
# PREFIX, PORT, BASE, QUERY, TOKEN30, TOKEN1000, REPORT
. "$ROOT/bench/lib/prefix.sh"
# proc_ticks, CLK_TCK
. "$ROOT/bench/lib/ticks.sh"

case ${PAIRS_ROW:-flags1000} in
    flags1000) ROW=/flags1000; BASELINE=/static1000; TOKEN=$TOKEN1000 ;;
    flags30)   ROW=/flags;     BASELINE=/static;     TOKEN=$TOKEN30 ;;
    *) die "PAIRS_ROW: flags1000 or flags30" ;;
esac

TMP=$(mktemp -d "$OUT/pairs.XXXXXX")
MASTERS=()
cleanup() {
    local m
    for m in "${MASTERS[@]}"; do
        kill -QUIT "$m" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$m" 2>/dev/null || break; sleep 0.1; done
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 1)->sockport'
}

# start SIDE SO: an nginx of the bench's prefix with SO, on a port of its
# own, its pid file, sockets and logs under TMP; prints "PORT MASTER
# WORKER" (run in a subshell: the caller keeps MASTER for the cleanup)
start() {
    local side=$1 so=$2 port conf master worker
    port=$(free_port)
    cp "$so" "$TMP/$side.so"
    conf=$TMP/$side.conf
    sed -e "s#^load_module .*#load_module $TMP/$side.so;#" \
        -e "s#127\.0\.0\.1:$PORT#127.0.0.1:$port#g" \
        -e "s#^pid .*#pid $TMP/$side.pid;#" \
        -e "s#^error_log .*#error_log $TMP/$side-error.log warn;#" \
        -e "s#unix:$PREFIX/logs/\([a-z]*\)\.sock#unix:$TMP/$side-\1.sock#g" \
        -e "s#flags_error_log .*#flags_error_log $TMP/$side-reports.log;#" \
        -e "s#\(access_log *\)logs/#\1$TMP/$side-#" \
        -e "s#file=flags/#file=$PREFIX/conf/flags/#g" \
        "$PREFIX/conf/nginx.conf" >"$conf"
    "$NGINX_BIN" -p "$PREFIX" -c "$conf" || die "nginx $side did not start ($TMP/$side-error.log)"
    for _ in $(seq 50); do [ -s "$TMP/$side.pid" ] && break; sleep 0.1; done
    master=$(cat "$TMP/$side.pid")
    worker=$(pgrep -P "$master" | head -1)
    echo "$port $master ${worker:-none}"
}

# second PORT WORKER PATH SECONDS: the worker's CPU µs a request
second() {
    local port=$1 worker=$2 path=$3 secs=$4 t0 t1 n log=$TMP/wrk.txt
    t0=$(proc_ticks "$worker")
    BENCH_USERS=$USERS BENCH_CLK_TCK=$CLK_TCK taskset -c 1 \
        wrk -t1 -c32 -d"${secs}s" -s "$LUA" -H "Authorization: Bearer $TOKEN" \
        "http://127.0.0.1:$port$path?$QUERY" >"$log" 2>&1 || die "wrk failed: $(tail -2 "$log")"
    t1=$(proc_ticks "$worker")
    [ -n "$t0" ] && [ -n "$t1" ] || die "the worker of $path is gone"
    grep -q 'non2xx=0 ' "$log" || die "$path: answers of 400 or more: $(grep '^BENCH' "$log")"
    n=$(sed -n 's/^BENCH requests=\([0-9]*\).*/\1/p' "$log")
    [ -n "$n" ] && [ "$n" -gt 0 ] || die "$path: no answers"
    awk -v t="$((t1 - t0))" -v hz="$CLK_TCK" -v n="$n" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }'
}

read -r PORT_A MASTER_A WORKER_A < <(start A "$SO_A")
[ -n "${MASTER_A:-}" ] || die "nginx A did not start"
MASTERS+=("$MASTER_A")
read -r PORT_B MASTER_B WORKER_B < <(start B "$SO_B")
[ -n "${MASTER_B:-}" ] || die "nginx B did not start"
MASTERS+=("$MASTER_B")
[ "$WORKER_A" != none ] && [ "$WORKER_B" != none ] || die "no worker of nginx A or B"
say "A: $(basename "$SO_A") on $PORT_A, B: $(basename "$SO_B") on $PORT_B; $ROW vs $BASELINE, $PAIRS pairs"

# the same bytes from both: the comparison is of the same answer
curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT_A$ROW?$QUERY" >"$TMP/a.json"
curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT_B$ROW?$QUERY" >"$TMP/b.json"
cmp -s "$TMP/a.json" "$TMP/b.json" || die "A and B answer $ROW differently"

# warm-up
second "$PORT_A" "$WORKER_A" "$ROW" 2 >/dev/null
second "$PORT_B" "$WORKER_B" "$ROW" 2 >/dev/null
second "$PORT_B" "$WORKER_B" "$BASELINE" 1 >/dev/null

printf '| pair | A µs | B µs | baseline µs |\n|---:|---:|---:|---:|\n'
for i in $(seq 1 "$PAIRS"); do
    a=$(second "$PORT_A" "$WORKER_A" "$ROW" 1)
    b=$(second "$PORT_B" "$WORKER_B" "$ROW" 1)
    s=$(second "$PORT_B" "$WORKER_B" "$BASELINE" 1)
    printf '| %d | %s | %s | %s |\n' "$i" "$a" "$b" "$s" | tee -a "$TMP/pairs.md"
done
python3 - "$TMP/pairs.md" <<'PY'
import statistics as st, sys
rows = [[float(x) for x in l.strip('| \n').split('|')[1:]] for l in open(sys.argv[1])]
a, b, s = ([r[k] for r in rows] for k in range(3))
ma, mb, ms = st.median(a), st.median(b), st.median(s)
print()
print("medians: A %.2f, B %.2f, baseline %.2f us a request" % (ma, mb, ms))
print("median of the pairs' A / B: %.3f (above 1: B costs less)" % st.median([x / y for x, y in zip(a, b)]))
print("baseline / A %.3f, baseline / B %.3f" % (ms / ma, ms / mb))
print("slow seconds (over 1.3 x the median): A %d, B %d, baseline %d of %d"
      % (sum(x > 1.3 * ma for x in a), sum(x > 1.3 * mb for x in b), sum(x > 1.3 * ms for x in s), len(rows)))
PY
