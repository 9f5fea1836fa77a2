-- report.lua - wrk script shared by every benchmark scenario (bench/run.sh).
--
-- * With BENCH_BODY_FILE set in the environment, every request is a POST
--   whose body is that file's content (headers such as Content-Type come
--   from wrk's -H options). Otherwise wrk sends its default GET.
-- * With BENCH_USERS=N the caller cycles through N distinct users:
--   bench-user-1 ... bench-user-N, then again. The userId is replaced in
--   the query ("userId=bench-user-7&") and, for a POST, in the body
--   ("userId":"bench-user-7"); the other traits stay.
-- * With BENCH_ZIPF=N the callers are N users drawn from a Zipf law,
--   P(user k) proportional to 1 / k^s (s = BENCH_ZIPF_S, default 1.0):
--   a few users ask very often, most now and then, as SDKs that poll do.
--   The draws are made up front, 2^20 of them, then cycled, from a fixed
--   seed (BENCH_ZIPF_SEED, 27), so module and baseline send the same
--   sequence; run.sh gives the warm-up another seed, else the measured run
--   would begin with the very users the warm-up just asked for, and the
--   memo of answers would hold more of them than it would in steady use.
-- * In both modes every request is built once, in init(), before wrk's
--   clock starts; request() only hands out a prebuilt string, so wrk's own
--   cost per request is the same as with a fixed request.
-- * done() prints one machine-readable line that run.sh parses, with exact
--   integers instead of wrk's rounded human output:
--     BENCH requests=N duration_us=N p50_us=N p99_us=N non2xx=N
--           connect=N read=N write=N timeout=N p999_us=N max_us=N
--           wrk_ticks=N wrk_cpu_pct=N
--   non2xx is wrk's "Non-2xx or 3xx responses" (statuses >= 400).
--   wrk_ticks is wrk's own CPU time (utime + stime of the whole process,
--   from /proc/self/stat, in clock ticks) from the end of init() to done(),
--   that is over the measured run; wrk_cpu_pct is that as a percentage of
--   the run's duration (clock ticks a second from BENCH_CLK_TCK, 100).
--   Near 100, wrk is the bottleneck and a ratio measures wrk.

local body_file = os.getenv("BENCH_BODY_FILE")
local users = tonumber(os.getenv("BENCH_USERS") or "")
local zipf = tonumber(os.getenv("BENCH_ZIPF") or "")
local zipf_s = tonumber(os.getenv("BENCH_ZIPF_S") or "") or 1.0
local clk_tck = tonumber(os.getenv("BENCH_CLK_TCK") or "") or 100
local ZIPF_DRAWS = 1048576

if body_file and body_file ~= "" then
    local f = assert(io.open(body_file, "rb"))
    wrk.method = "POST"
    wrk.body = f:read("*a")
    f:close()
end

-- utime + stime of this process (all its threads), in clock ticks
local function cpu_ticks()
    local f = io.open("/proc/self/stat", "r")
    if not f then return nil end
    local s = f:read("*l")
    f:close()
    -- after the command name "(...)": state is the 1st field, utime the
    -- 12th, stime the 13th (fields 3, 14 and 15 of proc(5))
    local rest = s:match("^.*%) (.*)$")
    local i, ut, st = 0, nil, nil
    for v in rest:gmatch("%S+") do
        i = i + 1
        if i == 12 then ut = tonumber(v) elseif i == 13 then st = tonumber(v); break end
    end
    return ut + st
end

-- the request of user n, built once
local function build(n)
    local id = "bench-user-" .. n
    -- a request that names no user to replace would send one user again
    -- and again: the row would measure the memo, so it is an error
    local path, np = wrk.path:gsub("userId=bench%-user%-7&", "userId=" .. id .. "&")
    local body, nb = wrk.body, 1
    if body then
        body, nb = body:gsub('"userId":"bench%-user%-7"', '"userId":"' .. id .. '"')
    end
    assert(np == 1 or (body and nb == 1),
           "report.lua: no userId=bench-user-7 to replace in " .. wrk.path)
    assert(nb == 1, 'report.lua: no "userId":"bench-user-7" to replace in the body')
    return wrk.format(nil, path, nil, body)
end

-- setup() runs in wrk's main Lua state, init() in the thread's: done()
-- reads the thread's start figure through the thread object.
local threads = {}
function setup(thread)
    table.insert(threads, thread)
end

local seq, nseq, i = nil, 0, 0

function init(args)
    if users and users > 0 then
        seq = {}
        for n = 1, users do seq[n] = build(n) end
        nseq = users
    elseif zipf and zipf > 0 then
        local reqs, cdf, sum = {}, {}, 0
        for k = 1, zipf do
            sum = sum + 1 / k ^ zipf_s
            cdf[k] = sum
        end
        for k = 1, zipf do reqs[k] = false end
        math.randomseed(tonumber(os.getenv("BENCH_ZIPF_SEED") or "") or 27)
        seq = {}
        for d = 1, ZIPF_DRAWS do
            local u = math.random() * sum
            local lo, hi = 1, zipf
            while lo < hi do
                local mid = math.floor((lo + hi) / 2)
                if cdf[mid] < u then lo = mid + 1 else hi = mid end
            end
            local r = reqs[lo]
            if not r then r = build(lo); reqs[lo] = r end
            seq[d] = r
        end
        nseq = ZIPF_DRAWS
    end
    if seq then
        function request()
            i = i + 1
            if i > nseq then i = 1 end
            return seq[i]
        end
    end
    cpu_start = cpu_ticks()
end

function done(summary, latency, requests)
    local e = summary.errors
    local t0 = threads[1] and threads[1]:get("cpu_start")
    local t1 = cpu_ticks()
    local ticks, pct = -1, -1
    if t0 and t1 then
        ticks = t1 - t0
        pct = math.floor(100 * ticks / clk_tck / (summary.duration / 1e6) + 0.5)
    end
    io.write(string.format(
        "BENCH requests=%d duration_us=%d p50_us=%d p99_us=%d non2xx=%d"
        .. " connect=%d read=%d write=%d timeout=%d p999_us=%d max_us=%d"
        .. " wrk_ticks=%d wrk_cpu_pct=%d\n",
        summary.requests, summary.duration,
        latency:percentile(50), latency:percentile(99),
        e.status, e.connect, e.read, e.write, e.timeout,
        latency:percentile(99.9), latency.max, ticks, pct))
end
