-- Takes the one use of a campaign's code for an order, atomically; or, for an
-- order Redis has already seen, answers what it stores (as reserve.lua does for
-- a voucher: a retry is recognised before anything else). proto/campaigns.md.
--
-- All keys carry the campaign's hash tag {c<ID>}:
-- KEYS[1] campaign:{cID}:taken    hash code -> orderId: the codes that hold a use
-- KEYS[2] campaign:{cID}:users    hash customerId -> uses held across the campaign
-- KEYS[3] campaign:{cID}:orders   hash orderId -> "customerId:discount:heldUntilMs:state"
--                                 (the voucher's format: confirm.lua and
--                                 release_begin.lua read it unchanged)
-- KEYS[4] campaign:{cID}:holds    KEYS[5] campaign:{cID}:resent
-- KEYS[6] campaign:{cID}:amounts  (all as reserve.lua's)
-- ARGV[1] customerId   ARGV[2] perCustomerLimit   ARGV[3] orderId
-- ARGV[4] discount     ARGV[5] heldUntilMs        ARGV[6] nowMs
-- ARGV[7] orderAmount  ARGV[8] "take" or "known" (as reserve.lua)
-- ARGV[9] code (stored form)
-- ARGV[10] "expireAtMs:loaded": when the keys expire (Unix ms), and loaded "1"
--          when PostgreSQL says Redis had the campaign's keys before
--          (campaign.redis_loaded_at: all of them missing is then a loss too),
--          else "0" (one argument: the gateway's scripts take 16 at most)
--
-- Returns reserve.lua's statuses: 1 taken, 0 the same order again, -2 the code
-- is taken by another order or the customer is at the campaign's limit (both
-- ALREADY_USED), -4 another customer's orderId, -5 another orderAmount,
-- -6 a new order and ARGV[8] is "known", -7 the campaign's taken codes or
-- customers' counts are lost (the reconciler rebuilds them from PostgreSQL:
-- reconciler/rc_campaign.c; until then nothing is taken, so no code is used
-- twice and no customer passes the limit on a guess).
--
-- Once created, taken holds the field "!" (never a code: codes are [A-Z0-9])
-- and users a field per customer that ever held a use (0 once given back),
-- so neither is ever emptied by a give-back: a key missing beside another of
-- the campaign's is a loss, not an empty campaign.
-- @include reserve_order.lua
-- @include campaign_lost.lua
-- @include taken_write.lua

-- A known order must be of this code: an orderId of the campaign reserved with
-- another of its codes is -4 (the gateway's ORDER_CONFLICT). Taken codes keep
-- their orderId until the use is back (R) or forgotten.
local function holds_code(state)
  return state == STATE.RELEASED or redis.call('HGET', KEYS[1], ARGV[9]) == ARGV[3]
end
local order = redis.call('HGET', KEYS[3], ARGV[3])
if order then return retry_answer(order, holds_code) end
if ARGV[8] ~= 'take' then return {RESERVE.NEW_ORDER, false} end
local expire_at, loaded = string.match(ARGV[10], '^(%d+):([01])$')
if campaign_keys_lost(KEYS[1], KEYS[2], KEYS[3], loaded) then
  return {RESERVE.COUNTS_LOST, false}
end
-- -2 either way, with why: the gateway's 409 ALREADY_USED says which (both
-- tell that the code exists, and both are failed tries for the guessing limits).
if redis.call('HEXISTS', KEYS[1], ARGV[9]) == 1 then return {RESERVE.ALREADY_USED, 'taken'} end
local used = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if used >= tonumber(ARGV[2]) then return {RESERVE.ALREADY_USED, 'limit'} end
write_codes(KEYS[1], ARGV[9], ARGV[3], '!', '0')
order = write_hold()
-- Retention: the campaign's keys expire together, at its endsAt plus the retention.
for _, i in ipairs({1, 2, 3, 4, 6}) do redis.call('PEXPIREAT', KEYS[i], expire_at) end
return {RESERVE.TAKEN, order}
