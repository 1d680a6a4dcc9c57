#!/usr/bin/env python3
"""Checks deploy/sql/003_writer_apply.sql against a real PostgreSQL.

1. Every sequence of up to four events of one order, applied one call per
   event and then redelivered as one batch, ends in the row the set of event
   types determines (proto/redemption-states.md), with used_count right.
2. Random batches give the same outcomes, rows (timestamps and amounts
   included) and used_count through wr_apply_events_set() as through
   wr_apply_events_seq().

Usage: VOUCHER_PG_DSN='host=... dbname=voucher user=voucher' apply_sql_check.py [SEED]
It creates vouchers SQ*, DA*, DB* and deletes their redemptions first.
"""
import itertools
import os
import random
import subprocess
import sys

DSN = os.environ.get("VOUCHER_PG_DSN", "host=127.0.0.1 port=15400 dbname=voucher user=voucher")


def psql(sql):
    r = subprocess.run(["psql", "-X", "-tA", "-q", "-v", "ON_ERROR_STOP=1", "-d", DSN],
                       input=sql, capture_output=True, text=True)
    if r.returncode:
        sys.exit("psql failed: " + r.stderr)
    return r.stdout.strip()


def arr(xs):
    return "'{" + ",".join('"%s"' % x for x in xs) + "}'"


def call(fn, evs, code_of, order_of):
    """evs: (type, code, order, discount, amount, at_ms, held_ms, customer)"""
    return "SELECT %s(%s::smallint[], %s::text[], %s::bigint[], %s::text[], %s::bigint[]," \
           " %s::bigint[], %s::bigint[], %s::bigint[]);" % (
               fn, arr([e[0] for e in evs]), arr([code_of(e) for e in evs]),
               arr([e[7] for e in evs]), arr([order_of(e) for e in evs]),
               arr([e[3] for e in evs]), arr([e[4] for e in evs]),
               arr([e[5] for e in evs]), arr([e[6] for e in evs]))


def sequences():
    psql("DELETE FROM voucher_redemption WHERE voucher_code LIKE 'SQ%';"
         "DELETE FROM voucher WHERE code LIKE 'SQ%';")
    cases, sql = [], []
    for length in range(1, 5):
        for seq in itertools.product([1, 2, 3], repeat=length):
            code = "SQ%d" % (len(cases) + 1)
            cases.append((code, seq))
            sql.append("INSERT INTO voucher (code, discount_amount, total_limit, starts_at, ends_at)"
                       " VALUES ('%s', 1, 10, now(), now() + interval '1 day');" % code)
            evs = [(t, code, "o" + code, 5 if t == 1 else 0, 50 if t == 1 else 0, 1000, 0, 1)
                   for t in seq]
            for e in evs:
                sql.append(call("wr_apply_events", [e], lambda e: e[1], lambda e: e[2]))
            sql.append(call("wr_apply_events", evs, lambda e: e[1], lambda e: e[2]))
    psql("\n".join(sql))
    got = {}
    for line in psql("SELECT v.code, r.status, v.used_count, r.discount_amount FROM voucher v"
                     " JOIN voucher_redemption r ON r.voucher_code = v.code"
                     " WHERE v.code LIKE 'SQ%'").split("\n"):
        code, *rest = line.split("|")
        got[code] = rest
    bad = 0
    for code, seq in cases:
        status = "RELEASED" if 3 in seq else "CONFIRMED" if 2 in seq else "RESERVED"
        want = [status, "0" if status == "RELEASED" else "1", "5" if 1 in seq else "0"]
        if got[code] != want:
            bad += 1
            print("mismatch", seq, got[code], want)
    print("sequences: %d checked, %d wrong" % (len(cases), bad))
    return bad == 0


def differential(seed, rounds=120, conflict=0.005):
    rnd = random.Random(seed)
    psql("DELETE FROM voucher_redemption WHERE voucher_code LIKE 'DA%' OR voucher_code LIKE 'DB%';"
         "DELETE FROM voucher WHERE code LIKE 'DA%' OR code LIKE 'DB%';"
         "INSERT INTO voucher (code, discount_amount, total_limit, starts_at, ends_at)"
         " SELECT p || g, 1, 100000, now(), now() + interval '1 day'"
         " FROM unnest(array['DA', 'DB']) p, generate_series(1, 4) g;")
    rows = ("SELECT string_agg(concat_ws('|', substr(order_id, 3), substr(voucher_code, 3),"
            " customer_id, status, discount_amount, order_amount, held_until, created_at,"
            " updated_at), E'\\n' ORDER BY order_id) FROM voucher_redemption"
            " WHERE voucher_code LIKE '%s%%';"
            "SELECT string_agg(used_count::text, ',' ORDER BY code) FROM voucher"
            " WHERE code LIKE '%s%%';")
    declined = 0
    for r in range(rounds):
        evs = []
        for _ in range(rnd.randint(1, 40)):
            t = rnd.choice([1, 1, 2, 3])
            order = rnd.randint(1, 25)
            code = order % 4 + 1
            if rnd.random() < conflict:
                code = code % 4 + 1
            carries = t == 1 and rnd.random() < 0.8
            evs.append((t, code, order, rnd.randint(1, 9) * 10 if carries else 0,
                        rnd.randint(1, 9) * 100 if carries else 0,
                        1700000000000 + rnd.randint(0, 10**6),
                        1700000900000 + rnd.randint(0, 10**6) if carries and rnd.random() < 0.5 else 0,
                        rnd.randint(1, 5)))
        a = psql(call("wr_apply_events_seq", evs, lambda e: "DA%d" % e[1], lambda e: "A-%d" % e[2]))
        b = psql(call("wr_apply_events_set", evs, lambda e: "DB%d" % e[1], lambda e: "B-%d" % e[2]))
        if b == "":
            declined += 1
            psql(call("wr_apply_events_seq", evs, lambda e: "DB%d" % e[1], lambda e: "B-%d" % e[2]))
        elif a != b:
            print("round %d: outcomes differ: %s vs %s for %s" % (r, a, b, evs))
            return False
        if psql(rows % ("DA", "DA")) != psql(rows % ("DB", "DB")):
            print("round %d: rows differ after %s" % (r, evs))
            return False
    print("differential: %d batches equal, %d declined by the set path" % (rounds, declined))
    return True


if __name__ == "__main__":
    ok = sequences()
    ok = differential(int(sys.argv[1]) if len(sys.argv) > 1 else 1) and ok
    sys.exit(0 if ok else 1)
