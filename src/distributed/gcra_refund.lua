-- tollgate: GCRA refund, for the token bucket and the leaky bucket shaper: gives back `cost`
-- units admitted earlier and never used (a shaped request abandoned before its slot), as the
-- local limiters' `refund_n` (with ARGV[2], their `refund_slot`): the TAT moves back by
-- `cost * T`, never behind now.
-- KEYS[1]  the key of gcra.lua: the TAT, integer microseconds, as 8 bytes (struct '<i8');
--          absent = a full bucket, nothing to give back.
-- ARGV[1]  cost, T (microseconds per unit), tolerance (burst * T) [, now_us], packed as
--          prologue.lua reads it (as for gcra.lua).
-- ARGV[2]  optional: the end of the slot given back, microseconds, as 8 bytes ('<i8'), the TAT
--          its admission stored (gcra.lua's 'slot' reply). The TAT moves back only if it still
--          equals it: a slot that is no longer the end of the queue (another request was given a
--          slot after it) passes unused, so that the requests behind keep their spacing.
-- Returns  1 when the TAT moved back, 0 when there was nothing to give back (no key, a TAT at
--          or before now, a weight of 0, or a slot that no longer ends the queue).
-- Every value is an integer below 2^53 (cost <= burst, checked by the client, and burst * T
-- below 2^51), which a Lua number (a double) holds exactly; see docs/distributed.md.
-- (The tolerance, `second`, is not needed: a refund only shortens the queue.)
local interval = first
local key = KEYS[1]
local stored = redis.call('GET', key)
if not stored then
  return 0
end
local tat = #stored == 8 and struct.unpack('<i8', stored)
-- 2^53: a time past it is no state of ours (foreign text decodes far above it).
if not tat or tat < 0 or tat >= 9007199254740992 then
  return redis.error_reply('TOLLGATE_STATE the key does not hold a GCRA state')
end
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
