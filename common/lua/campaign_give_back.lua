-- A use given back to a campaign, as campaign_forget.lua and
-- campaign_release_finish.lua do it (after campaign_guard.lua, whose
-- campaign_taken and campaign_code it reads): the customer's count loses it
-- and the code may be taken again, by any customer of the campaign. A
-- campaign has no counter: the voucher scripts' first key is one it never
-- writes (campaign:{cID}:remaining), left as it is (the first argument).
-- @include give_back.lua
-- @include orders_write.lua
-- @include taken_write.lua
local function campaign_give_back(_, users_key, customer)
  uncount_use(users_key, customer)
  drop_code(campaign_taken, campaign_code)
end
