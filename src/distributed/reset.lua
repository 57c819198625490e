-- tollgate: reset. Forgets a key for the whole fleet and answers whether it was still being
-- limited, judged by the algorithm's own decision script: its source stands below, as the body
-- of `decide` (reset.rs puts it there), and is run as a peek of weight 0, which writes nothing,
-- before the keys are deleted. Idle is then what the decisions say it is (a bucket's TAT not
-- after now, nothing counted in the windows that weigh now, no unit of the log in the window),
-- not whether the key still exists: its TTL is rounded up to the millisecond, and on a client's
-- clock it runs on the server's.
-- KEYS     the decision script's: the key, and for a sliding log the other encoding's key;
--          every one is deleted.
-- ARGV[1]  as for the decision script, with a cost of 0 (and now_us on a client's clock).
-- Returns  {deleted, reply}: how many keys DEL removed, and the decision script's reply to the
--          peek, which the client reads as for a decision. {deleted} alone when the decision
--          script refused the key's content (another type, not this algorithm's state): it is
--          deleted all the same, as a plain DEL would.
local function decide(KEYS, ARGV)
--[[decision script]]
end
local decided, reply = pcall(decide, KEYS, {ARGV[1], 'peek'})
local deleted = redis.call('DEL', unpack(KEYS))
if not decided or (type(reply) == 'table' and reply.err) then
  return {deleted}
end
return {deleted, reply}
