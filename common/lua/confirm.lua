-- Confirms a held use (the order was paid), atomically; optionally against
-- the order's final total (proto/openapi.yaml, "Confirm against the final
-- order"). The check against the stored reservation and the change to C are
-- this one script: nothing can run between them.
--
-- KEYS[1] voucher:{CODE}:orders  KEYS[2] voucher:{CODE}:holds   (as reserve.lua)
-- KEYS[3] voucher:{CODE}:resent  a confirm of an order already confirmed
--                                publishes VoucherConfirmed again: it is
--                                marked there, as reserve.lua marks a retry,
--                                so the reconciler does not release as
--                                "never delivered" an order whose 200 may
--                                come after its pass read Kafka
-- KEYS[4] voucher:{CODE}:amounts hash orderId -> orderAmount of the reservation
-- KEYS[5] voucher:{CODE}:paid    hash orderId -> the total the gateway confirmed
--                                the order at (the final one, or the
--                                reservation's for a confirm without one),
--                                written with the change to C. KEYS[4] and
--                                KEYS[5] may be left out (then nothing is
--                                compared nor written there)
-- KEYS[6] voucher:{CODE}:users, KEYS[7] voucher:{CODE}:remaining (the
--                                gateway's, for a voucher: what tells a lost
--                                orders hash or counter from an unknown order,
--                                with the limit and outside keys beside it,
--                                read by orders_lost.lua; left out, no such
--                                order is always -1)
-- ARGV[1] orderId   ARGV[2] nowMs
-- ARGV[3] the final orderAmount (absent: a confirm without a total)
-- ARGV[4] the discount the voucher's rules give for ARGV[3], or "" when they
--         refuse it (the gateway judged them, vc_voucher_price(); this script
--         does no arithmetic of the rules)
--
-- Returns {status, order, amount, paid}:
--   1 confirmed now; 0 already confirmed (without a total; or with the total
--   it was confirmed at, or with any when that is unknown: an order the
--   reconciler restored or repaired to C has no paid entry), nothing changed;
--  -1 no such order (-7 while the orders hash is lost, -8 while the counter
--   is missing: orders_lost.lua); -2 released, or held past heldUntilMs (the hold is no
--   longer promised and may be released at any moment);
--  -3 already confirmed at another total (paid: that total), nothing changed;
--  -4 the rules refuse the final total, nothing changed (the hold stays).
-- order is the stored value as it is now; amount the reservation's total, paid
-- the total the order is confirmed at (each false when unknown).
-- @include resent_mark.lua
-- @include orders_lost.lua
-- @include orders_write.lua
-- @include order_value.lua
local order = redis.call('HGET', KEYS[1], ARGV[1])
if not order then return {no_order(KEYS[1], KEYS[6], KEYS[4], KEYS[7]), false} end
local customer, discount, held, state = parse_order(order)
local total = ARGV[3]
local amount, paid = false, false
if KEYS[5] then
  amount = redis.call('HGET', KEYS[4], ARGV[1])
  paid = redis.call('HGET', KEYS[5], ARGV[1])
end
if state == STATE.CONFIRMED then
  if total and paid and paid ~= total then return {CONFIRM.OTHER_TOTAL, order, amount, paid} end
  if KEYS[3] then mark_resent(KEYS[3], ARGV[1], tonumber(ARGV[2])) end
  return {CONFIRM.ALREADY_CONFIRMED, order, amount, paid}
end
if state ~= STATE.HELD or tonumber(held) < tonumber(ARGV[2]) then
  return {CONFIRM.TOO_LATE, order}
end
-- The reservation's own total keeps its quote (the basket did not change,
-- whatever the rules say now); another total takes the rules' verdict.
if total and total ~= amount then
  if ARGV[4] == '' then return {CONFIRM.TOTAL_REFUSED, order, amount, false} end
  discount = ARGV[4]
end
paid = total or amount
if paid and KEYS[5] then
  redis.call('HSET', KEYS[5], ARGV[1], paid)
  -- Retention: paid expires with the voucher's other keys (reserve.lua).
  local expire_at = redis.call('PEXPIRETIME', KEYS[1])
  if expire_at > 0 then redis.call('PEXPIREAT', KEYS[5], expire_at) end
end
order = order_value(customer, discount, held, STATE.CONFIRMED)
write_order(KEYS[1], ARGV[1], order)
redis.call('ZREM', KEYS[2], ARGV[1])
return {CONFIRM.CONFIRMED, order, amount, paid}
