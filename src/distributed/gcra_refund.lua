-- tollgate: GCRA refund, for the token bucket and the leaky bucket shaper: gives back `cost`
-- units admitted earlier and never used (a shaped request abandoned before its slot), as the
-- local limiters' `refund_n` (with ARGV[2], their `refund_slot`): the TAT moves back by
-- `cost * T`, never behind now. The state is read by gcra_state.lua, before these lines.
-- ARGV[1]  cost, T (microseconds per unit), tolerance (burst * T) [, now_us], packed as
--          prologue.lua reads it (as for gcra.lua; for T not whole µs, `cost * T` in whole µs
--          and its remainder, as gcra.lua takes them).
-- ARGV[2]  optional: the end of the slot given back, microseconds, as 8 bytes ('<i8'), the TAT
--          its admission stored (gcra.lua's 'slot' reply). The TAT moves back only if it still
--          equals it: a slot that is no longer the end of the queue (another request was given a
--          slot after it) passes unused, so that the requests behind keep their spacing. For T
--          not whole µs, 16 bytes ('<i8i8'): whole µs and the nanoseconds after them, the TAT
--          rounded up to whole nanoseconds (as the client rounds the slot's end).
-- Returns  1 when the TAT moved back, 0 when there was nothing to give back (no key, a TAT at
--          or before now, a weight of 0, or a slot that no longer ends the queue).
-- Every value is an integer below 2^53 (cost <= burst, checked by the client, and burst * T
-- below 2^51), which a Lua number (a double) holds exactly; see docs/distributed.md.
-- (The tolerance, `second`, is not needed: a refund only shortens the queue.)
if not stored then
  return 0
end
if fine then
  part = part or 0
  if ARGV[2] then
    -- The TAT, rounded up to whole ns, is `stored` µs and `ceil(part * 1000 / d)` ns, which
    -- is 1000 (the next µs) when `part * 1000 > 999 * d`. Compared without dividing.
    local whole, nanos = struct.unpack('<i8i8', ARGV[2])
    local same
    if nanos == 0 then
      same = (stored == whole and part == 0) or (stored == whole - 1 and part * 1000 > 999 * d)
    else
      same = stored == whole and (nanos - 1) * d < part * 1000 and part * 1000 <= nanos * d
    end
    if not same then
      return 0
    end
  end
  if stored < now or (stored == now and part == 0) then
    return 0
  end
  local need = first
  if need == 0 and need_rem == 0 then
    return 0
  end
  local back, back_rem = stored - need, part - need_rem
  if back_rem < 0 then
    back, back_rem = back - 1, back_rem + d
  end
  if back < now then
    back, back_rem = now, 0
  end
  if back == now and back_rem == 0 then
    -- A TAT at now is a full bucket: the same as no key.
    redis.call('DEL', key)
  else
    -- The key expires when the new TAT is reached, as gcra.lua keeps it.
    local ttl = back - now
    if back_rem > 0 then
      ttl = ttl + 1
    end
    redis.call('PSETEX', key, string.format('%d', math.ceil(ttl / 1000)), struct.pack('<i8i8i8', back, back_rem, d))
  end
  return 1
end
local interval = first
local tat = stored
if ARGV[2] and tat ~= struct.unpack('<i8', ARGV[2]) then
  return 0
end
if tat <= now then
  return 0
end
local back = tat - cost * interval
if back < now then
  back = now
end
if back == tat then
  return 0
end
if back == now then
  -- A TAT at now is a full bucket: the same as no key.
  redis.call('DEL', key)
else
  -- The key expires when the new TAT is reached, as gcra.lua keeps it.
  -- The TTL as text made with '%d' (cheaper than a number argument: gcra.lua).
  redis.call('PSETEX', key, string.format('%d', math.ceil((back - now) / 1000)), struct.pack('<i8', back))
end
return 1
