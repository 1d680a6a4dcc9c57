-- Forgets a held use whose VoucherReserved Kafka definitely did not store
-- (RD_KAFKA_MSG_STATUS_NOT_PERSISTED): nothing downstream knows the order, so
-- it is deleted and its use goes straight back to the pool, and the client
-- may try the same orderId again. Every other give-back goes through
-- release_begin.lua and release_finish.lua, after its event is in Kafka
-- (proto/redis-keys.md).
--
-- "Definitely not stored" speaks of one message only. A retry of the same
-- orderId that found the hold publishes the event again (reserve.lua marks it
-- in KEYS[5]); that message may be stored, so such a hold is kept and left to
-- the retry, or to the reconciler if no event ever arrives.
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
local order = redis.call('HGET', KEYS[3], ARGV[1])
if not order then return {-1, false} end
local customer, state = string.match(order, '^([^:]*):[^:]*:[^:]*:(.)$')
if state ~= 'H' then return {0, order} end
if redis.call('ZSCORE', KEYS[5], ARGV[1]) then return {-2, order} end
local amounts = string.gsub(KEYS[3], ':orders$', ':amounts')
redis.call('HDEL', KEYS[3], ARGV[1])
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
return {1, order}
