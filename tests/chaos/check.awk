# The history checker of the chaos suite, in the spirit of Jepsen's checkers:
# every client call was recorded with its final outcome while the faults ran;
# once the system settled, PostgreSQL's rows are compared with that history.
#
#   awk -f check.awk -v limit=N -v per_user=N -v used=N \
#       -v attempts_file=F -v ops_file=F -v rows_file=F -v samples_file=F  F F F F
#       [-v events_file=F  F]
#
# Inputs (tab-separated):
#   attempts_file  vc-load --out: attempt orderId customerId status error replayed ...
#                  one line per reservation attempt, with its final answer after retries
#   ops_file       op orderId status tries: the confirms (POST .../confirm) and
#                  releases (DELETE) the driver sent for some of the 201s
#   rows_file      order_id customer_id status: voucher_redemption for the voucher
#   samples_file   epochMs used_count total_limit: PostgreSQL sampled during the run
#   events_file    type orderId: the voucher's events read back from voucher-events
#                  (optional; the direct voucher of direct-outage, whose events its
#                  outbox relays): every row must have the events of its state, and
#                  no event may name an order without a row
#
# An outcome is ok (201 for a reservation, 200 for a confirm or release),
# rejected (any 4xx: the service said no, definitely), or unknown (503, a
# timeout, a broken connection, anything else): an unknown call may or may not
# have taken effect, and either is allowed. A call that needed more than one
# try had an unknown outcome at its first (vc-load and the order service retry
# only those): both count as "unavailable", which a direct voucher must never
# be while Redis or Kafka is away, and a flash one must be then.
#
# Prints key=value lines: the counts of the table and one count per invariant
# (0 when it holds), then "example.<invariant>=orderId" for the first cases.

BEGIN {
    FS = "\t"
    split("attempts n201 n409 n422 n4xx unknown nrows live samples peak promised " \
          "oversold duplicates over_per_user used_vs_rows lost_reservation lost_confirm " \
          "lost_release phantom_row phantom_confirm customer_mismatch confirms_ok " \
          "releases_ok confirms_sent releases_sent n429 unavailable events events_missing " \
          "events_phantom", keys, " ")
    for (i in keys)
        out[keys[i]] = 0
}

function rejected(status) { return status ~ /^4[0-9][0-9]$/ }
function unknown_outcome(status) { return status != "201" && status != "200" && !rejected(status) }

function example(what, order) {
    if (!((what) in examples))
        examples[what] = order
}

FILENAME == attempts_file {
    if ($1 ~ /^#/ || NF < 5)
        next
    out["attempts"]++
    # A 429 refuses before the order is read: after earlier tries of the same orderId (tries
    # > 1, each unknown: vc-load retries only those), it says nothing about whether one of them
    # took the use, so the attempt's outcome is unknown, not rejected.
    if ($4 == "429" && $8 + 0 > 1)
        $4 = "429-after-unknown"
    if ($4 ~ /^429/)
        out["n429"]++
    if (unknown_outcome($4) || $8 + 0 > 1) {
        out["unavailable"]++
        example("unavailable", $2 " (reserve: " $4 ", " $8 " tries)")
    }
    reservation[$2] = $4
    reservation_error[$2] = $5
    reservation_customer[$2] = $3
    if ($4 == "201")
        out["n201"]++
    else if ($4 == "409")
        out["n409"]++
    else if ($4 == "422")
        out["n422"]++
    else if (rejected($4))
        out["n4xx"]++
    else
        out["unknown"]++
    next
}

FILENAME == ops_file {
    if (NF < 3)
        next
    if (unknown_outcome($3) || $4 + 0 > 1) {
        out["unavailable"]++
        example("unavailable", $2 " (" $1 ": " $3 ", " $4 " tries)")
    }
    if ($1 == "confirm") {
        confirm[$2] = $3
        out["confirms_sent"]++
        if ($3 == "200")
            out["confirms_ok"]++
    } else if ($1 == "release") {
        release[$2] = $3
        out["releases_sent"]++
        if ($3 == "200")
            out["releases_ok"]++
    }
    next
}

FILENAME == rows_file {
    if (NF < 3)
        next
    out["nrows"]++
    rows[$1]++
    row_customer[$1] = $2
    row_status[$1] = $3
    if ($3 != "RELEASED") {
        out["live"]++
        live_by_customer[$2]++
    }
    next
}

FILENAME == events_file {
    if (NF < 2)
        next
    out["events"]++
    events[$2, $1]++
    event_order[$2] = 1
    next
}

FILENAME == samples_file {
    if (NF < 3 || $2 !~ /^[0-9]+$/)
        next
    out["samples"]++
    if ($2 + 0 > out["peak"])
        out["peak"] = $2 + 0
    next
}

END {
    # No orderId has two rows (the UNIQUE constraint says so; we check it anyway).
    for (o in rows)
        if (rows[o] > 1) {
            out["duplicates"]++
            example("duplicates", o)
        }

    # No customer holds more live uses than per_user_limit.
    for (c in live_by_customer)
        if (live_by_customer[c] > per_user) {
            out["over_per_user"]++
            example("over_per_user", "customer " c)
        }

    # used_count equals the number of non-RELEASED rows.
    if (used != out["live"])
        out["used_vs_rows"] = used - out["live"]

    for (o in reservation) {
        if (reservation[o] != "201")
            continue
        # An acknowledged reservation is never lost: a 201 has exactly one row.
        if (!(o in rows)) {
            out["lost_reservation"]++
            example("lost_reservation", o)
        }
        # What the clients were promised: every 201 whose use was not given back.
        if (!(o in rows) || row_status[o] != "RELEASED")
            out["promised"]++
    }

    for (o in confirm) {
        # A confirm answered 200, with no cancel after it, leaves the row CONFIRMED.
        if (confirm[o] == "200" && !(o in release) && row_status[o] != "CONFIRMED") {
            out["lost_confirm"]++
            example("lost_confirm", o)
        }
    }
    for (o in release) {
        # A cancel answered 200 leaves the row RELEASED.
        if (release[o] == "200" && row_status[o] != "RELEASED") {
            out["lost_release"]++
            example("lost_release", o)
        }
    }

    for (o in rows) {
        # Every row belongs to a 201 or to a call whose outcome is unknown, never
        # to a rejected one. The one rejection that admits a row: 409
        # HOLD_EXPIRED on a retry, which says the order's use was taken and then
        # released, and the row must say RELEASED.
        if (!(o in reservation)) {
            out["phantom_row"]++
            example("phantom_row", o " (no such call)")
        } else if (rejected(reservation[o]) &&
                   !(reservation_error[o] == "HOLD_EXPIRED" && row_status[o] == "RELEASED")) {
            out["phantom_row"]++
            example("phantom_row", o " (answered " reservation[o] " " reservation_error[o] ")")
        } else if (row_customer[o] != reservation_customer[o]) {
            out["customer_mismatch"]++
            example("customer_mismatch", o)
        }
        # A CONFIRMED row needs a confirm that was answered 200 or not answered.
        if (row_status[o] == "CONFIRMED" &&
            (!(o in confirm) || rejected(confirm[o]))) {
            out["phantom_confirm"]++
            example("phantom_confirm", o)
        }
    }

    # Events stay the record: every row has the events of the changes it went through
    # (a copy sent twice is allowed), and no event names an order without a row.
    if (events_file != "") {
        for (o in rows) {
            if (!((o, "VoucherReserved") in events) ||
                (row_status[o] == "CONFIRMED" && !((o, "VoucherConfirmed") in events)) ||
                (row_status[o] == "RELEASED" && !((o, "VoucherReleased") in events))) {
                out["events_missing"]++
                example("events_missing", o " (" row_status[o] ")")
            }
        }
        for (o in event_order)
            if (!(o in rows)) {
                out["events_phantom"]++
                example("events_phantom", o)
            }
    }

    # Never oversell: not in PostgreSQL at any sampled moment, not at the end,
    # and not in what the clients were told.
    over = out["peak"] - limit
    if (used - limit > over) over = used - limit
    if (out["live"] - limit > over) over = out["live"] - limit
    if (out["promised"] - limit > over) over = out["promised"] - limit
    out["oversold"] = over > 0 ? over : 0

    for (i = 1; i in keys; i++)
        print keys[i] "=" out[keys[i]]
    for (w in examples)
        print "example." w "=" examples[w]
}
