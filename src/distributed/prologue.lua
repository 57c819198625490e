-- tollgate: the lines every script starts with (algorithm.rs builds each script as this
-- prologue followed by its body, the file of the algorithm's name).
-- ARGV[1]  cost, then the algorithm's two parameters (`first`, `second`: named by each body)
--          [, now_us]: little-endian 64-bit integers (struct '<i8' each), 24 bytes, or 32 with
--          a client's time (`client`; without it, the server's TIME): one packed argument costs
--          the server less than four numbers to parse. A bucket whose interval is not whole
--          microseconds appends three more (gcra_state.lua reads them): 48 bytes, or 56 with a
--          client's time (`length`, kept for it).
local cost, first, second, now
local length = #ARGV[1]
local client = length == 32 or length == 56
if client then
  cost, first, second, now = struct.unpack('<i8i8i8i8', ARGV[1])
else
  cost, first, second = struct.unpack('<i8i8i8', ARGV[1])
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
-- A weight the client never sends (weights are unsigned): refused before the state is read,
-- so that another program's bad call cannot write a state no decision makes.
if cost < 0 then
  return redis.error_reply('TOLLGATE_COST the weight must be at least 0')
end
