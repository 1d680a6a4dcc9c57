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
  return (string.gsub(remaining_key, ':remaining$', ':limit'))
end

local function limit_total(remaining_key, snapshot_total)
  return tonumber(redis.call('GET', limit_key(remaining_key))) or snapshot_total
end

local function taken_state(state)
  return state == 'H' or state == 'C' or state == 'X' or state == 'E'
end

-- The orders Redis holds as taken, now: how many, and how many per customer.
-- Also calls each(orderId, value, state) for every order when given.
local function count_taken(orders_key, each)
  local all = redis.call('HGETALL', orders_key)
  local live, per = 0, {}
  for i = 1, #all, 2 do
    local customer, state = string.match(all[i + 1], '^([^:]*):[^:]*:[^:]*:(.)$')
    if state and taken_state(state) then
      live = live + 1
      per[customer] = (per[customer] or 0) + 1
    end
    if each and state then each(all[i], all[i + 1], state) end
  end
  return live, per
end

-- Raises users[customer] to the orders the customer holds as taken. Never
-- lowers it: a count above the orders refuses the customer early, a count
-- below would let them past their limit for orders Redis lost. The hash is
-- left existing whenever orders does (a customer's 0 if nobody holds a use):
-- reserve.lua reads a users hash missing beside orders as lost, and refuses
-- until a rebuild like this one.
local function raise_users(users_key, per, orders_key)
  for customer, n in pairs(per) do
    local have = tonumber(redis.call('HGET', users_key, customer) or '0') or 0
    if have < n then redis.call('HSET', users_key, customer, n) end
  end
  if redis.call('EXISTS', users_key) == 0 then
    local any = redis.call('HRANDFIELD', orders_key)
    local customer = any and string.match(redis.call('HGET', orders_key, any) or '', '^([^:]*):')
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
  redis.call('DEL', users_key)
  for customer, n in pairs(per) do
    if n > 0 then redis.call('HSET', users_key, customer, n) end
  end
  raise_users(users_key, {}, orders_key)
end

-- An order Redis lacks, written again from the reconciler's snapshot (value
-- "customerId:discount:heldUntilMs:state"): as X when releasing_key still
-- lists it (its release had begun: the reconciler publishes it again and
-- finishes it; H would make a cancelled order confirmable). Returns the value
-- and the state to write. merge() and campaign_rebuild.lua.
local function lacking_order(releasing_key, id, value, state)
  if taken_state(state) and redis.call('ZSCORE', releasing_key, id) then
    return string.sub(value, 1, -2) .. 'X', 'X'
  end
  return value, state
end

-- Merges the reconciler's orders, ARGV[first..] in fours: orderId, the value
-- the snapshot implies ("customerId:discount:heldUntilMs:state", state H, C or
-- R), heldUntilMs, and "1" when an order Redis holds R may be taken again
-- (an earlier pass saw it R too, so the snapshot is younger than its release
-- and still counts it) or "0". An order Redis holds is never dropped nor
-- changed, except such an R; an order Redis lacks is written as
-- lacking_order() says. Returns how many were written.
local function merge(orders_key, holds_key, releasing_key, first)
  local written = 0
  for i = first, #ARGV - 3, 4 do
    local id, value, held, proven = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local state = string.match(value, '^[^:]*:[^:]*:[^:]*:(.)$')
    local have = redis.call('HGET', orders_key, id)
    if state and (not have or
        (proven == '1' and string.sub(have, -1) == 'R' and taken_state(state))) then
      if not have then value, state = lacking_order(releasing_key, id, value, state) end
      write_order(orders_key, id, value)
      if state == 'H' then redis.call('ZADD', holds_key, held, id) end
      written = written + 1
    end
  end
  return written
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


-- Retention (proto/redis-keys.md): a voucher's keys expire together, at its
-- endsAt plus VOUCHER_REDIS_RETENTION, the instant the gateway gave them when
-- it loaded the voucher. A rebuild (restore, retake) gives the counter, users,
-- orders and holds (KEYS[1..4]) that instant again; releasing keeps none, as
-- release_begin.lua leaves it. expire_at 0 or absent: none is set.
local function expire_together(keys, expire_at)
  if not expire_at or expire_at <= 0 then return end
  for i = 1, 4 do redis.call('PEXPIREAT', keys[i], expire_at) end
end
