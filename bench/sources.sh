#!/usr/bin/env bash
# bench/sources.sh - builds and runs bench/sources.c: what min_sources
# costs a counted error, against the same work without sources, in one run
# (median of alternated rounds; see the file's comment).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
"$ROOT/build.sh" unit >/dev/null 2>&1 || true      # builds the core library
lib=$BUILD/core/libflagscore.a
[ -f "$lib" ] || { echo "no $lib: run ./build.sh unit first" >&2; exit 1; }
cc -O2 -I"$ROOT/src/core" -o "$BUILD/bench-sources" "$ROOT/bench/sources.c" \
    "$lib" -lyajl -lpcre2-8 -lstdc++ -lm
taskset -c 0 "$BUILD/bench-sources" 2>/dev/null || "$BUILD/bench-sources"
