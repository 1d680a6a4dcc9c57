-- Every write of a voucher's order, by the scripts that include this file.
-- The reconciler reads an orders hash too large to read at once in pieces
-- (HSCAN; reconciler/rc_redis.c, proto/redis-keys.md "Reading a large orders
-- hash"): scan_begin.lua sets voucher:{CODE}:scan while such a read runs, and
-- each order written meanwhile is noted in voucher:{CODE}:touched, for
-- scan_finish.lua to read again at one moment. Both keys sit beside the
-- orders hash (same hash tag, so the same slot). A write that bypassed these
-- two functions would leave the reconciler a stale value of that order.
-- A campaign's orders (campaign:{cID}:orders) are noted the same way, in
-- campaign:{cID}:touched; its taken codes by taken_write.lua.
local function note_order(orders_key, id)
  if redis.call('EXISTS', (string.gsub(orders_key, ':orders$', ':scan'))) == 1 then
    redis.call('SADD', (string.gsub(orders_key, ':orders$', ':touched')), id)
  end
end

local function write_order(orders_key, id, value)
  redis.call('HSET', orders_key, id, value)
  note_order(orders_key, id)
end

-- Calls redis.call(command, key, [option,] ...) with list's elements in
-- slices of at most step (Lua bounds the arguments of one call): a bulk write
-- costs a few hundred calls instead of one per field. taken_write.lua and
-- remaining_rule.lua use it too.
local function call_in_slices(command, key, list, step, option)
  for i = 1, #list, step do
    local last = math.min(i + step - 1, #list)
    if option then
      redis.call(command, key, option, unpack(list, i, last))
    else
      redis.call(command, key, unpack(list, i, last))
    end
  end
end

-- write_noted(key, pairs, name, notes): every field of pairs ({field,
-- value, field, value, ...}) written to key (voucher:{CODE}:NAME or
-- campaign:{cID}:NAME), in slices, and each field noted in the set NOTES
-- beside it while a read in pieces is under way. write_orders() and
-- taken_write.lua's write_code_list().
local function write_noted(key, pairs, name, notes)
  if #pairs == 0 then return end
  call_in_slices('HSET', key, pairs, 1000)
  if redis.call('EXISTS', (string.gsub(key, ':' .. name .. '$', ':scan'))) == 1 then
    local fields = {}
    for i = 1, #pairs, 2 do fields[#fields + 1] = pairs[i] end
    call_in_slices('SADD', (string.gsub(key, ':' .. name .. '$', ':' .. notes)), fields, 1000)
  end
end

-- write_orders(orders_key, pairs): every order of pairs ({orderId, value,
-- orderId, value, ...}) written, as write_order() writes one.
local function write_orders(orders_key, pairs)
  write_noted(orders_key, pairs, 'orders', 'touched')
end

-- replace_orders(staged_key, orders_key): a whole orders hash put in place
-- at once (RENAME; restore_swap.lua). A read in pieces under way cannot note
-- its every order: its token goes, and the read is done again at once.
local function replace_orders(staged_key, orders_key)
  redis.call('RENAME', staged_key, orders_key)
  redis.call('DEL', (string.gsub(orders_key, ':orders$', ':scan')))
end

local function drop_order(orders_key, id)
  redis.call('HDEL', orders_key, id)
  note_order(orders_key, id)
end
