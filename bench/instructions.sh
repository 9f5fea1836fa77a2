#!/usr/bin/env bash
# bench/instructions.sh - user-space instructions per request of the
# distinct-user rows, counted by valgrind's callgrind: a figure the
# machine's noise does not move, beside bench/run.sh's timed ratios.
#
#   bench/instructions.sh [MODULE.so ...]
#
# Needs a finished bench/run.sh in BENCH_OUT (default build/bench): its
# nginx prefix (configuration, generated projects, baselines) is reused.
# Each MODULE (default: build/ngx_http_flags_module.so, then every .so kept
# by bench/before.sh in build/before/) is loaded in turn into that prefix's
# nginx, run as one process (master_process off) under callgrind with
# instrumentation off; for each row the module's location and its baseline
# are asked by wrk, with the same prebuilt requests as bench/run.sh
# (report.lua, BENCH_USERS distinct users cycling), for INSTR_SECONDS
# seconds each (default 6), instrumentation on only meanwhile. A row's
# figure is the instructions callgrind counted divided by the answers wrk
# received: nginx's, the module's and libc's user-space instructions. The
# kernel (the socket, the copy of the answer) is not in it, nor are cache
# misses: it says what the module's code costs, not how long a request
# takes; bench/run.sh says that.
#
# INSTR_KEEP=DIR keeps each row's callgrind profile there (MODULE-PATH.callgrind)
# for callgrind_annotate, to see where a row's instructions go.
#
# Output: a table (MODULE, row, instructions a request of the module and of
# the baseline, the module's own added instructions, baseline / module),
# printed and written to BENCH_OUT/instructions.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${BENCH_OUT:-$ROOT/build/bench}
SECS=${INSTR_SECONDS:-6}
USERS=${BENCH_DISTINCT_USERS:-100000}
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
LUA=$ROOT/bench/report.lua
say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'instructions: FAILED: %s\n' "$*" >&2; exit 1; }

for tool in valgrind callgrind_control callgrind_annotate wrk curl; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install valgrind wrk)"
done
# PREFIX, PORT, BASE, QUERY, TOKEN30, TOKEN1000, REPORT
. "$ROOT/bench/lib/prefix.sh"

if [ $# -eq 0 ]; then
    set -- "$ROOT/build/ngx_http_flags_module.so"
    for so in "$ROOT"/build/before/*.so; do
        [ -f "$so" ] && set -- "$@" "$so"
    done
fi

# one process, no daemon: callgrind follows the worker's code directly
CONF=$PREFIX/conf/instructions.conf
sed -e 's/^worker_processes.*/worker_processes 1;\nmaster_process off;\ndaemon off;/' \
    -e '/^worker_cpu_affinity/d' "$PREFIX/conf/nginx.conf" >"$CONF"
SAVED=$OUT/instructions-saved.so
cp "$PREFIX/modules/ngx_http_flags_module.so" "$SAVED"
VG_PID=
cleanup() {
    if [ -n "$VG_PID" ]; then kill "$VG_PID" 2>/dev/null || true; wait "$VG_PID" 2>/dev/null || true; fi
    cp "$SAVED" "$PREFIX/modules/ngx_http_flags_module.so" 2>/dev/null || true
    rm -f "$CONF" "$SAVED"
}
trap cleanup EXIT


# count PATH BODY [wrk options]: instructions a request while wrk asks
count() {
    local path=$1 body=$2 cg=$OUT/instructions-cg.out n total
    shift 2
    rm -f "$cg"
    callgrind_control -z "$VG_PID" >/dev/null
    callgrind_control -i on "$VG_PID" >/dev/null
    BENCH_USERS=$USERS BENCH_BODY_FILE=$body BENCH_CLK_TCK=100 \
        wrk -t1 -c4 -d"${SECS}s" -s "$LUA" "$@" "$BASE$path" >"$OUT/instructions-wrk.txt" 2>&1 \
        || die "wrk failed: $(tail -2 "$OUT/instructions-wrk.txt")"
    callgrind_control -i off "$VG_PID" >/dev/null
    callgrind_control -d "$VG_PID" >/dev/null
    n=$(sed -n 's/^BENCH requests=\([0-9]*\).*/\1/p' "$OUT/instructions-wrk.txt")
    grep -q 'non2xx=0 ' "$OUT/instructions-wrk.txt" || die "$path: answers of 400 or more: $(grep '^BENCH' "$OUT/instructions-wrk.txt")"
    # the newest dump is this run's
    local f
    f=$(ls -t "$OUT"/instructions-cg.out* | head -1)
    total=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    if [ -n "${INSTR_KEEP:-}" ]; then
        mkdir -p "$INSTR_KEEP"
        cp "$f" "$INSTR_KEEP/$(basename "$SO_NOW" .so)$(printf '%s' "${path%%\?*}" | tr / -).callgrind"
    fi
    rm -f "$OUT"/instructions-cg.out*
    [ -n "$n" ] && [ "$n" -gt 0 ] && [ -n "$total" ] || die "$path: no count (requests '$n', instructions '$total')"
    echo $((total / n))
}

ROWS=(
    "GET /flags, 30 flags|/flags?$QUERY|/static?$QUERY||-H|Authorization: Bearer $TOKEN30"
    "GET /flags, 1,000 flags|/flags1000?$QUERY|/static1000?$QUERY||-H|Authorization: Bearer $TOKEN1000"
    "POST /ingest/errors|/ingest/errors|/ingest-baseline|$REPORT|-H|Authorization: Bearer $TOKEN30|-H|Content-Type: application/json"
)

TABLE="| module | row ($USERS distinct users) | instructions a request, module | baseline | added by the module | baseline / module |
|---|---|---:|---:|---:|---:|"
for so in "$@"; do
    [ -f "$so" ] || die "no $so"
    say "$(basename "$so"): nginx under callgrind"
    cp "$so" "$PREFIX/modules/ngx_http_flags_module.so"
    SO_NOW=$so
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/instructions-cg.out" \
        "$NGINX_BIN" -p "$PREFIX" -c conf/instructions.conf >"$OUT/instructions-valgrind.log" 2>&1 &
    VG_PID=$!
    for _ in $(seq 100); do
        curl -s -o /dev/null "$BASE/static" && break
        kill -0 "$VG_PID" 2>/dev/null || die "nginx under valgrind exited: $(tail -3 "$OUT/instructions-valgrind.log")"
        sleep 0.3
    done
    for row in "${ROWS[@]}"; do
        IFS='|' read -r -a f <<<"$row"
        label=${f[0]} mpath=${f[1]} bpath=${f[2]} body=${f[3]}
        opts=("${f[@]:4}")
        m=$(count "$mpath" "$body" "${opts[@]}")
        b=$(count "$bpath" "$body" "${opts[@]}")
        line=$(awk -v s="$(basename "$so")" -v l="$label" -v m="$m" -v b="$b" \
            'BEGIN { printf "| %s | %s | %d | %d | %d | %.3f |", s, l, m, b, m - b, b / m }')
        say "$line"
        TABLE+=$'\n'"$line"
    done
    kill "$VG_PID"; wait "$VG_PID" 2>/dev/null || true; VG_PID=
done
printf '%s\n' "$TABLE" | tee "$OUT/instructions.md"
