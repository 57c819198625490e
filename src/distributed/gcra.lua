-- tollgate: GCRA, for the token bucket and the leaky bucket shaper.
-- KEYS[1]  the theoretical arrival time (TAT), integer microseconds, as 8 bytes (struct '<i8');
--          absent = a full bucket.
-- ARGV[1]  cost, T (microseconds per unit), tolerance (burst * T) [, now_us], packed as
--          prologue.lua reads it.
-- ARGV[2]  'peek': decide without writing. 'slot' (the shaper through the tower layer): count,
--          and answer an admission with the end of its slot as well.
-- ARGV[3]  with 'slot', optional: the longest wait allowed, microseconds, as 8 bytes ('<i8');
--          a request that would wait longer (`tat - now` above it) is refused, nothing written.
-- Returns  one integer: admitted, `tat - now + cost * T` (what the TAT runs ahead of now after
--          it); refused, `-1 - (tat - now)`. The client derives the rest of the decision. With
--          'slot', an admission that takes a slot answers 16 bytes instead ('<i8i8'): that
--          integer, then the new TAT itself (the slot's end, which gcra_refund.lua compares).
-- Every value is an integer below 2^53 (checked by the client at construction), which a Lua
-- number (a double) holds exactly; see docs/distributed.md.
-- Integer arguments go to redis.call as text made with '%d': a Lua number argument is turned
-- into text by the server with '%.17g', which costs more (benches/redis_call_costs.py).
local interval, tolerance = first, second
local key = KEYS[1]
local tat = now
local stored = redis.call('GET', key)
if stored then
  stored = #stored == 8 and struct.unpack('<i8', stored)
  -- 2^53: a time past it is no state of ours (foreign text decodes far above it).
  if not stored or stored < 0 or stored >= 9007199254740992 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a GCRA state')
  end
  if stored > now then
    tat = stored
  end
end
local mode = ARGV[2]
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
