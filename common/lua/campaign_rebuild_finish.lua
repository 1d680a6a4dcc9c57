-- campaign_rebuild_finish: the last step of a campaign's rebuild in slices
-- (proto/campaigns.md, "A rebuild in slices"; campaign_rebuild_slice.lua
-- counted every order the pass read; remaining_rule.lua and repair_slices.lua,
-- its count again of the noted orders, come before this). At one moment:
-- ends the read (its token out of scan) and gives up, writing nothing but
-- dropping the staged keys, when the token was gone (the
-- notes may lack a write), the keys are no longer lost as the rebuild began,
-- an order came to hold a use that the slices did not count so (no script
-- does that while the keys are lost), or the orders hash changed without a
-- note (its size is not what the slices counted plus the notes say). Otherwise
-- each order written since the rebuild began (touched) is counted as it is
-- now instead of as a slice counted it: one that no longer holds a use (a
-- cancel's finish, a forget) leaves its customer's staged count and gives up
-- its code's claim. Each code written meanwhile (touched_codes) is checked
-- again against what taken maps now: the same two refusals as
-- campaign_rebuild.lua's. Then as campaign_rebuild.lua writes them: taken
-- (mode "1": the staged taken put in place, with "!"; mode "0": the staged
-- codes written into it), users replaced by the staged counts (set, lowered
-- too), the expiries.
--
-- KEYS[1] taken  KEYS[2] users  KEYS[3] orders  KEYS[4] holds  KEYS[5] scan
-- KEYS[6] touched  KEYS[7] touched_codes  KEYS[8] the staged orders
-- KEYS[9] the staged taken  KEYS[10] the staged users
-- ARGV[1] the read's token  ARGV[2] the mode ("1" taken lost, "0" users lost
-- alone)  ARGV[3] expireAt, as campaign_rebuild.lua takes it ("0" sets none)
-- ARGV[4] the orders the slices counted holding a use (their "held", summed);
-- "-1" when a slice refused: the read ends, the staged keys go, nothing else
-- ARGV[5] the orders the slices wrote
--
-- Returns {written, "codes:customers:0"} as campaign_rebuild.lua does;
-- {NOTES_LOST, false}; {CHANGED, false}; {CODE_TWICE, code}. Nothing but the
-- staged keys and the read's notes is written unless rebuilt.
-- @include repair_slices.lua
-- @include taken_write.lua
-- @include campaign_slices.lua
local mode = ARGV[2]
local function drop_staged() redis.call('UNLINK', KEYS[8], KEYS[9], KEYS[10]) end
local kept = redis.call('SREM', KEYS[5], ARGV[1]) == 1
local ids = kept and redis.call('SMEMBERS', KEYS[6]) or {}
local codes = kept and redis.call('SMEMBERS', KEYS[7]) or {}
if redis.call('EXISTS', KEYS[5]) == 0 then redis.call('DEL', KEYS[6], KEYS[7]) end
if not kept then
  drop_staged()
  return {CAMPAIGN_REBUILD.NOTES_LOST, false}
end
if tonumber(ARGV[4]) < 0 or not lost_as_begun(KEYS[1], KEYS[2], KEYS[3], mode) then
  drop_staged()
  return {CAMPAIGN_REBUILD.CHANGED, false}
end
local held, per, unclaim, gained = tonumber(ARGV[4]), {}, {}, false
local whole = recount_noted(ids, KEYS[8], KEYS[3], function(id, was, now)
  local code, value = staged_parts(was)
  local customer, _, _, state = parse_order(value or '')
  local held_was = state and taken_state(state)
  local state_now = now and order_state(now)
  local held_now = state_now and taken_state(state_now)
  -- No script makes an order hold a use while the keys are lost.
  if held_now and not held_was then gained = true end
  if held_was and not held_now then
    held = held - 1
    per[customer] = (per[customer] or 0) - 1
    unclaim[#unclaim + 1] = {code, id}
  end
end)
if gained or not whole then
  drop_staged()
  return {CAMPAIGN_REBUILD.CHANGED, false}
end
for _, c in ipairs(unclaim) do
  if redis.call('HGET', KEYS[9], c[1]) == c[2] then redis.call('HDEL', KEYS[9], c[1]) end
end
-- A code written meanwhile (mode "0": taken kept): what taken maps now.
for _, code in ipairs(codes) do
  local claim, mapped = redis.call('HGET', KEYS[9], code), redis.call('HGET', KEYS[1], code)
  if claim and mapped == claim then
    redis.call('HDEL', KEYS[9], code)
  elseif claim and mapped then
    local v = redis.call('HGET', KEYS[3], mapped)
    if v and taken_state(order_state(v)) then
      drop_staged()
      return {CAMPAIGN_REBUILD.CODE_TWICE, code}
    end
  end
end
move_staged_counts(KEYS[10], per)
redis.call('UNLINK', KEYS[8])
if mode == '1' then
  if redis.call('EXISTS', KEYS[9]) == 1 then replace_codes(KEYS[9], KEYS[1]) end
else
  local claims = redis.call('HGETALL', KEYS[9])
  redis.call('UNLINK', KEYS[9])
  write_code_list(KEYS[1], claims)
end
write_codes(KEYS[1], '!', '0')
local customers = redis.call('HLEN', KEYS[10])
-- Each count set to the orders held, lowered too, as set_users() does.
place_users(KEYS[2], KEYS[10], KEYS[3])
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('HSET', KEYS[2], '!', '0') end
-- taken and users as placed carry the staged keys' lifetime: the campaign's
-- instant, or none, as campaign_rebuild.lua leaves them.
local expire_at = tonumber(ARGV[3])
if expire_at and expire_at > 0 then
  expire_together(KEYS, expire_at)
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[2])
end
return {tonumber(ARGV[5]), held .. ':' .. customers .. ':0'}
