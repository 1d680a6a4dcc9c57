-- Takes one use of a voucher for an order, atomically; or, for an order Redis
-- has already seen, answers what it stores. A known order is recognised before
-- anything else, so a retry gets its first answer whatever the voucher's rules
-- say now (proto/openapi.yaml).
--
-- KEYS[1] voucher:{CODE}:remaining  uses left (string integer)
-- KEYS[2] voucher:{CODE}:users      hash customerId -> uses held or confirmed
-- KEYS[3] voucher:{CODE}:orders     hash orderId -> "customerId:discount:heldUntilMs:state"
--                                   state H = held, C = confirmed, R = released
-- KEYS[4] voucher:{CODE}:holds      sorted set orderId scored by heldUntilMs
-- KEYS[5] voucher:{CODE}:resent     sorted set orderId scored by when a retry
--                                   found it held or confirmed (ms): its event
--                                   is being published again, so forget.lua
--                                   must keep it and the reconciler must not
--                                   release it as never delivered
-- KEYS[6] voucher:{CODE}:amounts    hash orderId -> orderAmount of the request
--                                   that took the use
-- ARGV[1] customerId   ARGV[2] perCustomerLimit   ARGV[3] orderId
-- ARGV[4] discount     ARGV[5] heldUntilMs        ARGV[6] nowMs
-- ARGV[7] orderAmount
-- ARGV[8] "take": the request passed the voucher's rules, a new order may take
--         a use; "known": it did not (or the voucher is marked sold out), only
--         an order seen before is answered and nothing is taken
--         "snapshot:LEASE": as "take", and on -1 take the sold-out snapshot
--         with a lease of LEASE ms (needs KEYS[7])
-- KEYS[7], ARGV[9] (optional; proto/redis-keys.md, "Sold out without a round
-- trip"): KEYS[7] voucher:{CODE}:soldout, hash gateway token -> end of the
-- lease of its sold-out snapshot (Redis ms); ARGV[9] this gateway's token
--
-- Returns {status, order[, amount]}: status 1 taken, 0 the same order again
-- (nothing taken), -1 out of stock, -2 customer at the limit, -3 voucher not
-- loaded, -4 the orderId belongs to another customer, -5 the orderId was
-- reserved with another orderAmount (amount: the stored one), -6 a new order
-- and ARGV[8] is "known" (nothing read beyond the order), -7 the customers'
-- counts are lost (orders exist, users does not: nothing taken until the
-- reconciler rebuilds them; or orders was lost: it does not exist while users
-- or amounts does, or while the counter is below its limit key by more than
-- the outside key (orders_lost.lua), nothing taken until the reconciler
-- rebuilds it from PostgreSQL); order is the stored order value for 1, 0, -4
-- and -5.
-- With KEYS[7]: status 1 and 0 are {status, order, nil, wait}, wait the ms
-- other gateways' sold-out leases still run (the 201 waits that long); -1 with
-- "snapshot:LEASE" is {-1, orderIds}, every orderId of the orders hash
-- joined by newlines, and the lease is taken in the same step.
-- @include reserve_order.lua
-- @include orders_lost.lua
local function redis_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- How long a sold-out snapshot another gateway took may still answer from
-- memory: a 201 must not go out before, or a retry there would get 409.
local function lease_wait()
  if not KEYS[7] or redis.call('EXISTS', KEYS[7]) == 0 then return 0 end
  local leases, now, wait = redis.call('HGETALL', KEYS[7]), redis_ms(), 0
  for i = 1, #leases, 2 do
    local w = tonumber(leases[i + 1]) - now
    if leases[i] ~= ARGV[9] and w > wait then wait = w end
  end
  return wait
end
local order = redis.call('HGET', KEYS[3], ARGV[3])
if order then return retry_answer(order, nil, lease_wait) end
local snapshot_lease = tonumber(string.match(ARGV[8], '^snapshot:(%d+)$'))
if ARGV[8] ~= 'take' and not snapshot_lease then return {RESERVE.NEW_ORDER, false} end
local remaining = redis.call('GET', KEYS[1])
if not remaining then return {RESERVE.NOT_LOADED, false} end
-- Orders without users: the customers' counts were lost (every script that
-- writes an order keeps a field in users). A count read as 0 would let a
-- customer past their limit, and PostgreSQL would refuse the event of a 201:
-- refuse until the reconciler rebuilds the counts from the orders.
local has_orders = redis.call('EXISTS', KEYS[3]) == 1
if has_orders and redis.call('EXISTS', KEYS[2]) == 0 then
  return {RESERVE.COUNTS_LOST, false}
end
-- No orders, but users or amounts, or a counter below its limit key by more
-- than the uses it holds back for no order: the orders hash was lost
-- (orders_lost.lua says why each tells it). Its released orders (R) went with
-- it: a retry of a cancelled orderId would take a new use and get a 201 while
-- PostgreSQL keeps the order RELEASED (the late VoucherReserved changes
-- nothing there), and a retry of a held one would take its use twice. Refuse
-- until the reconciler rebuilds orders from PostgreSQL (rebuild.lua,
-- proto/redis-keys.md "A lost orders hash").
if not has_orders and orders_lost(KEYS[3], KEYS[2], KEYS[6], KEYS[1]) then
  return {RESERVE.COUNTS_LOST, false}
end
local used = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if used >= tonumber(ARGV[2]) then return {RESERVE.ALREADY_USED, false} end
if tonumber(remaining) <= 0 then
  if not snapshot_lease or not KEYS[7] then return {RESERVE.OUT_OF_STOCK, false} end
  -- With remaining at 0 no order can be added until a use comes back; the
  -- lease makes every other gateway's 201 wait until this snapshot is void.
  local now, lease = redis_ms(), snapshot_lease
  local leases = redis.call('HGETALL', KEYS[7])
  for i = 1, #leases, 2 do
    if tonumber(leases[i + 1]) < now then redis.call('HDEL', KEYS[7], leases[i]) end
  end
  redis.call('HSET', KEYS[7], ARGV[9], now + lease)
  if redis.call('PTTL', KEYS[7]) < lease then redis.call('PEXPIRE', KEYS[7], lease) end
  return {RESERVE.OUT_OF_STOCK, table.concat(redis.call('HKEYS', KEYS[3]), '\n')}
end
redis.call('DECR', KEYS[1])
order = write_hold()
-- Retention (proto/redis-keys.md): the voucher's keys expire together, at the
-- instant the gateway gave the counter when it loaded it (endsAt plus the
-- retention). A counter without one (rebuilt before retention existed) gives none.
local expire_at = redis.call('PEXPIRETIME', KEYS[1])
if expire_at > 0 then
  for _, i in ipairs({2, 3, 4, 6}) do redis.call('PEXPIREAT', KEYS[i], expire_at) end
end
return {RESERVE.TAKEN, order, false, lease_wait()}
