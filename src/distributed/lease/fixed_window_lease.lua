-- tollgate: a lease of fixed window units, for a window whose units a process spends locally
-- within the window (src/distributed/lease/ledger/window.rs): `g` units added to the count of
-- the window holding `now`, admitted as one request of weight `g`.
-- KEYS[1]  the state of fixed_window.lua, the same key (index, count, w: '<i8i8i8'): leased and
--          per-decision limiters share the quota.
-- ARGV[1]  cost, w (window, microseconds), limit [, now_us], packed as for fixed_window.lua:
--          24 bytes, or 32 with a client's time (without it, the server's TIME). `cost` is the
--          weight of the request that waits for this answer (0: a refresh).
-- ARGV[2]  want: the units asked for in all, the request's included, as 8 bytes ('<i8').
-- Returns  32 bytes ('<i8i8i8i8'): the units granted (0: refused, or none asked), the
--          window's count before, the window's end (microseconds since the epoch), and `now`.
--          The grant is at least `cost` when the request is admitted (`count + cost <= limit`),
--          and at most `want` and half of the units left in the window (rounded up).
local cost, window, limit, now
if #ARGV[1] == 32 then
  cost, window, limit, now = struct.unpack('<i8i8i8i8', ARGV[1])
else
  cost, window, limit = struct.unpack('<i8i8i8', ARGV[1])
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
-- The stored state is read as fixed_window.lua reads it (a state written under another window
-- length included: "Changing a quota" in docs/distributed.md).
local index, count, same, converted = math.floor(now / window), 0, false, false
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, c, w
  if #stored == 24 then
    i, c, w = struct.unpack('<i8i8i8', stored)
  end
  if not w or w <= 0 or w > 2251799813685248 or i < 0 or i * w >= 4503599627370496
    or c < 0 or c >= 9007199254740992 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a fixed window state')
  end
  if w == window then
    if i >= index then
      index, count, same = i, c, true
    end
  elseif (i + 1) * w > index * window then
    index, count, converted = math.max(index, math.floor(i * w / window)), c, true
  end
end
local finish = (index + 1) * window
local until_end = finish - now
if count + cost > limit then
  if converted and cost > 0 then
    redis.call('PSETEX', KEYS[1], string.format('%d', math.ceil(until_end / 1000)),
      struct.pack('<i8i8i8', index, count, window))
  end
  return struct.pack('<i8i8i8i8', 0, count, finish, now)
end
-- The request's units, and up to half of what is left for the lease.
local granted = math.max(cost, math.min(want, math.ceil((limit - count) / 2)))
if granted == 0 then
  return struct.pack('<i8i8i8i8', 0, count, finish, now)
end
local value = struct.pack('<i8i8i8', index, count + granted, window)
if same then
  -- The key expires when its window ends, set by the window's first write (fixed_window.lua).
  redis.call('SET', KEYS[1], value, 'KEEPTTL')
else
  -- The TTL as text made with '%d' (cheaper than a number argument: gcra.lua).
  redis.call('PSETEX', KEYS[1], string.format('%d', math.ceil(until_end / 1000)), value)
end
return struct.pack('<i8i8i8i8', granted, count, finish, now)
