-- forget.lua on a campaign's code (proto/campaigns.md): campaign_guard.lua
-- takes the campaign's keys and the code off KEYS and ARGV and answers for an
-- order that does not hold the code; the hold is then forgotten as forget.lua
-- forgets a voucher's, and its use given back to the campaign (the code
-- freed). Keys, arguments and answers: forget.lua's, then the guard's.
-- @include campaign_guard.lua
-- @include campaign_give_back.lua
-- @include forget_hold.lua
return forget_hold(campaign_give_back)
