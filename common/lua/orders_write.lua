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
-- @include order_value.lua

-- Every order write also keeps the aggregate beside the orders hash
-- (voucher:{CODE}:agg, a campaign's campaign:{cID}:agg, a restore in steps'
-- staged one; proto/redis-keys.md, "Aggregates"): per state, how many orders
-- are in it (field: the state's letter) and the sum of their customers' last
-- six digits (field: the letter and "_customers": order_customer_tail()), and
-- how many values no parser reads (AGG_UNREADABLE). The reconciler compares
-- it with the same numbers PostgreSQL keeps for its rows, instead of reading a
-- quiet voucher in full. It holds only while every write of the hash comes
-- through here: the lint lua_writes refuses a script that writes the hash or
-- its aggregate directly.
local AGG_UNREADABLE = '?'

local function agg_key(orders_key)
  return (string.gsub(orders_key, ':orders$', ':agg'))
end

-- Adds sign times value's order to delta ({field = n}): its state's count
-- and customers' sum, or the unreadable count.
local function agg_delta(delta, value, sign)
  local customer, _, _, state = parse_order(value)
  if not state then
    delta[AGG_UNREADABLE] = (delta[AGG_UNREADABLE] or 0) + sign
    return
  end
  delta[state] = (delta[state] or 0) + sign
  local sum = state .. '_customers'
  delta[sum] = (delta[sum] or 0) + sign * order_customer_tail(customer)
end

-- Applies delta to orders_key's aggregate, which expires with the orders
-- hash (the voucher's keys expire together: Retention).
local function agg_apply(orders_key, delta)
  local key = agg_key(orders_key)
  for field, n in pairs(delta) do
    if n ~= 0 then redis.call('HINCRBY', key, field, n) end
  end
  if redis.call('PTTL', key) == -1 then
    local at = redis.call('PEXPIRETIME', orders_key)
    if at > 0 then redis.call('PEXPIREAT', key, at) end
  end
end

-- An aggregate counts the orders hash it sits beside only from that hash's
-- first order on: before the first order of a hash that does not exist
-- (never written, expired, or lost with Redis's data while the aggregate was
-- not), whatever aggregate is left is dropped.
local function agg_fresh(orders_key)
  if redis.call('EXISTS', orders_key) == 0 then redis.call('DEL', agg_key(orders_key)) end
end

local function note_order(orders_key, id)
  if redis.call('EXISTS', (string.gsub(orders_key, ':orders$', ':scan'))) == 1 then
    redis.call('SADD', (string.gsub(orders_key, ':orders$', ':touched')), id)
  end
end

local function write_order(orders_key, id, value)
  local was = redis.call('HGET', orders_key, id)
  local delta = {}
  if was then agg_delta(delta, was, -1) else agg_fresh(orders_key) end
  agg_delta(delta, value, 1)
  redis.call('HSET', orders_key, id, value)
  note_order(orders_key, id)
  agg_apply(orders_key, delta)
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

-- write_orders(orders_key, list): every order of list ({orderId, value,
-- orderId, value, ...}) written, as write_order() writes one, the aggregate
-- moved by what each replaced (read in slices of 1,000, HMGET).
local function write_orders(orders_key, list)
  if #list == 0 then return end
  agg_fresh(orders_key)
  local delta, ids = {}, {}
  for i = 1, #list, 2 do ids[#ids + 1] = list[i] end
  for i = 1, #ids, 1000 do
    local was = redis.call('HMGET', orders_key, unpack(ids, i, math.min(i + 999, #ids)))
    for j = 1, #was do
      if was[j] then agg_delta(delta, was[j], -1) end
    end
  end
  -- An orderId twice in list: HSET leaves its last value, counted once.
  local last = {}
  for i = 1, #list, 2 do last[list[i]] = i end
  for i = 1, #list, 2 do
    if last[list[i]] == i then agg_delta(delta, list[i + 1], 1) end
  end
  write_noted(orders_key, list, 'orders', 'touched')
  agg_apply(orders_key, delta)
end

-- replace_orders(staged_key, orders_key): a whole orders hash put in place
-- at once (RENAME; restore_swap.lua). A read in pieces under way cannot note
-- its every order: its token goes, and the read is done again at once.
local function replace_orders(staged_key, orders_key)
  redis.call('RENAME', staged_key, orders_key)
  redis.call('DEL', (string.gsub(orders_key, ':orders$', ':scan')))
  -- The staged hash's aggregate, kept by write_orders() as it was staged,
  -- goes with it, without the staged keys' expiry (the caller gives it the
  -- voucher's: expire_placed()).
  redis.call('DEL', agg_key(orders_key))
  if redis.call('EXISTS', agg_key(staged_key)) == 1 then
    redis.call('RENAME', agg_key(staged_key), agg_key(orders_key))
    redis.call('PERSIST', agg_key(orders_key))
  end
end

-- A staged orders hash dropped (the repair in steps gave up, or found
-- nothing to stage): its aggregate goes with it.
local function drop_staged_agg(staged_key)
  redis.call('UNLINK', agg_key(staged_key))
end

local function drop_order(orders_key, id)
  local was = redis.call('HGET', orders_key, id)
  if not was then return end
  local delta = {}
  agg_delta(delta, was, -1)
  redis.call('HDEL', orders_key, id)
  note_order(orders_key, id)
  if redis.call('EXISTS', orders_key) == 0 then
    redis.call('DEL', agg_key(orders_key))
  else
    agg_apply(orders_key, delta)
  end
end
