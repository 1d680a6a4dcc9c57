-- GET /campaigns/{id} and `voucher-admin campaign show` count a campaign's
-- codes by use (held, redeemed, free) from campaign_redemption (issue 44): the
-- gateway's role reads the campaign of each redemption too (020 gave it the
-- other columns for the support view). The index ix_campaign_redemption_campaign
-- (016) serves the count.
GRANT SELECT (campaign_id) ON campaign_redemption TO voucher_gateway;
