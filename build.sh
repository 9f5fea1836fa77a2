#!/usr/bin/env bash
# build.sh - build, test, run and benchmark ngx_http_flags_module.
#
#   ./build.sh            build build/ngx_http_flags_module.so (stripped)
#   ./build.sh run        build, then start the demo: nginx with nginx.conf.example
#                         on 127.0.0.1:8080, its page at /flags-dashboard/
#                         (docs/demo.md)
#   ./build.sh stop       stop the nginx started by "run"
#   ./build.sh screenshot the demo's page in chromium, written to docs/demo.png
#                         (t/node/demo-screenshot.js; about two minutes)
#   ./build.sh test       build and run every test (cmocka unit tests, then t/*.t,
#                         then the Node client tests t/node/, then a check that
#                         they left /etc/nginx, /var/log/nginx and
#                         /var/lib/nginx as they were, then, as root, the
#                         Debian package test t/pkg/deb.sh)
#   ./build.sh unit       cmocka unit tests only
#   ./build.sh prove [t]  the HTTP tests only (all, or the files given)
#   ./build.sh node [f]   the Node client tests only (t/node/: the real
#                         OpenFeature OFREP providers; all, or the files given)
#   ./build.sh valgrind   the HTTP suite with nginx under valgrind memcheck
#   ./build.sh bench      benchmarks (bench/run.sh)
#   ./build.sh instructions [so...]  instructions a request of the
#                         distinct-user rows under callgrind, after a bench
#                         (bench/instructions.sh)
#   ./build.sh profile [so]  where the worker's time goes on a distinct-user
#                         row, function by function (perf), after a bench
#                         (bench/profile.sh)
#   ./build.sh fuzz [s]   libFuzzer targets of the core, s seconds each (fuzz/run.sh)
#   ./build.sh deb        the Debian package libnginx-mod-http-flags in build/deb/
#   ./build.sh deps [p]   install the Debian packages the build and tests need
#
# The build is nginx's own: configure --add-dynamic-module=. --with-compat in
# build/nginx/, then its "make modules", which also builds the C++ core
# (config.make, src/core/core.mk). The cmocka tests and fuzz targets are
# built by the top-level Makefile. A build installs only build dependencies;
# the test commands install the test tools.
#
# Environment: NGINX_SRC (default /usr/share/nginx/src, Debian's nginx-dev),
# NGINX_BIN (default /usr/sbin/nginx), SANITIZE=1 (ASan + UBSan, in
# build/sanitize/), DEBUG=1 (-O0 -g, not stripped, in build/debug/), CFLAGS
# (the glue's, default -O2 -g ...), CXXFLAGS (the core's, default -O2 -g),
# FLAGS_CORE_CXXFLAGS (appended to the core's flags), VERBOSE=1, JOBS,
# FLAGS_PKG_TEST=required (the package test fails instead of skipping).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NGINX_SRC=${NGINX_SRC:-/usr/share/nginx/src}
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
JOBS=${JOBS:-$(nproc)}
SANITIZE=${SANITIZE:-0}
VALGRIND=${VALGRIND:-0}
DEBUG=${DEBUG:-0}
# instrumented and debug builds live apart, so switching never rebuilds the other
if [ "$SANITIZE" = 1 ]; then BUILD=$ROOT/build/sanitize
elif [ "$VALGRIND" = 1 ]; then BUILD=$ROOT/build/valgrind
elif [ "$DEBUG" = 1 ]; then BUILD=$ROOT/build/debug
else BUILD=$ROOT/build; fi
MAKE_Q=-s
[ "${VERBOSE:-0}" = 1 ] && MAKE_Q=

# what building the module needs; the test tools come with the test commands
BUILD_PKGS=(build-essential nginx-dev libyajl-dev libpcre2-dev libwslay-dev
            libhiredis-dev)
TEST_PKGS=(nginx libcmocka-dev perl libtest-base-perl libtext-diff-perl
           libtest-longstring-perl liblist-moreutils-perl libwww-perl
           libhttp-message-perl liburi-perl libipc-run-perl curl
           prometheus redis-server redis-sentinel faketime openssl)
# what "./build.sh deb" needs on top (dh-sequence-nginx comes with nginx-dev)
DEB_TOOLS=(debhelper dpkg-dev fakeroot)

say() { printf '==> %s\n' "$*" >&2; }

# need PKG...: install the Debian packages of the list that are missing
need() {
    local missing=() p
    for p in "$@"; do
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

# "./build.sh deps": everything any command needs, and the packages given
deps() { need "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}" valgrind chromium "$@"; need_node; }

san_flags() {
    if [ "$SANITIZE" = 1 ]; then
        echo "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
    fi
}

# PCRE2's JIT reads past the subject on purpose, which memcheck reports
variant_flags() {
    if [ "$VALGRIND" = 1 ]; then echo "-DFL_NO_PCRE2_JIT"; fi
}

# The flags of the two compilers. CFLAGS and CXXFLAGS from the environment
# replace the defaults (like nginx's configure and make do).
glue_opt() {
    if [ -n "${CFLAGS:-}" ]; then echo "$CFLAGS"
    elif [ "$DEBUG" = 1 ]; then echo "-O0 -g"
    else echo "-O2 -g -D_FORTIFY_SOURCE=2"; fi
}
core_opt() {
    if [ -n "${CXXFLAGS:-}" ]; then echo "$CXXFLAGS"
    elif [ "$DEBUG" = 1 ]; then echo "-O0 -g"
    else echo "-O2 -g"; fi
}
core_extra() { echo "${FLAGS_CORE_CXXFLAGS:-} $(san_flags) $(variant_flags)"; }

# The C++17 core library alone (the Makefile; what the unit tests link).
core() {
    need "${BUILD_PKGS[@]}"
    make $MAKE_Q --no-print-directory -j"$JOBS" -C "$ROOT" BUILD="$BUILD" \
        CXXFLAGS="$(core_opt)" FLAGS_CORE_CXXFLAGS="$(core_extra)" "${@:-core}"
}

# The module, built the nginx way: configure (only when something it
# depends on changed) and "make modules", which builds the core too.
module() {
    need "${BUILD_PKGS[@]}"
    local nb=$BUILD/nginx stamp cc_opt ld_opt core_opt core_extra
    cc_opt="$(glue_opt) -fPIC -fstack-protector-strong -Wformat -Werror=format-security $(san_flags)"
    ld_opt="-Wl,-z,relro -Wl,-z,now -fPIC $(san_flags)"
    core_opt=$(core_opt)
    core_extra=$(core_extra)
    stamp="$NGINX_SRC|$cc_opt|$ld_opt|$core_opt|$core_extra|${CXX:-}|${CPPFLAGS:-}|$(cat "$ROOT/config" "$ROOT/config.make" | md5sum | cut -c1-32)"
    if [ ! -f "$nb/Makefile" ] || [ "$(cat "$nb/.stamp" 2>/dev/null)" != "$stamp" ]; then
        say "configuring against $NGINX_SRC"
        mkdir -p "$nb"
        (
            cd "$NGINX_SRC"
            NGX_CONF_FLAGS=()
            # shellcheck disable=SC1091
            [ -f ./conf_flags ] && . ./conf_flags
            CXXFLAGS="$core_opt" FLAGS_CORE_CXXFLAGS="$core_extra" \
            ./configure "${NGX_CONF_FLAGS[@]}" --with-compat \
                --with-cc-opt="$cc_opt" --with-ld-opt="$ld_opt" \
                --add-dynamic-module="$ROOT" --builddir="$nb" >"$BUILD/configure.log" 2>&1
        ) || { tail -30 "$BUILD/configure.log"; exit 1; }
        echo "$stamp" >"$nb/.stamp"
    fi
    say "make modules"
    make $MAKE_Q -j"$JOBS" -f "$nb/Makefile" -C "$NGINX_SRC" modules
    # Installed only when nginx's make relinked it, so a no-change build
    # touches nothing. A new file renamed over the old: an nginx that has
    # the old one loaded keeps its mapping instead of running half-rewritten
    # code. The plain build is stripped; the debug and instrumented ones
    # keep their symbols (build/nginx/ keeps the unstripped one too).
    local so=$nb/ngx_http_flags_module.so out=$BUILD/ngx_http_flags_module.so
    if [ ! -e "$out" ] || [ "$so" -nt "$out" ]; then
        if [ "$DEBUG$SANITIZE$VALGRIND" = 000 ]; then
            strip --strip-unneeded -o "$out.tmp" "$so"
        else
            cp "$so" "$out.tmp"
        fi
        mv -f "$out.tmp" "$out"
        say "built $out"
    else
        say "$out is up to date"
    fi
}

unit() {
    need "${BUILD_PKGS[@]}" libcmocka-dev
    say "make unit"
    core UNIT_CFLAGS_EXTRA="$(san_flags)" unit
    local fail=0 bin
    for bin in "$BUILD"/unit/test_*; do
        [ -x "$bin" ] && [ "${bin%.d}" = "$bin" ] || continue
        say "unit $(basename "$bin")"
        (cd "$ROOT/t/unit" && "$bin") || fail=1
    done
    return $fail
}

# The Debian package, built by dpkg-buildpackage (dh-sequence-nginx) in a
# copy of the source tree, so the checkout never sees debian/ build products.
# The .debs, .buildinfo and .changes land in build/deb/, the log beside them.
deb() {
    need "${BUILD_PKGS[@]}" "${DEB_TOOLS[@]}"
    local out=$ROOT/build/deb ver src
    ver=$(dpkg-parsechangelog -l "$ROOT/debian/changelog" -S Version)
    src=$out/src/libnginx-mod-http-flags-$ver
    rm -rf "$out"
    mkdir -p "$src"
    if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        # the working tree as it is, tracked and new files, nothing ignored
        (cd "$ROOT" && git ls-files -z -co --exclude-standard) \
            | tar -C "$ROOT" --null --ignore-failed-read -T - -cf - | tar -C "$src" -xf -
    else
        tar -C "$ROOT" --exclude=./build --exclude=./.git -cf - . | tar -C "$src" -xf -
    fi
    say "dpkg-buildpackage -us -uc -b (log: $out/build.log)"
    # the package is built with Debian's flags (dpkg-buildflags), never
    # with this shell's instrumented or debug ones
    if ! (cd "$src" && env -u FLAGS_CORE_CXXFLAGS -u CFLAGS -u CXXFLAGS -u CPPFLAGS \
              -u LDFLAGS -u SANITIZE -u DEBUG -u VALGRIND \
              DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$JOBS}" \
              dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
        tail -40 "$out/build.log" >&2
        echo "dpkg-buildpackage failed: $out/build.log" >&2
        return 1
    fi
    mv "$out"/src/*.deb "$out"/src/*.buildinfo "$out"/src/*.changes "$out"/
    rm -rf "$out/src"
    say "built $(cd "$out" && echo *.deb)"
}

# The package test (t/pkg/deb.sh): as root only, with no system nginx
# running; it installs the package into the system nginx and purges it.
# Where it cannot run it is skipped with the reason, except where it must
# run (FLAGS_PKG_TEST=required; CI sets it, .ci/run): there a refusal
# fails the run.
pkg_test() {
    local why
    if ! why=$("$ROOT/t/pkg/deb.sh" --preflight 2>&1); then
        if [ "${FLAGS_PKG_TEST:-}" = required ]; then
            echo "package test cannot run: $why (FLAGS_PKG_TEST=required)" >&2
            return 1
        fi
        say "package test skipped: $why"
        return 0
    fi
    if [ "$SANITIZE$VALGRIND$DEBUG" != 000 ]; then
        say "package test skipped: the package is the plain build (run ./build.sh test)"
        return 0
    fi
    need "${TEST_PKGS[@]}"
    deb || return 1
    "$ROOT/t/pkg/deb.sh" "$ROOT"/build/deb/libnginx-mod-http-flags_*_"$(dpkg --print-architecture)".deb
}

# A port nobody listens on now, on 127.0.0.1: two suites on one machine
# must not collide.
free_port() {
    perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 1)->sockport'
}

prove_suite() {
    need "${TEST_PKGS[@]}"
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

# Node and npm for t/node/. Debian's nodejs and npm; a nodejs that brings
# its own npm (NodeSource's provides and conflicts with Debian's npm) is
# used as it is.
need_node() {
    need nodejs
    command -v npm >/dev/null 2>&1 || need npm
}

# The Node client tests (t/node/, node:test): the OpenFeature OFREP
# providers from npm, pinned by t/node/package-lock.json, against this
# build's module. "npm ci" runs only when the lock file changed since the
# last install (its hash is kept in node_modules/), with npm's cache in
# build/npm-cache, so a repeated run costs only the tests.
node_modules() {
    local dir=$ROOT/t/node stamp=$ROOT/t/node/node_modules/.flags-lock-md5 sum
    sum=$(md5sum <"$dir/package-lock.json" | cut -c1-32)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
        say "npm ci in t/node"
        (cd "$dir" && npm ci --cache "$ROOT/build/npm-cache" --prefer-offline \
             --no-audit --no-fund --loglevel=error) || return 1
        echo "$sum" >"$stamp"
    fi
}

node_suite() {
    need nginx
    need_node
    # the page's tests (t/node/dashboard*.test.js) drive Debian's chromium;
    # the fleet's (dashboard-fleet.test.js) starts a redis-server
    need chromium redis-server
    node_modules || return 1
    local dir=$ROOT/t/node
    export NGINX_BIN
    export TEST_NGINX_LOAD_MODULES=$BUILD/ngx_http_flags_module.so
    if [ "$SANITIZE" = 1 ]; then
        # nginx only (t/node/lib/nginx.js): node itself is not instrumented
        FLAGS_NGINX_PRELOAD=$(gcc -print-file-name=libasan.so)
        export FLAGS_NGINX_PRELOAD
        export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:log_path=$BUILD/asan}
        export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:log_path=$BUILD/ubsan}
        rm -f "$BUILD"/asan.* "$BUILD"/ubsan.*
    fi
    local rc=0 files=("$@")
    ((${#files[@]})) || files=("$dir"/*.test.js)
    say "node --test t/node/ ($(node --version))"
    # node and the chromium it drives are not instrumented: a sanitizer
    # runtime preloaded by the prove step before must not reach them
    env -u LD_PRELOAD node --test "${files[@]}" || rc=1
    if [ "$SANITIZE" = 1 ] && ls "$BUILD"/asan.* "$BUILD"/ubsan.* >/dev/null 2>&1; then
        echo "sanitizer reports:" >&2
        cat "$BUILD"/asan.* "$BUILD"/ubsan.* >&2
        rc=1
    fi
    return $rc
}

# The demo (docs/demo.md): nginx.conf.example with examples/flags/ in
# build/run/. Each run starts the tour afresh: the state file of the run
# before (its rollbacks and a ramp that may have finished) is removed, so
# search-v2 climbs again from its first stage.
run() {
    need nginx
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
    rm -f "$srv"/state/flags-state.json*
    cp "$ROOT/nginx.conf.example" "$srv/conf/nginx.conf"
    cp "$BUILD/ngx_http_flags_module.so" "$srv/modules/"
    cp "$ROOT"/examples/flags/*.json "$srv/conf/flags/"
    # workers write the state file: as root they run as "nobody"
    if [ "$(id -u)" = 0 ]; then chown nobody "$srv/state"; fi
    "$NGINX_BIN" -p "$srv/" -c conf/nginx.conf -t
    local pid
    pid=$("$ROOT/t/helper/nginxctl" start "$srv" 8080 --bin "$NGINX_BIN")
    say "nginx is running (pid $pid), logs in $srv/logs"
    cat <<'EOF'

Open the operator's page: http://127.0.0.1:8080/flags-dashboard/
search-v2 climbs its ramp (1, 5, 25, 50, 100 %), a stage every minute or two.

Ask for a user's flags, and report an error, as an app would:

curl -s -H 'Authorization: Bearer pub_demo_1' \
    'http://127.0.0.1:8080/flags?userId=user-2&trait_plan=pro&trait_country=DE'
curl -s -i -X POST -H 'Authorization: Bearer pub_demo_1' -H 'Content-Type: application/json' \
    -d '{"flagName":"dark-mode","message":"TypeError: x is undefined"}' \
    http://127.0.0.1:8080/ingest/errors

Then break the canary: 60 beta users ask for the checkout; the 12 that
new-checkout sends to the broken backend get its 500, and within a tick
(5 s) its ramp's regression rule rolls it back:

for i in $(seq 1 60); do
  curl -s -b uid=u$i -H 'X-Plan: pro' -H 'X-Country: de' http://127.0.0.1:8080/checkout/
done

Also: http://127.0.0.1:8080/flags-status, http://127.0.0.1:8080/flags-metrics
Stop it with: ./build.sh stop
EOF
}

stop() {
    local pidf=$BUILD/run/logs/nginx.pid
    if [ -f "$pidf" ]; then
        local pid; pid=$(cat "$pidf")
        "$ROOT/t/helper/nginxctl" stop "$pid" && say "stopped nginx $pid"
    fi
}

# "./build.sh screenshot [file]": t/node/demo-screenshot.js runs the demo's
# own configuration (nginx.conf.example and examples/flags/, only its ports
# changed, under a temporary directory), sends it traffic until search-v2
# has climbed a stage and new-checkout is rolled back by its ramp's
# regression rule, and writes the page as chromium shows it to docs/demo.png
# (or the file given).
screenshot() {
    need nginx
    need_node
    need chromium
    node_modules
    NGINX_BIN=$NGINX_BIN TEST_NGINX_LOAD_MODULES=$BUILD/ngx_http_flags_module.so \
        env -u LD_PRELOAD node "$ROOT/t/node/demo-screenshot.js" "${1:-$ROOT/docs/demo.png}"
}

cmd=${1:-build}
shift || true
case $cmd in
    build|module) module ;;
    core) core ;;
    deps) deps "$@" ;;
    unit) unit ;;
    test)
        module
        # every tool the steps install comes first: the snapshot of the
        # system nginx's paths is taken after apt has touched them
        need "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}" libcmocka-dev chromium
        need_node
        mkdir -p "$BUILD"
        "$ROOT/t/helper/system-paths" snapshot >"$BUILD/system-paths.before"
        rc=0
        unit || rc=1
        prove_suite "$@" || rc=1
        node_suite || rc=1
        # the tests write only under their own directories; the package
        # test, next, installs into the system on purpose
        say "what the tests left in the system nginx's paths"
        "$ROOT/t/helper/system-paths" check "$BUILD/system-paths.before" || rc=1
        pkg_test || rc=1
        exit $rc ;;
    prove) prove_suite "$@" ;;
    node) module; node_suite "$@" ;;
    valgrind)
        [ "$VALGRIND" = 1 ] || exec env VALGRIND=1 "$0" valgrind "$@"
        need "${TEST_PKGS[@]}" valgrind
        module
        export TEST_NGINX_USE_VALGRIND=${TEST_NGINX_USE_VALGRIND:-1}
        prove_suite "$@" ;;
    run) run ;;
    stop) stop ;;
    screenshot) module; screenshot "$@" ;;
    bench) need nginx wrk; module; exec "$ROOT/bench/run.sh" "$@" ;;
    instructions) need nginx wrk valgrind; module; exec "$ROOT/bench/instructions.sh" "$@" ;;
    profile) need nginx wrk linux-perf; module; exec "$ROOT/bench/profile.sh" "$@" ;;
    fuzz) exec "$ROOT/fuzz/run.sh" "$@" ;;
    deb) deb ;;
    *) echo "usage: $0 [build|run|stop|screenshot|test|unit|prove|node|valgrind|bench|instructions|profile|fuzz|deb|deps]" >&2; exit 2 ;;
esac
