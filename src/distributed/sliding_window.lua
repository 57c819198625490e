-- tollgate: sliding window counter, in exact integers. A request of weight n at e microseconds
-- into window `index` passes iff  previous * (w - e) + (current + n) * w <= limit * w.
-- KEYS[1]  the window, the previous window's count and its own count, as 24 bytes
--          (struct '<i8i8i8': index, previous, current).
-- ARGV[1]  cost, w (window, microseconds), limit [, now_us]:
--          little-endian 64-bit integers (struct '<i8' each), 24 bytes, or 32 with a client's
--          time (without it, the server's TIME): one packed argument costs the server less
--          than four numbers to parse.
-- ARGV[2]  present: a peek, decide without writing.
-- Returns  32 bytes (struct '<i8i8i8i8'): admitted (1 or 0), previous, current (before the
--          request), start of the window minus now (microseconds; positive only if the clock
--          went back).
local cost, w, limit, now
if #ARGV[1] == 32 then
  cost, w, limit, now = struct.unpack('<i8i8i8i8', ARGV[1])
else
  cost, w, limit = struct.unpack('<i8i8i8', ARGV[1])
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
local index = math.floor(now / w)
local previous, current, same = 0, 0, false
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, p, c
  if #stored == 24 then
    i, p, c = struct.unpack('<i8i8i8', stored)
  end
  -- 2^53: an index past it is no state of ours (foreign text decodes far above it). A count
  -- may exceed this limit (the quota was lowered since it was written: it then refuses, as a
  -- full window does) but not 2^51 / w, the most any valid quota with this window counts, which
  -- keeps every product below exactly representable integers.
  local most = math.floor(2251799813685248 / w)
  if not c or i < 0 or i >= 9007199254740992 or p < 0 or p > most or c < 0 or c > most then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a sliding window state')
  end
  if i >= index then
    -- The same window, or the clock went back into an earlier one: stay in the stored window.
    index, previous, current, same = i, p, c, true
  elseif i == index - 1 then
    previous = c
  end
end
local start = index * w
local elapsed = now - start
if elapsed < 0 then
  elapsed = 0
end
if cost > 0 and previous * (w - elapsed) + (current + cost) * w > limit * w then
  return struct.pack('<i8i8i8i8', 0, previous, current, start - now)
end
if cost > 0 and not ARGV[2] then
  -- The key expires when both counts have left the sliding window, at the end of the window
  -- after this one. A key that holds this window already expires then (set when its first unit
  -- was counted): keep that TTL, which spares setting it and formatting it.
  local value = struct.pack('<i8i8i8', index, previous, current + cost)
  if same then
    redis.call('SET', KEYS[1], value, 'KEEPTTL')
  else
    -- The TTL as text made with '%d' (cheaper than a number argument: gcra.lua).
    redis.call('PSETEX', KEYS[1], string.format('%d', math.ceil((start + 2 * w - now) / 1000)), value)
  end
end
return struct.pack('<i8i8i8i8', 1, previous, current, start - now)
