-- tollgate: GCRA, for the token bucket and the leaky bucket shaper (the state read by
-- gcra_state.lua, before these lines).
-- ARGV[1]  cost, T (microseconds per unit), tolerance (burst * T) [, now_us], packed as
--          prologue.lua reads it. For T not whole µs (`fine`): cost, `cost * T` and `burst * T`
--          in whole µs [, now_us], then their remainders in 1/d µs and d.
-- ARGV[2]  'peek': decide without writing. 'slot' (the shaper through the tower layer): count,
--          and answer an admission with the end of its slot as well.
-- ARGV[3]  with 'slot', optional: the longest wait allowed, microseconds, as 8 bytes ('<i8');
--          a request that would wait longer (`tat - now` above it) is refused, nothing written.
-- Returns  one integer: admitted, `tat - now + cost * T` (what the TAT runs ahead of now after
--          it); refused, `-1 - (tat - now)`. The client derives the rest of the decision. With
--          'slot', an admission that takes a slot answers 16 bytes instead ('<i8i8'): that
--          integer, then the new TAT itself (the slot's end, which gcra_refund.lua compares).
--          For T not whole µs, every such value is a pair (whole µs, remainder), packed
--          ('<i8i8': the whole part as above, then the remainder; a slot's admission '<i8i8i8i8').
-- Every value is an integer below 2^53 (checked by the client at construction), which a Lua
-- number (a double) holds exactly; see docs/distributed.md.
-- Integer arguments go to redis.call as text made with '%d': a Lua number argument is turned
-- into text by the server with '%.17g', which costs more (benches/redis_call_costs.py).
local mode = ARGV[2]
if fine then
  local need, tolerance = first, second
  local lead, rem = 0, 0
  part = part or 0
  if stored and (stored > now or (stored == now and part > 0)) then
    lead, rem = stored - now, part
  end
  if mode == 'slot' and ARGV[3] then
    local max = struct.unpack('<i8', ARGV[3])
    if lead > max or (lead == max and rem > 0) then
      return struct.pack('<i8i8', -1 - lead, rem)
    end
  end
  local after, after_rem = lead + need, rem + need_rem
  if after_rem >= d then
    after, after_rem = after + 1, after_rem - d
  end
  if need == 0 and need_rem == 0 then
    return struct.pack('<i8i8', after, after_rem)
  end
  if after > tolerance or (after == tolerance and after_rem > tolerance_rem) then
    return struct.pack('<i8i8', -1 - lead, rem)
  end
  if mode ~= 'peek' then
    -- Expires when the TAT is reached: `after` plus a remainder rounds up to the next ms.
    local ttl = after_rem > 0 and after + 1 or after
    redis.call('PSETEX', key, string.format('%d', math.ceil(ttl / 1000)), struct.pack('<i8i8i8', now + after, after_rem, d))
  end
  if mode == 'slot' then
    return struct.pack('<i8i8i8i8', after, after_rem, now + after, after_rem)
  end
  return struct.pack('<i8i8', after, after_rem)
end
local interval, tolerance = first, second
local tat = now
if stored and stored > now then
  tat = stored
end
if mode == 'slot' and ARGV[3] and tat - now > struct.unpack('<i8', ARGV[3]) then
  return now - tat - 1
end
local need = cost * interval
local after = tat - now + need
if need == 0 then
  return after
end
if after > tolerance then
  return now - tat - 1
end
if mode ~= 'peek' then
  -- The key expires when the TAT is reached: a fresh key then decides the same.
  redis.call('PSETEX', key, string.format('%d', math.ceil(after / 1000)), struct.pack('<i8', tat + need))
end
if mode == 'slot' then
  return struct.pack('<i8i8', after, tat + need)
end
return after
