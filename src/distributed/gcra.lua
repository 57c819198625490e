-- tollgate: GCRA, for the token bucket and the leaky bucket shaper.
-- KEYS[1]  the theoretical arrival time (TAT), integer microseconds; absent = a full bucket.
-- ARGV     now_us (-1: the server's TIME), cost, peek (1: decide without writing),
--          T (microseconds per unit), tolerance (burst * T).
-- Returns  one integer: admitted, `tat - now + cost * T` (what the TAT runs ahead of now after
--          it); refused, `-1 - (tat - now)`. The client derives the rest of the decision.
-- Every value is an integer below 2^53 (checked by the client at construction), which a Lua
-- number (a double) holds exactly; see docs/distributed.md.
local now = tonumber(ARGV[1])
if now < 0 then
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
local tat = redis.call('GET', KEYS[1])
if tat then
  tat = tonumber(tat)
  if not tat then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a GCRA state')
  end
  if tat < now then
    tat = now
  end
else
  tat = now
end
local need = ARGV[2] * ARGV[4]
local after = tat - now + need
if need == 0 then
  return after
end
if after > tonumber(ARGV[5]) then
  return now - tat - 1
end
if ARGV[3] == '0' then
  -- The key expires when the TAT is reached: a fresh key then decides the same.
  redis.call('PSETEX', KEYS[1], math.ceil(after / 1000), tat + need)
end
return after
