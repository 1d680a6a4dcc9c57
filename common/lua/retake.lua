-- Takes a use again for an order PostgreSQL counts but Redis had given back
-- (or lost): the reconciler's repair when Redis would otherwise offer a use
-- that is not there. The counter may go below zero: that only means Redis
-- answers OUT_OF_STOCK until releases bring it back.
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- ARGV[1] orderId  ARGV[2] order value (state H or C)  ARGV[3] heldUntilMs
--
-- Returns 1 taken again, 0 the order is already taken, -1 the counter is
-- missing (the keys were lost: the restore rebuilds them from PostgreSQL and
-- the events in flight; a DECR here would create a counter of -1 that looks
-- loaded, and the voucher would never be restored).
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local order = redis.call('HGET', KEYS[3], ARGV[1])
if order then
  local state = string.sub(order, -1)
  if state == 'H' or state == 'C' or state == 'X' or state == 'E' then return 0 end
end
local customer, state = string.match(ARGV[2], '^([^:]*):[^:]*:[^:]*:(.)$')
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], customer, 1)
redis.call('DECR', KEYS[1])
if state == 'H' then redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1]) end
return 1
