end)()
-- @include taken_write.lua
-- The use is back: the code may be taken again (by any customer of the campaign).
if campaign_result[1] == 1 then drop_code(campaign_taken, campaign_code) end
return campaign_result
