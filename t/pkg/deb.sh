#!/usr/bin/env bash
# t/pkg/deb.sh - the Debian package inside the system nginx, as a user gets it.
#
#   t/pkg/deb.sh --preflight          exit 0 when the test can run here; else
#                                     print why not and exit 1
#   t/pkg/deb.sh PACKAGE.deb          the test (./build.sh test runs it, as root)
#
# Installs the package (dpkg -i), checks that dh_nginx's postinst enabled the
# module, that the package ships the README and the examples (nginx.conf
# with its flags file, the Grafana dashboard, the alert rules the README
# quotes), and that its postinst created the state directory (www-data,
# 0750) and the report log (www-data:adm 0640, as Debian's access.log) and
# noted both as its own; adds a conf.d example of its own (the README's
# recipe; no load_module: the package's modules-enabled link loads it) on
# a free port of 127.0.0.1 with the state file in that directory and the
# report log at its default path, runs nginx -t (it passes at once), checks
# the message and the command nginx -t gives for a state directory that
# does not exist, starts /usr/sbin/nginx directly (no systemd here), checks
# GET /flags and POST /ingest/errors and the report log's owner and mode,
# rotates the report log the way Debian's logrotate does (rename, then USR1
# to the master), puts an override in force (the state file records it),
# stops that nginx by its pid file and purges the package: the purge keeps
# the state directory that holds the state file, removes the report log,
# says that the conf.d directives must go, and nginx -t fails on them until
# they do. Then two more installs: purged at once, the package removes the
# empty directory it made; over an administrator's directory and log (and
# an empty directory), install and purge leave them as they were.
# Everything it created is removed, the files it appended to are cut back,
# and the owners nginx changes at start are put back; a final comparison
# with the state before fails the test on any difference. It never touches
# a running system nginx, and refuses to run (--preflight) when the package
# is installed or a path it would create exists: those are an
# administrator's, and the test suite itself leaves none
# (t/helper/system-paths).
set -uo pipefail

PKG=libnginx-mod-http-flags
NGINX=/usr/sbin/nginx
PIDF=/run/nginx.pid
NAME=flags-pkg-test
CONF=/etc/nginx/conf.d/$NAME.conf
FLAGS_DIR=/etc/nginx/$NAME
# what the package creates, and where its postinst notes what it created
STATE_DIR=/var/lib/nginx/flags
LOG=/var/log/nginx/flags-errors.log
NOTES=/var/lib/$PKG
DOC=/usr/share/doc/$PKG
# a state directory that does not exist, for nginx -t's message
MISSING=/var/lib/nginx/$NAME-missing
LINK=/etc/nginx/modules-enabled/50-mod-http-flags.conf
TOKEN=pub_pkgtest_1
# what the test may change, compared before and after
WATCH=(/etc/nginx /var/log/nginx /var/lib/nginx /usr/lib/nginx /usr/share/nginx/modules-available)

preflight() {
    if [ "$(id -u)" != 0 ]; then
        echo "needs root (it installs the package into the system nginx)"; return 1
    fi
    if [ ! -x "$NGINX" ]; then echo "no system nginx at $NGINX"; return 1; fi
    if [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; then
        echo "a system nginx is running (pid $(cat "$PIDF")); leaving it alone"; return 1
    fi
    if dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'ok installed'; then
        echo "$PKG is installed already; not replacing it"; return 1
    fi
    local f
    for f in "$CONF" "$FLAGS_DIR" "$STATE_DIR" "$MISSING" "$LOG" "$LOG.1" "$NOTES"; do
        if [ -e "$f" ]; then echo "$f exists; not overwriting it"; return 1; fi
    done
    return 0
}

if [ "${1:-}" = --preflight ]; then preflight; exit; fi
DEB=${1:?usage: t/pkg/deb.sh PACKAGE.deb | --preflight}
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
why=$(preflight) || { echo "SKIP: $why"; exit 0; }

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }
# is WHAT GOT WANT: exact comparison, both shown on failure
is() {
    if [ "$2" = "$3" ]; then ok "$1"; else
        not_ok "$1"; printf '#   got:      %s\n#   expected: %s\n' "$2" "$3"; fi
}

snapshot() {
    find "${WATCH[@]}" -printf '%p %u:%g %m %y\n' 2>/dev/null | sort
}

# ---------------------------------------------------------------- state before

before=$(snapshot)
declare -A size_before owner_before
for f in /var/log/nginx/*; do [ -f "$f" ] && size_before[$f]=$(stat -c %s "$f"); done
for f in /var/lib/nginx/*; do [ -e "$f" ] && owner_before[$f]=$(stat -c %u:%g "$f"); done
created_prc=0
nginx_pid=

cleanup() {
    if [ -n "$nginx_pid" ] && kill -0 "$nginx_pid" 2>/dev/null; then
        kill -QUIT "$nginx_pid"
        for _ in $(seq 100); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
    fi
    if dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'installed\|config-files'; then
        dpkg --purge "$PKG" >/dev/null 2>&1
    fi
    rm -rf "$CONF" "$FLAGS_DIR" "$STATE_DIR" "$MISSING" "$LOG" "$LOG.1" "$NOTES"
    local f
    for f in /var/log/nginx/*; do
        [ -f "$f" ] || continue
        if [ -n "${size_before[$f]:-}" ]; then
            truncate -s "${size_before[$f]}" "$f"    # our requests and lines
        else
            rm -f "$f"
        fi
    done
    # nginx gives its temp directories to the worker user at start
    for f in /var/lib/nginx/*; do
        if [ -n "${owner_before[$f]:-}" ]; then chown "${owner_before[$f]}" "$f"
        elif [ -d "$f" ]; then rmdir "$f" 2>/dev/null || true; fi
    done
    [ $created_prc = 1 ] && rm -f /usr/sbin/policy-rc.d
}
trap cleanup EXIT

# dpkg's triggers must not start or reload any service
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    created_prc=1
fi

# ----------------------------------------------------------------- install

check "dpkg -i $(basename "$DEB")" dpkg -i "$DEB"
check "the module is in /usr/lib/nginx/modules" test -f /usr/lib/nginx/modules/ngx_http_flags_module.so
is "mod-http-flags.conf loads it" \
    "$(cat /usr/share/nginx/modules-available/mod-http-flags.conf 2>&1)" \
    "load_module modules/ngx_http_flags_module.so;"
is "postinst enabled it in modules-enabled" "$(readlink "$LINK")" \
    /usr/share/nginx/modules-available/mod-http-flags.conf
is "the README is in $DOC (compressed, as Debian does)" \
    "$(zcat "$DOC/README.md.gz" 2>&1 | head -1)" "# ngx_http_flags_module"
is "the example nginx.conf is in $DOC/examples" \
    "$(head -1 "$DOC/examples/nginx.conf.example" 2>&1)" \
    "# nginx.conf.example - a demo of ngx_http_flags_module."
check "with the demo flags file it uses" test -s "$DOC/examples/flags/demo.json"
check "the alert rules the README quotes are in $DOC/examples/flags-alerts.yml" \
    cmp -s "$DOC/examples/flags-alerts.yml" "$SRC/t/prometheus/flags-alerts.yml"
check "... with the Grafana dashboard" \
    cmp -s "$DOC/examples/flags-dashboard.json" "$SRC/grafana/flags-dashboard.json"
is "postinst created $STATE_DIR for the workers" \
    "$(stat -c '%U:%G %a %F' "$STATE_DIR" 2>&1)" "www-data:www-data 750 directory"
is "postinst created $LOG" \
    "$(stat -c '%U:%G %a %s' "$LOG" 2>&1)" "www-data:adm 640 0"
is "... as Debian's access.log is" "$(stat -c '%U:%G %a' /var/log/nginx/access.log 2>&1)" \
    "www-data:adm 640"
is "postinst noted the two as its own" "$(cat "$NOTES/created" 2>&1 | tr '\n' ' ')" "$STATE_DIR $LOG "

# ------------------------------------------------------- a conf.d example

port=$(perl -MIO::Socket::INET -e 'print IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0, Listen => 1)->sockport')
mkdir -p "$FLAGS_DIR"
cat >"$FLAGS_DIR/shop.json" <<'EOF'
{"flags": [
  {"name": "always-on", "enabled": true, "rolloutPercentage": 100},
  {"name": "killed", "enabled": false, "rolloutPercentage": 100}
]}
EOF
# the README's conf.d example as written (the block after the marker
# "recipe: debian-conf.d"): only the port, the flags file, the token, the
# server name and the state directory are this test's
README=$SRC/README.md
recipe=$(awk '/<!-- recipe: debian-conf.d/ { on = 1; next }
              on && /^```$/ { if (fence++) exit; next }
              on && fence { print }' "$README")
is "the README has the conf.d recipe" "$(echo "$recipe" | grep -c 'flags_project shop')" 1
conf() {
    echo "$recipe" | sed -e "s|127.0.0.1:8081|127.0.0.1:$port|" \
        -e "s|/etc/nginx/flags/shop.json|$FLAGS_DIR/shop.json|" \
        -e "s|token=pub_shop_1|token=$TOKEN|" \
        -e "s|server_name flags.example.com|server_name $NAME.localhost|" \
        -e "s|/var/lib/nginx/flags/|$1/|" >"$CONF"
}
STATE_LINE=$(echo "$recipe" | grep -n '^flags_state_file' | cut -d: -f1)

conf "$STATE_DIR"
check "nginx -t passes at once (no directory to create)" "$NGINX" -t -q

# a state directory that does not exist: the message names the command
conf "$MISSING"
out=$("$NGINX" -t 2>&1)
is "nginx -t names the command that creates a missing state directory" \
    "$(echo "$out" | grep -F '[emerg]')" \
    "nginx: [emerg] flags_state_file \"$MISSING/state.json\": directory \"$MISSING\" does not exist in $CONF:$STATE_LINE; create it for the worker user with \"install -d -o www-data -m 0750 $MISSING\" (2: No such file or directory)"
cmd=$(echo "$out" | sed -n 's/.*create it for the worker user with "\([^"]*\)".*/\1/p')
check "that command ($cmd) runs" bash -c "[ -n \"$cmd\" ] && $cmd"
check "... and nginx -t then passes" "$NGINX" -t -q
rm -rf "$MISSING"
conf "$STATE_DIR"

# ------------------------------------------------------------------- start

# the lines this nginx logs (the emerg of the nginx -t above is not one)
elog_from=$(($(stat -c %s /var/log/nginx/error.log 2>/dev/null || echo 0) + 1))
if "$NGINX"; then
    for _ in $(seq 50); do [ -s "$PIDF" ] && break; sleep 0.1; done
    nginx_pid=$(cat "$PIDF" 2>/dev/null)
fi
check "the system nginx starts (pid ${nginx_pid:-none})" test -n "$nginx_pid"
if [ -z "$nginx_pid" ]; then
    tail -5 /var/log/nginx/error.log | sed 's/^/# /'
    echo "1..$n"; exit 1
fi

url=http://127.0.0.1:$port
# request METHOD PATH [BODY]: prints "STATUS BODY"
request() {
    local args=(-s -o "/tmp/$NAME.body" -w '%{http_code}' -X "$1"
                -H "Host: $NAME.localhost" -H "Authorization: Bearer $TOKEN")
    [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    local code; code=$(curl "${args[@]}" "$url$2")
    echo "$code $(cat "/tmp/$NAME.body")"; rm -f "/tmp/$NAME.body"
}

is "GET /flags" "$(request GET '/flags?userId=u-1')" \
    '200 {"flags":[{"name":"always-on","enabled":true,"rolloutPercentage":100,"segments":[]},{"name":"killed","enabled":false,"rolloutPercentage":100,"segments":[]}]}'
is "POST /ingest/errors" "$(request POST /ingest/errors '{"flagName":"always-on","message":"before rotation"}')" \
    "204 "
is "POST /ingest/errors of an unknown flag" "$(request POST /ingest/errors '{"flagName":"nope","message":"x"}')" \
    '404 {"error":"unknown_flag","message":"project \"shop\" has no flag \"nope\""}'
is "the report is in $LOG" "$(grep -c '"message":"before rotation"' "$LOG")" 1
is "the running nginx kept its owner and mode" "$(stat -c '%U:%G %a' "$LOG" 2>&1)" \
    "www-data:adm 640"

# ------------------------------------------- rotation, as logrotate does it

mv "$LOG" "$LOG.1"
kill -USR1 "$nginx_pid"
for _ in $(seq 50); do [ -e "$LOG" ] && break; sleep 0.1; done
sleep 0.5    # the master has reopened; let the workers follow
is "after USR1 a report is accepted" \
    "$(request POST /ingest/errors '{"flagName":"killed","message":"after rotation"}')" "204 "
is "the new report is in the new file" \
    "$(grep -c . "$LOG" 2>&1) $(grep -c '"message":"after rotation"' "$LOG" 2>&1)" "1 1"
is "the old file keeps the old report only" \
    "$(grep -c . "$LOG.1") $(grep -c '"message":"before rotation"' "$LOG.1")" "1 1"
is "the new file belongs to the worker user" "$(stat -c %U "$LOG" 2>&1)" www-data

# ------------------------------- the recipe's limit_req and min_sources

# one address (127.0.0.2, a bucket of its own) gets 1 + burst 10 reports
# through at once, then nginx's 429; its errors are one source
codes=""
for i in $(seq 13); do
    codes="$codes $(curl -s -o /dev/null -w '%{http_code}' --interface 127.0.0.2 \
        -X POST -H "Host: $NAME.localhost" -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' \
        --data-binary '{"flagName":"always-on","message":"flood"}' "$url/ingest/errors")"
done
is "one address: 11 reports accepted, then 429" "$codes" \
    " 204 204 204 204 204 204 204 204 204 204 204 429 429"
status=$(curl -s -H "Host: $NAME.localhost" "$url/flags-status")
is "flags_status: always-on's window and what its rule waits for" \
    "$(echo "$status" | perl -MJSON::PP -0ne '
        my $j = decode_json($_);
        my ($f) = grep { $_->{name} eq "always-on" } @{ $j->{projects}[0]{flags} };
        my $w = $f->{rollbackRule}{waitingFor};
        print join " ", $f->{window}{errors}, $f->{window}{sources},
              $f->{rollbackRule}{minSources}, $w->{errors}, $w->{sources},
              $f->{rolledBack} ? "rolled-back" : "on"')" \
    "12 2 3 8 1 on"

# ------------------------------------------ a rollback in the state file

# an override in force, as an operator's incident leaves one: the state
# file records it
is "PUT an override (always-on off)" \
    "$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Host: $NAME.localhost" \
        -d '{"enabled": false}' "$url/flags-admin/overrides/shop/always-on")" 204
check "the state file records it" grep -q '"always-on"' "$STATE_DIR/state.json"

# -------------------------------------------------------- stop and purge

kill -QUIT "$nginx_pid"
for _ in $(seq 100); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
check "nginx stops on QUIT" bash -c "! kill -0 $nginx_pid 2>/dev/null"
nginx_pid=
check "its error log has no [alert] or [emerg]" \
    bash -c "! tail -c +$elog_from /var/log/nginx/error.log | grep -E '\[(alert|emerg|crit)\]' | grep -q flags"

state_before=$(cat "$STATE_DIR/state.json")
out=$(dpkg --purge "$PKG" 2>&1); rc=$?
is "dpkg --purge $PKG" "$rc" 0
is "purge says the conf.d directives must go" \
    "$(echo "$out" | grep -c 'remove its flags_\* directives from the nginx configuration')" 1
is "purge keeps $STATE_DIR, which holds the state file" \
    "$(stat -c '%U:%G %a' "$STATE_DIR" 2>&1) $(cd "$STATE_DIR" 2>/dev/null && echo *)" \
    "www-data:www-data 750 state.json"
is "... and says why" "$(echo "$out" | grep -c "keeping $STATE_DIR: it holds state files")" 1
is "... the state file as it was" "$(cat "$STATE_DIR/state.json" 2>&1)" "$state_before"
check "purge removed the report log and its rotation" test ! -e "$LOG" -a ! -e "$LOG.1"
check "purge removed its notes ($NOTES)" test ! -e "$NOTES"
is "no link is left in modules-enabled" \
    "$(find /etc/nginx/modules-enabled -name '*mod-http-flags*' | wc -l)" 0
check "the module is gone" test ! -e /usr/lib/nginx/modules/ngx_http_flags_module.so
# the administrator's conf.d is not the package's: nginx -t fails on it
# until it is removed (the README says so)
CONF_LINE=$(grep -n '^flags_project' "$CONF" | cut -d: -f1)
is "after the purge nginx -t fails on the conf.d example" \
    "$("$NGINX" -t 2>&1 | sed -En 's/^.*\[emerg\] ([0-9]+#[0-9]+: )?//p' | sort -u)" \
    "unknown directive \"flags_project\" in $CONF:$CONF_LINE"
rm -f "$CONF"
check "... and passes once it is removed" "$NGINX" -t -q
rm -rf "$STATE_DIR"    # the test's own data

# ------------------- a purge right after the install removes what it made

check "dpkg -i again" dpkg -i "$DEB"
check "dpkg --purge at once" dpkg --purge "$PKG"
check "purge removed $STATE_DIR, which held nothing" test ! -e "$STATE_DIR"
check "purge removed $LOG" test ! -e "$LOG"

# ------------------------------ an administrator's directory and log stay

install -d -o root -g root -m 0700 "$STATE_DIR"
printf 'kept\n' >"$STATE_DIR/notes.txt"
printf 'an earlier line\n' >"$LOG"
chmod 600 "$LOG"
admin_before=$(stat -c '%U:%G %a' "$STATE_DIR" "$LOG" | tr '\n' ' ')
check "dpkg -i with the administrator's $STATE_DIR and $LOG" dpkg -i "$DEB"
is "postinst left both as they were" "$(stat -c '%U:%G %a' "$STATE_DIR" "$LOG" | tr '\n' ' ')" \
    "$admin_before"
is "... and noted neither" "$(cat "$NOTES/created" 2>/dev/null)" ""
check "dpkg --purge" dpkg --purge "$PKG"
is "purge kept both, owner, mode and contents" \
    "$(stat -c '%U:%G %a' "$STATE_DIR" "$LOG" | tr '\n' ' ')$(cat "$STATE_DIR/notes.txt" "$LOG")" \
    "${admin_before}kept
an earlier line"
rm -rf "$STATE_DIR" "$LOG"

# an empty directory of the administrator's is theirs too
install -d -o root -g root -m 0755 "$STATE_DIR"
check "dpkg -i with an empty $STATE_DIR of the administrator's" dpkg -i "$DEB"
check "dpkg --purge" dpkg --purge "$PKG"
is "purge kept it" "$(stat -c '%U:%G %a %F' "$STATE_DIR" 2>&1)" "root:root 755 directory"
rm -rf "$STATE_DIR"

cleanup
trap - EXIT
after=$(snapshot)
is "the system is as it was" "$(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | tr '\n' ' ')" ""

echo "1..$n"
exit $failed
