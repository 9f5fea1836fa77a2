-- report.lua - wrk script shared by every benchmark scenario (bench/run.sh).
--
-- * With BENCH_BODY_FILE set in the environment, every request is a POST
--   whose body is that file's content (headers such as Content-Type come
--   from wrk's -H options). Otherwise wrk sends its default GET.
-- * done() prints one machine-readable line that run.sh parses, with exact
--   integers instead of wrk's rounded human output:
--     BENCH requests=N duration_us=N p50_us=N p99_us=N non2xx=N
--           connect=N read=N write=N timeout=N
--   non2xx is wrk's "Non-2xx or 3xx responses" (statuses >= 400).

local body_file = os.getenv("BENCH_BODY_FILE")
if body_file and body_file ~= "" then
    local f = assert(io.open(body_file, "rb"))
    wrk.method = "POST"
    wrk.body = f:read("*a")
    f:close()
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "BENCH requests=%d duration_us=%d p50_us=%d p99_us=%d non2xx=%d"
        .. " connect=%d read=%d write=%d timeout=%d\n",
        summary.requests, summary.duration,
        latency:percentile(50), latency:percentile(99),
        e.status, e.connect, e.read, e.write, e.timeout))
end
