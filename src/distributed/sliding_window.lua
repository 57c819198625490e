-- tollgate: sliding window counter, in exact integers. A request of weight n at e microseconds
-- into window `index` passes iff  previous * (w - e) + (current + n) * w <= limit * w.
-- A limit is at most 2^51 and a window at most 2^51 microseconds (checked by the client): where
-- `limit * w` and the counts times `w` stay within 2^51, the products are doubles, exact below
-- 2^53; past that (a large limit over a long window: `4294967295/d` is 3.7e20 microsecond-units)
-- each product is two exact limbs (`product`).
-- KEYS[1]  the window, the previous window's count, its own count and the window's length, as
--          32 bytes (struct '<i8i8i8i8': index, previous, current, w in microseconds). The
--          length makes a state written under another window (the quota changed) readable: its
--          index is in that window's units.
-- ARGV[1]  cost, w (window, microseconds), limit [, now_us], packed as prologue.lua reads it.
-- ARGV[2]  absent: a check. 'lease' (a leased limiter, `src/distributed/lease/`): a check that
--          also grants units, counted in this window, up to ARGV[3] (8 bytes, '<i8', at least
--          the cost) and at most half of what the window has free, rounded up. Anything else:
--          a peek, decide without writing.
-- Returns  32 bytes (struct '<i8i8i8i8'): admitted (1 or 0; with 'lease', the units granted,
--          the request's included: 0 for a refusal), previous, current (before the request),
--          start of the window minus now (microseconds; positive only if the clock went back);
--          with 'lease', 40 bytes: those, then now.
local w, limit = first, second
local lease = ARGV[2] == 'lease'
local peek = ARGV[2] and not lease
local want = cost
if lease then
  want = ARGV[3] and #ARGV[3] == 8 and struct.unpack('<i8', ARGV[3])
  if not want or want < cost then
    return redis.error_reply('TOLLGATE_LEASE the units asked for must be at least the weight')
  end
end
local index = math.floor(now / w)
local previous, current, same, converted = 0, 0, false, false
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, p, c, sw
  if #stored == 32 then
    i, p, c, sw = struct.unpack('<i8i8i8i8', stored)
  end
  -- A number past 2^53 is no state of ours (foreign text decodes far above it); a window is at
  -- most 2^51 microseconds (checked at construction) and starts before 2^52 microseconds (times
  -- are refused past it). A count may exceed this limit (the quota was lowered since it was
  -- written: it then refuses, as a full window does) but not 2^52: a limit is at most 2^51, and
  -- a state carried across a change of window holds at most two such counts in one.
  if not sw or sw <= 0 or sw > 2251799813685248 or i < 0 or i * sw >= 4503599627370496 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a sliding window state')
  end
  if p < 0 or p > 4503599627370496 or c < 0 or c > 4503599627370496 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a sliding window state')
  end
  if sw == w then
    if i >= index then
      -- The same window, or the clock went back into an earlier one: stay in the stored window.
      index, previous, current, same = i, p, c, true
    elseif i == index - 1 then
      previous = c
    end
  else
    -- Written under another window length (the quota changed). Its counts were admitted at
    -- unknown times, `c` in [i * sw, (i + 1) * sw) and `p` in the span before: each counts
    -- whole in the current window if its span reaches into it, else in the previous window if
    -- it reaches into that one, else not at all (none that may weigh now is lost). A stored
    -- window that starts after the current one (a clock that went back) is decided in the
    -- window of this length that holds its start. The first decision that is not a peek writes
    -- the state again under this length, admitted or refused, so that the key lives as long as
    -- these windows.
    local begins = i * sw
    if begins >= (index + 1) * w then
      index = math.floor(begins / w)
    end
    local from = index * w
    for _, span in ipairs({{begins + sw, c}, {begins, p}}) do
      if span[1] > from then
        current = current + span[2]
      elseif span[1] > from - w then
        previous = previous + span[2]
      end
    end
    -- Two counts carried into one are at most 2^53; past 2^52 (twice any limit a script takes)
    -- they are held at 2^52, which `product` multiplies exactly.
    previous = math.min(previous, 4503599627370496)
    current = math.min(current, 4503599627370496)
    converted = previous + current > 0
  end
end
local start = index * w
local elapsed = now - start
if elapsed < 0 then
  elapsed = 0
end
-- `a * b` for integers 0 <= a < 2^53 and 0 <= b < 2^52, exactly, as `high * 2^52 + low` with
-- `0 <= low < 2^52`: 26-bit halves, whose products are below 2^53, and the carries between them.
local function product(a, b)
  local ah, al = math.floor(a / 67108864), a % 67108864
  local bh, bl = math.floor(b / 67108864), b % 67108864
  local cross, other = ah * bl, al * bh
  local low = al * bl + (cross % 67108864) * 67108864
  local high = ah * bh + math.floor(cross / 67108864) + math.floor(low / 4503599627370496)
  low = low % 4503599627370496 + (other % 67108864) * 67108864
  high = high + math.floor(other / 67108864) + math.floor(low / 4503599627370496)
  return high, low % 4503599627370496
end
-- Whether `n` more units pass the limit (`n` at most the limit).
local function refuses(n)
  if limit * w <= 2251799813685248 and previous * w <= 2251799813685248 and current * w <= 2251799813685248 then
    -- Each product at most 2^51 (`n <= limit`): the sum is below 2^53.
    return previous * (w - elapsed) + (current + n) * w > limit * w
  end
  local ph, pl = product(previous, w - elapsed)
  local ch, cl = product(current + n, w)
  local lh, ll = product(limit, w)
  local sl = pl + cl
  local sh = ph + ch + math.floor(sl / 4503599627370496)
  sl = sl % 4503599627370496
  return sh > lh or (sh == lh and sl > ll)
end
if cost > 0 and refuses(cost) then
  -- A refusal on a client's time in a later window than the stored one stores the state moved
  -- to this window (the same counts), once per window: a request stamped earlier (a client clock
  -- that stepped back) is then decided in this window, at its start, as on a clock that never
  -- goes back, and not in the stored one (docs/distributed.md, "Time"). The server's clock is
  -- read, not sent: its refusals write nothing.
  if (converted or (client and stored and not same)) and not peek then
    redis.call('PSETEX', KEYS[1], string.format('%d', math.ceil((start + 2 * w - now) / 1000)),
      struct.pack('<i8i8i8i8', index, previous, current, w))
  end
  if lease then
    return struct.pack('<i8i8i8i8i8', 0, previous, current, start - now, now)
  end
  return struct.pack('<i8i8i8i8', 0, previous, current, start - now)
end
local granted = cost
if lease and want > cost then
  -- The most units that pass (`free`, at least `cost`, which passes): first as doubles (within
  -- a few units of exact), then moved to the exact bound by `refuses`, down or up.
  local free = math.floor(limit - current - previous * (w - elapsed) / w)
  free = math.max(cost, math.min(free, limit - current))
  while free > cost and refuses(free) do
    free = free - 1
  end
  while free < limit - current and not refuses(free + 1) do
    free = free + 1
  end
  granted = math.max(cost, math.min(want, math.ceil(free / 2)))
end
if granted > 0 and not peek then
  -- The key expires when both counts have left the sliding window, at the end of the window
  -- after this one. A key that holds this window already expires then (set when its first unit
  -- was counted): keep that TTL, which spares setting it and formatting it.
  local value = struct.pack('<i8i8i8i8', index, previous, current + granted, w)
  if same then
    redis.call('SET', KEYS[1], value, 'KEEPTTL')
  else
    -- The TTL as text made with '%d' (cheaper than a number argument: gcra.lua).
    redis.call('PSETEX', KEYS[1], string.format('%d', math.ceil((start + 2 * w - now) / 1000)), value)
  end
end
if lease then
  return struct.pack('<i8i8i8i8i8', granted, previous, current, start - now, now)
end
return struct.pack('<i8i8i8i8', 1, previous, current, start - now)
