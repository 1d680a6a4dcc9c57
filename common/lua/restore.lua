-- Restores a voucher whose keys Redis lost, from what the reconciler read in
-- PostgreSQL plus the events still in flight. Orders and holds are written
-- first and the counter last, so a gateway sees the voucher only when it is
-- whole; nothing is written when the counter exists (someone restored it).
--
-- KEYS[1] remaining  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] releasing
-- ARGV[1] remaining, then triples: orderId, order value, heldUntilMs
--
-- Returns 1 restored, 0 already present.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
for i = 2, #ARGV, 3 do
  local order = ARGV[i + 1]
  local customer, state = string.match(order, '^([^:]*):[^:]*:[^:]*:(.)$')
  redis.call('HSET', KEYS[3], ARGV[i], order)
  if state ~= 'R' then redis.call('HINCRBY', KEYS[2], customer, 1) end
  if state == 'H' then redis.call('ZADD', KEYS[4], ARGV[i + 2], ARGV[i]) end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
