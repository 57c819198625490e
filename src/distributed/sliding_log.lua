-- tollgate: sliding window log, exact. A request of weight n passes iff the units admitted in
-- (now - w, now] plus n are at most limit. Weight 0 always passes and is not recorded.
-- KEYS[1]  a list of admission times in microseconds, oldest first, one entry per admitted unit
--          (so at most `limit` entries once the expired ones are dropped).
-- ARGV     now_us (-1: the server's TIME), cost, peek (1: decide without writing),
--          w (window, microseconds), limit.
-- Returns  {admitted (1 or 0), remaining, retry_after_us, reset_after_us}.
local now = tonumber(ARGV[1])
if now < 0 then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end
local key = KEYS[1]
local cost, w, limit = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local function entry(at)
  local t = tonumber(redis.call('LINDEX', key, at))
  if not t then
    return error({err = 'TOLLGATE_STATE the key does not hold a sliding log'})
  end
  return t
end
local length = redis.call('LLEN', key)
-- A clock that went back decides at the newest entry's time, as if it had stood still there:
-- it never admits more, and the entries stay in time order.
local at = now
if length > 0 then
  at = math.max(entry(-1), now)
end
-- Entries at or before `at - w` have left the window; find how many, by bisection.
local cutoff = at - w
local expired = 0
if length > 0 and entry(0) <= cutoff then
  local low, high = 1, length
  while low < high do
    local middle = math.floor((low + high) / 2)
    if entry(middle) <= cutoff then
      low = middle + 1
    else
      high = middle
    end
  end
  expired = low
end
local inside = length - expired
local reset = 0
if inside > 0 then
  reset = entry(-1) + w - now
end
if cost == 0 then
  return {1, math.max(limit - inside, 0), 0, reset}
end
if inside + cost <= limit then
  if ARGV[3] == '0' then
    if expired > 0 then
      redis.call('LTRIM', key, expired, -1)
    end
    local batch = {}
    for i = 1, math.min(cost, 1000) do
      batch[i] = at
    end
    local left = cost
    while left > 0 do
      if left < #batch then
        batch = {unpack(batch, 1, left)}
      end
      redis.call('RPUSH', key, unpack(batch))
      left = left - #batch
    end
    -- The key expires when its newest entry leaves the window: it is then empty, as a fresh key.
    redis.call('PEXPIRE', key, math.ceil((at + w - now) / 1000))
  end
  return {1, limit - inside - cost, 0, at + w - now}
end
-- Refused: the request passes once the oldest (inside + cost - limit) entries have left.
local blocking = entry(expired + inside + cost - limit - 1)
return {0, math.max(limit - inside, 0), math.max(blocking + w - now, 0), reset}
