#!/usr/bin/env bash
# bench/answer-loop.sh - builds and runs bench/answer-loop.c: GET /flags'
# answer in the core alone, one pass against the two-pass way, for the
# bench's generated projects of 30 and 1,000 flags (bench/gen-flags.py,
# the seed bench/run.sh uses). Writes only under build/.
#
#   bench/answer-loop.sh [USERS] [ROUNDS]      (100000 and 5 by default)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
"$ROOT/build.sh" unit >/dev/null 2>&1 || true      # builds the core library
lib=$BUILD/core/libflagscore.a
[ -f "$lib" ] || { echo "no $lib: run ./build.sh unit first" >&2; exit 1; }
out=$BUILD/bench-answer-loop
mkdir -p "$out"
cc -O2 -Wall -Wextra -I"$ROOT/src/core" -o "$out/answer-loop" \
    "$ROOT/bench/answer-loop.c" "$lib" -lyajl -lpcre2-8 -lstdc++ -lm
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
for nflags in 30 1000; do
    python3 "$ROOT/bench/gen-flags.py" --flags "$nflags" --seed 42 \
        --name-prefix ff >"$out/p$nflags.json"
    "${pin[@]}" "$out/answer-loop" "$out/p$nflags.json" "${1:-100000}" "${2:-5}"
done
