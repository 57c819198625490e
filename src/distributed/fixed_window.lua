-- tollgate: fixed window counter, windows aligned to multiples of w since the UNIX epoch.
-- KEYS[1]  "index count": the window the count belongs to, and the units admitted in it.
-- ARGV     now_us (-1: the server's TIME), cost, peek (1: decide without writing),
--          w (window, microseconds), limit.
-- Returns  {admitted (1 or 0), count before the request, microseconds to the window's end}.
local now = tonumber(ARGV[1])
if now < 0 then
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
local cost, window = tonumber(ARGV[2]), tonumber(ARGV[4])
local index, count = math.floor(now / window), 0
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, c = string.match(stored, '^(%d+) (%d+)$')
  i, c = tonumber(i), tonumber(c)
  if not c then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a fixed window state')
  end
  -- A later window starts empty; a clock that went back keeps deciding in the stored one.
  if i >= index then
    index, count = i, c
  end
end
local until_end = (index + 1) * window - now
if count + cost > tonumber(ARGV[5]) then
  return {0, count, until_end}
end
if cost > 0 and ARGV[3] == '0' then
  -- The key expires when its window ends: a fresh key then decides the same.
  redis.call('PSETEX', KEYS[1], math.ceil(until_end / 1000), string.format('%d %d', index, count + cost))
end
return {1, count, until_end}
