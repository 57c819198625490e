-- tollgate: fixed window counter, windows aligned to multiples of w since the UNIX epoch.
-- KEYS[1]  the window the count belongs to, the units admitted in it and the window's length,
--          as 24 bytes (struct '<i8i8i8': index, count, w in microseconds). The length makes a
--          state written under another window (the quota changed) readable: its index is in
--          that window's units.
-- ARGV[1]  cost, w (window, microseconds), limit [, now_us], packed as prologue.lua reads it.
-- ARGV[2]  present: a peek, decide without writing.
-- Returns  24 bytes (struct '<i8i8i8'): admitted (1 or 0), the count before the request,
--          microseconds to the window's end.
local window, limit = first, second
local index, count, same, converted = math.floor(now / window), 0, false, false
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, c, w
  if #stored == 24 then
    i, c, w = struct.unpack('<i8i8i8', stored)
  end
  -- A number past 2^53 is no state of ours (foreign text decodes far above it); a window is at
  -- most 2^51 microseconds (checked at construction), and it starts before 2^52 microseconds
  -- (times are refused past it), so every sum below stays an exact integer.
  if not w or w <= 0 or w > 2251799813685248 or i < 0 or i * w >= 4503599627370496
    or c < 0 or c >= 9007199254740992 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a fixed window state')
  end
  if w == window then
    -- A later window starts empty; a clock that went back keeps deciding in the stored one.
    if i >= index then
      index, count, same = i, c, true
    end
  elseif (i + 1) * w > index * window then
    -- Written under another window length (the quota changed): its units were admitted at
    -- unknown times in [i * w, (i + 1) * w), so while that span reaches into the current window
    -- they all count in it: none that may be in the window is lost. A span that starts after the
    -- current window (a clock that went back) is decided in the window of this length that
    -- holds its start, as a stored window ahead of the clock is. The first decision that is not
    -- a peek writes the state again under this length, admitted or refused, so that the key
    -- lives as long as this window (an old, shorter window's key would expire while its units
    -- still count).
    index, count, converted = math.max(index, math.floor(i * w / window)), c, true
  end
end
local until_end = (index + 1) * window - now
if count + cost > limit then
  if converted and cost > 0 and not ARGV[2] then
    redis.call('PSETEX', KEYS[1], string.format('%d', math.ceil(until_end / 1000)),
      struct.pack('<i8i8i8', index, count, window))
  end
  return struct.pack('<i8i8i8', 0, count, until_end)
end
if cost > 0 and not ARGV[2] then
  -- The key expires when its window ends: a fresh key then decides the same. A key that holds
  -- this window already expires then (set when its first unit was counted): keep that TTL, which
  -- spares setting it and formatting it.
  local value = struct.pack('<i8i8i8', index, count + cost, window)
  if same then
    redis.call('SET', KEYS[1], value, 'KEEPTTL')
  else
    -- The TTL as text made with '%d' (cheaper than a number argument: gcra.lua).
    redis.call('PSETEX', KEYS[1], string.format('%d', math.ceil(until_end / 1000)), value)
  end
end
return struct.pack('<i8i8i8', 1, count, until_end)
