-- release_finish.lua on a campaign's code (proto/campaigns.md):
-- campaign_guard.lua takes the campaign's keys and the code off KEYS and ARGV
-- and answers for an order that does not hold the code; the release is then
-- finished as release_finish.lua finishes a voucher's, and its use given back
-- to the campaign (the code freed). Keys, arguments and answers:
-- release_finish.lua's, then the guard's.
-- @include campaign_guard.lua
-- @include campaign_give_back.lua
-- @include finish_release.lua
return finish_release(campaign_give_back)
