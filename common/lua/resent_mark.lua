-- The resent marker (proto/redis-keys.md, voucher:{CODE}:resent), included by
-- reserve_order.lua and confirm.lua. An order whose event is published again
-- (a retry of a held or confirmed order, a confirm of a confirmed one) is
-- marked at nowMs: forget.lua keeps it, and the reconciler does not release it
-- as never delivered. Markers older than ten minutes go: no delivery report
-- comes later than VOUCHER_KAFKA_TIMEOUT (five minutes at most).
local function mark_resent(resent_key, order_id, now)
  redis.call('ZADD', resent_key, now, order_id)
  redis.call('ZREMRANGEBYSCORE', resent_key, '-inf', now - 600000)
  redis.call('PEXPIRE', resent_key, 600000)
end
