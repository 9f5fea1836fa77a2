#!/usr/bin/env bash
# bench/before.sh - the distinct-user rows of bench/run.sh with the module of
# an older commit ("before") and with the current one ("after"), measured in
# the same conditions.
#
#   bench/before.sh [COMMIT]       COMMIT defaults to 660e303
#
# 1. The module of COMMIT is built in a temporary git worktree under build/
#    (git worktree add --detach; ./build.sh there, which configures its own
#    nginx build the first time: a few minutes), its .so is kept as
#    build/before/ngx_http_flags_module-<sha>.so and the worktree removed.
#    An existing .so of that commit is reused (BEFORE_REBUILD=1 builds again).
# 2. The current module is brought up to date with ./build.sh.
# 3. ROUNDS rounds (default 3). Each round runs bench/run.sh twice, once
#    with each .so (MODULE=), ROUNDS=1, only the distinct-user comparisons
#    (BEFORE_ONLY, default "flags30users flags1000users flags1000copy
#    ingestusers"; flags1000copy is the 1,000-flag answer against the file
#    with sendfile off, a reference without a target): in
#    odd rounds "before" first, in even rounds "after" first, so neither
#    side is favoured by its place. Inside each run the module and its
#    baseline run one after the other, on the same nginx, so each round
#    gives a ratio per side; the figures reported are the medians of the
#    rounds. The order inside a run alternates by round too: the module
#    before its baseline in odd rounds, after it in even rounds
#    (BENCH_ORDER_SHIFT), and the summary gives the median of each order
#    apart: a ratio that depends on which of the two ran first shows there.
#
#    Why runs interleaved by round and not two nginx at once: each run is
#    exactly bench/run.sh (the same generated projects, baselines, checks
#    and wrk script), a fresh nginx holds one module only, and the two
#    sides never share the worker's CPU or the port; a drift of the
#    machine over the minutes of the run falls on both sides, in turn.
#
# Output under build/bench-before/: each run's directory (<side>-<round>/,
# with its results.md and rounds.tsv), all rounds in rounds.tsv (side,
# then run.sh's columns), the summary in results.md (also printed).
#
#   bench/before.sh --summary TSV...   the same table for the rounds of
#                                      earlier runs pooled (rounds.tsv)
#
# Environment: ROUNDS (3), BEFORE_ONLY (above), BENCH_PORT (each run picks
# a free one from 127.0.0.1:20000-29999 when unset), BEFORE_REBUILD, and
# whatever bench/run.sh reads (DURATION, WARMUP, CONNECTIONS, ...).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COMMIT=${1:-660e303}
ROUNDS=${ROUNDS:-3}
ONLY=${BEFORE_ONLY:-flags30users flags1000users flags1000copy ingestusers}
OUTDIR=$ROOT/build/bench-before
say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'before: FAILED: %s\n' "$*" >&2; exit 1; }

# The table of the rounds in the rounds.tsv files given (pooled), for the
# sides' names $1 and $2. Columns of a round: side, module key, baseline
# key, round, ratio, req/s m, req/s b, CPU us/req m, CPU us/req b, wrk
# CPU % m, wrk CPU % b, which ran first ("module" or "baseline"; rounds
# written before that column existed ran the module first). The worker CPU
# ratio of a round is baseline / module CPU per request: the target's
# measure.
summary() {
    python3 - "$@" <<'EOF'
import statistics, sys
before, now, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = {}
for path in paths:
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        rows.setdefault(f[1], {}).setdefault(f[0], []).append(f)
n = max((len(v) for r in rows.values() for v in r.values()), default=0)
text = {"flags30users": ("GET /flags, 30 flags, distinct users, vs return 200 of the same body", "0.9"),
        "flags1000users": ("GET /flags1000, 1,000 flags, distinct users, vs the same body from a file", "0.7"),
        "flags1000copy": ("the same, vs that file with sendfile off (the body copied, as any generated answer is)", "-"),
        "ingestusers": ("POST /ingest/errors, distinct users, vs return 204", "0.85")}
def num(x):
    try:
        return float(x)
    except ValueError:
        return None
def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else float("nan")
def cpu(f):
    m, b = num(f[7]), num(f[8])
    return b / m if m and b is not None else None
def cell(fs):
    if not fs:
        return "-"
    c = [cpu(f) for f in fs]
    wrk = max(max(int(f[9]) if f[9].lstrip("-").isdigit() else -1,
                  int(f[10]) if f[10].lstrip("-").isdigit() else -1) for f in fs)
    def first(f):
        return f[11] if len(f) > 11 and f[11] else "module"
    order = "; module first %.2f, baseline first %.2f" % (
        med(cpu(f) for f in fs if first(f) == "module"),
        med(cpu(f) for f in fs if first(f) == "baseline"))
    return "CPU %.2f (%s)%s; throughput %.2f (%s); %.1f / %.1f us; wrk <= %d %%" % (
        med(c), "/".join("-" if x is None else "%.2f" % x for x in c), order,
        med(num(f[4]) for f in fs), "/".join(f[4] for f in fs),
        med(num(f[7]) for f in fs), med(num(f[8]) for f in fs), wrk)
print("## Before / after: %s against %s, %d rounds a side\n" % (before, now, n))
print("Each cell: the median worker CPU ratio of the rounds, baseline / module CPU per request (each")
print("round's in parentheses, in run order; then the median of the rounds where the module ran before its")
print("baseline, and of those where it ran after: nan when there were none), then the median throughput ratio and its rounds; the server")
print("CPU us per request of module / baseline (medians); the highest wrk CPU of that side's measured runs")
print("(above 90 %, the throughput ratio measures wrk: read the CPU).\n")
print("| path | before (%s) | after (%s) | target |" % (before, now))
print("|---|---:|---:|---:|")
for k in ("flags30users", "flags1000users", "flags1000copy", "ingestusers"):
    if k not in rows:
        continue
    t, target = text[k]
    print("| %s | %s | %s | %s |" % (t, cell(rows[k].get("before")), cell(rows[k].get("after")),
                                     ">= " + target if target != "-" else "-"))
for k in sorted(set(rows) - set(text)):
    print("| %s | %s | %s | - |" % (k, cell(rows[k].get("before")), cell(rows[k].get("after"))))
EOF
}

# bench/before.sh --summary ROUNDS.TSV...: the table of earlier runs'
# rounds pooled (say two runs of 3 rounds), nothing run
if [ "${1:-}" = "--summary" ]; then
    shift
    [ $# -gt 0 ] || die "--summary needs rounds.tsv files"
    summary before after "$@"
    exit 0
fi

SHA=$(git -C "$ROOT" rev-parse --verify "$COMMIT^{commit}") || die "no commit $COMMIT"
SHORT=${SHA:0:7}
NOW=$(git -C "$ROOT" rev-parse --short HEAD)
# uncommitted changes to the module's sources are part of "after"
[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no -- src config)" ] || NOW="$NOW+changes"
BEFORE_SO=$ROOT/build/before/ngx_http_flags_module-$SHORT.so
AFTER_SO=$ROOT/build/ngx_http_flags_module.so

# ---- 1. the module of COMMIT -------------------------------------------
WT=
remove_worktree() {
    [ -n "$WT" ] || return 0
    git -C "$ROOT" worktree remove --force "$WT" 2>/dev/null || rm -rf "$WT"
    git -C "$ROOT" worktree prune
    WT=
}
trap remove_worktree EXIT

if [ ! -f "$BEFORE_SO" ] || [ "${BEFORE_REBUILD:-0}" = 1 ]; then
    WT=$ROOT/build/before-worktree-$SHORT
    [ -e "$WT" ] && { git -C "$ROOT" worktree remove --force "$WT" 2>/dev/null || rm -rf "$WT"; git -C "$ROOT" worktree prune; }
    say "building the module of $SHORT in $WT"
    git -C "$ROOT" worktree add --detach "$WT" "$SHA" >/dev/null
    (cd "$WT" && ./build.sh) >"$ROOT/build/before-$SHORT.build.log" 2>&1 \
        || { tail -20 "$ROOT/build/before-$SHORT.build.log" >&2; die "the build of $SHORT failed (build/before-$SHORT.build.log)"; }
    mkdir -p "$(dirname "$BEFORE_SO")"
    cp "$WT/build/ngx_http_flags_module.so" "$BEFORE_SO"
    remove_worktree
fi
say "before: $BEFORE_SO ($SHORT)"

# ---- 2. the current module ---------------------------------------------
(cd "$ROOT" && ./build.sh) >"$ROOT/build/before-after.build.log" 2>&1 \
    || { tail -20 "$ROOT/build/before-after.build.log" >&2; die "./build.sh failed"; }
say "after:  $AFTER_SO ($NOW)"

# ---- 3. the rounds -----------------------------------------------------
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"
: >"$OUTDIR/rounds.tsv"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
    local p i
    if [ -n "${BENCH_PORT:-}" ]; then echo "$BENCH_PORT"; return; fi
    for i in $(seq 50); do
        p=$((20000 + RANDOM % 10000))
        port_free "$p" && { echo "$p"; return; }
    done
    die "no free port found"
}

run_side() {    # SIDE ROUND
    local side=$1 round=$2 so out
    if [ "$side" = before ]; then so=$BEFORE_SO; else so=$AFTER_SO; fi
    out=$OUTDIR/$side-$round
    say "round $round/$ROUNDS: $side ($(basename "$so"))"
    MODULE=$so ROUNDS=1 BENCH_ORDER_SHIFT=$(( (round + 1) % 2 )) \
        BENCH_ONLY=$ONLY BENCH_OUT=$out BENCH_PORT=$(pick_port) \
        "$ROOT/bench/run.sh" >"$OUTDIR/$side-$round.log" 2>&1 \
        || { tail -20 "$OUTDIR/$side-$round.log" >&2; die "bench/run.sh with the $side module failed ($OUTDIR/$side-$round.log)"; }
    sed "s/^/$side\t/" "$out/rounds.tsv" >>"$OUTDIR/rounds.tsv"
    grep -E '^==> WARNING' "$OUTDIR/$side-$round.log" >&2 || true
}

for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then run_side before "$r"; run_side after "$r"
    else run_side after "$r"; run_side before "$r"; fi
done

# ---- summary -----------------------------------------------------------
summary "$SHORT" "$NOW" "$OUTDIR/rounds.tsv" >"$OUTDIR/results.md"
cat "$OUTDIR/results.md"
echo
echo "(written to $OUTDIR/results.md; each run's log and results in $OUTDIR/)"
