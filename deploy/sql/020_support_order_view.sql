-- GET /vouchers/{code}/reservations/{orderId} (support staff, admin token)
-- shows the figures a confirm with the final total stored, and works for a
-- campaign's code too (issue 44): the gateway reads those columns of
-- voucher_redemption, and the same ones of campaign_redemption, nothing more.
GRANT SELECT (confirmed_order_amount, confirmed_discount_amount)
    ON voucher_redemption TO voucher_gateway;
GRANT SELECT (order_id, code, customer_id, status, discount_amount, order_amount, held_until,
              created_at, updated_at, release_reason, confirmed_order_amount,
              confirmed_discount_amount)
    ON campaign_redemption TO voucher_gateway;
