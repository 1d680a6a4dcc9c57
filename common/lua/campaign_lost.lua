-- Whether a campaign's keys were lost, the one rule for every script that
-- reads it (included by campaign_reserve.lua, campaign_due.lua and
-- campaign_guard.lua): taken or users missing while
-- another of taken, users, orders exists, or while PostgreSQL says Redis had
-- the campaign's keys (loaded "1": campaign.redis_loaded_at, deploy/sql/017).
-- Neither taken (its "!" field) nor users (a 0 per customer) is ever emptied
-- by a give-back, so missing beside the others is a loss, never an empty
-- campaign (proto/campaigns.md, "Redis").
local function campaign_keys_lost(taken, users, orders, loaded)
  local has_taken, has_users = redis.call('EXISTS', taken), redis.call('EXISTS', users)
  if has_taken == 1 and has_users == 1 then return false end
  return loaded == '1' or has_taken + has_users + redis.call('EXISTS', orders) > 0
end
