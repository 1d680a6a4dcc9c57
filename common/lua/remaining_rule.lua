-- The remaining rule and the merge, shared by the counter repairs
-- (restore.lua, retake.lua, lower.lua): the build puts this file before each
-- of them. proto/redis-keys.md ("The remaining rule", "Why the counter
-- repairs are safe") says why each step is safe.
--
-- Redis may offer at most  total_limit - uncounted - live  uses, never fewer
-- than 0, where uncounted is the uses PostgreSQL's used_count counts with no
-- row (the reconciler reads it in one snapshot: used_count - live rows, not
-- below 0) and live is every order accounted for as taken: each order Redis
-- holds H, C, X or E now, plus each order the reconciler's snapshot counts
-- that Redis lacks (merged in first). vc_remaining_bound() in
-- common/vc_voucher.c is the same rule in C.

-- @include orders_write.lua
-- @include orders_lost.lua
-- @include order_value.lua

local function remaining_bound(total, uncounted, live)
  local bound = total - uncounted - live
  if bound < 0 then return 0 end
  return bound
end

-- The limit key sits beside the counter (voucher:{CODE}:limit, the same hash
-- tag, so the same slot): the total_limit the counter reflects
-- (proto/redis-keys.md, "The limit key"). A repair judges the counter against
-- that total when it exists: the reconciler's snapshot may be older than a
-- PATCH that moved the counter and the key together, and lowering to the old
-- total would undersell for good. The limit sync (limit_sync.lua) alone
-- brings the key to PostgreSQL's total.
local function limit_key(remaining_key)
  return voucher_key(remaining_key, 'limit')
end

local function limit_total(remaining_key, snapshot_total)
  return tonumber(redis.call('GET', limit_key(remaining_key))) or snapshot_total
end

local function taken_state(state)
  return STATE_TAKEN[state] == true
end

-- Counts one order's value (orderId id) into a tally: sign (1 or -1) times
-- the use it holds into per[customer], and with sign 1 its hold into holds
-- ({heldUntil, orderId, ...}) or its release begun into releasing
-- ({release_at, orderId, ...}), as restore.lua stages an order. Returns sign
-- when it holds a use, else 0.
local function tally_order(value, id, sign, per, holds, releasing, release_at)
  local customer, _, held, state = parse_order(value)
  local used = 0
  if state and taken_state(state) then
    used = sign
    per[customer] = (per[customer] or 0) + sign
  end
  if sign > 0 and state == STATE.HELD and tonumber(held) then
    holds[#holds + 1] = tonumber(held)
    holds[#holds + 1] = id
  elseif sign > 0 and (state == STATE.CANCEL_BEGUN or state == STATE.EXPIRY_BEGUN) then
    releasing[#releasing + 1] = release_at
    releasing[#releasing + 1] = id
  end
  return used
end

-- Counts the orders of all ({orderId, value, orderId, value, ...}) held as
-- taken, adding to live and per (how many, and how many per customer), and
-- calls each(orderId, value, state) for every order when given.
local function count_pairs(all, each, live, per)
  live, per = live or 0, per or {}
  for i = 1, #all, 2 do
    local customer, _, _, state = parse_order(all[i + 1])
    if state and taken_state(state) then
      live = live + 1
      per[customer] = (per[customer] or 0) + 1
    end
    if each and state then each(all[i], all[i + 1], state) end
  end
  return live, per
end

-- The orders Redis holds as taken, now: how many, and how many per customer.
-- Also calls each(orderId, value, state) for every order when given.
local function count_taken(orders_key, each)
  return count_pairs(redis.call('HGETALL', orders_key), each)
end

-- The values of fields of key (HMGET in slices of 1,000): values[i] is
-- fields[i]'s, false when it has none.
local function hmget_all(key, fields)
  local values = {}
  for i = 1, #fields, 1000 do
    local got = redis.call('HMGET', key, unpack(fields, i, math.min(i + 999, #fields)))
    for j = 1, #got do values[i + j - 1] = got[j] end
  end
  return values
end

-- Raises users[customer] to the orders the customer holds as taken. Never
-- lowers it: a count above the orders refuses the customer early, a count
-- below would let them past their limit for orders Redis lost. The hash is
-- left existing whenever orders does (a customer's 0 if nobody holds a use):
-- reserve.lua reads a users hash missing beside orders as lost, and refuses
-- until a rebuild like this one.
local function raise_users(users_key, per, orders_key)
  local customers = {}
  for customer in pairs(per) do customers[#customers + 1] = customer end
  local have, raise = hmget_all(users_key, customers), {}
  for i, customer in ipairs(customers) do
    if (tonumber(have[i] or '0') or 0) < per[customer] then
      raise[#raise + 1] = customer
      raise[#raise + 1] = per[customer]
    end
  end
  call_in_slices('HSET', users_key, raise, 1000)
  if redis.call('EXISTS', users_key) == 0 then
    local any = redis.call('HRANDFIELD', orders_key)
    local customer = any and parse_order(redis.call('HGET', orders_key, any) or '')
    if customer then redis.call('HSETNX', users_key, customer, 0) end
  end
end

-- Sets each customer's count in users to the orders they hold as taken,
-- lowering as well as raising. Only for a rebuild with nothing else taking
-- uses meanwhile (restore: no counter; rebuild.lua: no orders hash, so
-- reserve.lua refuses new orders): then no order outside orders holds a use,
-- and a count above the orders is a use lost with them (proto/redis-keys.md,
-- "A lost orders hash"). The hash is left existing whenever orders does.
local function set_users(users_key, per, orders_key)
  local counts = {}
  for customer, n in pairs(per) do
    if n > 0 then
      counts[#counts + 1] = customer
      counts[#counts + 1] = n
    end
  end
  -- UNLINK: a large hash is freed off Redis's main thread.
  redis.call('UNLINK', users_key)
  call_in_slices('HSET', users_key, counts, 1000)
  raise_users(users_key, {}, orders_key)
end

-- An order Redis lacks, written again from the reconciler's snapshot (value
-- "customerId:discount:heldUntilMs:state"): as X when releasing_key still
-- lists it (its release had begun: the reconciler publishes it again and
-- finishes it; H would make a cancelled order confirmable). lacking[i] is
-- {orderId, value, heldUntilMs, state}; each gets the value and state to
-- write, the releasing set read once per 1,000 orders (ZMSCORE). merge() and
-- campaign_rebuild.lua.
local function lacking_orders(releasing_key, lacking)
  if #lacking == 0 or redis.call('EXISTS', releasing_key) == 0 then return end
  for i = 1, #lacking, 1000 do
    local ids = {}
    for j = i, math.min(i + 999, #lacking) do ids[#ids + 1] = lacking[j][1] end
    local scores = redis.call('ZMSCORE', releasing_key, unpack(ids))
    for j = 1, #ids do
      local o = lacking[i + j - 1]
      if scores[j] and taken_state(o[4]) then
        local customer, discount, held = parse_order(o[2])
        o[2], o[4] = order_value(customer, discount, held, STATE.CANCEL_BEGUN), STATE.CANCEL_BEGUN
      end
    end
  end
end

-- Writes the orders of list ({orderId, value, heldUntilMs, state} each) and
-- puts each H among the holds, by its heldUntilMs. Returns what it wrote as
-- {orderId, value, ...}.
local function write_lacking(orders_key, holds_key, list)
  local pairs_, holds = {}, {}
  for _, o in ipairs(list) do
    pairs_[#pairs_ + 1] = o[1]
    pairs_[#pairs_ + 1] = o[2]
    if o[4] == STATE.HELD then
      holds[#holds + 1] = o[3]
      holds[#holds + 1] = o[1]
    end
  end
  write_orders(orders_key, pairs_)
  call_in_slices('ZADD', holds_key, holds, 1000)
  return pairs_
end

-- Merges the reconciler's orders, ARGV[first..] in fours: orderId, the value
-- the snapshot implies ("customerId:discount:heldUntilMs:state", state H, C or
-- R), heldUntilMs, and "1" when an order Redis holds R may be taken again
-- (an earlier pass saw it R too, so the snapshot is younger than its release
-- and still counts it) or "0". An order Redis holds is never dropped nor
-- changed, except such an R; an order Redis lacks is written as
-- lacking_orders() says. Returns how many were written, and what
-- ({orderId, value, ...}).
local function merge(orders_key, holds_key, releasing_key, first)
  local ids = {}
  for i = first, #ARGV - 3, 4 do ids[#ids + 1] = ARGV[i] end
  local have = hmget_all(orders_key, ids)
  local lacking, revived, seen = {}, {}, {}
  for n, id in ipairs(ids) do
    local i = first + 4 * (n - 1)
    local value, held, proven = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local state = order_state(value)
    -- An orderId twice in the arguments: the first one written wins, as it
    -- would have with one HGET each.
    local had = seen[id] or have[n]
    if state and (not had or
        (proven == '1' and order_state(had) == STATE.RELEASED and taken_state(state))) then
      local o = {id, value, held, state}
      if had then revived[#revived + 1] = o else lacking[#lacking + 1] = o end
      seen[id] = value
    end
  end
  lacking_orders(releasing_key, lacking)
  for _, o in ipairs(revived) do lacking[#lacking + 1] = o end
  return #lacking, write_lacking(orders_key, holds_key, lacking)
end

-- Lowers the counter to the rule's bound when it is above it; never raises
-- it and never takes it below 0. Returns 1 lowered or 0, and "before:after".
local function settle(remaining_key, total, uncounted, live)
  local before = tonumber(redis.call('GET', remaining_key))
  local after = remaining_bound(total, uncounted, live)
  if before and after < before then
    -- KEEPTTL: the counter keeps the expiry its voucher's keys share (Retention).
    redis.call('SET', remaining_key, after, 'KEEPTTL')
    return 1, before .. ':' .. after
  end
  return 0, tostring(before) .. ':' .. tostring(before)
end


-- Whether the voucher's orders hash is lost (orders_lost.lua), for a repair
-- that writes the outside key (outside.lua) after it lowered the counter or
-- adopted a limit key (retake, lower, limit_sync). Asked before the repair
-- changes anything (its own lowering would read as a loss), and while it
-- says yes the repair leaves the outside key as it is: the uses of the lost
-- orders would be written down as held back for no order, the loss hidden,
-- and reserve.lua would take a retry of a lost order for a new one. The
-- rebuild (rebuild.lua) writes the key once the orders are back.
local function voucher_orders_lost(remaining_key, orders_key)
  return orders_lost(orders_key, voucher_key(remaining_key, 'users'),
                     voucher_key(remaining_key, 'amounts'), remaining_key)
end

-- Retention (proto/redis-keys.md): a voucher's keys expire together, at its
-- endsAt plus VOUCHER_REDIS_RETENTION, the instant the gateway gave them when
-- it loaded the voucher. A rebuild (restore, retake) gives the counter, users,
-- orders and holds (KEYS[1..4]) and the orders' aggregate that instant again; releasing keeps none, as
-- release_begin.lua leaves it. expire_at 0 or absent: none is set.
local function expire_together(keys, expire_at)
  if not expire_at or expire_at <= 0 then return end
  for i = 1, 4 do redis.call('PEXPIREAT', keys[i], expire_at) end
  redis.call('PEXPIREAT', agg_key(keys[3]), expire_at)
end

-- A repair in steps (restore_swap.lua, rebuild_swap.lua) puts its staged keys
-- in place with RENAME, which keeps the staged keys' expiry: each of the
-- voucher's counter, users, orders and holds (keys[1..4]) gets the voucher's
-- instant; with none given ("0", as every repair script takes it; the
-- daemons' retention is never below 48 h), none.
local function expire_placed(keys, expire_at)
  if expire_at and expire_at > 0 then
    expire_together(keys, expire_at)
  else
    for i = 2, 4 do redis.call('PERSIST', keys[i]) end
    redis.call('PERSIST', agg_key(keys[3]))
  end
end

-- Replaces users by the staged customers' counts (absent: nobody holds a
-- use), as set_users() leaves it: existing whenever orders does.
local function place_users(users_key, staged_key, orders_key)
  redis.call('UNLINK', users_key)
  if redis.call('EXISTS', staged_key) == 1 then redis.call('RENAME', staged_key, users_key) end
  raise_users(users_key, {}, orders_key)
end
