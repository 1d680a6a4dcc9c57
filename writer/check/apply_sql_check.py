#!/usr/bin/env python3
"""Checks the writer's SQL (deploy/sql/functions.sql) against a real PostgreSQL.

It first runs deploy/migrate, which applies deploy/sql/functions.sql (from
VOUCHER_SQL_DIR when set) whenever the database has another version of it, so
what is checked is the file, the one definition of the writer's functions, and
not whatever the database last had. Then:

1. Every sequence of up to four events of one order, applied one call per
   event and then redelivered as one batch, ends in the row the set of event
   types determines (proto/redemption-states.md), with used_count right, and
   the figures of the confirm that confirmed it (issue 24, deploy/sql/011).
2. Random batches give the same outcomes, rows (timestamps and amounts
   included) and used_count through wr_apply_events_set() as through
   wr_apply_events_seq().
3. The same for wr_apply_events_fresh(), on batches shaped like a live stream
   (each order once, most of them one step further), where it must not
   decline, and on random ones, where it may.
4. The per-customer limit: a customer's uses beyond per_user_limit are refused
   by the database (check_violation, ck_per_user_uses) whichever path applies
   them, and a use given back makes room again.
5. The three paths judge the per-customer limit alike, per event: batches
   where what a customer holds after the whole batch is within the limit but
   not after each event (a use taken before one given back) are refused by
   the walk, and the fresh and set paths either decline or give the very
   same result, never apply them (wr_batch_customers_fit()).
6. Under REPEATABLE READ the per-customer trigger refuses to count (it would
   read an old snapshot and let a second use through).

Usage: VOUCHER_PG_DSN='host=... dbname=voucher user=voucher' apply_sql_check.py [SEED]
It creates vouchers SQ*, DA*, DB*, PU* and deletes their redemptions first
(the checks of 5 run in transactions that are rolled back).
Exit status 0 when every check holds.
"""
import itertools
import os
import random
import subprocess
import sys

DSN = os.environ.get("VOUCHER_PG_DSN", "host=127.0.0.1 port=15400 dbname=voucher user=voucher")
MIGRATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "migrate")


def psql(sql, may_fail=False):
    r = subprocess.run(["psql", "-X", "-tA", "-q", "-v", "ON_ERROR_STOP=1", "-d", DSN],
                       input=sql, capture_output=True, text=True)
    if r.returncode:
        if may_fail:
            return None, r.stderr
        sys.exit("psql failed: " + r.stderr)
    return (r.stdout.strip(), "") if may_fail else r.stdout.strip()


def arr(xs):
    """An array literal; None is NULL (a confirm without the final figures)."""
    return "'{" + ",".join("NULL" if x is None else '"%s"' % x for x in xs) + "}'"


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
            sql.append("INSERT INTO voucher (code, mode, discount_amount, total_limit, starts_at, ends_at)"
                       " VALUES ('%s', 'flash', 1, 10, now(), now() + interval '1 day');" % code)
            # Reservations carry their quote, confirms the final figures.
            evs = [(t, code, "o" + code, {1: 5, 2: 7}.get(t, 0), {1: 50, 2: 70}.get(t, 0),
                    1000, 0, 1) for t in seq]
            for e in evs:
                sql.append(call("wr_apply_events", [e], lambda e: e[1], lambda e: e[2]))
            sql.append(call("wr_apply_events", evs, lambda e: e[1], lambda e: e[2]))
    psql("\n".join(sql))
    got = {}
    for line in psql("SELECT v.code, r.status, v.used_count, r.discount_amount,"
                     " r.confirmed_order_amount, r.confirmed_discount_amount FROM voucher v"
                     " JOIN voucher_redemption r ON r.voucher_code = v.code"
                     " WHERE v.code LIKE 'SQ%'").split("\n"):
        code, *rest = line.split("|")
        got[code] = rest
    bad = 0
    for code, seq in cases:
        status = "RELEASED" if 3 in seq else "CONFIRMED" if 2 in seq else "RESERVED"
        # The first confirm confirms the row unless a release came before it.
        confirmed = 2 in seq and (3 not in seq or seq.index(2) < seq.index(3))
        want = [status, "0" if status == "RELEASED" else "1", "5" if 1 in seq else "0",
                "70" if confirmed else "", "7" if confirmed else ""]
        if got[code] != want:
            bad += 1
            print("mismatch", seq, got[code], want)
    print("sequences: %d checked, %d wrong" % (len(cases), bad))
    return bad == 0


def random_batch(rnd, conflict):
    evs = []
    for _ in range(rnd.randint(1, 40)):
        t = rnd.choice([1, 1, 2, 3])
        order = rnd.randint(1, 25)
        code = order % 4 + 1
        if rnd.random() < conflict:
            code = code % 4 + 1
        carries = t == 1 and rnd.random() < 0.8
        # A confirm carries the final figures (deploy/sql/011) or none (NULL).
        final = t == 2 and rnd.random() < 0.5
        evs.append((t, code, order,
                     rnd.randint(1, 9) * 10 if carries or final else None if t == 2 else 0,
                     rnd.randint(1, 9) * 100 if carries or final else None if t == 2 else 0,
                    1700000000000 + rnd.randint(0, 10**6),
                    1700000900000 + rnd.randint(0, 10**6) if carries and rnd.random() < 0.5 else 0,
                    rnd.randint(1, 5)))
    return evs


class LiveStream:
    """Batches as a live stream makes them: each order once per batch, new
    orders reserved, held ones confirmed or released, confirmed ones released."""

    def __init__(self, rnd):
        self.rnd, self.state, self.next_order = rnd, {}, 1000

    def batch(self):
        rnd, evs, seen = self.rnd, [], set()
        for _ in range(rnd.randint(1, 40)):
            live = [o for o, st in self.state.items() if st < 3 and o not in seen]
            if live and rnd.random() < 0.5:
                order = rnd.choice(live)
                t = 2 if self.state[order] == 1 and rnd.random() < 0.6 else 3
            else:
                order, t = self.next_order, 1
                self.next_order += 1
            seen.add(order)
            self.state[order] = t
            final = t == 2 and rnd.random() < 0.5
            evs.append((t, order % 4 + 1, order,
                        rnd.randint(1, 9) * 10 if t == 1 or final else None if t == 2 else 0,
                        rnd.randint(1, 9) * 100 if t == 1 or final else None if t == 2 else 0,
                        1700000000000 + rnd.randint(0, 10**6),
                        1700000900000 + rnd.randint(0, 10**6) if t == 1 else 0, order % 7))
        return evs


def differential(seed, fn="wr_apply_events_set", live=False, rounds=120, conflict=0.005):
    """Each batch through wr_apply_events_seq() on DA* and through FN on DB*:
    the same outcomes and rows, or FN declines (then the walk applies it)."""
    rnd = random.Random(seed)
    stream = LiveStream(rnd)
    psql("DELETE FROM voucher_redemption WHERE voucher_code LIKE 'DA%' OR voucher_code LIKE 'DB%';"
         "DELETE FROM voucher WHERE code LIKE 'DA%' OR code LIKE 'DB%';"
         "INSERT INTO voucher (code, mode, discount_amount, total_limit, per_user_limit, starts_at,"
         " ends_at) SELECT p || g, 'flash', 1, 100000, 1000, now(), now() + interval '1 day'"
         " FROM unnest(array['DA', 'DB']) p, generate_series(1, 4) g;")
    # All rounds in one psql session (a psql start costs more than a round):
    # each round prints "round|outcomes A|outcomes B|rows A|rows B", rows as
    # md5 of their text with the prefixes that tell A from B taken off.
    state = ("md5(coalesce((SELECT string_agg(concat_ws('|', substr(order_id, 3),"
             " substr(voucher_code, 3), customer_id, status, discount_amount, order_amount,"
             " held_until, confirmed_order_amount, confirmed_discount_amount, created_at,"
             " updated_at), ',' ORDER BY order_id)"
             " FROM voucher_redemption WHERE voucher_code IN ('{p}1', '{p}2', '{p}3', '{p}4')),"
             " '') || ';' || (SELECT string_agg(used_count::text, ',' ORDER BY code) FROM voucher"
             " WHERE code IN ('{p}1', '{p}2', '{p}3', '{p}4')))")
    script = ["BEGIN; CREATE TEMP TABLE ra (o smallint[]); CREATE TEMP TABLE rb (o smallint[]);"
              " CREATE TEMP TABLE junk (o smallint[]);"]
    batches = []
    for r in range(rounds):
        evs = stream.batch() if live else random_batch(rnd, conflict)
        batches.append(evs)
        script.append("TRUNCATE ra, rb;")
        script.append("INSERT INTO ra " + call("wr_apply_events_seq", evs, lambda e: "DA%d" % e[1],
                                               lambda e: "A-%d" % e[2]))
        script.append("INSERT INTO rb " + call(fn, evs, lambda e: "DB%d" % e[1],
                                               lambda e: "B-%d" % e[2]))
        script.append("INSERT INTO junk " + call("wr_apply_events_seq", evs, lambda e: "DB%d" % e[1],
                                                 lambda e: "B-%d" % e[2])[:-1] +
                      " FROM rb WHERE rb.o IS NULL;")
        script.append("SELECT %d, (SELECT o FROM ra), (SELECT o FROM rb), %s, %s;" %
                      (r, state.format(p="DA"), state.format(p="DB")))
    script.append("COMMIT;")
    declined = 0
    for line in psql("\n".join(script)).split("\n"):
        r, a, b, rows_a, rows_b = line.split("|")
        evs = batches[int(r)]
        if b == "":
            if live and fn == "wr_apply_events_fresh":
                print("round %s: %s declined a live-stream batch: %s" % (r, fn, evs))
                return False
            declined += 1
        elif a != b:
            print("round %s: outcomes differ: %s vs %s for %s" % (r, a, b, evs))
            return False
        if rows_a != rows_b:
            print("round %s: rows differ after %s" % (r, evs))
            return False
    print("differential %s%s: %d batches equal, %d declined" %
          (fn, " (live stream)" if live else "", rounds, declined))
    return True


def per_customer():
    """A voucher with per_user_limit 2: the third use of one customer is
    refused by each path, in one batch or across batches; a release makes room."""
    psql("DELETE FROM voucher_redemption WHERE voucher_code LIKE 'PU%';"
         "DELETE FROM voucher WHERE code LIKE 'PU%';"
         "INSERT INTO voucher (code, mode, discount_amount, total_limit, per_user_limit, starts_at,"
         " ends_at) SELECT 'PU' || g, 'flash', 1, 100, 2, now(), now() + interval '1 day' FROM generate_series(1, 3) g;")
    ok = True

    def ev(t, code, order, cust):
        return (t, code, order, 10 if t == 1 else 0, 100 if t == 1 else 0, 1700000000000, 0, cust)

    def apply(fn, evs):
        return psql(call(fn, evs, lambda e: e[1], lambda e: e[2]), may_fail=True)

    def expect_refused(what, fn, evs):
        nonlocal ok
        out, err = apply(fn, evs)
        if out == "" and fn in ("wr_apply_events_fresh", "wr_apply_events_set"):
            return  # declined (deploy/sql/007): the walk judges it, and refuses it below
        if out is not None or "ck_per_user_uses" not in err and "per_user_limit" not in err:
            print("per-customer: %s through %s was not refused: %s %s" % (what, fn, out, err.strip()))
            ok = False

    for n, fn in enumerate(["wr_apply_events_fresh", "wr_apply_events_set", "wr_apply_events_seq",
                            "wr_apply_events"]):
        code = "PU%d" % (n % 3 + 1)
        pre = "%s-%d-" % (code, n)
        expect_refused("three uses in one batch", fn,
                       [ev(1, code, pre + "a", 7), ev(1, code, pre + "b", 7), ev(1, code, pre + "c", 7)])
        out, err = apply(fn, [ev(1, code, pre + "a", 7), ev(1, code, pre + "b", 7)])
        if out is None:
            print("per-customer: two uses through %s refused: %s" % (fn, err.strip()))
            ok = False
        expect_refused("a third use in a later batch", fn, [ev(1, code, pre + "c", 7)])
        out, err = apply(fn, [ev(3, code, pre + "a", 7), ev(1, code, pre + "c", 7)])
        if out is None:
            print("per-customer: a use after a release through %s refused: %s" % (fn, err.strip()))
            ok = False
        # Another customer is not held by customer 7's uses.
        out, err = apply(fn, [ev(1, code, pre + "d", 8)])
        if out is None:
            print("per-customer: customer 8 refused through %s: %s" % (fn, err.strip()))
            ok = False
        psql("DELETE FROM voucher_redemption WHERE voucher_code = '%s';"
             "UPDATE voucher SET used_count = 0 WHERE code = '%s';" % (code, code))
    # By hand: bringing back a released row over the limit is refused too.
    psql(call("wr_apply_events", [ev(1, "PU1", "PU1-h1", 9), ev(1, "PU1", "PU1-h2", 9),
                                  ev(3, "PU1", "PU1-h1", 9), ev(1, "PU1", "PU1-h3", 9)],
              lambda e: e[1], lambda e: e[2]))
    out, err = psql("UPDATE voucher_redemption SET status = 'RESERVED' WHERE order_id = 'PU1-h1';",
                    may_fail=True)
    if out is not None or "ck_per_user_uses" not in err and "per_user_limit" not in err:
        print("per-customer: an UPDATE bringing back a third use was not refused: %s" % err.strip())
        ok = False
    print("per-customer limit: %s" % ("refused beyond the limit on every path" if ok else "FAILED"))
    return ok


PATHS = ["wr_apply_events_fresh", "wr_apply_events_set", "wr_apply_events_seq", "wr_apply_events"]


def per_customer_paths():
    """Each batch, from the same rows, through every path in a transaction
    rolled back afterwards: the walk's result (outcomes and rows, or refused)
    is the reference; the dispatcher must give it, fresh and set must give it
    or decline."""

    def ev(t, order, cust):
        return (t, "PC", order, 10 if t == 1 else 0, 100 if t == 1 else 0, 1700000000000,
                0, cust)

    R, C, X = 1, 2, 3  # Reserved, Confirmed, Released
    # (name, per_user_limit, events applied before, the batch, what the walk must do)
    cases = [
        ("a use taken before one given back", 1, [ev(R, "A", 7)],
         [ev(R, "B", 7), ev(X, "A", 7)], "refused"),
        ("a use given back before one taken", 1, [ev(R, "A", 7)],
         [ev(X, "A", 7), ev(R, "B", 7)], "applied"),
        ("two taken, then one given back, in one batch", 1, [],
         [ev(R, "A", 7), ev(R, "B", 7), ev(X, "A", 7)], "refused"),
        ("taken, given back, taken again", 1, [],
         [ev(R, "A", 7), ev(X, "A", 7), ev(R, "B", 7)], "applied"),
        ("limit 2: two taken before one given back", 2, [ev(R, "A", 7)],
         [ev(R, "B", 7), ev(R, "C", 7), ev(X, "A", 7)], "refused"),
        ("an early confirm before the release", 1, [ev(R, "A", 7)],
         [ev(C, "B", 7), ev(X, "A", 7)], "refused"),
        ("another customer", 1, [ev(R, "A", 7)], [ev(R, "B", 8), ev(X, "A", 7)], "applied"),
        # A release naming another customer than its row's still gives the row's customer's use back.
        ("a release that names another customer", 1, [ev(R, "A", 7)],
         [ev(R, "B", 7), ev(X, "A", 8)], "refused"),
        ("the same, the row made in the batch", 1, [],
         [ev(R, "A", 7), ev(R, "B", 7), ev(X, "A", 8)], "refused"),
        ("a redelivered use", 1, [ev(R, "A", 7)], [ev(R, "A", 7), ev(C, "A", 7)], "applied"),
    ]
    state = ("(SELECT string_agg(order_id || '=' || status, ' ' ORDER BY order_id)"
             " FROM voucher_redemption WHERE voucher_code = 'PC') || ' used=' ||"
             " (SELECT used_count FROM voucher WHERE code = 'PC')")
    code_of, order_of = (lambda e: e[1]), (lambda e: "PC-" + e[2])
    ok = True
    for name, limit, before, batch, want in cases:
        results = {}
        for fn in PATHS:
            script = ["BEGIN;",
                      "DELETE FROM voucher_redemption WHERE voucher_code = 'PC';",
                      "DELETE FROM voucher WHERE code = 'PC';",
                      "INSERT INTO voucher (code, mode, discount_amount, total_limit, per_user_limit,"
                      " starts_at, ends_at) VALUES ('PC', 'flash', 1, 100, %d, now(),"
                      " now() + interval '1 day');" % limit]
            if before:
                script.append("SELECT 'before|' || " + call("wr_apply_events_seq", before, code_of,
                                                            order_of)[7:-1] + "::text;")
            script.append("SELECT 'result|' || coalesce(" + call(fn, batch, code_of, order_of)[7:-1] +
                          "::text, 'declined');")
            # A statement of its own: the call's own statement cannot see its changes.
            script.append("SELECT 'result|' || coalesce(%s, '');" % state)
            script.append("ROLLBACK;")
            out, err = psql("\n".join(script), may_fail=True)
            if out is None:
                refused = "ck_per_user_uses" in err or "above per_user_limit" in err
                results[fn] = "refused" if refused else "error " + err.strip()[:200]
            else:
                results[fn] = " ".join(l[7:] for l in out.split("\n") if l.startswith("result|"))
        walk = results["wr_apply_events_seq"]
        if (walk == "refused") != (want == "refused") or walk.startswith("error"):
            print("per-customer paths: %s: the walk gave %s, expected %s" % (name, walk, want))
            ok = False
        for fn in PATHS:
            got = results[fn]
            if got == walk or (fn != "wr_apply_events" and got.startswith("declined")):
                continue
            print("per-customer paths: %s: %s gave %s, the walk %s" % (name, fn, got, walk))
            ok = False
    # REPEATABLE READ: the trigger's count would read an old snapshot.
    out, err = psql("BEGIN ISOLATION LEVEL REPEATABLE READ;"
                    " INSERT INTO voucher (code, mode, discount_amount, total_limit, per_user_limit,"
                    " starts_at, ends_at) VALUES ('PC', 'flash', 1, 100, 1, now(), now() + interval '1 day');"
                    " INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status)"
                    " VALUES ('PC', 7, 'PC-rr', 'RESERVED'); ROLLBACK;", may_fail=True)
    if out is not None or "REPEATABLE READ" not in err:
        print("per-customer paths: a use added under REPEATABLE READ was not refused: %s" %
              (out if out is not None else err.strip()))
        ok = False
    print("per-customer paths: %s" % ("%d batches judged per event on every path" % len(cases)
                                      if ok else "FAILED"))
    return ok


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    r = subprocess.run([MIGRATE, DSN], capture_output=True, text=True)
    if r.returncode:
        sys.exit("deploy/migrate failed: " + r.stderr)
    ok = sequences()
    ok = differential(seed) and ok
    ok = differential(seed, "wr_apply_events_fresh") and ok
    ok = differential(seed, "wr_apply_events_fresh", live=True) and ok
    ok = differential(seed, "wr_apply_events", live=True) and ok
    ok = per_customer() and ok
    ok = per_customer_paths() and ok
    sys.exit(0 if ok else 1)
