#!/usr/bin/env bash
# bench/definitions.sh - what a new version of a 1,000-flag project costs
# the workers that serve it (definitions=runtime, docs/definitions.md).
#
#   bench/definitions.sh        (module built: ./build.sh; wrk installed)
#
# One nginx, worker_processes 2, both workers pinned to CPU 0 (the flag
# traffic and the writes share them as on a real host); wrk -t1 on CPU 1.
# Project p1000 is a runtime project seeded with the 1,000 generated flags
# of bench/gen-flags.py; each new version is the whole document again with
# the rolloutPercentage of 10 flags changed (PUT {admin}definitions/p1000,
# answered 200 once both workers serve it).
#
# 1. The switch alone, no traffic: N_QUIET writes, one at a time; for each,
#    the CPU time each worker spent (/proc/<pid>/schedstat, ns) while the
#    write was made and answered.  The worker that took the PUT (the
#    writer) validated the document (parse), built and bound the new
#    version, stored it (write + fsync of the file and of its directory)
#    and applied it; the other (the reader) parsed and bound the published
#    version between two events.  An idle worker spends nothing else (a
#    50 ms timer that reads one word), so its CPU is the switch's
#    duration in it (no I/O in it).  The same for ?dryRun=1 PUTs: the
#    validation alone.  And the time of an fsync of a file of that size in
#    the same directory: the part of the writer's stall that is disk, not
#    CPU.
# 2. Under traffic: GET /flags of p1000 for many distinct users
#    (BENCH_USERS=100000, every request evaluates the 1,000 flags), wrk
#    -c$CONNECTIONS for DURATION s; runs with a burst of BURST writes
#    (one after another, paced so that they cover the run from 0.5 s to
#    1 s before its end: every percentile is one "during the burst")
#    alternate with runs without, ROUNDS times.  Per run: req/s, p50, p99, p99.9 and max
#    latency.  Reported: the medians of each side, the throughput ratio
#    (burst / quiet, median of the rounds' ratios), and max latency with
#    the burst against quiet max + the switch (the goal: no request stalls
#    longer than the switch).
#
# Exit status: non-zero on real failures (nginx does not start, a write is
# not answered 200 with the next version, wrk sees non-2xx answers, a
# worker crashes); 0 otherwise, whatever the numbers.
#
# Environment: BENCH_PORT (18090), DURATION (6), CONNECTIONS (32), ROUNDS
# (3), BURST (50), N_QUIET (50), CHANGED (10: flags changed a version),
# ZONE_MB (128: flags_zone's size), WORKERS (2; 1: the writer is the only
# worker, so every request waits for the whole write),
# NGINX_BIN, SERVER_CPU (0), CLIENT_CPU (1), MODULE (the .so to load;
# build/nginx/ngx_http_flags_module.so keeps its symbols), BENCH_PERF=1
# (perf record of both workers during the quiet writes, with call graphs,
# into perf.data there).  Written under
# build/bench-definitions/; the summary also in results.md there.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_DIR=$ROOT/bench
OUT=$ROOT/build/bench-definitions
PREFIX=$OUT/nginx
MODULE=${MODULE:-$ROOT/build/ngx_http_flags_module.so}
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
PORT=${BENCH_PORT:-18090}
DURATION=${DURATION:-6}
CONNECTIONS=${CONNECTIONS:-32}
ROUNDS=${ROUNDS:-3}
BURST=${BURST:-50}
N_QUIET=${N_QUIET:-50}
CHANGED=${CHANGED:-10}
ZONE_MB=${ZONE_MB:-128}
WORKERS=${WORKERS:-2}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
LUA=$BENCH_DIR/report.lua
NGINXCTL=$ROOT/t/helper/nginxctl
TOKEN=pub_bench_1000
QUERY='userId=bench-user-7&trait_plan=pro&trait_country=de&trait_appVersion=2.3.1&trait_email=ana.silva%40example.com&trait_sessions=42'
BASE=http://127.0.0.1:$PORT
ADMIN=$BASE/flags-admin/definitions/p1000

if [ $# -gt 0 ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
fi

say()  { printf '==> %s\n' "$*" >&2; }
die()  { printf 'bench: FAILED: %s\n' "$*" >&2; exit 1; }

for tool in wrk curl taskset python3 "$NGINX_BIN"; do
    command -v "$tool" >/dev/null || die "$tool not found"
done
[ -f "$MODULE" ] || die "$MODULE missing: run ./build.sh first"

NGX_PID=
WRK_PID=
BURST_PID=
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ -z "$WRK_PID" ] || kill "$WRK_PID" 2>/dev/null || true
    [ -z "$BURST_PID" ] || kill "$BURST_PID" 2>/dev/null || true
    [ -z "${PROBE_PID:-}" ] || kill "$PROBE_PID" 2>/dev/null || true
    if [ -n "$NGX_PID" ]; then "$NGINXCTL" stop "$NGX_PID" || true; fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------------ inputs
say "generating p1000 and its versions under $OUT"
rm -rf "$OUT"
mkdir -p "$PREFIX/conf/flags" "$PREFIX/logs" "$PREFIX/modules" "$OUT/versions"
cp "$MODULE" "$PREFIX/modules/ngx_http_flags_module.so"
python3 "$BENCH_DIR/gen-flags.py" --flags 1000 --seed 42 --name-prefix ff >"$PREFIX/conf/flags/p1000.json"
# Version documents: doc k changes the rolloutPercentage of CHANGED flags
# (k*CHANGED ... k*CHANGED+CHANGED-1, modulo 1000) from the seed's; two
# documents in a row always differ, so every PUT is a new version.
python3 - "$PREFIX/conf/flags/p1000.json" "$OUT/versions" "$BURST" "$CHANGED" <<'EOF'
import json, sys
seed, outdir, n, changed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
base = json.load(open(seed))
for k in range(1, n + 1):
    doc = json.loads(json.dumps(base))
    for j in range(changed):
        f = doc["flags"][(k * changed + j) % len(doc["flags"])]
        f["rolloutPercentage"] = (int(f["rolloutPercentage"]) + k) % 100 + 1
    with open("%s/v%d.json" % (outdir, k), "w") as fh:
        json.dump(doc, fh)
EOF
DOC_SIZE=$(stat -c %s "$OUT/versions/v1.json")

AFFINITY=1
for ((i = 0; i < SERVER_CPU; i++)); do AFFINITY+=0; done
user=
[ "$(id -u)" = 0 ] && user="user root root;"
cat >"$PREFIX/conf/nginx.conf" <<EOF
# generated by bench/definitions.sh - do not edit
load_module modules/ngx_http_flags_module.so;
$user
worker_processes     $WORKERS;
worker_cpu_affinity  $(for ((i = 0; i < WORKERS; i++)); do printf '%s ' "$AFFINITY"; done);
error_log            logs/error.log notice;
pid                  logs/nginx.pid;
events { worker_connections 1024; accept_mutex off; }
http {
    access_log          off;
    keepalive_requests  100000;
    client_body_temp_path  $PREFIX/logs/body;
    client_body_buffer_size 1m;
    # a changed flag's new version takes zone memory that is not given
    # back until a reload (see the zone row of the results): room for the
    # run's ~250 versions of 10 changed flags
    flags_zone          flags:${ZONE_MB}m;
    flags_state_file    $PREFIX/logs/state.json;
    flags_project  p1000 token=$TOKEN file=flags/p1000.json definitions=runtime;
    flags_rollback off;
    flags_error_log $PREFIX/logs/reports.log;
    server {
        listen       127.0.0.1:$PORT;
        location = /flags   { flags_evaluate; }
        location = /metrics { flags_metrics; }
        location /flags-admin/ {
            allow 127.0.0.1;
            deny  all;
            flags_admin;
        }
    }
}
EOF

"$NGINX_BIN" -p "$PREFIX/" -c conf/nginx.conf -t -q 2>&1 || die "nginx -t rejected the configuration"
NGX_PID=$("$NGINXCTL" start "$PREFIX" "$PORT" --wrap "taskset -c $SERVER_CPU" --bin "$NGINX_BIN") \
    || die "nginx failed to start"
for _ in $(seq 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$BASE/flags?$QUERY")" = 200 ] && break
    sleep 0.05
done
read -r W1 W2 _ < <("$NGINXCTL" workers "$NGX_PID" | tr "\n" " "; echo)
[ -n "$W1" ] || die "no worker"
if [ "$WORKERS" = 2 ]; then [ -n "${W2:-}" ] || die "expected two workers"; else W2=; fi
say "nginx $NGX_PID, workers $W1 $W2 on CPU $SERVER_CPU; wrk on CPU $CLIENT_CPU; a version is $DOC_SIZE bytes"

# CPU ns a worker has run (/proc/<pid>/schedstat, field 1)
cpu_ns() { local a b c; [ -n "$1" ] || { echo 0; return; }; read -r a b c <"/proc/$1/schedstat"; echo "$a"; }
# "busy total" jiffies of SERVER_CPU (/proc/stat), and the ns both
# workers ran: what the rest of the machine took of that CPU is the busy
# time the workers did not use
cpu_busy() { awk -v c="cpu$SERVER_CPU" '$1 == c { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
workers_ns() { echo $(( $(cpu_ns "$W1") + $(cpu_ns "$W2") )); }

# put_version K [QUERY]: PUT document k; prints "status version time_ms"
NEXT=0
put_version() {
    local out code t v
    out=$(taskset -c "$CLIENT_CPU" curl -s -o "$OUT/put.out" -w '%{http_code} %{time_total}' -X PUT \
          -H 'Content-Type: application/json' --data-binary @"$OUT/versions/v$1.json" \
          "$ADMIN${2:-}") || true
    code=${out%% *}
    t=${out##* }
    v=$(sed -n 's/^{"version":\([0-9]*\).*/\1/p' "$OUT/put.out")
    [ "$code" = 200 ] || { printf '%s: ' "$code"; cat "$OUT/put.out"; echo; } >>"$OUT/put-errors.txt"
    printf '%s %s %s\n' "$code" "${v:--}" "$(awk -v t="$t" 'BEGIN { printf "%.2f", t * 1000 }')"
}

DOC_K=0
next_doc() { DOC_K=$(( DOC_K % BURST + 1 )); }

# ------------------------------------------- 1. the switch alone, no traffic
stats() {   # numbers on stdin: "p50 max" (ms from ns unless $1 = ms)
    sort -g | awk -v ms="${1:-ns}" '{ v[NR] = $1 } END {
        d = ms == "ms" ? 1 : 1e6
        printf "%.2f %.2f %.2f\n", v[int((NR + 1) / 2)] / d, v[int(NR * 0.9 + 0.999)] / d, v[NR] / d }'
}

quiet() {   # quiet LABEL QUERY: N_QUIET writes; per write both workers' CPU
    local label=$1 q=$2 i a1 a2 b1 b2 res st v t want
    : >"$OUT/quiet-$label.txt"
    for ((i = 1; i <= N_QUIET; i++)); do
        next_doc
        sleep 0.06                    # both workers idle, their timers ran
        a1=$(cpu_ns "$W1") a2=$(cpu_ns "$W2")
        res=$(put_version "$DOC_K" "$q")
        sleep 0.12                    # the reader's apply is done (the 200 waits for it)
        b1=$(cpu_ns "$W1") b2=$(cpu_ns "$W2")
        read -r st v t <<<"$res"
        [ "$st" = 200 ] || die "PUT ($label) answered $st: $(head -c 300 "$OUT/put.out")"
        if [ -z "$q" ]; then
            want=$(( VERSION + 1 ))
            [ "$v" = "$want" ] || die "PUT answered version $v, expected $want"
            VERSION=$v
        fi
        # the writer is the worker that spent more
        d1=$((b1 - a1)) d2=$((b2 - a2))
        if [ "$d1" -ge "$d2" ]; then echo "$d1 $d2 $t"; else echo "$d2 $d1 $t"; fi >>"$OUT/quiet-$label.txt"
    done
}

VERSION=$(curl -s -D - -o /dev/null "$ADMIN" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: "v\([0-9]*\)"/\1/p')
[ -n "$VERSION" ] || die "GET $ADMIN gave no ETag"
say "1. the switch alone: $N_QUIET writes, then $N_QUIET dry runs, no traffic"
put_version 1 >/dev/null; VERSION=$(( VERSION + 1 )); DOC_K=1  # now serving document 1
PERF_PID=
if [ "${BENCH_PERF:-0}" = 1 ]; then
    # both workers' CPU, with call graphs, during the writes only
    perf record -q -e cpu-clock -F 4999 --call-graph dwarf,16384 -p "$W1,$W2" \
        -o "$OUT/perf.data" >/dev/null 2>&1 &
    PERF_PID=$!
    sleep 1
fi
zone_used() { curl -s "$BASE/metrics" | sed -n 's/^flags_zone_bytes{state="used"} \([0-9]*\)$/\1/p'; }
Z0=$(zone_used)
quiet write ""
Z1=$(zone_used)
ZONE_PER_VERSION=$(( (Z1 - Z0) / N_QUIET ))
if [ -n "$PERF_PID" ]; then
    kill -INT "$PERF_PID"; wait "$PERF_PID" || true; PERF_PID=
    say "profile of the writes: $OUT/perf.data (perf report -i $OUT/perf.data --children)"
fi
served=$DOC_K
quiet dryrun "?dryRun=1"
DOC_K=$served                         # dry runs changed nothing
read -r WR50 WR90 WRMAX < <(awk '{ print $1 }' "$OUT/quiet-write.txt" | stats)
read -r RD50 RD90 RDMAX < <(awk '{ print $2 }' "$OUT/quiet-write.txt" | stats)
read -r PT50 PT90 PTMAX < <(awk '{ print $3 }' "$OUT/quiet-write.txt" | stats ms)
read -r DR50 DR90 DRMAX < <(awk '{ print $1 }' "$OUT/quiet-dryrun.txt" | stats)
FSYNC=$(python3 - "$PREFIX/logs/state.json.definitions/p1000" "$DOC_SIZE" <<'EOF'
import os, sys, time
d, size = sys.argv[1], int(sys.argv[2])
ts = []
for i in range(20):
    p = os.path.join(d, "fsync-probe.tmp")
    t = time.perf_counter()
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"x" * size); os.fsync(fd); os.close(fd)
    os.rename(p, p + "2")
    dfd = os.open(d, os.O_RDONLY); os.fsync(dfd); os.close(dfd)
    ts.append((time.perf_counter() - t) * 1000)
    os.unlink(p + "2")
ts.sort()
print("%.2f %.2f" % (ts[len(ts) // 2], ts[-1]))
EOF
)
read -r FS50 FSMAX <<<"$FSYNC"
say "writer CPU a write: p50 $WR50 ms, p90 $WR90, max $WRMAX; reader (parse + bind): p50 $RD50 ms, p90 $RD90, max $RDMAX"
say "dry run (validation alone) CPU: p50 $DR50 ms, max $DRMAX; PUT answered in p50 $PT50 ms, max $PTMAX"
say "write + fsync + rename + directory fsync of $DOC_SIZE bytes there: p50 $FS50 ms, max $FSMAX"
say "zone: $Z0 bytes used before the writes, $Z1 after: $ZONE_PER_VERSION bytes a version ($CHANGED flags changed)"

# ------------------------------------------------ 2. under traffic
field() { sed -n "s/^BENCH .*\\b$1=\\([0-9]*\\).*/\\1/p" "$2"; }

run_wrk() {   # run_wrk OUTFILE
    BENCH_USERS=100000 taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency \
        -s "$LUA" -H "Authorization: Bearer $TOKEN" "$BASE/flags?$QUERY" >"$1" 2>&1 &
    WRK_PID=$!
}

burst() {     # BURST writes paced over the run; "status version ms" lines
    local i t0 due
    sleep 0.5
    t0=$(date +%s%N)
    for ((i = 1; i <= BURST; i++)); do
        next_doc
        put_version "$DOC_K"
        due=$(( t0 + i * PACE_NS ))
        now=$(date +%s%N)
        [ "$now" -ge "$due" ] || sleep "$(awk -v n=$((due - now)) 'BEGIN { printf "%.3f", n / 1e9 }')"
    done
    echo "$DOC_K" >"$OUT/doc_k"       # this runs in a subshell
}

# one write every PACE_NS: the writes cover the run from 0.5 s to 1 s
# before its end, so every latency percentile is one "during the burst"
PACE_NS=$(( (DURATION * 1000 - 1500) * 1000000 / BURST ))
: >"$OUT/runs.txt"
: >"$OUT/disk.txt"
PROBE_PID=
one_run() {   # one_run burst|quiet ROUND
    local kind=$1 r=$2 out=$OUT/wrk-$1-$2.txt n d rps b0 b1 a0 a1 n0 n1 waited cpureq
    read -r b0 a0 < <(cpu_busy); n0=$(workers_ns)
    run_wrk "$out"
    if [ "$kind" = burst ]; then
        # the disk's own latency meanwhile: the same sync a version's
        # write does, every 100 ms, beside the versions (on CPU 1)
        taskset -c "$CLIENT_CPU" python3 - "$PREFIX/logs" "$DOC_SIZE" "$DURATION" >"$OUT/disk-$r.txt" <<'PY' &
import os, sys, time
d, size, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ts, end = [], time.time() + secs - 0.5
while time.time() < end:
    p = os.path.join(d, "disk-probe.tmp")
    t = time.perf_counter()
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"x" * size); os.fsync(fd); os.close(fd)
    os.rename(p, p + "2")
    dfd = os.open(d, os.O_RDONLY); os.fsync(dfd); os.close(dfd)
    ts.append((time.perf_counter() - t) * 1000)
    time.sleep(0.1)
ts.sort()
print("%.2f %.2f %.2f" % (ts[len(ts) // 2], ts[int(len(ts) * 0.99)], ts[-1]))
PY
        PROBE_PID=$!
        burst >"$OUT/burst-$r.txt" &
        BURST_PID=$!
        wait "$BURST_PID"; BURST_PID=
        DOC_K=$(<"$OUT/doc_k")
        wait "$PROBE_PID" || true
    fi
    wait "$WRK_PID" || die "wrk failed: $(tail -3 "$out")"
    WRK_PID=
    read -r b1 a1 < <(cpu_busy); n1=$(workers_ns)
    # share of CPU 0 that other processes took during the run
    waited=$(awk -v b=$((b1 - b0)) -v a=$((a1 - a0)) -v n=$((n1 - n0)) -v hz="$(getconf CLK_TCK)" \
             'BEGIN { o = b / hz - n / 1e9; if (o < 0) o = 0; printf "%.0f", 100 * o / (a / hz) }')
    [ "$(field non2xx "$out")" = 0 ] || die "$kind run $r: $(field non2xx "$out") non-2xx answers"
    n=$(field requests "$out") d=$(field duration_us "$out")
    cpureq=$(awk -v c=$((n1 - n0)) -v n="$n" 'BEGIN { printf "%.1f", c / 1000 / n }')
    rps=$(awk -v n="$n" -v d="$d" 'BEGIN { printf "%.0f", n / (d / 1e6) }')
    printf '%s %s %s %s %s %s %s %s %s\n' "$kind" "$r" "$rps" "$(field p50_us "$out")" "$(field p99_us "$out")" \
        "$(field p999_us "$out")" "$(field max_us "$out")" "$waited" "$cpureq" >>"$OUT/runs.txt"
    printf '  %-6s round %s: %6s req/s  p50 %6s us  p99 %6s us  p99.9 %6s us  max %6s us  %s us CPU/req  others took %s%% of CPU 0\n' \
        "$kind" "$r" "$rps" "$(field p50_us "$out")" "$(field p99_us "$out")" "$(field p999_us "$out")" \
        "$(field max_us "$out")" "$cpureq" "$waited" >&2
    if [ "$kind" = burst ]; then
        local bad prev=$VERSION
        bad=$(awk '$1 != 200' "$OUT/burst-$r.txt" | wc -l)
        [ "$bad" = 0 ] || die "burst $r: $bad writes not answered 200: $(awk '$1 != 200' "$OUT/burst-$r.txt" | head -3)"
        while read -r _ v _; do
            [ "$v" = $((prev + 1)) ] || die "burst $r: version $v after $prev"
            prev=$v
        done <"$OUT/burst-$r.txt"
        VERSION=$prev
        printf '         %s writes, versions up to %s, each answered in p50/p90/max %s ms; a sync of the disk meanwhile p50/p99/max %s ms\n' \
            "$BURST" "$VERSION" "$(awk '{ print $3 }' "$OUT/burst-$r.txt" | stats ms | tr ' ' /)" "$(tr ' ' / <"$OUT/disk-$r.txt")" >&2
        cat "$OUT/disk-$r.txt" >>"$OUT/disk.txt"
    fi
}

say "2. GET /flags of p1000, 100000 distinct users, ${DURATION}s runs (wrk -t1 -c$CONNECTIONS), $BURST writes in each burst run"
BENCH_USERS=100000 taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d2s -s "$LUA" \
    -H "Authorization: Bearer $TOKEN" "$BASE/flags?$QUERY" >"$OUT/wrk-warmup.txt" 2>&1 || die "warm-up wrk failed"
for ((r = 1; r <= ROUNDS; r++)); do
    one_run burst "$r"
    one_run quiet "$r"
done

NALERTS=$(grep -cE '\[(alert|crit|emerg)\]' "$PREFIX/logs/error.log" || true)
[ "$NALERTS" = 0 ] || { grep -E '\[(alert|crit|emerg)\]' "$PREFIX/logs/error.log" | head -3 >&2; die "$NALERTS alert lines in the error log"; }

med() { awk -v k="$1" -v c="$2" '$1 == k { print $c }' "$OUT/runs.txt" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
RATIO=$(awk '$1 == "burst" { b[$2] = $3 } $1 == "quiet" { q[$2] = $3 } END { for (r in b) if (q[r]) print b[r] / q[r] }' "$OUT/runs.txt" \
        | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", v[int((NR + 1) / 2)] }')
RATIOS=$(awk '$1 == "burst" { b[$2] = $3 } $1 == "quiet" { q[$2] = $3 } END { for (r = 1; r in b; r++) printf "%s%.3f", (r > 1 ? "/" : ""), b[r] / q[r] }' "$OUT/runs.txt")
MAXB=$(awk '$1 == "burst" && $7 > m { m = $7 } END { print m + 0 }' "$OUT/runs.txt")
MAXQ=$(awk '$1 == "quiet" && $7 > m { m = $7 } END { print m + 0 }' "$OUT/runs.txt")
ms() { awk -v v="$1" 'BEGIN { printf "%.2f", v / 1000 }'; }
# the goal: the burst adds to the worst wait of a request no more than one
# switch (per round, burst max - quiet max); the two workers share one
# CPU, so a request of either can wait for both: the writer's CPU and disk
# sync and the reader's parse and bind, at their maxima
DELTAS=$(awk '$1 == "burst" { b[$2] = $7 } $1 == "quiet" { q[$2] = $7 } END { for (r = 1; r in b; r++) printf "%s%.2f", (r > 1 ? " " : ""), (b[r] - q[r]) / 1000 }' "$OUT/runs.txt")
DELTA=$(echo "$DELTAS" | tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
BOUND=$(awk -v w="$WRMAX" -v r="$RDMAX" -v f="$FSMAX" -v k="$WORKERS" 'BEGIN { printf "%.2f", w + (k > 1 ? r : 0) + f }')
# a request that arrives during the switch also waits for the requests
# queued before it: at most one a connection, each the quiet CPU per request
BACKLOG=$(awk -v c="$CONNECTIONS" -v u="$(med quiet 9)" 'BEGIN { printf "%.2f", c * u / 1000 }')
BOUND2=$(awk -v b="$BOUND" -v q="$BACKLOG" 'BEGIN { printf "%.2f", b + q }')
VERDICT=$(awk -v d="$DELTA" -v bound="$BOUND" 'BEGIN { print (d <= bound) ? "yes" : "no" }')
VERDICT2=$(awk -v d="$DELTA" -v bound="$BOUND2" 'BEGIN { print (d <= bound) ? "yes" : "NO" }')
BUSY=$(awk '$8 > 10' "$OUT/runs.txt" | wc -l)

{
    echo "## definitions=runtime: a new 1,000-flag version under GET /flags traffic"
    echo
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $("$NGINX_BIN" -v 2>&1 | sed 's/.*: //'), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) CPUs;"
    echo "worker_processes $WORKERS on CPU $SERVER_CPU, wrk -t1 -c$CONNECTIONS on CPU $CLIENT_CPU; a version: $DOC_SIZE bytes, $CHANGED flags changed."
    echo
    echo "The switch alone (no traffic, $N_QUIET writes; CPU time of each worker while the write was made and answered):"
    echo
    echo "| per version | p50 ms | p90 ms | max ms |"
    echo "|---|---:|---:|---:|"
    if [ "$WORKERS" = 2 ]; then
        echo "| reader worker: parse + bind of the published version (its switch) | $RD50 | $RD90 | $RDMAX |"
    fi
    echo "| writer worker, CPU: validate + build + store + apply | $WR50 | $WR90 | $WRMAX |"
    echo "| writer worker, CPU of a dry run (validation and diff alone) | $DR50 | $DR90 | $DRMAX |"
    echo "| disk: write + fsync + rename + directory fsync of a version's size (writer's wait) | $FS50 | - | $FSMAX |"
    echo "| PUT answered (client's time) | $PT50 | $PT90 | $PTMAX |"
    echo
    echo "Zone: $ZONE_PER_VERSION bytes more in use after each version of $CHANGED changed flags ($Z0 before the $N_QUIET writes, $Z1 after)."
    echo
    echo "Under traffic (GET /flags of p1000, 100000 distinct users), medians of $ROUNDS alternated rounds:"
    echo
    echo "| run | req/s | p50 ms | p99 ms | p99.9 ms | max ms (median) | max ms (worst run) | workers' CPU µs/req |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    echo "| $BURST writes during the run | $(med burst 3) | $(ms "$(med burst 4)") | $(ms "$(med burst 5)") | $(ms "$(med burst 6)") | $(ms "$(med burst 7)") | $(ms "$MAXB") | $(med burst 9) |"
    echo "| no writes | $(med quiet 3) | $(ms "$(med quiet 4)") | $(ms "$(med quiet 5)") | $(ms "$(med quiet 6)") | $(ms "$(med quiet 7)") | $(ms "$MAXQ") | $(med quiet 9) |"
    echo
    echo "Throughput ratio, burst / quiet: $RATIO (rounds $RATIOS)."
    echo "The disk during the burst runs (the same write + fsync + rename + directory fsync every 100 ms, from CPU $CLIENT_CPU):"
    echo "max per round $(awk '{ printf "%s%s", (NR > 1 ? " / " : ""), $3 }' "$OUT/disk.txt") ms, p50 per round $(awk '{ printf "%s%s", (NR > 1 ? " / " : ""), $1 }' "$OUT/disk.txt") ms."
    echo "Max latency added by the burst (burst max - quiet max, per round): $DELTAS ms, median $DELTA ms;"
    if [ "$WORKERS" = 2 ]; then
        echo "one switch at most, both workers sharing CPU $SERVER_CPU: $BOUND ms (writer CPU max + reader CPU max + disk max)."
    else
        echo "one switch at most, the writer the only worker: $BOUND ms (writer CPU max + disk max)."
    fi
    echo "Median added max within the switch alone: $VERDICT; within the switch and the backlog it leaves"
    echo "($CONNECTIONS connections x $(med quiet 9) µs = $BACKLOG ms, so $BOUND2 ms): $VERDICT2"
    if [ "$BUSY" -gt 0 ]; then
        echo
        echo "WARNING: in $BUSY run(s) other processes took more than 10% of CPU $SERVER_CPU: other load on the"
        echo "machine; latencies and ratios of those rounds are unreliable (runs.txt, last column)."
    fi
} >"$OUT/results.md"
echo
cat "$OUT/results.md"
