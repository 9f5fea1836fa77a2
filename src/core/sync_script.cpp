/*
 * sync_script.cpp - the fleet's decision, run inside Redis (docs/sync.md):
 * the Lua script flags_sync sends.  It applies the rule of
 * fl_rollback_decide() (policy.cpp) to the fleet's window sums, with the
 * policy passed by each host, so the one rule has one statement in C++
 * and this, its Redis-side twin, beside the rest of the core's decisions.
 *
 * It also runs the ramps of the fleet ("Ramps across the fleet"): the
 * functions rbegin, radvance, rclose, rprogress, rstep and ract are the
 * twins of begin(), advance(), close_tick(), progress(), fl_ramp_step()
 * and fl_ramp_act() (ramp.cpp), and rclose's evidence that of
 * fl_regression_tick() (regression.cpp).  ramp.cpp is the reference:
 * change it first, then this, statement for statement.  The differences
 * are the fleet's own: a tick's counts are the deltas the hosts sent
 * during it (fields a1 a0 ae1 ae0, summed in Redis) instead of totals
 * against a local baseline, so a start or a restart drops what was
 * counted before it at once (the host's first tick after a restart counts
 * nothing, having no baseline); nothing is "frozen" (Redis is there when
 * the script runs); a rollback record marks the ramp rolled back before
 * the call's actions run (rmark), so no action but restart moves a
 * rolled-back ramp, and again after the absolute rule, so the hash saved
 * is rolled back exactly when the flag has a record (fl_ramp_step()
 * marks it at its next step, half a second later on one host); and Lua
 * 5.1 has no log1p, so log1p is computed as log(u) * x / (u - 1),
 * u = 1 + x, which agrees with the C library's to a few units in the
 * last place.
 *
 * A reseed (Redis restarted empty, docs/sync.md "Rejoining"): a missing
 * hash, or one the script cannot step (rbroken), is made from the
 * caller's seed, and records when (born) and the seed's word (sst, snx:
 * its start and tick end; 0 0 for a ramp that never started).  For RW
 * ms after, a seed whose word is ahead of that one (started against
 * never started, a later start, or the same start and a later tick end)
 * and not a copy of the fleet's current run from before its last tick
 * replaces the state, so a host that never saw the ramp run does not win
 * over one that did because it called first; an operator's action closes
 * the window (born 0).  A seed taken carries its actions' effect: they
 * are not run again.
 */

#include "flags_core.h"

#include <cstdio>
#include <cstring>

/*
 * The fleet's script.  KEYS[1] is the project's control hash, KEYS[2 + i]
 * the window hash of entry i (i from 0 to n - 1) and KEYS[2 + n + i] its
 * sources hash.  ARGV: the epoch and version the host last read, the
 * number of entries n, the calling host's name (flags_sync host=), its
 * acknowledged calls, then
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
 * A ramped entry adds three arguments (sync_round.cpp): the ramp's
 * definition, this host's part "n1 n0 e1 e0 stopped guard actions
 * witnesses floor a1 a0 ae1 ae0" (the cohorts' cumulative counts, the
 * errors witnessed; the host's distinct witnesses of the evidence and
 * the floor a proof needs, docs/regression.md; what Redis acknowledged
 * of the four counts: fresh() adds only what it has not applied, kept in
 * the host's hash as "c1:", "c0:", "x1:", "x0:" + the flag, with no
 * age limit, as a ramp's evidence has no window) and a
 * seed (the host's copy of the state, taken when the fleet has none:
 * Redis restarted empty; see "A reseed" above), and the key
 * KEYS[2 + 2n + i], a hash of the ramp's state (the names in RF, then
 * born, sst and snx; wit, the most witnesses any host reported for the
 * evidence, and held, 1 while the floor holds a proof back; Redis's
 * clock in milliseconds; log likelihood ratios as %.17g), kept 7 days
 * after its last call.  rclose's guard is true, false, or 'floor' (the
 * rule may act, but the proof lacks witnesses).  While
 * such a ramp guards its flag, the absolute rule's window is kept but
 * decides nothing (fl_ramp_guards()).
 * What a failover loses (docs/sync.md): the error and enabled counts of
 * an entry (ARGV[a + 6], ARGV[a + 7]) are the host incarnation's
 * cumulative counts, and ARGV[a + 13], ARGV[a + 14] what it had
 * acknowledged of them; the last key, PREFIX{project}:h:<host>:<16 hex
 * incarnation>, keeps per flag the cumulative counts applied ("e:" and
 * "n:" + the flag), the host's calls ("q", from ARGV[5], its acknowledged
 * calls) and its last call's second ("at"), for a day.  fresh() adds
 * sent - applied: a resent call adds nothing, a store that lost some adds
 * them again, one without them (or that lost them a window ago or more)
 * adds what was never acknowledged.  A caller whose version is above the
 * hash's, same epoch, read versions the store lost: the range is kept in
 * "lost" ("from to at_ms", merged within 60 s), ver jumps past it, and
 * every caller within it is told so (bit 1 of a fifth element; a range
 * not below the version, which the script never writes, tells nobody:
 * a host told so would stay within it); bit 2
 * says the store lacks acknowledged calls of this host (it resends).
 * Returns {epoch, version} or, when the host's are stale, {epoch, version,
 * HGETALL of the control hash}; with ramped entries {epoch, version,
 * HGETALL or 0, ramps}, ramps holding one item an entry: 0, or its
 * FL_SYNC_RAMP_VALUES numbers as strings; with news of a loss {epoch,
 * version, HGETALL or 0, ramps or 0, bits}.
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
    "local back = 0\n"
    "local mine = tonumber(ARGV[2]) or 0\n"
    "local ver0 = tonumber(redis.call('HGET', ctl, 'ver') or '0') or 0\n"
    "local lf, lt, la\n"
    "local lost = redis.call('HGET', ctl, 'lost')\n"
    "if lost then\n"
    "  lf, lt, la = string.match(lost, '(%d+) (%d+) (%d+)')\n"
    "  lf, lt, la = tonumber(lf), tonumber(lt), tonumber(la)\n"
    "end\n"
    "local vfloor = ver0\n"
    "if epoch == ARGV[1] and mine > ver0 then\n"
    "  vfloor = mine + 1\n"
    "  if lf and now_ms - la < 60000 then\n"
    "    lf, lt = math.min(lf, ver0), math.max(lt, mine)\n"
    "  else\n"
    "    lf, lt = ver0, mine\n"
    "  end\n"
    "  la = now_ms\n"
    "  redis.call('HSET', ctl, 'lost', lf .. ' ' .. lt .. ' ' .. la,\n"
    "             'ver', mine)\n"
    "  bump = bump + 1\n"
    "end\n"
    "if lf and epoch == ARGV[1] and mine > lf and mine <= lt\n"
    "   and lt < vfloor then\n"
    "  back = 1\n"
    "end\n"
    "local hk = KEYS[2 + 3 * n]\n"
    "local hv = redis.call('HMGET', hk, 'q', 'at')\n"
    "local hat = tonumber(hv[2] or '0') or 0\n"
    "local calls = tonumber(ARGV[5]) or 0\n"
    "if (tonumber(hv[1] or '0') or 0) < calls then back = back + 2 end\n"
    "redis.call('HSET', hk, 'q', calls + 1, 'at', now)\n"
    "redis.call('EXPIRE', hk, 86400)\n"
    "local function fresh(field, s, acked, win)\n"
    "  local sent = tonumber(s) or 0\n"
    "  local ap = tonumber(redis.call('HGET', hk, field) or '')\n"
    "  local was = ap\n"
    "  if ap == nil or ap > sent or (ap < acked and now - hat >= win) then\n"
    "    ap = acked\n"
    "  end\n"
    "  if ap > sent then ap = sent end\n"
    "  if was ~= sent then redis.call('HSET', hk, field, s) end\n"
    "  return sent - ap\n"
    "end\n"
    "local RF = {'state', 'stage', 'start', 'sms', 'pms', 'next', 'on',\n"
    "  'off', 'chg', 'cause', 'dms', 'stall', 'n1', 'n0', 'e1', 'e0', 'l1',\n"
    "  'l2', 'l3', 'l4', 'l5', 'ticks', 'eon', 'eoff', 'dtick', 'dec', 'dn1',\n"
    "  'dn0', 'de1', 'de0', 'a1', 'a0', 'ae1', 'ae0'}\n"
    "local TH = {1.5, 2, 3, 5, 10}\n"
    "local RW = 60000\n"
    "local function log1p(x)\n"
    "  local u = 1 + x\n"
    "  if u == 1 then return x end\n"
    "  return math.log(u) * x / (u - 1)\n"
    "end\n"
    "local function lme(r)\n"
    "  local m = r.l1\n"
    "  for k = 2, 5 do if r['l' .. k] > m then m = r['l' .. k] end end\n"
    "  local s = 0\n"
    "  for k = 1, 5 do s = s + math.exp(r['l' .. k] - m) end\n"
    "  return m + math.log(s / 5)\n"
    "end\n"
    "local function evidence0(r)\n"
    "  for k = 1, 5 do r['l' .. k] = 0 end\n"
    "  r.ticks, r.eon, r.eoff, r.dtick, r.dec = 0, 0, 0, 0, 0\n"
    "  r.wit, r.held = 0, 0\n"
    "end\n"
    "local function rbegin(d, r)\n"
    "  r.start, r.stage, r.sms, r.pms = now_ms, 0, now_ms, 0\n"
    "  r.on, r.off, r.stall, r.cause, r.dms = 0, 0, 0, 0, 0\n"
    "  r.next = now_ms + d.tick * 1000\n"
    "  evidence0(r)\n"
    "  r.a1, r.a0, r.ae1, r.ae0 = 0, 0, 0, 0\n"
    "  if d.n <= 1 then r.state = 4 return 3 end\n"
    "  r.state = 1\n"
    "  return 1\n"
    "end\n"
    "local function radvance(d, r)\n"
    "  local nx = r.stage + 1\n"
    "  r.stage, r.sms, r.on, r.off, r.stall = nx, now_ms, 0, 0, 0\n"
    "  r.chg = r.chg + 1\n"
    "  if nx + 1 >= d.n then r.state = 4 return 3 end\n"
    "  if r.state == 3 then r.pms = now_ms else r.state = 1 end\n"
    "  return 2\n"
    "end\n"
    "local function rclose(d, r, guard)\n"
    "  local n1, n0, e1, e0 = r.a1, r.a0, r.ae1, r.ae0\n"
    "  r.a1, r.a0, r.ae1, r.ae0 = 0, 0, 0, 0\n"
    "  local nx = r.next + d.tick * 1000\n"
    "  if nx <= now_ms then nx = now_ms + d.tick * 1000 end\n"
    "  r.next = nx\n"
    "  r.n1, r.n0, r.e1, r.e0 = n1, n0, e1, e0\n"
    "  r.on, r.off = r.on + n1, r.off + n0\n"
    "  local was = r.dec\n"
    "  r.ticks = r.ticks + 1\n"
    "  local c1, c0 = math.min(e1, n1), math.min(e0, n0)\n"
    "  if n1 > 0 and n0 > 0 and (c1 > 0 or c0 > 0) then\n"
    "    local phi = d.phi >= 1 and d.phi or 1\n"
    "    local pi = n1 / (n1 + n0)\n"
    "    for k = 1, 5 do\n"
    "      local th = TH[k]\n"
    "      r['l' .. k] = r['l' .. k]\n"
    "        + (c1 * math.log(th) - (c1 + c0) * log1p(pi * (th - 1))) / phi\n"
    "    end\n"
    "    r.eon, r.eoff = r.eon + c1, r.eoff + c0\n"
    "    if r.dec == 0 and d.alpha > 0 and d.alpha < 1\n"
    "       and lme(r) >= -math.log(d.alpha) then\n"
    "      r.dec, r.dtick = 1, r.ticks\n"
    "    end\n"
    "  end\n"
    "  if r.dec == 1 and (was == 0 or r.held == 1) then\n"
    "    if guard == true then\n"
    "      r.held = 0\n"
    "      r.cause, r.dms, r.state = 1, now_ms, 5\n"
    "      r.dn1, r.dn0, r.de1, r.de0 = n1, n0, e1, e0\n"
    "      return 5\n"
    "    end\n"
    "    r.held = guard == 'floor' and 1 or 0\n"
    "  end\n"
    "  return 0\n"
    "end\n"
    "local function rprogress(d, r)\n"
    "  local s = d.st[r.stage + 1]\n"
    "  local el = now_ms - r.sms\n"
    "  local held = el >= s[2] * 1000\n"
    "  if held and r.on >= s[3] then return radvance(d, r) end\n"
    "  if not held then r.state = 1 return 0 end\n"
    "  r.state = 2\n"
    "  if el < (s[2] + d.ext) * 1000 or r.stall ~= 0 then return 0 end\n"
    "  if d.ins == 1 then r.cause, r.dms, r.state = 2, now_ms, 5 return 5 end\n"
    "  r.stall = 1\n"
    "  return 4\n"
    "end\n"
    "local function rstep(d, r, rolled, stopped, guard)\n"
    "  if r.state == 4 then return 0 end\n"
    "  if rolled then\n"
    "    if r.state ~= 5 then\n"
    "      r.state = 5\n"
    "      if r.cause == 0 then r.cause, r.dms = 3, now_ms end\n"
    "    end\n"
    "    return 0\n"
    "  end\n"
    "  if r.state == 5 then r.state, r.pms = 3, now_ms return 0 end\n"
    "  if r.state == 0 then\n"
    "    if now_ms < d.at then return 0 end\n"
    "    return rbegin(d, r)\n"
    "  end\n"
    "  if now_ms < r.next then return 0 end\n"
    "  if rclose(d, r, guard) == 5 then return 5 end\n"
    "  if r.state == 3 then return 0 end\n"
    "  if stopped then r.state = 2 return 0 end\n"
    "  return rprogress(d, r)\n"
    "end\n"
    "local function ract(d, r, a)\n"
    "  if a == 4 then return rbegin(d, r) end\n"
    "  if r.state == 4 or r.state == 5 then return -1 end\n"
    "  if r.state == 0 then\n"
    "    if a ~= 3 then return -1 end\n"
    "    return rbegin(d, r)\n"
    "  end\n"
    "  if a == 1 then\n"
    "    if r.state ~= 3 then r.state, r.pms = 3, now_ms end\n"
    "  elseif a == 2 then\n"
    "    if r.state == 3 then\n"
    "      if r.pms ~= 0 and now_ms > r.pms then\n"
    "        r.sms = r.sms + now_ms - r.pms\n"
    "      end\n"
    "      r.pms, r.state = 0, 1\n"
    "      if r.dec ~= 0 then evidence0(r) r.cause = 0 end\n"
    "    end\n"
    "  elseif a == 3 then\n"
    "    return radvance(d, r)\n"
    "  end\n"
    "  return 0\n"
    "end\n"
    "local function rdef(s)\n"
    "  local v = {}\n"
    "  for w in string.gmatch(s, '%S+') do v[#v + 1] = w end\n"
    "  local d = {tick = tonumber(v[1]), alpha = tonumber(v[2]) / 1e6,\n"
    "    phi = tonumber(v[3]) / 1e3, at = tonumber(v[4]),\n"
    "    ext = tonumber(v[5]), ins = tonumber(v[6]), n = tonumber(v[7]),\n"
    "    st = {}}\n"
    "  for k = 1, d.n do\n"
    "    local m, h, q = string.match(v[7 + k], '(%d+):(%d+):(%d+)')\n"
    "    d.st[k] = {tonumber(m), tonumber(h), tonumber(q)}\n"
    "  end\n"
    "  return d\n"
    "end\n"
    "local function rseed(seed)\n"
    "  local r, k = {}, 0\n"
    "  for w in string.gmatch(seed, '%S+') do\n"
    "    k = k + 1\n"
    "    if k <= 30 then r[RF[k]] = tonumber(w) end\n"
    "  end\n"
    "  for k = 1, #RF do r[RF[k]] = r[RF[k]] or 0 end\n"
    "  if r.state == 0 then r.start, r.next, r.stage = 0, 0, 0 end\n"
    "  return r\n"
    "end\n"
    "local function rbroken(d, r)\n"
    "  if r.state < 0 or r.state > 5 or r.state % 1 ~= 0 or r.stage < 0\n"
    "     or r.stage >= d.n or r.stage % 1 ~= 0 then return true end\n"
    "  for k = 1, 5 do\n"
    "    local x = r['l' .. k]\n"
    "    if x ~= x or x == math.huge or x == -math.huge then return true end\n"
    "  end\n"
    "  return false\n"
    "end\n"
    "local function rload(d, rk, seed)\n"
    "  local s = rseed(seed)\n"
    "  if rbroken(d, s) then s = rseed('') end\n"
    "  local r = {}\n"
    "  if redis.call('EXISTS', rk) == 1 then\n"
    "    local v = redis.call('HMGET', rk, unpack(RF))\n"
    "    for k = 1, #RF do r[RF[k]] = tonumber(v[k]) or 0 end\n"
    "  end\n"
    "  if r.state and not rbroken(d, r) then\n"
    "    local o = redis.call('HMGET', rk, 'born', 'sst', 'snx')\n"
    "    local born = tonumber(o[1]) or 0\n"
    "    local sst, snx = tonumber(o[2]) or 0, tonumber(o[3]) or 0\n"
    "    if seed == '' or born == 0 or now_ms - born >= RW\n"
    "       or s.state == 0 or s.start < sst\n"
    "       or (s.start == sst and s.next <= snx)\n"
    "       or (s.start == r.start and s.next <= r.next) then\n"
    "      return r, false\n"
    "    end\n"
    "  else\n"
    "    redis.call('HSET', rk, 'born', now_ms)\n"
    "  end\n"
    "  redis.call('HSET', rk, 'sst', s.start, 'snx', s.next)\n"
    "  return s, seed ~= ''\n"
    "end\n"
    "local function rmark(r)\n"
    "  if r.state == 4 or r.state == 5 then return end\n"
    "  r.state = 5\n"
    "  if r.cause == 0 then r.cause, r.dms = 3, now_ms end\n"
    "end\n"
    "local function rsave(rk, r)\n"
    "  local a, out = {}, {}\n"
    "  for k = 1, #RF do\n"
    "    local x = r[RF[k]]\n"
    "    if k >= 17 and k <= 21 then x = string.format('%.17g', x)\n"
    "    else x = string.format('%d', x) end\n"
    "    a[#a + 1] = RF[k]\n"
    "    a[#a + 1] = x\n"
    "    if k <= 30 then out[k] = x end\n"
    "  end\n"
    "  a[#a + 1] = 'wit'\n"
    "  a[#a + 1] = string.format('%d', r.wit or 0)\n"
    "  a[#a + 1] = 'held'\n"
    "  a[#a + 1] = string.format('%d', r.held or 0)\n"
    "  redis.call('HSET', rk, unpack(a))\n"
    "  redis.call('EXPIRE', rk, 604800)\n"
    "  return out\n"
    "end\n"
    "local ramps, ramped = {}, false\n"
    "for i = 0, n - 1 do\n"
    "  local a = 6 + i * 15\n"
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
    "  local rguard, r, rk = false, nil, nil\n"
    "  ramps[i + 1] = 0\n"
    "  if ARGV[a + 10] ~= '' then\n"
    "    local d = rdef(ARGV[a + 10])\n"
    "    local seeded\n"
    "    rk = KEYS[2 + 2 * n + i]\n"
    "    r, seeded = rload(d, rk, ARGV[a + 12])\n"
    "    local h1, h0, he1, he0, hs, hg, acts, hw, hm, k1, k0, ke1, ke0 =\n"
    "      string.match(ARGV[a + 11], '(%d+) (%d+) (%d+) (%d+) (%d) (%d) '\n"
    "        .. '(%S+) ?(%d*) ?(%d*) ?(%d*) ?(%d*) ?(%d*) ?(%d*)')\n"
    "    local wh = redis.call('HMGET', rk, 'wit', 'held')\n"
    "    r.wit = r.wit or tonumber(wh[1] or '0') or 0\n"
    "    r.held = r.held or tonumber(wh[2] or '0') or 0\n"
    "    if seeded then r.wit, r.held = 0, 0 end\n"
    "    hw, hm = tonumber(hw) or 0, tonumber(hm) or 0\n"
    "    if hw > r.wit then r.wit = hw end\n"
    "    local function cohort(pfx, c, k)\n"
    "      return fresh(pfx .. flag, c, tonumber(k) or 0, math.huge)\n"
    "    end\n"
    "    r.a1 = r.a1 + cohort('c1:', h1, k1)\n"
    "    r.a0 = r.a0 + cohort('c0:', h0, k0)\n"
    "    r.ae1 = r.ae1 + cohort('x1:', he1, ke1)\n"
    "    r.ae0 = r.ae0 + cohort('x0:', he0, ke0)\n"
    "    local rolled = redis.call('HEXISTS', ctl, rbf) == 1\n"
    "    if rolled then rmark(r) end\n"
    "    if not seeded and acts ~= '-' then\n"
    "      for c in string.gmatch(acts, '%d') do ract(d, r, tonumber(c)) end\n"
    "      redis.call('HSET', rk, 'born', 0)\n"
    "    end\n"
    "    local g = hg == '1'\n"
    "    if g and r.wit < hm then g = 'floor' end\n"
    "    local ev = rstep(d, r, rolled, hs == '1', g)\n"
    "    if ev == 5 and redis.call('HSETNX', ctl, rbf, now_ms .. ' '\n"
    "         .. r.eon .. ' ' .. r.on .. ' ' .. host .. ' ' .. (r.wit or 0))\n"
    "       == 1 then\n"
    "      redis.call('HDEL', ctl, cbf)\n"
    "      bump = bump + 1\n"
    "    end\n"
    "    rguard = r.state >= 1 and r.state <= 3\n"
    "             and d.st[math.min(r.stage + 1, d.n)][1] < 100000\n"
    "             and (r.off > 0 or r.n0 > 0)\n"
    "    ramped = true\n"
    "  end\n"
    "  local pol = ARGV[a + 8]\n"
    "  local pwin = tonumber(string.match(pol, '^%d+ %d+ (%d+)') or '0')\n"
    "  local de = fresh('e:' .. flag, ARGV[a + 6],\n"
    "                   tonumber(ARGV[a + 13]) or 0, pwin)\n"
    "  local dn = fresh('n:' .. flag, ARGV[a + 7],\n"
    "                   tonumber(ARGV[a + 14]) or 0, pwin)\n"
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
    "    if errors >= me and sources >= ms and not rguard\n"
    "       and (enabled == 0 or errors * 100000 >= rate * enabled) then\n"
    "      if redis.call('HSETNX', ctl, rbf, now_ms .. ' ' .. errors\n"
    "                    .. ' ' .. enabled .. ' ' .. host .. ' ' .. sources)\n"
    "       == 1 then\n"
    "        redis.call('HDEL', ctl, cbf)\n"
    "        bump = bump + 1\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  if r then\n"
    "    if redis.call('HEXISTS', ctl, rbf) == 1 then rmark(r) end\n"
    "    ramps[i + 1] = rsave(rk, r)\n"
    "  end\n"
    "end\n"
    "if bump > 0 then redis.call('HINCRBY', ctl, 'ver', 1) end\n"
    "local ver = redis.call('HGET', ctl, 'ver')\n"
    "local c = 0\n"
    "if epoch ~= ARGV[1] or ver ~= ARGV[2] then\n"
    "  c = redis.call('HGETALL', ctl)\n"
    "end\n"
    "if back > 0 then\n"
    "  if ramped then return {epoch, ver, c, ramps, back} end\n"
    "  return {epoch, ver, c, 0, back}\n"
    "end\n"
    "if ramped then return {epoch, ver, c, ramps} end\n"
    "if c ~= 0 then return {epoch, ver, c} end\n"
    "return {epoch, ver}\n";

} // namespace

extern "C" const char *fl_sync_script(size_t *len) noexcept
{
    *len = sizeof(script) - 1;
    return script;
}


namespace {

/*
 * The definitions of a runtime project in the fleet (docs/sync.md, "One
 * version for the fleet"): one hash, KEYS[1] = PREFIX{project}:defs, with
 * v (the version), at (its time, ms), entry (its history line), doc (the
 * document), sig (HMAC-SHA256, hex; absent without key_file) and host
 * (where it was written).  A missing hash is the fleet's version 0:
 * Redis restarted empty, or no version written yet (every host serves
 * its flags file as version 1).
 *
 *   get  ARGV[2] = the caller's version: {v} when the caller has it or a
 *        newer one, else {v, at, entry, doc, sig, host};
 *   cas  ARGV[2] = base, ARGV[3..8] = v, at, entry, doc, sig, host:
 *        stored when the fleet's version is base (a missing hash is
 *        version 1's base, the file), {1, v}; else {0, fleet's version};
 *   seed ARGV[3..8] as cas: stored when the fleet's version is older
 *        (Redis lost it), {1, v}; else {0, fleet's version}.
 */
const char defs_script[] =
    "local k = KEYS[1]\n"
    "local cur = tonumber(redis.call('HGET', k, 'v') or '0') or 0\n"
    "local op = ARGV[1]\n"
    "if op == 'get' then\n"
    "  if cur > (tonumber(ARGV[2]) or 0) then\n"
    "    local f = redis.call('HMGET', k, 'at', 'entry', 'doc', 'sig', "
    "'host')\n"
    "    return {cur, f[1] or '0', f[2] or '', f[3] or '', f[4] or '', "
    "f[5] or ''}\n"
    "  end\n"
    "  return {cur}\n"
    "end\n"
    "local v = tonumber(ARGV[3]) or 0\n"
    "local ok\n"
    "if op == 'cas' then\n"
    "  local base = tonumber(ARGV[2]) or 0\n"
    "  ok = cur == base or (cur == 0 and base == 1)\n"
    "else\n"
    "  ok = cur < v\n"
    "end\n"
    "if not ok or v < 1 then return {0, cur} end\n"
    "redis.call('DEL', k)\n"
    "redis.call('HMSET', k, 'v', ARGV[3], 'at', ARGV[4], 'entry', ARGV[5], "
    "'doc', ARGV[6], 'host', ARGV[8])\n"
    "if ARGV[7] ~= '' then redis.call('HSET', k, 'sig', ARGV[7]) end\n"
    "return {1, v}\n";

} // namespace

extern "C" const char *fl_sync_defs_script(size_t *len) noexcept
{
    *len = sizeof(defs_script) - 1;
    return defs_script;
}


/* ------------------------------------------------ definitions' decisions */

extern "C" size_t fl_sync_defs_signed_bound(size_t project_len,
    size_t entry_len, size_t doc_len) noexcept
{
    /* the prefix, two numbers of at most 20 digits, four newlines */
    return sizeof("flags-definitions\n") - 1 + project_len + 2 * 20 + 4
           + entry_len + doc_len;
}

extern "C" size_t fl_sync_defs_signed(const char *project,
    size_t project_len, uint64_t version, uint64_t at_ms, const char *entry,
    size_t entry_len, const char *doc, size_t doc_len, char *out,
    size_t cap) noexcept
{
    char    num[2][24];
    int     nl[2];
    size_t  len, off;

    nl[0] = snprintf(num[0], sizeof(num[0]), "%llu",
                     (unsigned long long) version);
    nl[1] = snprintf(num[1], sizeof(num[1]), "%llu",
                     (unsigned long long) at_ms);

    len = sizeof("flags-definitions\n") - 1 + project_len + 1 + (size_t) nl[0]
          + 1 + (size_t) nl[1] + 1 + entry_len + 1 + doc_len;

    if (len > cap) {
        return 0;
    }

    off = 0;

    auto put = [&](const char *p, size_t n) {
        if (n) {
            memcpy(out + off, p, n);
            off += n;
        }
    };

    put("flags-definitions\n", sizeof("flags-definitions\n") - 1);
    put(project, project_len);
    put("\n", 1);
    put(num[0], (size_t) nl[0]);
    put("\n", 1);
    put(num[1], (size_t) nl[1]);
    put("\n", 1);
    put(entry, entry_len);
    put("\n", 1);
    put(doc, doc_len);

    return off;
}

extern "C" fl_sync_defs_do_t fl_sync_defs_get(uint64_t fleet, uint64_t mine,
    int carries_version, uint64_t at_ms, uint64_t *refused,
    uint64_t *refused_at) noexcept
{
    /* a refused version gone (deleted, Redis restarted): its number may
     * come again, written properly */
    if (fleet < *refused) {
        *refused = 0;
        *refused_at = 0;
    }

    if (!carries_version || fleet <= mine) {
        /* the fleet lost ours, or holds an older one: seed it, unless
         * this host serves the file (version 1, every host's) */
        return (mine > 1 && fleet < mine) ? FL_SYNC_DEFS_SEED
                                          : FL_SYNC_DEFS_NOTHING;
    }

    if (fleet == *refused && at_ms == *refused_at) {
        return FL_SYNC_DEFS_NOTHING;            /* refused, and logged */
    }

    return FL_SYNC_DEFS_CHECK;
}
