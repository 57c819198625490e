-- tollgate: sliding window log, exact. A request of weight n passes iff the units admitted in
-- (now - w, now] plus n are at most limit. Weight 0 always passes and is not recorded.
-- KEYS[1]  the log, one string: one 12-byte record per admission time, oldest first, times
--          strictly increasing, then a 16-byte trailer. A record (struct '<i8I4') holds its time
--          (microseconds) and the units admitted up to and including it, counted modulo 2^32
--          from an arbitrary start; the trailer (struct '<I4I4i8') holds that count before the
--          first record, the count after the newest, and the newest record's time. The units of
--          records j+1..i are then (count_i - count_j) mod 2^32, so the units in the window take
--          two reads whatever the log's length. An admission overwrites the string's end in
--          place (`SETRANGE`: a new record and trailer, 28 bytes, or the newest record's count
--          and the trailer, 20) and moves the TTL (`PEXPIRE`), cheaper than writing the whole
--          string again. Records that left the window stay at the front (the search for the
--          window's first record gallops past them) until an admission that adds a record finds
--          them at least a sixteenth of those still in the window: that one rewrites the log
--          without them (`PSETEX`). A log then holds at most `limit + limit / 16` records. On
--          a client's time the log may end with one record of no unit: the latest time a
--          refusal was decided at, after the newest unit.
-- KEYS[2]  the same client key's log in the other encoding: a list of admission times, one per
--          unit (sliding_log_list.lua), written while the limit was above 256. Read only when
--          KEYS[1] does not exist: its units in the window count here (the quota crossed 256),
--          and an admission moves them into KEYS[1] and deletes it.
-- ARGV[1]  cost, w (window, microseconds), limit [, now_us], packed as prologue.lua reads it.
-- ARGV[2]  present: a peek, decide without writing.
-- Returns  one integer where it fits below 2^53 (an integer reply costs the server about
--          0.2 us less than packing four): an admission of weight > 0 is
--          `(at - now) * (limit + 1) + remaining` (>= 0; reset_after_us is `w + at - now`), a
--          refusal whose reset_after_us is at most w is
--          `-1 - ((retry_after_us * (w + 1) + reset_after_us) * (limit + 1) + remaining)`.
--          Otherwise (weight 0, a refusal past the clock, numbers too large, the other
--          encoding's key) 32 bytes (struct '<i8i8i8i8'): admitted (1 or 0), remaining,
--          retry_after_us, reset_after_us.
local w, limit = first, second
-- A weight above the limit, which the client refuses as too large (the prologue refuses one
-- below 0): refused before the state is read, so that another program's bad call gets an error,
-- never a Lua error or a state no decision makes.
if cost > limit then
  return redis.error_reply('TOLLGATE_COST the weight must be from 0 to the limit')
end
local key = KEYS[1]
local read = struct.unpack
local wrap = 4294967296
-- Record i starts at byte 12 * i - 11 (its time); its count is at byte 12 * i - 3.
local log = redis.call('GET', key)
if not log and KEYS[2] then
  local other = KEYS[2]
  -- A wrong type here names this key (TOLLGATE_OTHER_WRONGTYPE), not KEYS[1], which does not
  -- exist; any other error (an ACL's NOPERM...) goes back as it came.
  local length = redis.pcall('LLEN', other)
  if type(length) == 'table' then
    if not string.find(length.err, '^WRONGTYPE') then
      return length
    end
    return redis.error_reply('TOLLGATE_OTHER_WRONGTYPE the other encoding\'s key does not hold a list')
  end
  if length > 0 then
    -- The list's rule (sliding_log_list.lua), on its entries: decided at the newest entry if
    -- the clock is behind it; entries at or before `at - w` have left the window.
    local function entry(at)
      local t = tonumber(redis.call('LINDEX', other, string.format('%d', at)))
      if not t or t < 0 or t >= 9007199254740992 or t % 1 ~= 0 then
        return error({err = 'TOLLGATE_OTHER_STATE the other encoding\'s key does not hold a sliding log'})
      end
      return t
    end
    -- A list written on a client's time may end with a marker, not a unit: the latest time a
    -- refusal was decided at (sliding_log_list.lua), its time with a '.0'.
    local last = entry(-1)
    if string.find(redis.call('LINDEX', other, '-1'), '.', 1, true) then
      length = length - 1
    end
    local at = math.max(last, now)
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
    if inside > 0 then
      local reset = entry(length - 1) + w - now
      local remaining = math.max(limit - inside, 0)
      if cost == 0 then
        return struct.pack('<i8i8i8i8', 1, remaining, 0, reset)
      end
      if inside + cost > limit then
        local blocking = entry(expired + inside + cost - limit - 1)
        return struct.pack('<i8i8i8i8', 0, remaining, math.max(blocking + w - now, 0), reset)
      end
      if not ARGV[2] then
        -- At most limit - 1 entries in the window: one record per distinct time, counted from
        -- 0, then the request's units at `at`, written as a new log; the list goes.
        local records, count, time = {}, 0, nil
        for _, text in ipairs(redis.call('LRANGE', other, string.format('%d', expired), '-1')) do
          local t = tonumber(text)
          if not t or t < 0 or t >= 9007199254740992 or t % 1 ~= 0 then
            return redis.error_reply('TOLLGATE_OTHER_STATE the other encoding\'s key does not hold a sliding log')
          end
          -- The marker of the latest time holds no unit (`at` is at or after it).
          if not string.find(text, '.', 1, true) then
            if t ~= time then
              if time then
                records[#records + 1] = struct.pack('<i8I4', time, count)
              end
              time = t
            end
            count = count + 1
          end
        end
        if time ~= at then
          records[#records + 1] = struct.pack('<i8I4', time, count)
          time = at
        end
        count = count + cost
        records[#records + 1] = struct.pack('<i8I4I4I4i8', at, count, 0, count, at)
        redis.call('PSETEX', key, string.format('%d', math.ceil((at + w - now) / 1000)), table.concat(records))
        redis.call('DEL', other)
      end
      return struct.pack('<i8i8i8i8', 1, limit - inside - cost, 0, at + w - now)
    elseif not ARGV[2] then
      -- Nothing of the list counts any more: it goes, so that no instance still on the list's
      -- quota reads it instead of this log.
      redis.call('DEL', other)
    end
  end
end
-- `at`: a clock that went back decides at the newest record's time, as if it had stood still
-- there: it never admits more, and the records stay in time order.
local at, records, expired, base, total, newest, oldest, first = now, 0, 0, 0, 0, nil, nil, nil
local inside_time, inside_count
-- `idle_tail`: the newest record holds no unit. A log decided on a client's time keeps there the
-- latest time a refusal was decided at, so that a request stamped before it (a client clock
-- that stepped back) is decided at that time, as on a clock that never goes back; `unit_time`
-- is then the newest record that holds units. Only a client's time writes one: the server's
-- clock is read, not sent, so its decisions take the newest record as the newest unit.
local idle_tail, unit_time = false, nil
-- `before`: the count before the first record (the trailer's), `base` the count before the
-- first record still in the window.
local before = 0
if log then
  records = (#log - 16) / 12
  if records < 1 or records % 1 ~= 0 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a sliding log')
  end
  oldest, first = read('<i8I4', log)
  before, total, newest = read('<I4I4i8', log, #log - 15)
  base = before
  -- 2^53: a time past it is no state of ours (foreign text decodes far above it).
  if oldest < 0 or newest >= 9007199254740992 or oldest > newest then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a sliding log')
  end
  if newest > now then
    at = newest
  end
  unit_time = newest
  if client then
    -- Record `records - 1` (the count before the newest record, else the trailer's `before`).
    local time, count = nil, before
    if records > 1 then
      time, count = read('<i8I4', log, #log - 39)
    end
    if count == total then
      idle_tail, unit_time = true, time
    end
  end
  -- Records at or before `at - w` have left the window: a prefix, usually short, found by
  -- galloping from the oldest record then bisecting. Each read takes a record's time and count,
  -- so that the first record in the window (`inside_time`, `inside_count`: record
  -- `expired + 1`, where the refusal's search below starts) and `base` need no read of their
  -- own.
  local cutoff = at - w
  inside_time, inside_count = oldest, first
  if newest <= cutoff then
    expired, base = records, total
  elseif oldest <= cutoff then
    -- Record `low` has left the window (`base`: its count), record `high` has not.
    local low, high, step = 1, records, 1
    base, inside_time, inside_count = first, newest, total
    while low + step < high do
      local time, count = read('<i8I4', log, 12 * (low + step) - 11)
      if time > cutoff then
        high, inside_time, inside_count = low + step, time, count
        break
      end
      low, base, step = low + step, count, step * 2
    end
    while high - low > 1 do
      local middle = math.floor((low + high) / 2)
      local time, count = read('<i8I4', log, 12 * middle - 11)
      if time <= cutoff then
        low, base = middle, count
      else
        high, inside_time, inside_count = middle, time, count
      end
    end
    expired = low
  end
end
local inside = (total - base) % wrap
local reset = 0
if inside > 0 then
  -- A log whose only record holds no unit has none in the window (`inside` is 0): `unit_time`
  -- is set wherever units are.
  reset = (unit_time or newest) + w - now
end
local remaining = limit - inside
if remaining < 0 then
  remaining = 0
end
if cost == 0 then
  return struct.pack('<i8i8i8i8', 1, remaining, 0, reset)
end
if cost <= remaining then
  if not ARGV[2] then
    -- Add the request's units at `at`: to the newest record if it is at that time already (then
    -- it is in the window: `at - w < at`), else as a new record. Both overwrite the string's end
    -- in place with one SETRANGE (the newest record's count and the trailer, or a record where
    -- the trailer was and a new trailer after it); the trailer keeps `before`, as the first
    -- record stays. A new record when the records that left the window are at least a
    -- sixteenth of those in it (at most `limit - 1`: `inside + cost <= limit`) rewrites the log
    -- from the first record still in the window instead: for a limit up to 17 at the first
    -- admission after a record left, so that refusals do not search past old records (on the
    -- benchmark's quota, once its records leave the window, 1 us less per call than keeping up
    -- to `limit` of them: docs/distributed.md); for larger limits one rewrite, a copy of at
    -- most `limit - 1` records, per `(limit - 1) / 16` records that left.
    local count = (total + cost) % wrap
    -- Offsets and the TTL go as text made with '%d' (cheaper than number arguments: gcra.lua).
    local ttl = string.format('%d', math.ceil((at + w - now) / 1000))
    if not log then
      redis.call('PSETEX', key, ttl, struct.pack('<i8I4I4I4i8', at, count, 0, count, at))
    elseif newest ~= at and expired > 0 and 16 * expired >= records - expired then
      -- Without a record of no unit at the end: the request's own record comes after it.
      local last = -17
      if idle_tail then
        last = -29
      end
      redis.call('PSETEX', key, ttl, string.sub(log, 12 * expired + 1, last)
        .. struct.pack('<i8I4I4I4i8', at, count, base, count, at))
    else
      if newest == at then
        redis.call('SETRANGE', key, string.format('%d', #log - 20), struct.pack('<I4I4I4i8', count, before, count, at))
      else
        -- A record of no unit at the end (the latest refusal's time, before `at`) is written
        -- over: at most one such record, always the newest.
        local from = #log - 16
        if idle_tail then
          from = #log - 28
        end
        redis.call('SETRANGE', key, string.format('%d', from), struct.pack('<i8I4I4I4i8', at, count, before, count, at))
      end
      -- The key expires when its newest record leaves the window: it is then empty, as a fresh
      -- key.
      redis.call('PEXPIRE', key, ttl)
    end
  end
  -- `at - now` and the remaining units in one integer (the header's "Returns"): exact below
  -- 2^53, which a product that overflows cannot fall back under.
  local reply = (at - now) * (limit + 1) + remaining - cost
  if reply < 9007199254740992 then
    return reply
  end
  return struct.pack('<i8i8i8i8', 1, remaining - cost, 0, at + w - now)
end
-- Refused on a client's time later than every record: the log keeps that time as a record of no
-- unit at its end (over the one there, if any), with the same counts, so that later decisions
-- are made at or after it. The key's TTL stays (when its newest unit leaves the window).
if client and log and now > newest and not ARGV[2] then
  local from = #log - 16
  if idle_tail then
    from = #log - 28
  end
  redis.call('SETRANGE', key, string.format('%d', from), struct.pack('<i8I4I4I4i8', now, total, before, total, now))
end
-- Refused: the request passes once the oldest (inside + cost - limit) units in the window have
-- left, that is when the first record whose count from `base` reaches that number leaves. It is
-- usually the oldest in the window (read already) or close to it: gallop, then bisect.
-- Record `low` does not reach it (`expired`: none of the window's units), record `high` does
-- (the newest: all of them), and `leaves` is when record `high` leaves the window.
local blocking = inside + cost - limit
local low, high, step, leaves = expired, records, 1, newest
if expired < records then
  -- Record `expired + 1`, read already.
  if (inside_count - base) % wrap >= blocking then
    high, leaves = expired + 1, inside_time
  else
    low, step = expired + 1, 2
  end
end
while low + step < high do
  local time, count = read('<i8I4', log, 12 * (low + step) - 11)
  if (count - base) % wrap >= blocking then
    high, leaves = low + step, time
    break
  end
  low, step = low + step, step * 2
end
while high - low > 1 do
  local middle = math.floor((low + high) / 2)
  local time, count = read('<i8I4', log, 12 * middle - 11)
  if (count - base) % wrap >= blocking then
    high, leaves = middle, time
  else
    low = middle
  end
end
leaves = leaves + w - now
if leaves < 0 then
  leaves = 0
end
-- The three numbers in one integer (the header's "Returns") when decided at `now` (else
-- `reset > w`): `reset` and `remaining` are then digits below `w + 1` and `limit + 1`.
if reset <= w then
  local reply = (leaves * (w + 1) + reset) * (limit + 1) + remaining
  if reply < 9007199254740992 then
    return -1 - reply
  end
end
return struct.pack('<i8i8i8i8', 0, remaining, leaves, reset)
