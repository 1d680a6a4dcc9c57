-- Whether a campaign's keys were lost, the one rule for every script that
-- reads it (included by campaign_reserve.lua, campaign_due.lua and
-- campaign_guard.lua): taken or users missing while
-- another of taken, users, orders exists, or while PostgreSQL says Redis had
-- the campaign's keys (loaded "1": campaign.redis_loaded_at, deploy/sql/017).
-- Neither taken (its "!" field) nor users (a 0 per customer) is ever emptied
-- by a give-back, so missing beside the others is a loss, never an empty
-- campaign (proto/campaigns.md, "Redis").
-- orders lost beside them: amounts (the same hash tag, named from orders)
-- keeps an entry for each order orders holds that a reservation wrote, and
-- forget.lua drops both together, so amounts without orders is a lost orders
-- hash (its released orders with it: a retry of a cancelled orderId would take
-- a code anew and get a 201 PostgreSQL keeps RELEASED; the explorer's
-- campaign-answer-after-cancel).
local function campaign_keys_lost(taken, users, orders, loaded)
  local has_taken, has_users = redis.call('EXISTS', taken), redis.call('EXISTS', users)
  local has_orders = redis.call('EXISTS', orders)
  if has_taken == 1 and has_users == 1 then
    return has_orders == 0 and
           redis.call('EXISTS', (string.gsub(orders, ':orders$', ':amounts'))) == 1
  end
  return loaded == '1' or has_taken + has_users + has_orders > 0
end
