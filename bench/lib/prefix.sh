# bench/lib/prefix.sh - sourced by the scripts that reuse the nginx prefix
# of a finished bench/run.sh (instructions.sh, profile.sh). Needs OUT (the
# run's BENCH_OUT) and a die() of the caller's; sets
#   PREFIX  OUT/nginx, with its configuration, projects and baselines
#   PORT, BASE  where that configuration listens (127.0.0.1 only)
#   QUERY   the benchmark user's query; report.lua replaces its userId
#   TOKEN30, TOKEN1000  the tokens of the 30- and 1,000-flag projects
#   REPORT  the report the ingest rows post

PREFIX=$OUT/nginx
[ -f "$PREFIX/conf/nginx.conf" ] || die "no $PREFIX/conf/nginx.conf: run bench/run.sh first (./build.sh bench)"
PORT=$(sed -n 's/^ *listen *127\.0\.0\.1:\([0-9]*\).*/\1/p' "$PREFIX/conf/nginx.conf" | head -1)
[ -n "$PORT" ] || die "no listen port in $PREFIX/conf/nginx.conf"
BASE=http://127.0.0.1:$PORT

QUERY='userId=bench-user-7&trait_plan=pro&trait_country=de&trait_appVersion=2.3.1&trait_email=ana.silva%40example.com&trait_sessions=42'
TOKEN30=pub_bench_30
TOKEN1000=pub_bench_1000
REPORT=$OUT/report.json
[ -f "$REPORT" ] || die "no $REPORT: run bench/run.sh first"
