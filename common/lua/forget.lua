-- Forgets a held use for which no event was ever published: the gateway took
-- it under an orderId's claim that is not the request's (another code's, or a
-- claim that failed or did not answer; gw_reserve.c script_cb()). Nothing
-- downstream knows such an order, so it is deleted and its use goes straight
-- back to the pool. Every other give-back goes through release_begin.lua and
-- release_finish.lua, after its event is in Kafka (proto/redis-keys.md).
--
-- A hold whose VoucherReserved was handed to Kafka is never forgotten, even
-- when Kafka reports it definitely not stored: its order may have been
-- confirmed and the confirm acknowledged, and a confirm's write that Redis
-- lost since (everysec, a promoted replica, a restore) shows it as H here, so
-- forgetting would offer a use PostgreSQL counts. The gateway keeps such a
-- hold (503, outcome unknown) for a retry or the reconciler.
--
-- A hold a retry of the same orderId found and published again (reserve.lua
-- marks it in KEYS[5]) is kept too: that message may be stored.
--
-- KEYS[1] voucher:{CODE}:remaining  KEYS[2] voucher:{CODE}:users
-- KEYS[3] voucher:{CODE}:orders     KEYS[4] voucher:{CODE}:holds
-- KEYS[5] voucher:{CODE}:resent     (as reserve.lua)
-- ARGV[1] orderId
--
-- Returns {status, order}: 1 forgotten, 0 not held (confirmed or being
-- released: kept), -1 no such order, -2 held and published again by a retry
-- (kept); order is the stored value as it was.
-- @include give_back.lua
-- @include orders_write.lua
local order = redis.call('HGET', KEYS[3], ARGV[1])
if not order then return {FORGET.NO_ORDER, false} end
local customer, state = string.match(order, '^([^:]*):[^:]*:[^:]*:(.)$')
if state ~= STATE.HELD then return {FORGET.NOT_HELD, order} end
if redis.call('ZSCORE', KEYS[5], ARGV[1]) then return {FORGET.RESENT, order} end
local amounts = string.gsub(KEYS[3], ':orders$', ':amounts')
drop_order(KEYS[3], ARGV[1])
-- Its amount goes with it: a campaign reads an amount without its order as
-- the orders hash lost (campaign_lost.lua); a voucher drops the whole hash
-- with the last order below.
redis.call('HDEL', amounts, ARGV[1])
give_back(KEYS[1], KEYS[2], customer)
redis.call('ZREM', KEYS[4], ARGV[1])
-- The last order gone: users and amounts go too (every count is 0, and no
-- order needs its amount). reserve.lua reads users or amounts without orders
-- as an orders hash lost, and refuses new orders until it is rebuilt. amounts
-- sits beside orders (the same hash tag). A campaign's users is kept: there
-- it is never emptied, and missing beside taken means lost
-- (campaign_reserve.lua).
if redis.call('EXISTS', KEYS[3]) == 0 and string.sub(KEYS[3], 1, 8) == 'voucher:' then
  redis.call('DEL', KEYS[2], amounts)
end
return {FORGET.FORGOTTEN, order}
