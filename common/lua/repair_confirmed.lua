-- Repairs a hold that PostgreSQL, or an event in flight, has as confirmed:
-- H -> C. Redis lost the confirm's write (a crash under appendfsync
-- everysec, a lagging replica promoted, a restore from an older snapshot)
-- while Kafka kept its VoucherConfirmed, and the customer got 200: left H,
-- the order would be expired at heldUntil and its paid use sold again.
--
-- Only the hold the reconciler read is repaired (same heldUntil, still H):
-- an orderId forgotten and taken again is another hold, which PostgreSQL's
-- row does not describe. Both states count the use as taken, so no counter
-- moves.
--
-- KEYS[1] voucher:{CODE}:orders  KEYS[2] voucher:{CODE}:holds
-- ARGV[1] orderId   ARGV[2] heldUntilMs of the hold as the pass read it
--
-- Returns {status, order}: 1 repaired now, 0 already confirmed, -1 no such
-- order, -2 another hold or another state now (the next pass looks again);
-- order as it is now.
-- @include orders_write.lua
-- @include order_value.lua
local order = redis.call('HGET', KEYS[1], ARGV[1])
if not order then return {REPAIR_CONFIRMED.NO_ORDER, false} end
local customer, discount, held, state = parse_order(order)
if state == STATE.CONFIRMED then return {REPAIR_CONFIRMED.ALREADY_CONFIRMED, order} end
if state ~= STATE.HELD or held ~= ARGV[2] then return {REPAIR_CONFIRMED.CHANGED, order} end
order = order_value(customer, discount, held, STATE.CONFIRMED)
write_order(KEYS[1], ARGV[1], order)
redis.call('ZREM', KEYS[2], ARGV[1])
return {REPAIR_CONFIRMED.REPAIRED, order}
