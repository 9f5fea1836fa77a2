#!/usr/bin/env bash
# bench/sources.sh - builds and runs bench/sources.c: what min_sources
# costs a counted error, against the same work without sources, in one run
# (median of alternated rounds; see the file's comment).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$ROOT/bench/lib/core-program.sh"
core_program "$BUILD/bench-sources" "$ROOT/bench/sources.c"
taskset -c 0 "$BUILD/bench-sources" 2>/dev/null || "$BUILD/bench-sources"
