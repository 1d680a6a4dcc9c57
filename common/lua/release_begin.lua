-- Begins giving a use back: the order stops being confirmable, but the use
-- stays taken until release_finish.lua runs, after Kafka acknowledged the
-- VoucherReleased event (proto/redis-keys.md says why).
--
-- KEYS[1] voucher:{CODE}:orders  KEYS[2] voucher:{CODE}:holds
-- KEYS[3] voucher:{CODE}:releasing
-- ARGV[1] orderId
-- ARGV[2] why: "cancel" (held or confirmed -> X), "expire" (held and past
--         heldUntil -> E), "undelivered" (held, its event never reached
--         Kafka -> E)
-- ARGV[3] nowMs
--
-- Returns {status, order}: 1 begun now, 2 already begun (publish and finish
-- again), 0 already released, -1 no such order, -2 not in a state this
-- reason may release (confirmed, or not expired yet); order as it is now.
local order = redis.call('HGET', KEYS[1], ARGV[1])
if not order then return {-1, false} end
local customer, discount, held, state = string.match(order, '^([^:]*):([^:]*):([^:]*):(.)$')
if state == 'R' then return {0, order} end
if state == 'X' or state == 'E' then return {2, order} end
local next
if ARGV[2] == 'cancel' and (state == 'H' or state == 'C') then
  next = 'X'
elseif ARGV[2] == 'expire' and state == 'H' and tonumber(held) <= tonumber(ARGV[3]) then
  next = 'E'
elseif ARGV[2] == 'undelivered' and state == 'H' then
  next = 'E'
else
  return {-2, order}
end
order = customer .. ':' .. discount .. ':' .. held .. ':' .. next
redis.call('HSET', KEYS[1], ARGV[1], order)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return {1, order}
