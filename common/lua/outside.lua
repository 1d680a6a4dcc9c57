-- The uses a voucher's counter holds back for no order Redis holds:
-- voucher:{CODE}:outside (proto/redis-keys.md, "A lost orders hash"), the
-- limit key less the counter less the orders held as taken (H, C, X, E).
-- Every gateway script keeps that difference: reserve.lua takes a use with a
-- new order, release_finish.lua and forget.lua give one back with its order
-- (R, or dropped), a PATCH (limit.lua) moves the counter and the limit key
-- together. So only what sets the counter otherwise writes the key: the
-- gateway's load (the uses PostgreSQL counted before Redis knew the voucher:
-- uses without rows, rows imported) and the reconciler's repairs, each with
-- the orders as they are when it runs. Absent is 0, as for most vouchers.
--
-- With no orders hash the counter is therefore the limit key less this; a
-- counter below that means orders holding uses were lost with the hash
-- (orders_lost.lua). load.lua, orders_lost.lua and remaining_rule.lua
-- include this file.

-- A key of the voucher whose counter is remaining_key (the same hash tag, so
-- the same slot), or nil for a key that is not a voucher's counter (a
-- campaign's keys have no counter). KEY_HEAD.voucher, the voucher family's
-- head ('voucher:{'), holds no character magic in a pattern.
local function voucher_key(remaining_key, name)
  local pattern = '^(' .. KEY_HEAD.voucher .. '.*):remaining$'
  local key, n = string.gsub(remaining_key, pattern, '%1:' .. name)
  if n ~= 1 then return nil end
  return key
end

-- The outside key's value (0 when it is absent or remaining_key is no counter).
local function outside_uses(remaining_key)
  local key = voucher_key(remaining_key, 'outside')
  return key and tonumber(redis.call('GET', key)) or 0
end

-- Whether the counter is below its limit key by more than the outside key:
-- uses taken that the orders Redis holds must explain. False without a limit
-- key (a counter loaded before limit keys existed: nothing to compare with)
-- or without the counter.
local function uses_unexplained(remaining_key)
  local limit_key = voucher_key(remaining_key, 'limit')
  if not limit_key then return false end
  local limit = tonumber(redis.call('GET', limit_key))
  local remaining = tonumber(redis.call('GET', remaining_key))
  if not limit or not remaining then return false end
  return limit - remaining > outside_uses(remaining_key)
end

-- Writes the outside key for the counter as it is now, live being the orders
-- Redis holds as taken now: the limit key less the counter less live, with
-- the counter's expiry (Retention); deleted when that is 0, or when the
-- counter or its limit key is missing (nothing to hold back from). Only for a
-- writer that knows the orders hash is not lost: otherwise the uses its lost
-- orders held would be written down as outside, and the loss hidden.
local function set_outside(remaining_key, live)
  local key = voucher_key(remaining_key, 'outside')
  if not key then return end
  local limit = tonumber(redis.call('GET', voucher_key(remaining_key, 'limit')))
  local remaining = tonumber(redis.call('GET', remaining_key))
  local outside = limit and remaining and limit - remaining - live or 0
  if outside == 0 then
    redis.call('DEL', key)
    return
  end
  if tonumber(redis.call('GET', key)) ~= outside then redis.call('SET', key, outside) end
  local expire_at = redis.call('PEXPIRETIME', remaining_key)
  if expire_at > 0 then redis.call('PEXPIREAT', key, expire_at) else redis.call('PERSIST', key) end
end
