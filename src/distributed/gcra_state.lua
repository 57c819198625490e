-- tollgate: the bucket's state read, shared by gcra.lua and gcra_refund.lua (algorithm.rs puts
-- these lines between the prologue and each body).
-- KEYS[1]  the theoretical arrival time (TAT): 8 bytes ('<i8', whole microseconds) for a bucket
--          whose interval T is whole µs; for one whose T is `n/d` µs (d >= 2, in lowest terms),
--          24 bytes ('<i8i8i8': whole µs, the remainder in 1/d µs, d). Absent = a full bucket.
-- ARGV[1]  with T not whole µs, the prologue's fields are followed by the remainders of
--          `cost * T` and `burst * T` and d (`fine`, read here); otherwise d is 1.
-- Leaves   `stored` (the TAT's whole µs, or nil) and `part` (its remainder in 1/d µs of this
--          call's d; nil for an 8-byte state, which has none). A state written at another d (a
--          quota changed live) is read up to the next whole µs when it has a remainder: later,
--          so it never admits more. Every value is an integer below 2^53 (d at most 2^43).
--          For T whole µs, `d` and the remainders stay nil (no Lua work on the common path): a
--          24-byte state's d then differs from the call's, as it does from 1.
local key = KEYS[1]
local fine = length > 32
local d, need_rem, tolerance_rem, part
if fine then
  need_rem, tolerance_rem, d = struct.unpack('<i8i8i8', ARGV[1], length - 23)
end
local stored = redis.call('GET', key)
if stored then
  if #stored == 8 then
    stored = struct.unpack('<i8', stored)
  elseif #stored == 24 then
    local base
    stored, part, base = struct.unpack('<i8i8i8', stored)
    if base < 2 or base > 8796093022208 or part < 0 or part >= base then
      stored = false
    elseif base ~= d and part > 0 then
      stored, part = stored + 1, 0
    end
  else
    stored = false
  end
  -- 2^53: a time past it is no state of ours (foreign text decodes far above it).
  if not stored or stored < 0 or stored >= 9007199254740992 then
    return redis.error_reply('TOLLGATE_STATE the key does not hold a GCRA state')
  end
end
