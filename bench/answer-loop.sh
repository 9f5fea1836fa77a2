#!/usr/bin/env bash
# bench/answer-loop.sh - builds and runs bench/answer-loop.c: GET /flags'
# answer in the core alone, one pass against the two-pass way, for the
# bench's generated projects of 30 and 1,000 flags (bench/gen-flags.py,
# the seed bench/run.sh uses), then the 1,000 flags again with callers of
# varied traits (BENCH_TRAITS=varied). Writes only under build/.
#
#   bench/answer-loop.sh [USERS] [ROUNDS]      (100000 and 5 by default)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$ROOT/bench/lib/core-program.sh"
out=$BUILD/bench-answer-loop
mkdir -p "$out"
core_program "$out/answer-loop" "$ROOT/bench/answer-loop.c"
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
for nflags in 30 1000; do
    python3 "$ROOT/bench/gen-flags.py" --flags "$nflags" --seed 42 \
        --name-prefix ff >"$out/p$nflags.json"
    "${pin[@]}" "$out/answer-loop" "$out/p$nflags.json" "${1:-100000}" "${2:-5}"
done
# the callers' traits varied too: which segments match changes from one
# caller to the next, as in real traffic
BENCH_TRAITS=varied "${pin[@]}" "$out/answer-loop" "$out/p1000.json" \
    "${1:-100000}" "${2:-5}"
