-- What the scripts of a repair in slices share (proto/redis-keys.md, "A
-- restore in slices", "A retake in slices", "A lower in slices";
-- proto/campaigns.md, "A rebuild in slices"): a slice's read of the orders
-- hash (restore_slice.lua, retake_slice.lua, lower_slice.lua), and the last
-- step's count again of the orders noted written since the read began, with
-- its check of the orders hash's size (restore_finish.lua, retake_finish.lua,
-- lower_finish.lua, campaign_rebuild_finish.lua). The staged orders hold each
-- order as a slice counted it.
-- @include remaining_rule.lua

-- Reads the next piece of the orders hash (HSCAN orders_key cursor COUNT
-- count) and, for each order not read before (not among the staged orders;
-- HSCAN may return one twice), copies its value into staged_orders and adds
-- one to its customer's count in staged_users when it is held as taken (a
-- lower, which needs no customer's count, passes false: none kept); an H goes
-- into holds and an X or E into releasing, as tally_order() puts them
-- (release_at). Returns the next cursor ("0" at the end of the hash) and how
-- many orders read now are held as taken.
local function read_slice(orders_key, cursor, count, staged_orders, staged_users, holds,
                          releasing, release_at)
  local got = redis.call('HSCAN', orders_key, cursor, 'COUNT', count)
  local read, ids = got[2], {}
  for i = 1, #read, 2 do ids[#ids + 1] = read[i] end
  local before = hmget_all(staged_orders, ids)
  local copy, per, seen, taken = {}, {}, {}, 0
  for n, id in ipairs(ids) do
    local value = read[2 * n]
    if not before[n] and not seen[id] then
      seen[id] = true -- an orderId twice in one piece: counted once
      copy[#copy + 1] = id
      copy[#copy + 1] = value
      taken = taken + tally_order(value, id, 1, per, holds, releasing, release_at)
    end
  end
  call_in_slices('HSET', staged_orders, copy, 1000)
  if staged_users then
    for customer, n in pairs(per) do redis.call('HINCRBY', staged_users, customer, n) end
  end
  return got[1], taken
end

-- Calls each(orderId, was, now) for every order noted written since the read
-- began (ids: touched's members, less the "" scan_begin.lua puts there): was
-- its value as the slices counted it (staged_orders'; false when no slice
-- read it), now its value in orders_key (false when it is gone). Returns
-- whether the orders hash holds as many orders as the slices read plus the
-- notes say (each noted order there now that no slice read adds one, each
-- read and gone takes one): a size the notes do not explain (the hash expired
-- or was lost meanwhile, or changed without a note) means a count from it
-- would miss orders, and the caller gives up.
local function recount_noted(ids, staged_orders, orders_key, each)
  local size = redis.call('HLEN', staged_orders)
  local written = {}
  for _, id in ipairs(ids) do
    if id ~= '' then written[#written + 1] = id end
  end
  local was, now = hmget_all(staged_orders, written), hmget_all(orders_key, written)
  for n, id in ipairs(written) do
    each(id, was[n], now[n])
    if now[n] and not was[n] then size = size + 1 end
    if was[n] and not now[n] then size = size - 1 end
  end
  return redis.call('HLEN', orders_key) == size
end

-- The recount of a restore, a retake or a lower in slices (recount_noted()):
-- each noted order counted as it is now instead of as a slice counted it. live
-- (the uses the slices counted) and per (its customer's count, from nothing)
-- move by the difference; an H now goes into holds and an X or E into
-- releasing (release_at), as read_slice() puts them. Returns whether the size
-- is explained, live, and per.
local function recount_uses(ids, staged_orders, orders_key, live, holds, releasing, release_at)
  local per = {}
  local whole = recount_noted(ids, staged_orders, orders_key, function(id, was, now)
    if was then live = live + tally_order(was, id, -1, per) end
    if now then live = live + tally_order(now, id, 1, per, holds, releasing, release_at) end
  end)
  return whole, live, per
end

-- Ends the read of a voucher's repair in slices at its last step
-- (restore_finish.lua, retake_finish.lua, lower_finish.lua): its token out of
-- scan, touched dropped with the last token. refusal(kept) is the finish's
-- check of the keys, told whether the token was still there (if not, touched
-- may lack writes): the answer to give up with, or nil. On giving up the
-- staged keys (a list) are dropped. Returns that answer (nil: go on) and the
-- orderIds noted meanwhile (touched's members, for recount_noted()).
local function end_read(scan_key, touched_key, token, staged, refusal)
  local kept = redis.call('SREM', scan_key, token) == 1
  local ids = kept and redis.call('SMEMBERS', touched_key) or {}
  if redis.call('EXISTS', scan_key) == 0 then redis.call('DEL', touched_key) end
  local refused = refusal(kept)
  if refused then redis.call('UNLINK', unpack(staged)) end
  return refused, ids
end

-- Moves each customer's count in staged_users by per[customer], a count that
-- falls to 0 or below taken out (a customer holding no use has no count).
local function move_staged_counts(staged_users, per)
  for customer, n in pairs(per) do
    if n ~= 0 and redis.call('HINCRBY', staged_users, customer, n) <= 0 then
      redis.call('HDEL', staged_users, customer)
    end
  end
end
