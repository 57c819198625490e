-- tollgate: fixed window counter, windows aligned to multiples of w since the UNIX epoch.
-- KEYS[1]  the window the count belongs to and the units admitted in it, as 16 bytes
--          (struct '<i8i8': index, count).
-- ARGV[1]  cost, w (window, microseconds), limit [, now_us]:
--          little-endian 64-bit integers (struct '<i8' each), 24 bytes, or 32 with a client's
--          time (without it, the server's TIME): one packed argument costs the server less
--          than four numbers to parse.
-- ARGV[2]  present: a peek, decide without writing.
-- Returns  24 bytes (struct '<i8i8i8'): admitted (1 or 0), the count before the request,
--          microseconds to the window's end.
local cost, window, limit, now
if #ARGV[1] == 32 then
  cost, window, limit, now = struct.unpack('<i8i8i8i8', ARGV[1])
else
  cost, window, limit = struct.unpack('<i8i8i8', ARGV[1])
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
local index, count, same = math.floor(now / window), 0, false
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, c
  if #stored == 16 then
    i, c = struct.unpack('<i8i8', stored)
  end
  -- 2^53: a number past it is no state of ours (foreign text decodes far above it).
  if not c or i < 0 or i >= 9007199254740992 or c < 0 or c >= 9007199254740992 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a fixed window state')
  end
  -- A later window starts empty; a clock that went back keeps deciding in the stored one.
  if i >= index then
    index, count, same = i, c, true
  end
end
local until_end = (index + 1) * window - now
if count + cost > limit then
  return struct.pack('<i8i8i8', 0, count, until_end)
end
if cost > 0 and not ARGV[2] then
  -- The key expires when its window ends: a fresh key then decides the same. A key that holds
  -- this window already expires then (set when its first unit was counted): keep that TTL, which
  -- spares setting it and formatting it.
  local value = struct.pack('<i8i8', index, count + cost)
  if same then
    redis.call('SET', KEYS[1], value, 'KEEPTTL')
  else
    -- The TTL as text made with '%d' (cheaper than a number argument: gcra.lua).
    redis.call('PSETEX', KEYS[1], string.format('%d', math.ceil(until_end / 1000)), value)
  end
end
return struct.pack('<i8i8i8', 1, count, until_end)
