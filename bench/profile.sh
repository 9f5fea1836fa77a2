#!/usr/bin/env bash
# bench/profile.sh - where the worker's time goes on a distinct-user row,
# function by function, in microseconds a request: perf's cpu-clock
# samples, which see what bench/instructions.sh cannot (a load that misses
# the cache, a chain of multiplications waiting on each other, the kernel).
#
#   bench/profile.sh [MODULE.so]          (default build/nginx/, with symbols)
#
# Needs a finished bench/run.sh in BENCH_OUT (default build/bench): its
# nginx prefix (configuration, generated projects, baselines) is reused,
# with one worker pinned to CPU 0 as bench/run.sh runs it, and wrk pinned
# to CPU 1 asking the row's BENCH_DISTINCT_USERS users (100,000) with the
# same prebuilt requests (report.lua). For each side of the row (the
# module's location, then its baseline) wrk warms up for 2 s, then perf
# samples the worker at PROFILE_HZ (5,000) for PROFILE_SECONDS (6) while
# wrk asks. Sampling costs the worker a few per cent: compare shares
# within one run, and time only with bench/run.sh.
#
# PROFILE_ROW: flags30 (default), flags1000 or ingest. PROFILE_TOP: how
# many functions to list (30).
#
# Output, printed and written to BENCH_OUT/profile-ROW.md: for each side,
# the worker's CPU µs a request (samples / rate / requests), the split by
# object (kernel, nginx, the module, libc, PCRE2's JIT) and the busiest
# functions, each in µs a request and per cent of the worker's samples.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${BENCH_OUT:-$ROOT/build/bench}
ROW=${PROFILE_ROW:-flags30}
HZ=${PROFILE_HZ:-5000}
SECS=${PROFILE_SECONDS:-6}
TOP=${PROFILE_TOP:-30}
USERS=${BENCH_DISTINCT_USERS:-100000}
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
LUA=$ROOT/bench/report.lua
say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'profile: FAILED: %s\n' "$*" >&2; exit 1; }

for tool in perf wrk curl taskset; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install linux-perf wrk)"
done
# PREFIX, PORT, BASE, QUERY, TOKEN30, TOKEN1000, REPORT
. "$ROOT/bench/lib/prefix.sh"
SO=${1:-$ROOT/build/nginx/ngx_http_flags_module.so}
[ -f "$SO" ] || die "no $SO"

case $ROW in
    flags30)   MPATH=/flags?$QUERY      BPATH=/static?$QUERY     BODY= OPTS=(-H "Authorization: Bearer $TOKEN30") ;;
    flags1000) MPATH=/flags1000?$QUERY  BPATH=/static1000?$QUERY BODY= OPTS=(-H "Authorization: Bearer $TOKEN1000") ;;
    ingest)    MPATH=/ingest/errors     BPATH=/ingest-baseline   BODY=$REPORT
               OPTS=(-H "Authorization: Bearer $TOKEN30" -H "Content-Type: application/json") ;;
    *) die "PROFILE_ROW: flags30, flags1000 or ingest, not $ROW" ;;
esac

SAVED=$OUT/profile-saved.so
DATA=$OUT/profile.data
cp "$PREFIX/modules/ngx_http_flags_module.so" "$SAVED"
NGX_PID=
cleanup() {
    if [ -n "$NGX_PID" ]; then
        kill "$NGX_PID" 2>/dev/null || true
        # gone before the next run binds the same port and socket
        for _ in $(seq 50); do kill -0 "$NGX_PID" 2>/dev/null || break; sleep 0.1; done
    fi
    cp "$SAVED" "$PREFIX/modules/ngx_http_flags_module.so" 2>/dev/null || true
    rm -f "$SAVED" "$DATA" "$DATA.old"
}
trap cleanup EXIT

if [ -s "$PREFIX/logs/nginx.pid" ] && kill -0 "$(cat "$PREFIX/logs/nginx.pid")" 2>/dev/null; then
    die "an nginx already runs in $PREFIX (pid $(cat "$PREFIX/logs/nginx.pid"))"
fi
# a socket left by an nginx that did not exit cleanly
rm -f "$PREFIX"/logs/*.sock
cp "$SO" "$PREFIX/modules/ngx_http_flags_module.so"
"$NGINX_BIN" -p "$PREFIX" -c conf/nginx.conf || die "nginx did not start"
for _ in $(seq 50); do [ -s "$PREFIX/logs/nginx.pid" ] && break; sleep 0.1; done
NGX_PID=$(cat "$PREFIX/logs/nginx.pid")
for _ in $(seq 50); do curl -s -o /dev/null "$BASE/static" && break; sleep 0.1; done
WORKER=$(pgrep -P "$NGX_PID" | head -1)
[ -n "$WORKER" ] || die "no worker of nginx $NGX_PID"

# ask SECONDS PATH: wrk from CPU 1, the row's users; prints the answers
ask() {
    local secs=$1 path=$2 log=$OUT/profile-wrk.txt
    BENCH_USERS=$USERS BENCH_BODY_FILE=$BODY BENCH_CLK_TCK=100 \
        taskset -c 1 wrk -t1 -c8 -d"${secs}s" -s "$LUA" "${OPTS[@]}" "$BASE$path" >"$log" 2>&1 \
        || die "wrk failed: $(tail -2 "$log")"
    grep -q 'non2xx=0 ' "$log" || die "$path: answers of 400 or more: $(grep '^BENCH' "$log")"
    sed -n 's/^BENCH requests=\([0-9]*\).*/\1/p' "$log"
}

# side LABEL PATH: one side's table
side() {
    local label=$1 path=$2 n samples us
    ask 2 "$path" >/dev/null
    perf record -q -e cpu-clock -F "$HZ" -p "$WORKER" -o "$DATA" -- sleep $((SECS + 1)) >/dev/null 2>&1 &
    local perf_pid=$!
    sleep 0.3
    n=$(ask "$SECS" "$path")
    wait "$perf_pid" || true
    samples=$(perf report -i "$DATA" --stdio --no-children --sort dso -g none 2>/dev/null \
              | sed -n 's/^# Samples: \([0-9.]*\)\(K\{0,1\}\) .*/\1 \2/p' \
              | awk '{ print ($2 == "K") ? $1 * 1000 : $1 }')
    [ -n "$n" ] && [ "$n" -gt 0 ] && [ -n "$samples" ] || die "$label: no samples ('$samples') or answers ('$n')"
    us=$(awk -v s="$samples" -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.2f", s / hz * 1e6 / n }')
    printf '\n### %s: %s\n\n%s answers, %s samples: **%s µs of the worker a request** (with perf sampling it)\n\n' \
        "$label" "${path%%\?*}" "$n" "$samples" "$us"
    printf '| object | µs a request | share |\n|---|---:|---:|\n'
    perf report -i "$DATA" --stdio --no-children --sort dso -g none 2>/dev/null \
        | awk -v us="$us" '/^ +[0-9.]+%/ { p = $1; sub("%", "", p); if (p >= 0.1) printf "| %s | %.3f | %s |\n", $2, p / 100 * us, $1 }'
    printf '\n| function | object | µs a request | share |\n|---|---|---:|---:|\n'
    perf report -i "$DATA" --stdio --no-children --sort dso,sym -g none 2>/dev/null \
        | awk -v us="$us" -v top="$TOP" '/^ +[0-9.]+%/ && k < top {
              p = $1; sub("%", "", p); dso = $2; $1 = ""; $2 = ""; $3 = "";
              sym = substr($0, 4); gsub(/\|/, "\\|", sym);
              printf "| `%s` | %s | %.3f | %.2f %% |\n", sym, dso, p / 100 * us, p; k++ }'
}

TABLE=$OUT/profile-$ROW.md
{
    printf '## Profile of %s (%s distinct users): %s\n' "$ROW" "$USERS" "$(basename "$SO")"
    side "module" "$MPATH"
    side "baseline" "$BPATH"
} | tee "$TABLE"
say "written to $TABLE"
