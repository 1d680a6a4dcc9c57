# Shared by the voucher's repair tests (sourced after lib.sh):
# test_restore_steps.sh (the orders hash lost: a restore or rebuild in steps),
# test_restore_slices.sh (the counter lost, the orders kept: a restore in
# slices) and test_retake_slices.sh (the users hash lost: a retake in slices).
# $code is the voucher under test; slices_lib.sh has the paused passes.

key() { echo "voucher:{$code}:$1"; }
reserve() { http POST "/vouchers/$code/reservations" "{\"customerId\":$1,\"orderId\":\"$2\",\"orderAmount\":500000}"; }
# Everything Redis holds of the voucher, as a restore writes it.
dump() {
  local k
  for k in remaining limit outside; do echo "$k $(rcli GET "$(key $k)")"; done
  for k in remaining users orders holds limit; do echo "$k expires $(rcli PEXPIRETIME "$(key $k)")"; done
  rcli HGETALL "$(key orders)" | paste - - | sort
  rcli HGETALL "$(key users)" | paste - - | sed 's/^/user /' | sort
  rcli ZRANGE "$(key holds)" 0 -1 WITHSCORES | paste - - | sed 's/^/hold /' | sort
  rcli ZRANGE "$(key releasing)" 0 -1 | sed 's/^/releasing /' | sort
}
staged_pattern() { echo "voucher:{$code}:restoring:*"; }
orders_key() { key orders; }
source "$(dirname "${BASH_SOURCE[0]}")/slices_lib.sh"

# fill_voucher NAME CUSTOMER_BASE: $code, a voucher of 3,000 uses, two a customer,
# with 2,100 holds of 1,500 customers, 40 confirmed, 20 cancelled (their uses
# back), PostgreSQL caught up (two checks).
fill_voucher() {
  code=$(unique_code "$1")
  new_voucher "$code" 3000 2
  "$bin_load" --code "$code" --attempts 2100 --connections 50 --customers 1500 \
    --customer-base "$2" --order-prefix "$code-" --amount 500000 >"$scratch/load.txt" 2>&1
  ok $? "2,100 holds taken on a voucher of 3,000"
  for i in $(seq 0 39); do http POST "/vouchers/$code/reservations/$code-$i/confirm" >/dev/null; done
  for i in $(seq 40 59); do http DELETE "/vouchers/$code/reservations/$code-$i" >/dev/null; done
  is "$(wait_sql "SELECT used_count FROM voucher WHERE code = '$code'" 2080 60) $(wait_sql \
    "SELECT count(*) FROM voucher_redemption WHERE voucher_code = '$code' AND status = 'CONFIRMED'" 40 30)" \
    "2080 40" "PostgreSQL counts 2,080 uses, 40 confirmed"
}

# notes_lost_between_slices NAME AT: a paused pass (one_pass_paused NAME, its
# output in $scratch/NAME.txt) let on until its slices have read AT orders or
# more, its read's token then taken out of the scan key (the notes of what was
# written meanwhile lost), and let go to its end; one check: that it stopped
# between two slices.
notes_lost_between_slices() {
  one_pass_paused "$1"
  staged_until -ge "$2"
  ok $? "again the reconciler stops between two slices"
  rcli DEL "$(key scan)" >/dev/null
  run_out
}
