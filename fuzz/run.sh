#!/usr/bin/env bash
# fuzz/run.sh - build and run the libFuzzer targets of the flags core.
#
#   fuzz/run.sh [seconds]       build, replay fuzz/regressions/, then fuzz each
#                               target for `seconds` (default 30)
#   fuzz/run.sh 0               build and replay the regressions only
#
# Targets (fuzz/fuzz_<target>.cc): report, query, loader, evaluate,
# override_state, sync_reply, defs, targeting, sentinel.  FUZZ_TARGETS="query loader" limits the run
# to some.
#
# The core (src/core/core.mk lists its sources) is compiled again by clang++
# with -fsanitize=fuzzer-no-link,address,undefined into build/fuzz/obj/ (never
# build/core, which the normal build owns) by the top-level Makefile
# ("make fuzz"); binaries go to build/fuzz/bin/.
# Seeds are read from fuzz/corpus/<target>/ and copied into a scratch corpus
# build/fuzz/corpus-work/<target>/, which keeps growing between runs (delete
# it to start over); the repo corpus is never modified.  A crash is written
# to build/fuzz/artifacts/<target>/crash-* (path printed); minimise it with
#   build/fuzz/bin/fuzz_<target> -minimize_crash=1 -runs=10000 <crash-file>
# and keep it as fuzz/regressions/<target>/<name>: every run replays those
# first and fails if one still crashes.
#
# Environment: FUZZ_NO_JIT=1 builds with -DFL_NO_PCRE2_JIT; JOBS (compile
# parallelism); FUZZ_ARGS (extra libFuzzer flags for every target).
# Exit status: 0 when nothing crashed, 1 when a target or a regression did,
# 2 when the build failed.  Needs clang++ 14 with its compiler-rt; when the
# fuzzer runtime is missing it is installed with apt-get (as root).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FUZZ=$ROOT/fuzz
OUT=$ROOT/build/fuzz
SECONDS_PER_TARGET=${1:-30}
JOBS=${JOBS:-$(nproc)}
CXX=${CXX_FUZZ:-clang++}
ALL_TARGETS=(report query loader evaluate override_state sync_reply defs targeting sentinel)
read -r -a TARGETS <<<"${FUZZ_TARGETS:-${ALL_TARGETS[*]}}"

say() { printf '==> %s\n' "$*" >&2; }

if ! [[ $SECONDS_PER_TARGET =~ ^[0-9]+$ ]]; then
    echo "usage: fuzz/run.sh [seconds]" >&2
    exit 2
fi

# ------------------------------------------------------------ toolchain

runtime_ok() {
    local d
    d=$(mktemp -d) || return 1
    printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }\n' >"$d/t.cc"
    "$CXX" -fsanitize=fuzzer,address,undefined "$d/t.cc" -o "$d/t" >/dev/null 2>&1
    local rc=$?
    rm -rf "$d"
    return $rc
}

install_pkgs() {
    if [ "$(id -u)" != 0 ]; then
        echo "missing: $* (run as root, or apt-get install them)" >&2
        exit 2
    fi
    say "installing $*"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null || {
        echo "apt-get install $* failed" >&2
        exit 2
    }
}

toolchain() {
    local missing=() p
    command -v "$CXX" >/dev/null 2>&1 || missing+=(clang)
    for p in libyajl-dev libpcre2-dev; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    ((${#missing[@]} == 0)) || install_pkgs "${missing[@]}"
    if ! runtime_ok; then
        install_pkgs libclang-rt-14-dev
        if ! runtime_ok; then
            install_pkgs libfuzzer-14-dev
            runtime_ok || { echo "$CXX -fsanitize=fuzzer does not link" >&2; exit 2; }
        fi
    fi
}

# ----------------------------------------------------------------- build

# The top-level Makefile builds the targets (sources and flags of the core
# from src/core/core.mk), in parallel, rebuilding only what changed.
build() {
    local t goals=() extra=""
    for t in "${TARGETS[@]}"; do
        [ -e "$FUZZ/fuzz_$t.cc" ] || { echo "no such target: $t" >&2; exit 2; }
        goals+=("$OUT/bin/fuzz_$t")
    done
    [ "${FUZZ_NO_JIT:-0}" = 1 ] && extra="-DFL_NO_PCRE2_JIT"
    say "make fuzz targets (${TARGETS[*]})"
    make -s --no-print-directory -j"$JOBS" -C "$ROOT" BUILD="$ROOT/build" \
        FUZZ_CXX="$CXX" FUZZ_CXXFLAGS_EXTRA="$extra" "${goals[@]}" \
        || { echo "fuzz build failed" >&2; exit 2; }
}

# ------------------------------------------------------------------- run

max_len() {
    case $1 in
        query|evaluate) echo 8192 ;;
        targeting) echo 512 ;;          # a byte program: ~200 bytes say all
        *) echo 65536 ;;
    esac
}

dict_for() {
    case $1 in
        query|evaluate) echo "$FUZZ/dict/query.dict" ;;
        sync_reply|sentinel) echo "$FUZZ/dict/sync.dict" ;;
        targeting) echo "" ;;           # bytes, not text: no dictionary
        *) echo "$FUZZ/dict/json.dict" ;;
    esac
}

# Replays fuzz/regressions/<target>/* as plain inputs.
regressions() {
    local t=$1 bin=$OUT/bin/fuzz_$1 dir=$FUZZ/regressions/$1 f log rc=0
    [ -d "$dir" ] || return 0
    local files=()
    for f in "$dir"/*; do [ -f "$f" ] && files+=("$f"); done
    ((${#files[@]})) || return 0
    log=$OUT/logs/$t.regressions.log
    for f in "${files[@]}"; do
        if ! "$bin" -timeout=10 -rss_limit_mb=2048 "$f" >>"$log" 2>&1; then
            printf '  %-15s REGRESSION CRASHES: %s (log %s)\n' "$t" "$f" "$log"
            rc=1
        fi
    done
    ((rc)) || printf '  %-15s %d regression input(s) pass\n' "$t" "${#files[@]}"
    return $rc
}

fuzz_one() {
    local t=$1 bin=$OUT/bin/fuzz_$1 work=$OUT/corpus-work/$1
    local art=$OUT/artifacts/$1/ log=$OUT/logs/$1.log dict rc
    mkdir -p "$work" "$art"
    if [ -d "$FUZZ/corpus/$t" ]; then
        cp -n "$FUZZ/corpus/$t"/* "$work"/ 2>/dev/null || true
    fi
    dict=$(dict_for "$t")
    local extra=()
    [ -f "$dict" ] && extra+=("-dict=$dict")
    # shellcheck disable=SC2206
    [ -n "${FUZZ_ARGS:-}" ] && extra+=($FUZZ_ARGS)

    say "fuzz_$t for ${SECONDS_PER_TARGET}s"
    "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
        -max_len="$(max_len "$t")" -print_final_stats=1 -artifact_prefix="$art" \
        "${extra[@]}" "$work" >"$log" 2>&1
    rc=$?

    local execs cov crash status
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    if ((rc == 0)); then
        status="nothing found"
    else
        status="CRASH (exit $rc)${crash:+: $crash}; log $log"
    fi
    printf '  %-15s execs %-10s cov %-6s corpus %-5s %s\n' "$t" "${execs:-?}" \
        "${cov:-?}" "$(find "$work" -type f | wc -l)" "$status"
    return $((rc != 0))
}

toolchain
build
mkdir -p "$OUT/logs"
rm -f "$OUT"/logs/*.regressions.log

fail=0
say "regressions"
for t in "${TARGETS[@]}"; do
    regressions "$t" || fail=1
done

if ((SECONDS_PER_TARGET > 0)); then
    results=()
    for t in "${TARGETS[@]}"; do
        line=$(fuzz_one "$t") || fail=1
        results+=("$line")
        printf '%s\n' "$line"
    done
    echo "summary (${SECONDS_PER_TARGET}s per target):"
    printf '%s\n' "${results[@]}"
fi

if ((fail)); then
    echo "FAIL: a target or a regression crashed" >&2
    exit 1
fi
echo "ok: no crashes"
