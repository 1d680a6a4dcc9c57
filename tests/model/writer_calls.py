#!/usr/bin/env python3
"""The explorer's writer against the real writer: the same statements, rows and dead letters.

The explorer writes the writer's batching in Python (explorer.Writer: one wr_apply_batch() call
per batch, a refused batch bisected under savepoints, the poison dead-lettered with the writer's
class) around the writer's real SQL. This check runs the real voucher-writer over event
sequences of a voucher and a campaign produced to a topic of its own, and applies the same
batches with explorer.Writer into a second database of the same schema, with the same vouchers
and campaign. Then it compares:

1. the statements, in order: what the writer sent (the PostgreSQL log of its own login role,
   voucher_writer_calls, member of voucher_writer, under log_statement = all: the statement
   text and the eleven array literals bound to it, SAVEPOINT, ROLLBACK TO, RELEASE, BEGIN,
   COMMIT) against what explorer.Writer sent for the same batches; the writer's connection
   set-up and its parking of the letters (wr_pg_park()) are left out;
2. the rows: every redemption of the voucher, of a second voucher and of the campaign (each
   column but the id), used_count of each;
3. the dead letters: each event's offset and class (wr_dlt_park()'s rows against the letters
   explorer.Writer returned), and the error message where PostgreSQL wrote it (not a malformed
   event's: the decoder's words are not ported).

Any difference fails, naming the batch or the event and both sides. All the events go to one
partition, produced before the writer starts, which then runs with one lane, batches of BATCH
events and a linger long enough that only full batches are sent: the writer's batches are the
same every run, and three of them have a poison event between good ones, so that it bisects.

    writer_calls.py --build BUILD        (tests/model/run --writer-calls; suite model)

It needs the stack (eval "$(deploy/stack env)"). Its events go to a topic made for the run
(and its dead-letter topic), deleted at the end: the stack's voucher-events never holds them, so
no later writer of the stack applies or dead-letters them. It makes, once, the login role
voucher_writer_calls and the database voucher_writer_calls (migrated at every run, as
deploy/migrate does), and leaves them.
"""
import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import psycopg2
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import explorer  # noqa: E402

ROLE = "voucher_writer_calls"
DB = "voucher_writer_calls"
BATCH = 6
TOPIC = "writer-calls-%d-%d" % (os.getpid(), int(time.time()))   # the run's own topic


def topics(create):
    """Makes (or deletes) the run's topic, with the stack topic's partitions, and its
    dead-letter topic."""
    admin = AdminClient({"bootstrap.servers": os.environ["VOUCHER_KAFKA_BROKERS"]})
    names = [TOPIC, TOPIC + ".dlt"]
    if create:
        done = admin.create_topics([NewTopic(TOPIC, explorer.PARTITIONS, 1),
                                    NewTopic(TOPIC + ".dlt", 1, 1)], operation_timeout=30)
    else:
        done = admin.delete_topics(names, operation_timeout=30)
    for name, future in done.items():
        future.result(60)
    deadline = time.time() + 60
    while create:   # a new topic's partitions have no leader for a moment
        meta = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if meta and not meta.error and len(meta.partitions) == explorer.PARTITIONS and all(
                q.leader >= 0 for q in meta.partitions.values()):
            break
        if time.time() > deadline:
            raise SystemExit("writer calls: topic %s has no leader for every partition" % TOPIC)
        time.sleep(0.1)


def dsn_with(dsn, **kw):
    """dsn with some keywords replaced (a later keyword wins in a libpq conninfo)."""
    return dsn + "".join(" %s=%s" % kv for kv in kw.items())


def superuser(dbname="postgres"):
    pg = psycopg2.connect(dsn_with(os.environ["VOUCHER_PG_DSN"], user="postgres",
                                   dbname=dbname))
    pg.autocommit = True
    return pg


def set_up_role_and_database():
    """The writer's own login role, logging its statements, and the explorer's database."""
    # No "with pg": psycopg2 would open a transaction there, which CREATE DATABASE refuses.
    pg = superuser()
    with pg.cursor() as c:
        c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,))
        if not c.fetchone():
            c.execute("CREATE ROLE %s LOGIN IN ROLE voucher_writer" % ROLE)
        c.execute("ALTER ROLE %s SET log_statement = 'all'" % ROLE)
        c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB,))
        if not c.fetchone():
            c.execute("CREATE DATABASE %s OWNER voucher" % DB)
    pg.close()
    out = subprocess.run([os.path.join(REPO, "deploy", "migrate"),
                          dsn_with(os.environ["VOUCHER_PG_DSN"], dbname=DB)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if out.returncode:
        raise SystemExit("writer calls: migrating %s failed:\n%s" % (DB, out.stdout.decode()))


class Fixture:
    """Two vouchers (V: total 3, two uses a customer; W: total 5, one a customer), a code no
    voucher has (U), a direct voucher (D, proto/direct-mode.md: total 5, its two rows written
    as its functions write them, o30 RESERVED and o33 CONFIRMED), and a campaign of three codes
    (one use a customer), in both databases, all their events keyed to one partition."""

    def __init__(self, pgs):
        stamp = "%d_%d" % (os.getpid() % 10000, int(time.time()) % 100000)
        self.made = int(time.time())
        with pgs[0].cursor() as c:
            c.execute("INSERT INTO campaign (name, state, alphabet, code_length, total_count,"
                      " generated_count, discount_amount, per_customer_limit, starts_at,"
                      " ends_at) VALUES (%s, 'FAILED', 'safe32', 12, 3, 3, 100, 1,"
                      " now() - interval '1 hour', now() + interval '1 day') RETURNING id",
                      ("writer calls " + stamp,))
            self.cid = c.fetchone()[0]
        self.part = explorer.partition_of("campaign:%d" % self.cid)
        rnd = random.SystemRandom()
        self.codes = ["".join(rnd.choice(explorer.SAFE32) for _ in range(12)) for _ in "abc"]
        # A voucher's events are keyed by its code: codes drawn until they share the partition.
        self.v, self.w, self.u, self.d = (self.draw("WC%s_%s_" % (stamp, n)) for n in "VWUD")
        self.oid = "WC%s-" % stamp
        for i, pg in enumerate(pgs):
            with pg.cursor() as c:
                if i:
                    c.execute("INSERT INTO campaign (id, name, state, alphabet, code_length,"
                              " total_count, generated_count, discount_amount,"
                              " per_customer_limit, starts_at, ends_at) OVERRIDING SYSTEM VALUE"
                              " SELECT %s, name, state, alphabet, code_length, total_count,"
                              " generated_count, discount_amount, per_customer_limit,"
                              " starts_at, ends_at FROM (VALUES (%s, 'FAILED', 'safe32', 12,"
                              " 3, 3, 100, 1, now() - interval '1 hour',"
                              " now() + interval '1 day')) AS x(name, state, alphabet,"
                              " code_length, total_count, generated_count, discount_amount,"
                              " per_customer_limit, starts_at, ends_at)",
                              (self.cid, "writer calls " + stamp))
                for seq, code in enumerate(self.codes):
                    c.execute("INSERT INTO campaign_code (code, campaign_id, seq) VALUES"
                              " (%s, %s, %s)", (code, self.cid, seq + 1))
                # Out of the reconciler's window from the start: nothing here is Redis's.
                for code, total, per_user in ((self.v, 3, 2), (self.w, 5, 1)):
                    c.execute("INSERT INTO voucher (code, mode, discount_amount, min_order_amount,"
                              " total_limit, per_user_limit, starts_at, ends_at) VALUES"
                              " (%s, 'flash', 100, 0, %s, %s, now() - interval '3 days',"
                              " now() - interval '2 days')", (code, total, per_user))
                c.execute("INSERT INTO voucher (code, discount_amount, min_order_amount,"
                          " total_limit, per_user_limit, starts_at, ends_at, mode, used_count)"
                          " VALUES (%s, 100, 0, 5, 1, now() - interval '3 days',"
                          " now() - interval '2 days', 'direct', 2)", (self.d,))
                for o, cust, status in (("o30", 1, "RESERVED"), ("o33", 3, "CONFIRMED")):
                    # One time in both databases: the rows are compared column by column.
                    c.execute("INSERT INTO voucher_redemption (voucher_code, customer_id,"
                              " order_id, status, discount_amount, order_amount, created_at,"
                              " updated_at) VALUES (%s, %s, %s, %s, 100, 500000,"
                              " to_timestamp(%s), to_timestamp(%s))",
                              (self.d, cust, self.oid + o, status, self.made, self.made))

    def draw(self, prefix):
        for n in range(10000):
            if explorer.partition_of(prefix + str(n)) == self.part:
                return prefix + str(n)
        raise SystemExit("writer calls: no code of partition %d" % self.part)

    def events(self):
        """The sequences, BATCH events a batch: (key, event, what it is)."""
        t = [int(time.time() * 1000)]
        held = t[0] + 120000

        def at():
            t[0] += 1
            return explorer.iso(t[0])

        def res(code, o, c, camp=None):
            e = {"type": "VoucherReserved", "version": 1, "code": code, "customerId": c,
                 "orderId": self.oid + o, "discountAmount": 100, "orderAmount": 500000,
                 "reservedAt": at(), "heldUntil": explorer.iso(held)}
            return self.camp(e, camp)

        def conf(code, o, c, total=None, camp=None):
            e = {"type": "VoucherConfirmed", "version": 1, "code": code, "customerId": c,
                 "orderId": self.oid + o, "confirmedAt": at()}
            if total:
                e["discountAmount"], e["orderAmount"] = total
            return self.camp(e, camp)

        def rel(code, o, c, reason, camp=None):
            return self.camp({"type": "VoucherReleased", "version": 1, "code": code,
                              "customerId": c, "orderId": self.oid + o, "releasedAt": at(),
                              "reason": reason}, camp)
        v, w, u, d, (k1, k2, k3), cid = self.v, self.w, self.u, self.d, self.codes, self.cid
        no_order = res(v, "o20", 1)
        del no_order["orderId"]
        version2 = dict(res(v, "o21", 1), version=2)
        customer0 = res(v, "o22", 0)
        return [
            # 1: a voucher's life: a reservation, its retry's duplicate, confirms with and
            # without a total, a cancel.
            (v, res(v, "o1", 1), "reservation o1"), (v, res(v, "o1", 1), "its duplicate"),
            (v, res(v, "o2", 2), "reservation o2"),
            (v, conf(v, "o1", 1, (80, 400000)), "confirm o1 with a total"),
            (v, conf(v, "o2", 2), "confirm o2 without"),
            (v, rel(v, "o2", 2, "CANCELLED"), "cancel o2"),
            # 2: poison between good events: an unknown voucher, one over total_limit.
            (v, res(v, "o3", 3), "reservation o3"),
            (u, res(u, "o9", 1), "reservation of an unknown voucher"),
            (v, res(v, "o4", 4), "reservation o4 (the last use)"),
            (v, res(v, "o5", 5), "reservation o5 over total_limit"),
            (v, conf(v, "o1", 1, (50, 300000)), "confirm o1 at another total"),
            (v, no_order, "an event without orderId"),
            # 3: a campaign's: a code taken twice.
            ("campaign:%d" % cid, res(k1, "o6", 1, cid), "campaign reservation o6"),
            ("campaign:%d" % cid, res(k1, "o6", 1, cid), "its duplicate"),
            ("campaign:%d" % cid, res(k2, "o7", 2, cid), "campaign reservation o7"),
            ("campaign:%d" % cid, conf(k1, "o6", 1, (100, 500000), cid), "campaign confirm o6"),
            ("campaign:%d" % cid, rel(k2, "o7", 2, "EXPIRED", cid), "campaign expiry o7"),
            ("campaign:%d" % cid, res(k1, "o8", 3, cid), "campaign reservation o8 of k1 held"),
            # 4: an orderId of another voucher, a release, a version this build does not read.
            (w, res(w, "o1", 7), "reservation of o1 on the other voucher"),
            (v, rel(v, "o3", 3, "EXPIRED"), "expiry o3"),
            (v, version2, "an event of version 2"),
            (v, res(v, "o10", 1), "reservation o10 (customer 1's second)"),
            (w, res(w, "o11", 1), "reservation o11"),
            ("campaign:%d" % cid, res(k2, "o12", 2, cid), "campaign reservation o12 of k2 free"),
            # 5: per-customer limits of both, a tombstone, an early confirm.
            (w, res(w, "o14", 1), "reservation o14 over per_user_limit"),
            (w, rel(w, "o15", 5, "UNDELIVERED"), "release o15 with no row (tombstone)"),
            (w, conf(w, "o16", 6), "confirm o16 with no row (early)"),
            (v, customer0, "an event of customer 0"),
            (v, rel(v, "o4", 4, "EXPIRED"), "expiry o4"),
            ("campaign:%d" % cid, res(k3, "o17", 1, cid),
             "campaign reservation o17 over perCustomerLimit"),
            # 6: a direct voucher's events, verified against its rows, never applied: the ones
            # they bear out are no-ops, the others direct-mismatch letters.
            (d, res(d, "o30", 1), "direct reservation o30 (its row)"),
            (d, res(d, "o30", 1), "its duplicate"),
            (d, rel(d, "o30", 1, "CANCELLED"), "direct cancel o30 (the row still RESERVED)"),
            (d, res(d, "o31", 2), "direct reservation o31 (no row)"),
            (d, conf(d, "o33", 3), "direct confirm o33 (its row)"),
            (d, dict(res(d, "o33", 3), orderAmount=1), "direct reservation o33 (other figures)"),
        ]

    def camp(self, e, cid):
        if cid:
            e["campaignId"] = cid
        return e


def commit_to_start(group, parts):
    """The group's committed offsets at the start of parts (the run's topic is new: its writer
    reads every event of it)."""
    c = Consumer({"bootstrap.servers": os.environ["VOUCHER_KAFKA_BROKERS"], "group.id": group,
                  "enable.auto.commit": False})
    try:
        tps = [TopicPartition(TOPIC, p, 0) for p in parts]
        c.commit(offsets=tps, asynchronous=False)
    finally:
        c.close()


def committed(group, part):
    c = Consumer({"bootstrap.servers": os.environ["VOUCHER_KAFKA_BROKERS"], "group.id": group,
                  "enable.auto.commit": False})
    try:
        high = c.get_watermark_offsets(TopicPartition(TOPIC, part), timeout=10, cached=False)[1]
        return c.committed([TopicPartition(TOPIC, part)], timeout=10)[0].offset, high
    finally:
        c.close()


def produce(items, part):
    """Each event to the partition, in order; returns their offsets."""
    p = Producer({"bootstrap.servers": os.environ["VOUCHER_KAFKA_BROKERS"],
                  "enable.idempotence": True})
    offsets = []
    for key, e, _ in items:
        got = {}

        def cb(err, msg, got=got):
            got["err"], got["o"] = err, msg.offset()
        p.produce(TOPIC, key=key.encode(), value=json.dumps(e).encode(), partition=part,
                  on_delivery=cb)
        p.flush(10)
        if got.get("err") is not None or "o" not in got:
            raise SystemExit("writer calls: producing failed: %s" % got.get("err"))
        offsets.append(got["o"])
    if offsets != list(range(offsets[0], offsets[0] + len(offsets))):
        raise SystemExit("writer calls: another producer wrote to partition %d meanwhile" % part)
    return offsets


LOG_LINE = re.compile(r"^\S+ \S+ \S+ \[(\d+)\] (\w+):  (.*)$")
PARAM = re.compile(r"\$(\d+) = (NULL|'((?:[^']|'')*)')(?:, |$)")


def logged_statements(path, start, pids):
    """The statements the sessions pids sent, from the PostgreSQL log after byte start, as
    (text, bound parameters or None)."""
    with open(path, "rb") as f:
        f.seek(start)
        lines = f.read().decode(errors="replace").split("\n")
    out = []
    for line in lines:
        m = LOG_LINE.match(line)
        if not m or int(m.group(1)) not in pids:
            continue
        level, text = m.group(2), m.group(3)
        if level == "LOG" and text.startswith("statement: "):
            out.append((text[len("statement: "):], None))
        elif level == "LOG" and text.startswith("execute "):
            out.append((text.split(": ", 1)[1], None))
        elif level == "DETAIL" and text.startswith("parameters: ") and out:
            params = [None if whole == "NULL" else inner.replace("''", "'")
                      for _, whole, inner in PARAM.findall(text[len("parameters: "):])]
            out[-1] = (out[-1][0], params)
    return out


def applies(statements):
    """The statements of the batches: the connection's set-up (its session's isolation, the
    schema check) and the parking of dead letters (a transaction of wr_dlt_park() calls) left
    out."""
    out, i = [], 0
    while i < len(statements):
        text = statements[i][0]
        if text.startswith("SET SESSION") or "to_regprocedure" in text:
            i += 1
            continue
        if text == "BEGIN" and i + 1 < len(statements) and \
                "wr_dlt_park" in statements[i + 1][0]:
            i += 1
            while i < len(statements) and "wr_dlt_park" in statements[i][0]:
                i += 1
            i += 1  # its COMMIT
            continue
        out.append(statements[i])
        i += 1
    return out


def rows(pg, f):
    """What the events left: each redemption (every column but the id) and each used_count."""
    with pg.cursor() as c:
        c.execute("SELECT order_id, to_jsonb(r) - 'id' FROM voucher_redemption r"
                  " WHERE voucher_code IN (%s, %s, %s, %s) ORDER BY order_id",
                  (f.v, f.w, f.u, f.d))
        out = {"redemption " + o: j for o, j in c.fetchall()}
        c.execute("SELECT order_id, to_jsonb(r) FROM campaign_redemption r"
                  " WHERE campaign_id = %s ORDER BY order_id", (f.cid,))
        out.update({"campaign redemption " + o: j for o, j in c.fetchall()})
        c.execute("SELECT code, used_count FROM voucher WHERE code IN (%s, %s, %s)",
                  (f.v, f.w, f.d))
        out.update({"used_count of " + code: n for code, n in c.fetchall()})
        c.execute("SELECT used_count FROM campaign WHERE id = %s", (f.cid,))
        out["used_count of the campaign"] = c.fetchone()[0]
    return out


def run_writer(a, f, group, offsets):
    """The real writer (in group, which starts before the events) over the events; returns its
    statements and its dead letters."""
    log = os.path.join(os.environ["VOUCHER_STACK_DIR"], "logs", "postgres.log")
    start = os.path.getsize(log)
    env = dict(os.environ, VOUCHER_WRITER_GROUP=group, VOUCHER_WRITER_BATCH=str(BATCH),
               VOUCHER_WRITER_TOPIC=TOPIC, VOUCHER_WRITER_DLT_TOPIC=TOPIC + ".dlt",
               VOUCHER_WRITER_LANES="1", VOUCHER_WRITER_LINGER_MS="60s", VOUCHER_ADMIN_ADDR="",
               VOUCHER_WRITER_PG_DSN=dsn_with(os.environ["VOUCHER_WRITER_PG_DSN"], user=ROLE),
               VOUCHER_LOG_LEVEL="info")
    wlog = open(os.path.join(os.environ["VOUCHER_STACK_DIR"], "logs", "writer-calls.log"), "a")
    proc = subprocess.Popen([os.path.join(a.build, "writer", "voucher-writer")], env=env,
                            stdout=wlog, stderr=subprocess.STDOUT)
    pids = set()
    try:
        end = offsets[-1] + 1
        deadline = time.time() + 40
        pg = superuser("voucher")
        with pg.cursor() as c:
            while True:
                c.execute("SELECT pid FROM pg_stat_activity WHERE usename = %s", (ROLE,))
                pids |= {r[0] for r in c.fetchall()}
                if committed(group, f.part)[0] >= end:
                    break
                if proc.poll() is not None:
                    raise SystemExit("writer calls: the writer exited (%s; see %s)" % (
                        proc.returncode, wlog.name))
                if time.time() > deadline:
                    raise SystemExit("writer calls: the writer did not commit the events in"
                                     " 40 s (see %s)" % wlog.name)
                time.sleep(0.05)
            c.execute("SELECT original_offset, error_class, error_message FROM dead_letter"
                      " WHERE original_topic = %s AND original_partition = %s"
                      " AND original_offset BETWEEN %s AND %s", (TOPIC, f.part, offsets[0],
                                                                 offsets[-1]))
            dead = {o: (cls, msg) for o, cls, msg in c.fetchall()}
        pg.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        wlog.close()
    # PostgreSQL logs a statement when it starts it: all are there once the offsets are.
    return applies(logged_statements(log, start, pids)), dead


def run_explorer(items, offsets):
    """explorer.Writer over the same batches in the second database; returns its statements
    and dead letters."""
    sent = []
    pg = psycopg2.connect(dsn_with(os.environ["VOUCHER_WRITER_PG_DSN"], dbname=DB,
                                   options="'-c statement_timeout=30s -c lock_timeout=10s'"))
    pg.autocommit = True
    dead = {}
    try:
        with pg.cursor() as c:
            c.execute("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED")
        writer = explorer.Writer(pg, sent)
        for lo in range(0, len(items), BATCH):
            batch = [e for _, e, _ in items[lo:lo + BATCH]]
            for i, cls, err in writer.apply(batch):
                dead[offsets[lo + i]] = (cls, err)
    finally:
        pg.close()
    return sent, dead


def as_read(pg, statements):
    """statements with each bound array as PostgreSQL reads it: the log shows a parameter by its
    type's output function (its casts in the statement: $1::smallint[]), not as the client sent
    it, so the explorer's literals are read back the same way ('{"A","B"}' is {A,B})."""
    out = []
    with pg.cursor() as c:
        for text, params in statements:
            if params is not None:
                casts = dict(re.findall(r"\$(\d+)(::[a-z]+(?:\[\])?)", text))
                c.execute("SELECT " + ", ".join("%%s%s::text" % casts[str(n + 1)]
                                               for n in range(len(params))), params)
                params = list(c.fetchone())
            out.append((text, params))
    return out


def describe(params):
    """A statement's events, by their orders (o1, o2...)."""
    if not params:
        return ""
    orders = [o.strip('"') for o in params[3].strip("{}").split(",")]
    return "(%s)" % " ".join(o.rsplit("-", 1)[-1] for o in orders)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    t0 = time.time()
    set_up_role_and_database()
    pgs = [psycopg2.connect(os.environ["VOUCHER_PG_DSN"]),
           psycopg2.connect(dsn_with(os.environ["VOUCHER_PG_DSN"], dbname=DB))]
    for pg in pgs:
        pg.autocommit = True
    f = Fixture(pgs)
    items = f.events()
    assert len(items) % BATCH == 0
    group = TOPIC
    topics(create=True)
    try:
        commit_to_start(group, range(explorer.PARTITIONS))
        offsets = produce(items, f.part)
        theirs, their_dead = run_writer(a, f, group, offsets)
    finally:
        topics(create=False)
    ours, our_dead = run_explorer(items, offsets)
    ours = as_read(pgs[1], ours)
    bad = 0
    if not theirs:
        print("no statement of the writer's sessions in the PostgreSQL log: is log_line_prefix"
              " '%m [%p] ' (deploy/stack's default)?")
    print("== the statements: %d from the writer, %d from the explorer" % (len(theirs),
                                                                         len(ours)))
    for n in range(max(len(theirs), len(ours))):
        t = theirs[n] if n < len(theirs) else None
        o = ours[n] if n < len(ours) else None
        if t != o:
            bad += 1
            orders = describe((t[1] if t else None) or (o[1] if o else None))
            print("DIFFERENT statement %d%s:\n  writer:   %s\n  explorer: %s" % (
                n + 1, " " + orders if orders else "", t, o))
            break
    if not bad:
        for text, params in ours:
            print("same: %s%s" % (text if params is None else "wr_apply_batch",
                                  describe(params)))
    print("== the rows")
    mine, real = rows(pgs[1], f), rows(pgs[0], f)
    for k in sorted(set(mine) | set(real)):
        if mine.get(k) != real.get(k):
            bad += 1
            print("DIFFERENT %s:\n  writer:   %s\n  explorer: %s" % (k, real.get(k),
                                                                   mine.get(k)))
    print("%d rows and counts compared" % len(set(mine) | set(real)))
    print("== the dead letters")
    for n, (off, (key, e, what)) in enumerate(zip(offsets, items)):
        t, o = their_dead.get(off), our_dead.get(off)
        same = (t is None) == (o is None) and (t is None or (
            t[0] == o[0] and (t[0] == "malformed" or t[1] == o[1])))
        if not same:
            bad += 1
            print("DIFFERENT event %d (batch %d, %s):\n  writer:   %s\n  explorer: %s" % (
                n + 1, n // BATCH + 1, what, t, o))
        elif t:
            print("same event %d (batch %d, %s): %s" % (n + 1, n // BATCH + 1, what, t[0]))
    for pg in pgs:
        pg.close()
    print("writer calls: %s (%.1f s)" % (
        "the explorer's writer does what the writer does" if not bad else
        "%d difference(s)" % bad, time.time() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
