-- What the two scripts of a campaign's rebuild in slices share
-- (campaign_rebuild_slice.lua, campaign_rebuild_finish.lua; proto/campaigns.md,
-- "A rebuild in slices"). The rebuild runs only while the campaign's keys are
-- lost, which is what keeps every new order out (campaign_reserve.lua answers
-- -7): with taken lost (mode "1") taken must stay missing, and the whole of it
-- is staged; with users lost alone (mode "0") taken must stay and users stay
-- missing, and only the codes taken does not map as they should are staged.
-- In both the orders hash must still be there: a rebuild of a lost orders
-- hash is campaign_rebuild.lua's, in one script.

-- Whether the keys taken, users, orders are still lost as the rebuild in
-- mode began.
local function lost_as_begun(taken_key, users_key, orders_key, mode)
  if redis.call('EXISTS', orders_key) == 0 then return false end
  if mode == '1' then return redis.call('EXISTS', taken_key) == 0 end
  return redis.call('EXISTS', taken_key) == 1 and redis.call('EXISTS', users_key) == 0
end

-- A staged order: the code it was counted with, a space (never in a code nor
-- an order value), then its value as counted.
local function staged_order(code, value)
  return code .. ' ' .. value
end

-- The code and the value of a staged order (nil, nil for none).
local function staged_parts(staged)
  if not staged then return nil, nil end
  return string.match(staged, '^([^ ]*) (.*)$')
end
