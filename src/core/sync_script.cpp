/*
 * sync_script.cpp - the fleet's decision, run inside Redis (docs/sync.md):
 * the Lua script flags_sync sends.  It applies the rule of
 * fl_rollback_decide() (policy.cpp) to the fleet's window sums, with the
 * policy passed by each host, so the one rule has one statement in C++
 * and this, its Redis-side twin, beside the rest of the core's decisions.
 */

#include "flags_core.h"

/*
 * The fleet's script.  KEYS[1] is the project's control hash, KEYS[2 + i]
 * the window hash of entry i (i from 0 to n - 1) and KEYS[2 + n + i] its
 * sources hash.  ARGV: the epoch and version the host last read, the
 * number of entries n, the calling host's name (flags_sync host=), then
 * FL_SYNC_ENTRY_ARGS a flag (sync_round.cpp writes them): name,
 * definition hash (16 hex digits), rollback op ("-", "set", "clr") and
 * its record ("at_ms errors enabled host sources"), override op ("-",
 * "set", "del") and its value ("off" or milli-percent), error and
 * enabled-evaluation deltas, the policy as
 * "min_errors rate_milli window min_sources" ("" when off), and the
 * sources of the host's window errors as "key:age ..." (8 hex digits and
 * seconds ago; "" when no error goes out).
 * Sources live in a hash of their own (field: key, value: Redis second
 * last seen), so the window hash an older host reads never holds a field
 * it cannot parse; the fleet's count is the number of keys seen within
 * the window on any host, the rule's third condition.  A rollback the
 * script decides records "at_ms errors enabled host sources".
 * Provenance: a rollback record ends with the host that published it or
 * whose deltas crossed the threshold; "cb:<def>:<flag>" names the host
 * that last cleared the rollback, "ob:<def>:<flag>" the one that last set
 * or removed the override (hosts of an older version ignore both fields
 * and read the record's first three numbers).
 * Time is Redis's own (TIME), so hosts' clocks need not agree.
 * Returns {epoch, version} or, when the host's are stale, {epoch, version,
 * HGETALL of the control hash}.
 */

namespace {

constexpr char script[] =
    "local ctl = KEYS[1]\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1])\n"
    "local now_ms = now * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local epoch = redis.call('HGET', ctl, 'epoch')\n"
    "if not epoch then\n"
    "  epoch = t[1] .. string.format('%06d', tonumber(t[2]))\n"
    "  redis.call('HSET', ctl, 'epoch', epoch, 'ver', 0)\n"
    "end\n"
    "local bump = 0\n"
    "local n = tonumber(ARGV[3])\n"
    "local host = ARGV[4]\n"
    "for i = 0, n - 1 do\n"
    "  local a = 5 + i * 10\n"
    "  local flag, def = ARGV[a], ARGV[a + 1]\n"
    "  local rbf = 'rb:' .. def .. ':' .. flag\n"
    "  local ovf = 'ov:' .. def .. ':' .. flag\n"
    "  local cbf = 'cb:' .. def .. ':' .. flag\n"
    "  local w = KEYS[2 + i]\n"
    "  local sk = KEYS[2 + n + i]\n"
    "  if ARGV[a + 2] == 'set' then\n"
    "    if redis.call('HSETNX', ctl, rbf, ARGV[a + 3]) == 1 then\n"
    "      redis.call('HDEL', ctl, cbf)\n"
    "      bump = bump + 1\n"
    "    end\n"
    "  elseif ARGV[a + 2] == 'clr' then\n"
    "    if redis.call('HDEL', ctl, rbf) == 1 then\n"
    "      redis.call('HSET', ctl, cbf, host)\n"
    "      bump = bump + 1\n"
    "    end\n"
    "    redis.call('DEL', w, sk)\n"
    "  end\n"
    "  local ov = 0\n"
    "  if ARGV[a + 4] == 'set' then\n"
    "    if redis.call('HGET', ctl, ovf) ~= ARGV[a + 5] then\n"
    "      redis.call('HSET', ctl, ovf, ARGV[a + 5])\n"
    "      ov = 1\n"
    "    end\n"
    "  elseif ARGV[a + 4] == 'del' then\n"
    "    ov = redis.call('HDEL', ctl, ovf)\n"
    "  end\n"
    "  if ov == 1 then\n"
    "    redis.call('HSET', ctl, 'ob:' .. def .. ':' .. flag, host)\n"
    "    bump = bump + 1\n"
    "  end\n"
    "  local de, dn = tonumber(ARGV[a + 6]), tonumber(ARGV[a + 7])\n"
    "  local pol = ARGV[a + 8]\n"
    "  if (de > 0 or dn > 0) and pol ~= ''\n"
    "     and redis.call('HEXISTS', ctl, rbf) == 0 then\n"
    "    local me, rate, win, ms =\n"
    "      string.match(pol, '(%d+) (%d+) (%d+) ?(%d*)')\n"
    "    me, rate, win = tonumber(me), tonumber(rate), tonumber(win)\n"
    "    ms = tonumber(ms) or 1\n"
    "    for key, age in string.gmatch(ARGV[a + 9], '(%x+):(%d+)') do\n"
    "      local sec = now - tonumber(age)\n"
    "      local old = tonumber(redis.call('HGET', sk, key) or '0')\n"
    "      if sec > old then redis.call('HSET', sk, key, sec) end\n"
    "    end\n"
    "    local sources = 0\n"
    "    local seen = redis.call('HGETALL', sk)\n"
    "    for j = 1, #seen, 2 do\n"
    "      if tonumber(seen[j + 1]) > now - win then sources = sources + 1\n"
    "      else redis.call('HDEL', sk, seen[j]) end\n"
    "    end\n"
    "    if #seen > 0 then redis.call('EXPIRE', sk, win + 60) end\n"
    "    if de > 0 then redis.call('HINCRBY', w, now .. ':e', de) end\n"
    "    if dn > 0 then redis.call('HINCRBY', w, now .. ':n', dn) end\n"
    "    redis.call('EXPIRE', w, win + 60)\n"
    "    local errors, enabled = 0, 0\n"
    "    local all = redis.call('HGETALL', w)\n"
    "    for j = 1, #all, 2 do\n"
    "      local sec, kind = string.match(all[j], '(%d+):(%a)')\n"
    "      if tonumber(sec) > now - win then\n"
    "        if kind == 'e' then errors = errors + tonumber(all[j + 1])\n"
    "        else enabled = enabled + tonumber(all[j + 1]) end\n"
    "      else\n"
    "        redis.call('HDEL', w, all[j])\n"
    "      end\n"
    "    end\n"
    "    if me < 1 then me = 1 end\n"
    "    if ms < 1 then ms = 1 end\n"
    "    if errors >= me and sources >= ms\n"
    "       and (enabled == 0 or errors * 100000 >= rate * enabled) then\n"
    "      if redis.call('HSETNX', ctl, rbf, now_ms .. ' ' .. errors\n"
    "                    .. ' ' .. enabled .. ' ' .. host .. ' ' .. sources)\n"
    "       == 1 then\n"
    "        redis.call('HDEL', ctl, cbf)\n"
    "        bump = bump + 1\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if bump > 0 then redis.call('HINCRBY', ctl, 'ver', 1) end\n"
    "local ver = redis.call('HGET', ctl, 'ver')\n"
    "if epoch ~= ARGV[1] or ver ~= ARGV[2] then\n"
    "  return {epoch, ver, redis.call('HGETALL', ctl)}\n"
    "end\n"
    "return {epoch, ver}\n";

} // namespace

extern "C" const char *fl_sync_script(size_t *len) noexcept
{
    *len = sizeof(script) - 1;
    return script;
}
