# bench/lib/core-program.sh - sourced by the benches that link a C program
# with the core library alone (sources.sh, answer-loop.sh). Needs ROOT;
# sets BUILD (default ROOT/build) and builds the library the way the unit
# tests do, then defines
#   core_program OUT SRC   compile SRC against it into the program OUT
BUILD=${BUILD:-$ROOT/build}
"$ROOT/build.sh" unit >/dev/null 2>&1 || true      # builds the core library
CORE_LIB=$BUILD/core/libflagscore.a
[ -f "$CORE_LIB" ] || { echo "no $CORE_LIB: run ./build.sh unit first" >&2; exit 1; }

core_program() {
    cc -O2 -Wall -Wextra -I"$ROOT/src/core" -o "$1" "$2" "$CORE_LIB" \
        -lyajl -lpcre2-8 -lstdc++ -lm
}
