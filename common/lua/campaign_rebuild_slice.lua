-- campaign_rebuild_slice: one slice of a campaign's rebuild in slices
-- (proto/campaigns.md, "A rebuild in slices"; remaining_rule.lua comes before
-- this). A campaign whose taken (or users) hash Redis lost, with more orders
-- than the reconciler reads at once, is rebuilt without one script holding
-- Redis for every order (campaign_rebuild.lua: 1.1 s for 100,000). While the
-- keys are lost campaign_reserve.lua takes nothing (-7), but with users lost
-- alone the guarded confirms, cancels, releases and forgets of existing orders
-- still write orders and taken: each such write is noted (touched,
-- touched_codes) by the read's token in scan (scan_begin.lua, orders_write.lua,
-- taken_write.lua), and campaign_rebuild_finish.lua counts those orders again
-- at one moment.
--
-- Each call takes a slice of the orders the reconciler's pass read (Redis's
-- and the snapshot's), each with its code: it reads their values now, writes
-- those of the snapshot that Redis lacks (as campaign_rebuild.lua: X where
-- releasing lists them, an H among the holds; noted like any write), and for
-- each order not counted before copies its code and value into the staged
-- orders; one that holds a use adds one to its customer's staged count and
-- claims its code: staged into the staged taken (mode "1": every code; mode
-- "0": a code taken does not map to it). Checked before this slice writes
-- anything, as campaign_rebuild.lua checks before it writes: an order holding
-- a use with no code known, or a code another order holds (staged, or mapped
-- by taken to an order that holds a use now), refuse.
--
-- KEYS[1] taken  KEYS[2] users  KEYS[3] orders  KEYS[4] holds
-- KEYS[5] releasing  KEYS[6] scan  KEYS[7] the staged orders
-- KEYS[8] the staged taken  KEYS[9] the staged users
-- (campaign:{cID}:rebuilding:TOKEN:orders, :taken, :users)
-- ARGV[1] the read's token (in scan since scan_begin.lua)
-- ARGV[2] the mode: "1" taken lost, "0" users lost alone
-- ARGV[3] how long the staged keys live (ms): a reconciler that stops midway
-- leaves nothing for good
-- then fours: orderId, its code ("" when the pass knows none), the value the
-- snapshot implies ("customerId:discount:heldUntilMs:state"; "" for an order
-- only Redis holds: nothing written), heldUntilMs
--
-- Returns {READ, "held:written"}: how many orders counted now hold a use, how
-- many were written; {NOTES_LOST, false} the token gone; {CHANGED, false} the
-- keys no longer lost as begun; {CODE_UNKNOWN, orderId}; {CODE_TWICE, code}.
-- Nothing is written by a call that refuses.
-- @include remaining_rule.lua
-- @include campaign_slices.lua
local mode = ARGV[2]
if redis.call('SISMEMBER', KEYS[6], ARGV[1]) == 0 then
  return {CAMPAIGN_REBUILD.NOTES_LOST, false}
end
if not lost_as_begun(KEYS[1], KEYS[2], KEYS[3], mode) then
  return {CAMPAIGN_REBUILD.CHANGED, false}
end
local ids = {}
for i = 4, #ARGV - 3, 4 do ids[#ids + 1] = ARGV[i] end
local now, before = hmget_all(KEYS[3], ids), hmget_all(KEYS[7], ids)
local lacking, counted, seen = {}, {}, {}
for n, id in ipairs(ids) do
  local i = 4 + 4 * (n - 1)
  local code, value = ARGV[i + 1], now[n]
  if not value then
    local state = order_state(ARGV[i + 2])
    if state then
      value = ARGV[i + 2]
      lacking[#lacking + 1] = {id, value, ARGV[i + 3], state}
    end
  end
  -- An orderId twice, or counted by an earlier slice: counted once.
  if value and not before[n] and not seen[id] then
    seen[id] = true
    counted[#counted + 1] = {id, code, value}
  end
end
-- The state a lacking order gets written in (X where releasing lists it).
lacking_orders(KEYS[5], lacking)
local lacking_of = {}
for _, o in ipairs(lacking) do lacking_of[o[1]] = o[2] end
-- Every claim checked before anything is written; the staged and taken
-- codes read in bulk (HMGET), not one call per order.
local holding, claims, claimed, held, per = {}, {}, {}, 0, {}
for _, o in ipairs(counted) do
  o[3] = lacking_of[o[1]] or o[3]
  local customer, _, _, state = parse_order(o[3])
  if state and taken_state(state) then
    if o[2] == '' then return {CAMPAIGN_REBUILD.CODE_UNKNOWN, o[1]} end
    holding[#holding + 1] = {o[1], o[2], customer}
  end
end
local codes = {}
for n, h in ipairs(holding) do codes[n] = h[2] end
local staged_by = hmget_all(KEYS[8], codes)
local mapped_by = mode == '0' and hmget_all(KEYS[1], codes) or {}
for n, h in ipairs(holding) do
  local id, code, customer = h[1], h[2], h[3]
  local other = claimed[code] or staged_by[n]
  if other and other ~= id then return {CAMPAIGN_REBUILD.CODE_TWICE, code} end
  local mapped = mapped_by[n]
  if mapped and mapped ~= id then
    local v = redis.call('HGET', KEYS[3], mapped)
    if v and taken_state(order_state(v)) then return {CAMPAIGN_REBUILD.CODE_TWICE, code} end
  end
  claimed[code] = id
  if mapped ~= id then
    claims[#claims + 1] = code
    claims[#claims + 1] = id
  end
  held = held + 1
  per[customer] = (per[customer] or 0) + 1
end
write_lacking(KEYS[3], KEYS[4], lacking)
local copy = {}
for _, o in ipairs(counted) do
  copy[#copy + 1] = o[1]
  copy[#copy + 1] = staged_order(o[2], o[3])
end
call_in_slices('HSET', KEYS[7], copy, 1000)
call_in_slices('HSET', KEYS[8], claims, 1000)
local customers, counts = {}, {}
for customer in pairs(per) do customers[#customers + 1] = customer end
local had = hmget_all(KEYS[9], customers)
for n, customer in ipairs(customers) do
  counts[#counts + 1] = customer
  counts[#counts + 1] = (tonumber(had[n]) or 0) + per[customer]
end
call_in_slices('HSET', KEYS[9], counts, 1000)
for i = 7, 9 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
end
return {CAMPAIGN_REBUILD_SLICE.READ, held .. ':' .. #lacking}
