-- Begins giving a use back: the order stops being confirmable, but the use
-- stays taken until release_finish.lua runs, after Kafka acknowledged the
-- VoucherReleased event (proto/redis-keys.md says why).
--
-- KEYS[1] voucher:{CODE}:orders  KEYS[2] voucher:{CODE}:holds
-- KEYS[3] voucher:{CODE}:releasing
-- KEYS[4] voucher:{CODE}:resent: read by the reconciler's "undelivered";
--         marked for a release begun before (status 2, below). May be left out
-- KEYS[5] voucher:{CODE}:users  KEYS[6] voucher:{CODE}:amounts
-- KEYS[7] voucher:{CODE}:remaining (the gateway's cancel of a voucher's
--         order: what tells a lost orders hash or counter from an unknown
--         order, with the limit and outside keys beside it, read by
--         orders_lost.lua; left out, no such order is always -1)
-- ARGV[1] orderId
-- ARGV[2] why: "cancel" (the order service: held or confirmed -> X),
--         "expire" (held and past heldUntil -> E), "undelivered" (held or
--         confirmed, and no event of it ever reached Kafka -> E), "resume"
--         (a release begun before: only answers 2 or 0, changes no order)
-- ARGV[3] nowMs
-- ARGV[4] (the reconciler) "heldUntilMs:state" of the order as its pass read
--         it. The pass decided on a snapshot; if the order is another hold
--         now (its orderId forgotten and taken again), or moved on (a
--         confirm), the decision no longer holds: -3, nothing changed.
-- ARGV[5] ("undelivered") resentSinceMs: a retry that published the order's
--         event again at or after this time (reserve.lua and confirm.lua
--         mark it in KEYS[4]) may have been acknowledged after the pass read
--         Kafka, so its answer (201 or 200) would be released behind it: -3.
--
-- Returns {status, order}: 1 begun now, 2 already begun (publish and finish
-- again), 0 already released, -1 no such order (-7 while the orders hash is
-- lost, -8 while the counter is missing: orders_lost.lua), -2 not in a state
-- this reason may release (confirmed, or not expired yet), -3 changed since
-- the reconciler read it (it looks again next pass); order as it is now.
--
-- Status 2 marks the order in KEYS[4] at nowMs, as a retry that publishes
-- again is marked: the caller publishes next, and with
-- VOUCHER_REDIS_WAIT_REPLICAS it first sends WAIT on its own connection,
-- which counts only that connection's writes. Without a write here the WAIT
-- would not cover the X or E another client wrote (and whose own WAIT may
-- have failed), and a failover after the publish could bring the order back
-- held (proto/redis-keys.md, "Redis Cluster").
-- @include resent_mark.lua
-- @include orders_lost.lua
-- @include orders_write.lua
-- @include order_value.lua
local order = redis.call('HGET', KEYS[1], ARGV[1])
if not order then return {no_order(KEYS[1], KEYS[5], KEYS[6], KEYS[7]), false} end
local customer, discount, held, state = parse_order(order)
if state == STATE.RELEASED then return {RELEASE_BEGIN.ALREADY_RELEASED, order} end
if state == STATE.CANCEL_BEGUN or state == STATE.EXPIRY_BEGUN then
  if KEYS[4] then mark_resent(KEYS[4], ARGV[1], tonumber(ARGV[3])) end
  return {RELEASE_BEGIN.ALREADY_BEGUN, order}
end
if ARGV[2] == 'resume' then return {RELEASE_BEGIN.NOT_RELEASABLE, order} end
if ARGV[4] and ARGV[4] ~= held .. ':' .. state then return {RELEASE_BEGIN.CHANGED, order} end
local next
if ARGV[2] == 'cancel' and (state == STATE.HELD or state == STATE.CONFIRMED) then
  next = STATE.CANCEL_BEGUN
elseif ARGV[2] == 'expire' and state == STATE.HELD and tonumber(held) <= tonumber(ARGV[3]) then
  next = STATE.EXPIRY_BEGUN
elseif ARGV[2] == 'undelivered' and (state == STATE.HELD or state == STATE.CONFIRMED) and
    ARGV[5] then
  local marked = redis.call('ZSCORE', KEYS[4], ARGV[1])
  if marked and tonumber(marked) >= tonumber(ARGV[5]) then return {RELEASE_BEGIN.CHANGED, order} end
  next = STATE.EXPIRY_BEGUN
else
  return {RELEASE_BEGIN.NOT_RELEASABLE, order}
end
order = order_value(customer, discount, held, next)
write_order(KEYS[1], ARGV[1], order)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return {RELEASE_BEGIN.BEGUN, order}
