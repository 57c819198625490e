-- tollgate: sliding window log, exact, for limits above 256 (sliding_log.lua holds smaller
-- ones in one packed string, which is cheaper until a decision's copy of it costs more than this
-- script's O(log n) list calls). A request of weight n passes iff the units admitted in
-- (now - w, now] plus n are at most limit. Weight 0 always passes and is not recorded.
-- KEYS[1]  a list of admission times in microseconds, oldest first, one entry per admitted unit
--          (so at most `limit` entries once the expired ones are dropped). On a client's time it
--          may end with one marker, not a unit: the latest time a refusal was decided at, after
--          every unit, written with a '.0'.
-- KEYS[2]  the same client key's log in the other encoding: one packed string
--          (sliding_log.lua), written while the limit was at most 256. Read only when KEYS[1]
--          does not exist: its units in the window count here (the quota crossed 256), and an
--          admission moves them into KEYS[1] and deletes it.
-- ARGV[1]  cost, w (window, microseconds), limit [, now_us], packed as prologue.lua reads it.
-- ARGV[2]  present: a peek, decide without writing.
-- Returns  32 bytes (struct '<i8i8i8i8'): admitted (1 or 0), remaining, retry_after_us,
--          reset_after_us.
local w, limit = first, second
-- A weight above the limit, which the client refuses as too large (the prologue refuses one
-- below 0): refused before the state is read, so that another program's bad call gets an error,
-- never a Lua error or a state no decision makes.
if cost > limit then
  return redis.error_reply('TOLLGATE_COST the weight must be from 0 to the limit')
end
local key = KEYS[1]
-- Integer arguments go as text made with '%d' (cheaper than number arguments: gcra.lua).
local format = string.format
-- `moved`: the packed log's records in the window, oldest first, when it stands in for the list:
-- each {time, units, units before it}, read by `entry` as the list's one entry per unit would be
-- (found by bisection over the records: the units are never spread out one by one, so a log of
-- any size its encoding holds is read at the cost of its records).
local moved = nil
local length = 0
-- `latest`: the newest entry's time, or the marker's; `marker`: the list ends with one.
local latest, marker = nil, false
local function entry(at)
  if moved then
    if at < 0 then
      at = length + at
    end
    local low, high = 1, #moved
    while low < high do
      local middle = math.floor((low + high + 1) / 2)
      if moved[middle][3] <= at then
        low = middle
      else
        high = middle - 1
      end
    end
    return moved[low][1]
  end
  local t = tonumber(redis.call('LINDEX', key, format('%d', at)))
  -- Whole microseconds below 2^53, as the scripts write them (`inf`, `1e300`, `-5`, `1.5` are
  -- no state of ours).
  if not t or t < 0 or t >= 9007199254740992 or t % 1 ~= 0 then
    return error({err = 'TOLLGATE_STATE the key does not hold a sliding log'})
  end
  return t
end
length = redis.call('LLEN', key)
if length == 0 and KEYS[2] then
  -- A wrong type here names this key (TOLLGATE_OTHER_WRONGTYPE), not KEYS[1], which holds
  -- nothing; any other error (an ACL's NOPERM...) goes back as it came.
  local log = redis.pcall('GET', KEYS[2])
  if type(log) == 'table' and log.err then
    if not string.find(log.err, '^WRONGTYPE') then
      return log
    end
    return redis.error_reply('TOLLGATE_OTHER_WRONGTYPE the other encoding\'s key does not hold a string')
  end
  if log then
    local read, wrap = struct.unpack, 4294967296
    local records = (#log - 16) / 12
    -- A packed log holds at most 272 records (`limit + limit / 16`, limit <= 256): past 2^20,
    -- no state of ours, and every sum of units below (each under 2^32) stays below 2^53.
    if records < 1 or records % 1 ~= 0 or records > 1048576 then
      return redis.error_reply('TOLLGATE_OTHER_STATE the other encoding\'s key does not hold a sliding log')
    end
    local oldest = read('<i8', log)
    local before, _, newest = read('<I4I4i8', log, #log - 15)
    if oldest < 0 or newest >= 9007199254740992 or oldest > newest then
      return redis.error_reply('TOLLGATE_OTHER_STATE the other encoding\'s key does not hold a sliding log')
    end
    -- Its newest record may hold no unit (the latest time a refusal was decided at): decided at
    -- or after it all the same.
    latest = newest
    -- Only the units still in the window matter (the packed log's own window may have been
    -- shorter: then more than 256 of them).
    local cutoff = math.max(newest, now) - w
    local previous = before
    moved = {}
    for i = 1, records do
      local time, count = read('<i8I4', log, 12 * i - 11)
      local units = (count - previous) % wrap
      previous = count
      if time > cutoff and units > 0 then
        moved[#moved + 1] = {time, units, length}
        length = length + units
      end
    end
  end
end
-- A clock that went back decides at the newest entry's time (or the marker's), as if it had
-- stood still there: it admits only what a clock that never goes back admits, and the entries
-- stay in time order. The newest entry is read as text, to tell a marker from a unit.
if length > 0 and not moved then
  local text = redis.call('LINDEX', key, '-1')
  latest = tonumber(text)
  if not latest or latest < 0 or latest >= 9007199254740992 or latest % 1 ~= 0 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a sliding log')
  end
  if string.find(text, '.', 1, true) then
    marker, length = true, length - 1
  end
elseif length > 0 then
  latest = math.max(latest, entry(-1))
end
local at = now
if latest then
  at = math.max(latest, now)
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
  reset = entry(length - 1) + w - now
end
if cost == 0 then
  return struct.pack('<i8i8i8i8', 1, math.max(limit - inside, 0), 0, reset)
end
if inside + cost <= limit then
  if not ARGV[2] then
    if moved then
      -- The packed log's units in the window come first, one entry per unit, pushed in batches
      -- of at most 1000 (`unpack` is limited by Lua's C stack, about 8000 values); the string
      -- goes. They are fewer than `limit` (the request was admitted with them).
      local pending, count = {}, 0
      for _, record in ipairs(moved) do
        local units = math.min(record[2], record[2] + record[3] - expired)
        local text = format('%d', record[1])
        for _ = 1, units do
          count = count + 1
          pending[count] = text
          if count == 1000 then
            redis.call('RPUSH', key, unpack(pending, 1, count))
            count = 0
          end
        end
      end
      if count > 0 then
        redis.call('RPUSH', key, unpack(pending, 1, count))
      end
      redis.call('DEL', KEYS[2])
    else
      if marker then
        -- The request's units come at or after the marker's time: they take its place.
        redis.call('RPOP', key)
      end
      if expired > 0 then
        redis.call('LTRIM', key, format('%d', expired), '-1')
      end
    end
    local batch = {}
    local text = format('%d', at)
    for i = 1, math.min(cost, 1000) do
      batch[i] = text
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
    redis.call('PEXPIRE', key, format('%d', math.ceil((at + w - now) / 1000)))
  end
  return struct.pack('<i8i8i8i8', 1, limit - inside - cost, 0, at + w - now)
end
-- Refused on a client's time later than every entry: the list keeps that time as a marker at
-- its end (over the one there, if any), so that later decisions are made at or after it. The
-- key's TTL stays (when its newest unit leaves the window).
if client and not moved and latest and now > latest and not ARGV[2] then
  local text = format('%d.0', now)
  if marker then
    redis.call('LSET', key, '-1', text)
  else
    redis.call('RPUSH', key, text)
  end
end
-- Refused: the request passes once the oldest (inside + cost - limit) entries have left.
local blocking = entry(expired + inside + cost - limit - 1)
return struct.pack('<i8i8i8i8', 0, math.max(limit - inside, 0), math.max(blocking + w - now, 0),
  reset)
