-- report.lua - wrk script shared by every benchmark scenario (bench/run.sh).
--
-- * With BENCH_BODY_FILE set in the environment, every request is a POST
--   whose body is that file's content (headers such as Content-Type come
--   from wrk's -H options). Otherwise wrk sends its default GET.
-- * With BENCH_USERS=N the userId of the query cycles through N users.
-- * done() prints one machine-readable line that run.sh parses, with exact
--   integers instead of wrk's rounded human output:
--     BENCH requests=N duration_us=N p50_us=N p99_us=N non2xx=N
--           connect=N read=N write=N timeout=N p999_us=N max_us=N
--   non2xx is wrk's "Non-2xx or 3xx responses" (statuses >= 400).

local body_file = os.getenv("BENCH_BODY_FILE")
-- With BENCH_USERS=N, each request names the next of N users
-- (userId=bench-user-1 ... bench-user-N, then again): a cache keyed by
-- the caller sees a new caller on (nearly) every request.
local users = tonumber(os.getenv("BENCH_USERS") or "")
if body_file and body_file ~= "" then
    local f = assert(io.open(body_file, "rb"))
    wrk.method = "POST"
    wrk.body = f:read("*a")
    f:close()
end

if users and users > 0 then
    local n = 0
    function request()
        n = n % users + 1
        local path = wrk.path:gsub("userId=bench%-user%-7", "userId=bench-user-" .. n)
        return wrk.format(nil, path)
    end
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "BENCH requests=%d duration_us=%d p50_us=%d p99_us=%d non2xx=%d"
        .. " connect=%d read=%d write=%d timeout=%d p999_us=%d max_us=%d\n",
        summary.requests, summary.duration,
        latency:percentile(50), latency:percentile(99),
        e.status, e.connect, e.read, e.write, e.timeout,
        latency:percentile(99.9), latency.max))
end
