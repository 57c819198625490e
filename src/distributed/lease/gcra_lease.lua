-- tollgate: a lease of GCRA slots, for a token bucket whose units a process spends locally
-- (src/distributed/lease/ledger/bucket.rs): `g` units taken at `now` are the slots
-- `[start, start + g*T)`, `start = max(tat, now)`, admitted as one request of weight `g`, and
-- the TAT moves to their end.
-- KEYS[1]  the TAT of gcra.lua, the same key: leased and per-decision limiters share the quota.
--          (Leases run only intervals of whole µs; a 24-byte TAT is read as gcra.lua's does.)
-- ARGV[1]  cost, T (microseconds per unit), tolerance (burst * T) [, now_us], packed as for
--          gcra.lua: 24 bytes, or 32 with a client's time (without it, the server's TIME).
--          `cost` is the weight of the request that waits for this answer (0: a refresh).
-- ARGV[2]  want: the units asked for in all, the request's included, as 8 bytes ('<i8').
-- Returns  24 bytes ('<i8i8i8'): the units granted (0: refused, or none asked), `start`
--          (for a refusal, where the key's queue ends, or now if later), and `now`. The grant
--          is at least `cost` when the request is admitted (`start + cost*T - now` within the
--          tolerance, as gcra.lua admits it), and at most `want` and half of the units still
--          free at `now` (rounded up), so that near the limit leases shrink to the request.
-- Every value is an integer below 2^53, as in gcra.lua.
local cost, interval, tolerance, now
if #ARGV[1] == 32 then
  cost, interval, tolerance, now = struct.unpack('<i8i8i8i8', ARGV[1])
else
  cost, interval, tolerance = struct.unpack('<i8i8i8', ARGV[1])
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
-- A weight the client never sends (weights are unsigned): refused before the state is read,
-- so that another program's bad call cannot write a state no decision makes.
if cost < 0 then
  return redis.error_reply('TOLLGATE_COST the weight must be at least 0')
end
local want = ARGV[2] and #ARGV[2] == 8 and struct.unpack('<i8', ARGV[2])
if not want or want < cost then
  return redis.error_reply('TOLLGATE_LEASE the units asked for must be at least the weight')
end
local key = KEYS[1]
local tat = now
local stored = redis.call('GET', key)
if stored then
  if #stored == 24 then
    -- A bucket's TAT at an interval of 1/d µs (gcra_state.lua), written by a limiter whose
    -- interval is not whole µs: read up to the next whole µs, never admitting more.
    local whole, part, base = struct.unpack('<i8i8i8', stored)
    stored = base >= 2 and base <= 8796093022208 and part >= 0 and part < base and whole + (part > 0 and 1 or 0)
  else
    stored = #stored == 8 and struct.unpack('<i8', stored)
  end
  -- 2^53: a time past it is no state of ours (foreign text decodes far above it).
  if not stored or stored < 0 or stored >= 9007199254740992 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a GCRA state')
  end
  if stored > now then
    tat = stored
  end
end
local backlog = tat - now
if backlog + cost * interval > tolerance then
  return struct.pack('<i8i8i8', 0, tat, now)
end
-- At least `cost` units are free: the request's, and up to half of them for the lease.
local free = math.floor((tolerance - backlog) / interval)
local granted = math.max(cost, math.min(want, math.ceil(free / 2)))
if granted == 0 then
  return struct.pack('<i8i8i8', 0, tat, now)
end
local after = backlog + granted * interval
-- The key expires when the TAT is reached, as gcra.lua keeps it.
-- The TTL as text made with '%d' (cheaper than a number argument: gcra.lua).
redis.call('PSETEX', key, string.format('%d', math.ceil(after / 1000)), struct.pack('<i8', tat + granted * interval))
return struct.pack('<i8i8i8', granted, tat, now)
