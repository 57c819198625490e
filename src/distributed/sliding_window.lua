-- tollgate: sliding window counter, in exact integers. A request of weight n at e microseconds
-- into window `index` passes iff  previous * (w - e) + (current + n) * w <= limit * w.
-- KEYS[1]  "index previous current": the window, the previous window's count, its own count.
-- ARGV     now_us (-1: the server's TIME), cost, peek (1: decide without writing),
--          w (window, microseconds), limit.
-- Returns  {admitted (1 or 0), previous, current (before the request), start of the window
--          minus now (microseconds; positive only if the clock went back)}.
local now = tonumber(ARGV[1])
if now < 0 then
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
local cost, w, limit = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local index = math.floor(now / w)
local previous, current = 0, 0
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, p, c = string.match(stored, '^(%d+) (%d+) (%d+)$')
  i, p, c = tonumber(i), tonumber(p), tonumber(c)
  if not c or p > limit or c > limit then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a sliding window state')
  end
  if i >= index then
    -- The same window, or the clock went back into an earlier one: stay in the stored window.
    index, previous, current = i, p, c
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
  return {0, previous, current, start - now}
end
if cost > 0 and ARGV[3] == '0' then
  -- The key expires when both counts have left the sliding window.
  redis.call('PSETEX', KEYS[1], math.ceil((start + 2 * w - now) / 1000),
    string.format('%d %d %d', index, previous, current + cost))
end
return {1, previous, current, start - now}
