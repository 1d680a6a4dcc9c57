#!/usr/bin/env bash
# The chaos suite's checker, checked: a history that breaks each invariant
# must be caught, and a clean one must pass. No servers needed (TAP).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/chaos-check.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
n=0
failed=0

# A clean history: voucher of 3 uses, per customer 1.
#   o1 201 confirmed; o2 201 cancelled; o3 201 left held; o4 409 OUT_OF_STOCK;
#   o5 503 (unknown) that did take a use; o6 timeout that did not.
clean() {
  printf '#attempt\torderId\tcustomerId\tstatus\terror\treplayed\tlatencyUs\ttries\tstartUs\tendUs\n'
  printf '0\to1\t1\t201\t-\t0\t1\t1\t0\t1\n'
  printf '1\to2\t2\t201\t-\t0\t1\t1\t0\t1\n'
  printf '2\to3\t3\t201\t-\t0\t1\t1\t0\t1\n'
  printf '3\to4\t4\t409\tOUT_OF_STOCK\t0\t1\t1\t0\t1\n'
  printf '4\to5\t5\t503\tUNAVAILABLE\t0\t1\t5\t0\t1\n'
  printf '5\to6\t6\ttimeout\t-\t0\t1\t5\t0\t1\n'
} 
clean_ops() { printf 'confirm\to1\t200\t1\nrelease\to2\t200\t1\n'; }
clean_rows() { printf 'o1\t1\tCONFIRMED\no2\t2\tRELEASED\no3\t3\tRESERVED\no5\t5\tRESERVED\n'; }
clean_samples() { printf '1\t0\t3\n2\t2\t3\n3\t3\t3\n4\t3\t3\n'; }

# The events of the clean history's rows, as the direct voucher's outbox relays them
# (o1 reserved and confirmed, o2 reserved and released, o3 and o5 reserved; o1's
# confirm sent twice, as a relay may after Kafka came back).
clean_events() {
  printf 'VoucherReserved\to1\nVoucherReserved\to2\nVoucherConfirmed\to1\nVoucherConfirmed\to1\n'
  printf 'VoucherReleased\to2\nVoucherReserved\to3\nVoucherReserved\to5\n'
}

# check NAME KEY WANT USED: runs check.awk on $scratch/{a,o,r,s}.tsv (and on
# $scratch/e.tsv as the events when events=1) and compares KEY's value with WANT.
events=0
check() {
  local got
  local -a ev=()
  [ "$events" = 1 ] && ev=(-v events_file="$scratch/e.tsv" "$scratch/e.tsv")
  got=$(awk -f "$here/check.awk" -v limit=3 -v per_user=1 -v used="$4" \
    -v attempts_file="$scratch/a.tsv" -v ops_file="$scratch/o.tsv" \
    -v rows_file="$scratch/r.tsv" -v samples_file="$scratch/s.tsv" "${ev[@]:0:2}" \
    "$scratch/a.tsv" "$scratch/o.tsv" "$scratch/r.tsv" "$scratch/s.tsv" "${ev[@]:2}" | sed -n "s/^$2=//p")
  n=$((n + 1))
  if [ "$got" = "$3" ]; then
    echo "ok $n - $1"
  else
    echo "not ok $n - $1 ($2: got '$got', want '$3')"
    failed=$((failed + 1))
  fi
}

reset() {
  clean >"$scratch/a.tsv"
  clean_ops >"$scratch/o.tsv"
  clean_rows >"$scratch/r.tsv"
  clean_samples >"$scratch/s.tsv"
  clean_events >"$scratch/e.tsv"
}

echo "1..43"
reset
for key in oversold duplicates over_per_user used_vs_rows lost_reservation lost_confirm lost_release phantom_row phantom_confirm customer_mismatch; do
  [ "$key" = oversold ] && check "a clean history passes" oversold 0 3 || check "a clean history has no $key" "$key" 0 3
done
check "the clean history counts its calls" attempts 6 3

reset
clean_rows | sed '/^o3/d' >"$scratch/r.tsv"
check "a 201 without a row is lost" lost_reservation 1 2

reset
{ clean_rows; printf 'o4\t4\tRESERVED\n'; } >"$scratch/r.tsv"
check "a row for a 409 is a phantom" phantom_row 1 4

reset
{ clean_samples; printf '5\t4\t3\n'; } >"$scratch/s.tsv"
check "a sample above the limit is an oversell" oversold 1 3

reset
clean_rows | sed 's/^o1\t1\tCONFIRMED/o1\t1\tRESERVED/' >"$scratch/r.tsv"
check "a confirm answered 200 on a RESERVED row is lost" lost_confirm 1 3

reset
{ clean_rows; printf 'o3\t3\tRESERVED\n'; } >"$scratch/r.tsv"
check "two rows for one orderId are duplicates" duplicates 1 4

reset
clean | sed 's/^2\to3\t3\t/2\to3\t1\t/' >"$scratch/a.tsv"
clean_rows | sed 's/^o3\t3\t/o3\t1\t/' >"$scratch/r.tsv"
check "two live uses of one customer above a limit of 1" over_per_user 1 3
check "... which are still theirs (no mismatch)" customer_mismatch 0 3

reset
check "used_count one below the live rows" used_vs_rows -1 2
check "used_count one above the live rows" used_vs_rows 1 4

reset
clean_rows | sed 's/^o2\t2\tRELEASED/o2\t2\tRESERVED/' >"$scratch/r.tsv"
check "a cancel answered 200 on a RESERVED row is lost" lost_release 1 4

reset
clean_rows | sed 's/^o3\t3\tRESERVED/o3\t3\tCONFIRMED/' >"$scratch/r.tsv"
check "a CONFIRMED row nobody confirmed is a phantom confirm" phantom_confirm 1 3
{ clean_ops; printf 'confirm\to3\t409\t1\n'; } >"$scratch/o.tsv"
check "... and so is one whose confirm was refused" phantom_confirm 1 3

reset
clean_rows | sed 's/^o3\t3\t/o3\t9\t/' >"$scratch/r.tsv"
check "a row under another customer than the call's" customer_mismatch 1 3

reset
{ clean; printf '6\to7\t7\t201\t-\t0\t1\t1\t0\t1\n'; } >"$scratch/a.tsv"
{ clean_rows; printf 'o7\t7\tRESERVED\n'; } >"$scratch/r.tsv"
check "a fourth live use of three is an oversell, seen in used_count and rows" oversold 1 4

reset
# Two more 201s whose rows never came: PostgreSQL counts 3 of 3, but four
# clients hold a promise (o1, o3, o7, o8).
{ clean; printf '6\to7\t7\t201\t-\t0\t1\t1\t0\t1\n7\to8\t8\t201\t-\t0\t1\t1\t0\t1\n'; } >"$scratch/a.tsv"
check "four 201s not given back for three uses oversell what clients were told" oversold 1 3

reset
{ clean; printf '6\to7\t7\t409\tHOLD_EXPIRED\t0\t1\t1\t0\t1\n'; } >"$scratch/a.tsv"
{ clean_rows; printf 'o7\t7\tRELEASED\n'; } >"$scratch/r.tsv"
check "a 409 HOLD_EXPIRED with a RELEASED row is no phantom" phantom_row 0 3
{ clean_rows; printf 'o7\t7\tRESERVED\n'; } >"$scratch/r.tsv"
check "a 409 HOLD_EXPIRED with a live row is a phantom" phantom_row 1 4

reset
{ clean; printf '6\to7\t7\t429\tTOO_MANY_ATTEMPTS\t0\t1\t3\t0\t1\n'; } >"$scratch/a.tsv"
{ clean_rows; printf 'o7\t7\tRELEASED\n'; } >"$scratch/r.tsv"
check "a 429 after unknown tries with a row is no phantom (a try before it may have taken the use)" phantom_row 0 3
{ clean; printf '6\to7\t7\t429\tTOO_MANY_ATTEMPTS\t0\t1\t1\t0\t1\n'; } >"$scratch/a.tsv"
check "a 429 at the first try with a row is a phantom" phantom_row 1 3

# The direct voucher's calls while Redis or Kafka is away: none may be unavailable.
reset
check "the clean history's 503 and timeout are unavailable" unavailable 2 3
check "... and no 429" n429 0 3
clean | sed '/^[45]\t/d' >"$scratch/a.tsv"
clean_rows | sed '/^o5/d' >"$scratch/r.tsv"
check "only answers at the first try: none unavailable" unavailable 0 2
{ clean | sed '/^[45]\t/d'; printf '4\to9\t9\t409\tOUT_OF_STOCK\t0\t1\t2\t0\t1\n'; } >"$scratch/a.tsv"
check "a 409 after a retried first try is unavailable" unavailable 1 2
clean | sed '/^[45]\t/d' >"$scratch/a.tsv"
{ clean_ops; printf 'confirm\to3\t200\t2\n'; } >"$scratch/o.tsv"
clean_rows | sed '/^o5/d; s/^o3\t3\tRESERVED/o3\t3\tCONFIRMED/' >"$scratch/r.tsv"
check "a confirm answered 200 at its second try is unavailable" unavailable 1 2
{ clean_ops; printf 'release\to3\t503\t4\n'; } >"$scratch/o.tsv"
check "a cancel answered 503 is unavailable" unavailable 1 2
reset
{ clean; printf '6\to7\t7\t429\tTOO_MANY_ATTEMPTS\t0\t1\t1\t0\t1\n'; } >"$scratch/a.tsv"
check "a 429 is counted" n429 1 3

# The direct voucher's events against its rows.
events=1
reset
check "every row has the events of its state" events_missing 0 3
check "... and every event has its row" events_phantom 0 3
clean_events | sed '/Confirmed/d' >"$scratch/e.tsv"
check "a CONFIRMED row without its VoucherConfirmed is missing an event" events_missing 1 3
clean_events | sed '/Reserved\to3/d' >"$scratch/e.tsv"
check "a row without its VoucherReserved is missing an event" events_missing 1 3
clean_events | sed '/Released/d' >"$scratch/e.tsv"
check "a RELEASED row without its VoucherReleased is missing an event" events_missing 1 3
{ clean_events; printf 'VoucherReserved\to4\n'; } >"$scratch/e.tsv"
check "an event of an order without a row is a phantom" events_phantom 1 3
events=0

[ "$failed" -eq 0 ]
