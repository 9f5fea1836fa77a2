#!/usr/bin/env bash
# build.sh - build, test, run and benchmark ngx_http_flags_module.
#
#   ./build.sh            build build/ngx_http_flags_module.so
#   ./build.sh run        build, then start nginx with nginx.conf.example on 127.0.0.1:8080
#   ./build.sh stop       stop the nginx started by "run"
#   ./build.sh test       build and run every test (cmocka unit tests, then t/*.t)
#   ./build.sh unit       cmocka unit tests only
#   ./build.sh valgrind   the HTTP suite with nginx under valgrind memcheck
#   ./build.sh bench      benchmarks (bench/run.sh)
#   ./build.sh fuzz [s]   libFuzzer targets of the core, s seconds each (fuzz/run.sh)
#   ./build.sh deps       install the Debian packages the build and tests need
#
# Environment: NGINX_SRC (default /usr/share/nginx/src, Debian's nginx-dev),
# NGINX_BIN (default /usr/sbin/nginx), SANITIZE=1 (ASan + UBSan), JOBS.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NGINX_SRC=${NGINX_SRC:-/usr/share/nginx/src}
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
JOBS=${JOBS:-$(nproc)}
SANITIZE=${SANITIZE:-0}
VALGRIND=${VALGRIND:-0}
# instrumented builds live apart, so switching never rebuilds the other
if [ "$SANITIZE" = 1 ]; then BUILD=$ROOT/build/sanitize
elif [ "$VALGRIND" = 1 ]; then BUILD=$ROOT/build/valgrind
else BUILD=$ROOT/build; fi

DEB_PKGS=(build-essential nginx nginx-dev libyajl-dev libpcre2-dev libcmocka-dev valgrind
          perl libtest-base-perl libtext-diff-perl libtest-longstring-perl
          liblist-moreutils-perl libwww-perl libhttp-message-perl liburi-perl
          libipc-run-perl curl)

say() { printf '==> %s\n' "$*" >&2; }

deps() {
    local missing=()
    for p in "${DEB_PKGS[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    if [ "$(id -u)" != 0 ]; then
        echo "missing packages: ${missing[*]} (run as root or install them)" >&2
        exit 1
    fi
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # policy-rc.d keeps the nginx package from trying to start a system nginx.
    local prc=/usr/sbin/policy-rc.d created=0
    if [ ! -e $prc ]; then printf '#!/bin/sh\nexit 101\n' >$prc; chmod +x $prc; created=1; fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [ $created = 1 ] && rm -f $prc
    return 0
}

san_flags() {
    if [ "$SANITIZE" = 1 ]; then
        echo "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
    fi
}

# PCRE2's JIT reads past the subject on purpose, which memcheck reports
variant_flags() {
    if [ "$VALGRIND" = 1 ]; then echo "-DFL_NO_PCRE2_JIT"; fi
}

# The C++17 core as a static library of its own (CRAFT: nginx compiles its
# modules with one set of C flags; the core keeps its own).
core() {
    local out=$BUILD/core objs=() src obj
    mkdir -p "$out"
    local cxxflags="-std=c++17 -O2 -g -fPIC -fvisibility=hidden -fno-strict-aliasing
        -Wall -Wextra -Werror -Wno-unused-parameter $(san_flags) $(variant_flags)"
    for src in "$ROOT"/src/core/*.cpp; do
        obj=$out/$(basename "${src%.cpp}").o
        if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ "$ROOT/src/core/flags_core.h" -nt "$obj" ] \
           || [ -n "$(find "$ROOT/src/core" -name '*.hpp' -newer "$obj" 2>/dev/null)" ] \
           || [ "$(cat "$out/.flags" 2>/dev/null)" != "$cxxflags" ]; then
            say "c++ $(basename "$src")"
            # shellcheck disable=SC2086
            g++ $cxxflags -c "$src" -o "$obj"
        fi
        objs+=("$obj")
    done
    echo "$cxxflags" >"$out/.flags"
    rm -f "$out/libflagscore.a"
    ar rcs "$out/libflagscore.a" "${objs[@]}"
}

module() {
    deps
    core
    local nb=$BUILD/nginx stamp cc_opt ld_opt
    cc_opt="-g -O2 -fPIC -fstack-protector-strong -Wformat -Werror=format-security -D_FORTIFY_SOURCE=2 $(san_flags)"
    ld_opt="-Wl,-z,relro -Wl,-z,now -fPIC $(san_flags)"
    stamp="$NGINX_SRC|$cc_opt|$ld_opt|$(md5sum "$ROOT/config" | cut -c1-32)"
    if [ ! -f "$nb/Makefile" ] || [ "$(cat "$nb/.stamp" 2>/dev/null)" != "$stamp" ]; then
        say "configuring against $NGINX_SRC"
        rm -rf "$nb"; mkdir -p "$nb"
        (
            cd "$NGINX_SRC"
            NGX_CONF_FLAGS=()
            # shellcheck disable=SC1091
            [ -f ./conf_flags ] && . ./conf_flags
            FLAGS_CORE_LIB="$BUILD/core/libflagscore.a" \
            ./configure "${NGX_CONF_FLAGS[@]}" --with-compat \
                --with-cc-opt="$cc_opt" --with-ld-opt="$ld_opt" \
                --add-dynamic-module="$ROOT" --builddir="$nb" >"$BUILD/configure.log" 2>&1
        ) || { tail -30 "$BUILD/configure.log"; exit 1; }
        echo "$stamp" >"$nb/.stamp"
    fi
    # The core archive is not a source nginx knows; relink when it changes.
    if [ "$BUILD/core/libflagscore.a" -nt "$nb/ngx_http_flags_module.so" ] 2>/dev/null; then
        rm -f "$nb/ngx_http_flags_module.so"
    fi
    say "make modules"
    make -s -j"$JOBS" -f "$nb/Makefile" -C "$NGINX_SRC" modules
    # a new file renamed over the old: an nginx that has the old one loaded
    # keeps its mapping instead of running half-rewritten code
    cp "$nb/ngx_http_flags_module.so" "$BUILD/.ngx_http_flags_module.so.tmp"
    mv -f "$BUILD/.ngx_http_flags_module.so.tmp" "$BUILD/ngx_http_flags_module.so"
    say "built $BUILD/ngx_http_flags_module.so"
}

unit() {
    deps
    core
    local out=$BUILD/unit fail=0 t bin
    mkdir -p "$out"
    for t in "$ROOT"/t/unit/test_*.c; do
        [ -e "$t" ] || continue
        bin=$out/$(basename "${t%.c}")
        # shellcheck disable=SC2046
        gcc -std=c11 -O1 -g -Wall -Wextra -Werror -I"$ROOT/src/core" $(san_flags) \
            "$t" "$BUILD/core/libflagscore.a" -lyajl -lpcre2-8 -lstdc++ -lcmocka -lm -o "$bin"
        say "unit $(basename "$bin")"
        (cd "$ROOT/t/unit" && "$bin") || fail=1
    done
    return $fail
}

# A port nobody listens on now, on 127.0.0.1: two suites on one machine
# must not collide.
free_port() {
    perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 1)->sockport'
}

prove_suite() {
    local mod=$BUILD/ngx_http_flags_module.so
    if [ -z "${TEST_NGINX_PORT:-}" ]; then TEST_NGINX_PORT=$(free_port); fi
    while [ -z "${TEST_NGINX_FLAGS_PORT:-}" ] || [ "$TEST_NGINX_FLAGS_PORT" = "$TEST_NGINX_PORT" ]; do
        TEST_NGINX_FLAGS_PORT=$(free_port)
    done
    export TEST_NGINX_PORT TEST_NGINX_FLAGS_PORT
    export TEST_NGINX_BINARY=$NGINX_BIN
    export TEST_NGINX_LOAD_MODULES=$mod
    export TEST_NGINX_SERVROOT=${TEST_NGINX_SERVROOT:-$BUILD/servroot}
    export TEST_NGINX_FLAGS_DIR=$ROOT/t/flags
    export PATH=$(dirname "$NGINX_BIN"):$PATH
    local inc=()
    if ! perl -MTest::Nginx::Socket -e1 2>/dev/null; then
        inc=(-I "$ROOT/t/lib")
        say "Test::Nginx not installed: using the runner in t/lib"
    fi
    if [ "$SANITIZE" = 1 ]; then
        # nginx is not instrumented: the sanitizer runtime must come first.
        local asan
        asan=$(gcc -print-file-name=libasan.so)
        export LD_PRELOAD="$asan"
        export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:log_path=$BUILD/asan}
        export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:log_path=$BUILD/ubsan}
        rm -f "$BUILD"/asan.* "$BUILD"/ubsan.*
    fi
    local rc=0
    prove "${inc[@]}" -r "${@:-$ROOT/t}" || rc=1
    if [ "$SANITIZE" = 1 ] && ls "$BUILD"/asan.* "$BUILD"/ubsan.* >/dev/null 2>&1; then
        echo "sanitizer reports:" >&2
        cat "$BUILD"/asan.* "$BUILD"/ubsan.* >&2
        rc=1
    fi
    return $rc
}

run() {
    module
    local srv=$BUILD/run
    mkdir -p "$srv/logs"
    if [ -f "$srv/logs/nginx.pid" ] && kill -0 "$(cat "$srv/logs/nginx.pid")" 2>/dev/null; then
        say "stopping the previous demo nginx"
        stop
    fi
    # nginx.conf.example expects the module in <prefix>/modules/ and the
    # flags files in conf/flags/, next to the configuration.
    mkdir -p "$srv/modules" "$srv/conf/flags" "$srv/state"
    cp "$ROOT/nginx.conf.example" "$srv/conf/nginx.conf"
    cp "$BUILD/ngx_http_flags_module.so" "$srv/modules/"
    cp "$ROOT"/examples/flags/*.json "$srv/conf/flags/"
    # workers write the state file: as root they run as "nobody"
    if [ "$(id -u)" = 0 ]; then chown nobody "$srv/state"; fi
    "$NGINX_BIN" -p "$srv/" -c conf/nginx.conf -t
    "$NGINX_BIN" -p "$srv/" -c conf/nginx.conf
    say "nginx is running (pid $(cat "$srv/logs/nginx.pid")), logs in $srv/logs"
    cat <<'EOF'

Try it:
  curl -s -H 'Authorization: Bearer pub_demo_1' 'http://127.0.0.1:8080/flags?userId=user-2&trait_plan=pro&trait_country=DE'
  curl -s -i -X POST -H 'Authorization: Bearer pub_demo_1' -H 'Content-Type: application/json' \
       -d '{"flagName":"new-checkout","message":"TypeError: x is undefined","stack":"at a.js:1\nat b.js:2"}' \
       http://127.0.0.1:8080/ingest/errors

Stop it with: ./build.sh stop
EOF
}

stop() {
    local pidf=$BUILD/run/logs/nginx.pid
    if [ -f "$pidf" ]; then
        local pid; pid=$(cat "$pidf")
        kill -QUIT "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        say "stopped nginx $pid"
    fi
}

cmd=${1:-build}
shift || true
case $cmd in
    build|module) module ;;
    core) deps; core ;;
    deps) deps "$@" ;;
    unit) unit ;;
    test)
        module
        rc=0
        unit || rc=1
        prove_suite "$@" || rc=1
        exit $rc ;;
    prove) prove_suite "$@" ;;
    valgrind)
        [ "$VALGRIND" = 1 ] || exec env VALGRIND=1 "$0" valgrind "$@"
        deps valgrind
        module
        export TEST_NGINX_USE_VALGRIND=${TEST_NGINX_USE_VALGRIND:-1}
        prove_suite "$@" ;;
    run) run ;;
    stop) stop ;;
    bench) module; deps wrk; exec "$ROOT/bench/run.sh" "$@" ;;
    fuzz) exec "$ROOT/fuzz/run.sh" "$@" ;;
    *) echo "usage: $0 [build|run|stop|test|unit|prove|valgrind|bench|fuzz|deps]" >&2; exit 2 ;;
esac
