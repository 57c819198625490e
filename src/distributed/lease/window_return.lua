-- tollgate: gives back window units a process leased (fixed_window_lease.lua, or
-- sliding_window.lua's lease) and never spent: subtracted from the window's count while the key
-- still holds that window.
-- KEYS[1]  the state of fixed_window.lua (index, count, w: '<i8i8i8'), or of sliding_window.lua
--          (index, previous, count, w: '<i8i8i8i8').
-- ARGV[1]  units, w (window, microseconds), limit [, now_us], packed as for fixed_window.lua.
-- ARGV[2]  the end of the window the units were counted in, microseconds, as 8 bytes ('<i8').
-- Returns  the units given back: 0 when the key holds another window (or another window
--          length, or nothing), or the window has ended.
local units, window, limit, now
if #ARGV[1] == 32 then
  units, window, limit, now = struct.unpack('<i8i8i8i8', ARGV[1])
else
  units, window, limit = struct.unpack('<i8i8i8', ARGV[1])
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
local finish = ARGV[2] and #ARGV[2] == 8 and struct.unpack('<i8', ARGV[2])
if units < 0 or not finish then
  return redis.error_reply('TOLLGATE_COST the units must be at least 0, and the end 8 bytes')
end
local stored = redis.call('GET', KEYS[1])
if not stored or now >= finish then
  return 0
end
local i, p, c, w
if #stored == 24 then
  i, c, w = struct.unpack('<i8i8i8', stored)
elseif #stored == 32 then
  i, p, c, w = struct.unpack('<i8i8i8i8', stored)
end
if not w or w <= 0 or w > 2251799813685248 or i < 0 or i * w >= 4503599627370496
  or c < 0 or c >= 9007199254740992 or (p and (p < 0 or p >= 9007199254740992)) then
  return redis.error_reply('TOLLGATE_STATE the key does not hold a window state')
end
if w ~= window or (i + 1) * w ~= finish then
  return 0
end
local back = math.min(units, c)
if back == 0 then
  return 0
end
if p then
  -- The sliding window's previous count still weighs: the key stays.
  redis.call('SET', KEYS[1], struct.pack('<i8i8i8i8', i, p, c - back, w), 'KEEPTTL')
elseif c == back then
  -- An empty window is the same as no key.
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], struct.pack('<i8i8i8', i, c - back, w), 'KEEPTTL')
end
return back
