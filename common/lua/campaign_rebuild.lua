-- Rebuilds what Redis lost of a campaign (remaining_rule.lua comes before
-- this: taken_state, count_pairs, hmget_all, raise_users, set_users,
-- lacking_orders, write_lacking, expire_together): the orders PostgreSQL and the
-- events in flight count that Redis lacks, the taken hash (code -> orderId for
-- every order holding a use) and the users hash: each customer set to the
-- orders they hold when taken was lost (lowered too: see below), else raised
-- to them and never lowered. The campaign's restore and retake in one
-- script (proto/campaigns.md, "The reconciler's repairs").
--
-- One atomic step: campaign_reserve.lua refuses every new order (-7) while
-- taken or users is missing, so no code can be taken twice in the meantime,
-- and after this runs every order holding a use has its code in taken.
-- Everything is checked before anything is written: an order holding a use
-- whose code nobody knows (not in the reconciler's arguments, not in taken),
-- or two such orders on one code, refuse the whole rebuild.
--
-- An order Redis holds is never dropped nor changed; one it lacks is written
-- from the snapshot, as X when releasing still lists it (lacking_orders()).
--
-- KEYS[1] taken  KEYS[2] users  KEYS[3] orders  KEYS[4] holds  KEYS[5] releasing
-- ARGV[1] expireAt: the campaign's endsAt plus the retention, "0" sets none
-- then fours: orderId, code, the value the snapshot implies
-- ("customerId:discount:heldUntilMs:state", state H, C or R), heldUntilMs;
-- the value "" for an order only Redis holds whose code taken no longer
-- names (its orderId's claim does: rc_campaign.c, claimed_codes()): the code
-- alone, nothing written
--
-- Returns {n, "codes:customers:freed"}: n orders written, the codes taken
-- and the customers counted after, the codes freed (orders lost: taken by no
-- order the snapshot or Redis holds); {-2, orderId}: an order holds a use and its code
-- is unknown; {-3, code}: two orders hold one code. Nothing is written then.
-- @include remaining_rule.lua
-- @include order_value.lua
-- @include taken_write.lua
-- taken lost: the reconciler waited the restore delay from the loss to its
-- snapshot (rc_campaign.c), and campaign_reserve.lua refused every new order
-- since, so every order holding a use is in orders or written below: a count
-- above them is a use lost with a hold whose event was never stored, and it
-- is lowered (the explorer's campaign-users-high: else that customer stays
-- counted for good). Otherwise a count is only raised.
local taken_lost = redis.call('EXISTS', KEYS[1]) == 0
-- orders lost (campaign_lost.lua's sign: amounts without orders): the same
-- wait and the same refusal, so every order holding a use is written below
-- from the snapshot, and a code taken for an order that is not among them was
-- taken by a hold whose event was never stored (its 503 told the client the
-- outcome was unknown): it is freed, and the counts are set, not raised (the
-- explorer's campaign-taken-orphan: else the code stays taken for good).
local amounts_key = (string.gsub(KEYS[3], ':orders$', ':amounts'))
local orders_lost = redis.call('EXISTS', KEYS[3]) == 0 and
                    redis.call('EXISTS', amounts_key) == 1
local code_of, write, ids, queued = {}, {}, {}, {}
for i = 2, #ARGV - 3, 4 do ids[#ids + 1] = ARGV[i] end
local have = hmget_all(KEYS[3], ids)
for n, id in ipairs(ids) do
  local i = 2 + 4 * (n - 1)
  local code, value, held = ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  code_of[id] = code
  local state = order_state(value)
  if state and not have[n] and not queued[id] then
    queued[id] = true
    write[#write + 1] = {id, value, held, state}
  end
end
lacking_orders(KEYS[5], write)
-- taken as it is now: nothing is written before the checks below.
local taken, taken_by = redis.call('HGETALL', KEYS[1]), {}
for i = 1, #taken, 2 do
  taken_by[taken[i]] = taken[i + 1]
  if taken[i] ~= '!' and not code_of[taken[i + 1]] then code_of[taken[i + 1]] = taken[i] end
end
-- Every order that will hold a use, and its code: checked before any write.
local holder = {}
local function claim(id, state)
  if not taken_state(state) then return nil end
  local code = code_of[id]
  if not code then return {CAMPAIGN_REBUILD.CODE_UNKNOWN, id} end
  if holder[code] and holder[code] ~= id then return {CAMPAIGN_REBUILD.CODE_TWICE, code} end
  holder[code] = id
  return nil
end
local orders = redis.call('HGETALL', KEYS[3])
for i = 1, #orders, 2 do
  local refused = claim(orders[i], order_state(orders[i + 1]) or '')
  if refused then return refused end
end
for _, w in ipairs(write) do
  local refused = claim(w[1], w[4])
  if refused then return refused end
end
-- A code taken by an order that does not hold it now is left as it is: only
-- a live order may claim a taken code (undersell at worst, never two uses).
for code, id in pairs(holder) do
  local have = taken_by[code]
  if have and have ~= id then
    local v = redis.call('HGET', KEYS[3], have)
    if v and taken_state(order_state(v)) then return {CAMPAIGN_REBUILD.CODE_TWICE, code} end
  end
end
local written = write_lacking(KEYS[3], KEYS[4], write)
local freed = 0
if orders_lost then
  for i = 1, #taken, 2 do
    if taken[i] ~= '!' and holder[taken[i]] ~= taken[i + 1] then
      drop_code(KEYS[1], taken[i])
      freed = freed + 1
    end
  end
end
local codes = {}
for code, id in pairs(holder) do
  codes[#codes + 1] = code
  codes[#codes + 1] = id
end
codes[#codes + 1] = '!'
codes[#codes + 1] = '0'
write_code_list(KEYS[1], codes)
-- orders now: what it held (read above, nothing dropped since) and what was
-- written, each order once (only orders it lacked were written).
local live, per = count_pairs(orders)
live, per = count_pairs(written, nil, live, per)
if taken_lost or orders_lost then
  set_users(KEYS[2], per, KEYS[3])
else
  raise_users(KEYS[2], per, KEYS[3])
end
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('HSET', KEYS[2], '!', '0') end
-- Still no orders (the snapshot knows none): amounts, which told their loss
-- (campaign_lost.lua), goes too, or new orders would stay refused.
if redis.call('EXISTS', KEYS[3]) == 0 then redis.call('DEL', amounts_key) end
expire_together(KEYS, tonumber(ARGV[1]))
local customers = 0
for _ in pairs(per) do customers = customers + 1 end
return {#write, live .. ':' .. customers .. ':' .. freed}
