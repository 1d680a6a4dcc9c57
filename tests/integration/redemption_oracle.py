#!/usr/bin/env python3
"""Every SQL apply path of the writer, on a real PostgreSQL, against the one
transition table (common/vc_redemption.h, printed by redemption_table).

For each path (wr_apply_events_seq, _set, _fresh, the dispatcher
wr_apply_events and the writer's wr_apply_batch), each start status of a
redemption (no row, RESERVED, CONFIRMED, RELEASED: the row written directly,
used_count to match) and each sequence of one to three events of that order,
applied once as one batch and once one call per event: every event's outcome,
the final status and used_count must be what folding the table gives. A path
may decline (return NULL: the dispatcher then tries the next one), except the
walk and the two dispatchers, which must apply everything.

One exception the table does not model, because it is not a change of state: a
VoucherReserved that reaches a row an earlier event of the same order created
without amounts (an early confirm, a tombstone) fills them in, and the SQL
counts that as applied (1) where the table says no-op (2) (deploy/sql/003).

Usage: VOUCHER_PG_DSN=... redemption_oracle.py TABLE_TOOL. Exit status 0 when
every case matches (TAP on stdout).
"""
import itertools
import os
import subprocess
import sys

DSN = os.environ.get("VOUCHER_PG_DSN", "host=127.0.0.1 port=15400 dbname=voucher user=voucher")
PATHS = ["wr_apply_events_seq", "wr_apply_events_set", "wr_apply_events_fresh",
         "wr_apply_events", "wr_apply_batch"]
MUST_APPLY = {"wr_apply_events_seq", "wr_apply_events", "wr_apply_batch"}
STARTS = ["NONE", "RESERVED", "CONFIRMED", "RELEASED"]
PREFIX = "RO"


def psql(sql):
    r = subprocess.run(["psql", "-X", "-tA", "-q", "-v", "ON_ERROR_STOP=1", "-d", DSN],
                       input=sql, capture_output=True, text=True)
    if r.returncode:
        sys.exit("Bail out! psql failed: " + r.stderr)
    return r.stdout.strip()


def load_table(tool):
    table = {}
    for line in subprocess.run([tool], capture_output=True, text=True, check=True).stdout.split("\n"):
        if line:
            st, t, nxt, delta, outcome = line.split()
            table[(st, int(t))] = (nxt, int(delta), int(outcome))
    if len(table) != 12:
        sys.exit("Bail out! the table tool printed %d transitions, not 12" % len(table))
    return table


def fold(table, start, seq):
    """The outcomes, final status and used_count delta the table gives; amounts known from the start."""
    st, used, outcomes, amounts = start, 0, [], start != "NONE"
    for t in seq:
        nxt, delta, outcome = table[(st, t)]
        if t == 1 and not amounts and st != "NONE" and outcome == 2:
            outcome = 1  # the documented exception: the reservation fills in the amounts
        if t == 1 or nxt != "NONE":
            amounts = amounts or t == 1
        outcomes.append(outcome)
        st, used = nxt, used + delta
    return outcomes, st, used


def call(fn, code, seq):
    n = len(seq)
    arrays = ["'{%s}'::smallint[]" % ",".join(str(t) for t in seq),
              "'{%s}'::text[]" % ",".join([code] * n),
              "'{%s}'::bigint[]" % ",".join(["7"] * n),
              "'{%s}'::text[]" % ",".join(["o" + code] * n),
              "'{%s}'::bigint[]" % ",".join("5" if t == 1 else "0" for t in seq),
              "'{%s}'::bigint[]" % ",".join("50" if t == 1 else "0" for t in seq),
              "'{%s}'::bigint[]" % ",".join(["1700000000000"] * n),
              "'{%s}'::bigint[]" % ",".join("1700000900000" if t == 1 else "0" for t in seq)]
    if fn == "wr_apply_batch":
        arrays += ["'{%s}'::text[]" % ",".join('""' for _ in seq)] * 2
    return "%s(%s)" % (fn, ", ".join(arrays))


def main():
    table = load_table(sys.argv[1])
    cases, sql = [], []
    psql("DELETE FROM voucher_redemption WHERE voucher_code LIKE '%s%%';"
         "DELETE FROM voucher WHERE code LIKE '%s%%';" % (PREFIX, PREFIX))
    for fn in PATHS:
        for start in STARTS:
            for length in (1, 2, 3):
                for seq in itertools.product((1, 2, 3), repeat=length):
                    for mode in ("batch", "each") if length > 1 else ("batch",):
                        code = "%s%d" % (PREFIX, len(cases))
                        cases.append((code, fn, start, seq, mode))
                        counts = start in ("RESERVED", "CONFIRMED")
                        sql.append("INSERT INTO voucher (code, mode, discount_amount, total_limit,"
                                   " used_count, starts_at, ends_at) VALUES ('%s', 'flash', 1, 10, %d,"
                                   " now(), now() + interval '1 day');" % (code, counts))
                        if start != "NONE":
                            sql.append("INSERT INTO voucher_redemption (voucher_code, customer_id,"
                                       " order_id, status, discount_amount, order_amount)"
                                       " VALUES ('%s', 7, 'o%s', '%s', 5, 50);" % (code, code, start))
                        calls = [seq] if mode == "batch" else [(t,) for t in seq]
                        # One line per call: the code, the call's index, its outcomes.
                        for i, c in enumerate(calls):
                            sql.append("SELECT '%s|%d|' || coalesce(array_to_string(%s, ','), 'NULL');"
                                       % (code, i, call(fn, code, c)))
    out = psql("\n".join(sql))
    got_outcomes = {}
    for line in out.split("\n"):
        code, i, outcomes = line.split("|")
        got_outcomes.setdefault(code, []).append(outcomes)
    rows = {}
    for line in psql("SELECT v.code, coalesce(r.status, 'NONE'), v.used_count FROM voucher v"
                     " LEFT JOIN voucher_redemption r ON r.voucher_code = v.code"
                     " WHERE v.code LIKE '%s%%'" % PREFIX).split("\n"):
        code, status, used = line.split("|")
        rows[code] = (status, int(used))

    results = {fn: [0, 0, 0] for fn in PATHS}  # checked, declined, wrong
    wrong = []
    for code, fn, start, seq, mode in cases:
        outcomes, final, delta = fold(table, start, seq)
        got = got_outcomes[code]
        if "NULL" in got:
            results[fn][1] += 1
            if fn in MUST_APPLY:
                wrong.append("%s declined %s %s from %s" % (fn, mode, seq, start))
            continue
        results[fn][0] += 1
        got_list = [int(x) for g in got for x in g.split(",")]
        want_used = (1 if start in ("RESERVED", "CONFIRMED") else 0) + delta
        if got_list != outcomes or rows[code] != (final, want_used):
            results[fn][2] += 1
            wrong.append("%s %s %s from %s: outcomes %s status %s used %d; the table: %s %s %d"
                         % (fn, mode, seq, start, got_list, rows[code][0], rows[code][1],
                            outcomes, final, want_used))
    psql("DELETE FROM voucher_redemption WHERE voucher_code LIKE '%s%%';"
         "DELETE FROM voucher WHERE code LIKE '%s%%';" % (PREFIX, PREFIX))

    print("1..%d" % (len(PATHS) + 1))
    n = 0
    for fn in PATHS:
        checked, declined, bad = results[fn]
        n += 1
        ok = bad == 0 and checked > 0 and (declined == 0 or fn not in MUST_APPLY)
        print("%s %d - %s agrees with the table: %d cases applied, %d declined, %d wrong"
              % ("ok" if ok else "not ok", n, fn, checked, declined, bad))
    # Every status with every event, one event alone, applied by every path that must apply.
    singles = [c for c in cases if len(c[3]) == 1 and c[1] in MUST_APPLY]
    n += 1
    print("%s %d - every status x every event checked on %d paths (%d cases)"
          % ("ok" if len(singles) == 12 * len(MUST_APPLY) else "not ok", n, len(MUST_APPLY),
             len(singles)))
    for w in wrong[:40]:
        print("# " + w)
    return 0 if not wrong and all(r[2] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
