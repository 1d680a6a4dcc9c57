-- Wraps forget.lua or release_finish.lua (after campaign_guard.lua): the
-- voucher script runs as a function, and campaign_give_back_end.lua frees the
-- code when it gave the use back (status 1). The voucher scripts give a use
-- back by INCR of a counter that exists; a campaign passes a key it never
-- writes (campaign:{cID}:remaining), so that part does nothing.
local campaign_result = (function()
