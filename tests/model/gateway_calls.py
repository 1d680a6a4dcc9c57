#!/usr/bin/env python3
"""The explorer's gateway steps against the real gateway: the same scripts, keys, arguments and
WAITs.

The explorer writes the gateway's side in Python (CurrentScripts and the gateway rules in
explorer.py): it sends the build's scripts with the keys and arguments gw_reserve_*.c, gw_holds.c
and gw_campaign_redeem.c send, and under WAIT (--replica) it waits for a replica where they do.
This check runs the real voucher-gateway against the stack and records every script call and
every WAIT Redis receives (MONITOR) for a reservation, its retry, a confirm and a cancel over
HTTP, and compares them with what the explorer sends for the same requests:

1. without a replica: a voucher's and a campaign code's; each call's script (by its text's
   SHA-1), keys (the code and orderId as placeholders) and arguments (numbers as N, the code,
   orderId and customer as placeholders, a gateway's id as ID, words kept); then a direct
   voucher's reservation, its retry, and a reservation of the flash voucher's held orderId on
   it: the orderId's claim (SET ... NX GET PXAT, and claim.lua) and the answer's status against
   explorer.twin_take(), the explorer's direct twin's reservation (README, "A direct twin");
2. with a replica of the stack's Redis and VOUCHER_REDIS_WAIT_REPLICAS=1: a voucher's, the same
   calls and a WAIT after each script the explorer waits after (explorer.WAITED).

Any difference fails, naming the request and both lists.

    gateway_calls.py --build BUILD        (tests/model/run --gateway-calls; suite model)

It needs the stack (eval "$(deploy/stack env)") and, while it runs, owns it as the explorer does.
The mutants (tests/model/mutants.py) run it on a mutant that changes the gateway.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shlex
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import psycopg2
import redis

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import explorer  # noqa: E402

PORT_BASE = int(os.environ.get("VOUCHER_PORT_BASE", "15400"))
HTTP = "127.0.0.1:%d" % (PORT_BASE + 17)
ADMIN = "127.0.0.1:%d" % (PORT_BASE + 18)
REPLICA_PORT = PORT_BASE + 20


class Monitor(threading.Thread):
    """Redis's MONITOR on a connection of its own: every EVAL, EVALSHA and WAIT, and every SET
    of an orderId's claim (voucher-order:{ORDERID}), as word lists."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.r = redis.Redis.from_url(url)
        self.calls = []
        self.stop = False
        self.ready = threading.Event()

    def run(self):
        with self.r.monitor() as m:
            self.ready.set()
            for cmd in m.listen():
                if self.stop:
                    break
                words = shlex.split(cmd["command"]) if cmd.get("command") else []
                if words and (words[0].upper() in ("EVAL", "EVALSHA", "WAIT") or
                              words[0].upper() == "SET" and len(words) > 1 and
                              words[1].startswith("voucher-order:")):
                    self.calls.append(words)


def sha(text):
    return hashlib.sha1(text.encode()).hexdigest()


def normal(words, names, exact):
    """An argument list with the request's identities as placeholders (names: inside a word, as
    the code in a key; exact: a whole word only, as a customer's number), numbers as N, a
    claim's token (CODE:32 hex digits) as CODE:TOKEN, and a gateway's lease id (16 or more hex
    digits) as ID."""
    out = []
    for w in words:
        w = str(w)
        for value, name in names:
            w = w.replace(value, name)
        w = re.sub(r":[0-9a-f]{32}$", ":TOKEN", w)
        w = exact.get(w, w)
        # The lease token is 16 random hex digits, all of them decimal once in 1,800 starts
        # (a CI run met one): its length tells it from the numbers, which are at most 13.
        if re.fullmatch(r"[0-9a-f]{16,}", w):
            w = "ID"
        else:
            w = re.sub(r"-?\d+", "N", w)
        out.append(w)
    return out


def gateway_calls(words_list, by_sha):
    """The calls the gateway made: (script, "WAIT" or "SET", keys, args)."""
    out = []
    for words in words_list:
        cmd = words[0].upper()
        if cmd == "WAIT":
            out.append(("WAIT", [], []))
            continue
        if cmd == "SET":
            out.append(("SET", words[1:2], [w.upper() if w.isalpha() else w
                                            for w in words[2:]]))
            continue
        body, n = words[1], int(words[2])
        name = by_sha.get(body if cmd == "EVALSHA" else sha(body), "?")
        out.append((name, words[3:3 + n], words[3 + n:]))
    return out


class Recorder:
    """Stands for the explorer's Redis connection: records each script call the adapter makes and
    answers what the gateway's run answered (its steps need an answer to go on)."""

    def __init__(self, by_text):
        self.by_text = by_text
        self.calls = []
        self.prior = None   # what an orderId's claim (set()) finds

    def eval(self, text, n, *rest):
        self.calls.append((self.by_text.get(text, "?"), list(rest[:n]), list(rest[n:])))
        return [1, "1:100:1:H"]

    def set(self, key, value, nx=False, get=False, pxat=None):
        """An orderId's claim (explorer.claim_order()): SET key value NX GET PXAT pxat."""
        self.calls.append(("SET", [key], [value] + (["NX"] if nx else []) +
                           (["GET"] if get else []) + (["PXAT", pxat] if pxat else [])))
        return self.prior


def start_replica(scratch):
    """A replica of the stack's Redis (port base + 20), followed until a WAIT counts it."""
    u = urllib.parse.urlparse(os.environ["VOUCHER_REDIS_URL"])
    master = redis.Redis.from_url(os.environ["VOUCHER_REDIS_URL"])
    master.config_set("repl-diskless-sync-delay", 0)
    args = ["redis-server", "--port", str(REPLICA_PORT), "--bind", "127.0.0.1", "--dir", scratch,
            "--save", "", "--appendonly", "no", "--replicaof", u.hostname, str(u.port)]
    if u.password:
        args += ["--masterauth", u.password]
    log = open(os.path.join(scratch, "replica.log"), "w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    replica = redis.Redis(host="127.0.0.1", port=REPLICA_PORT)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if replica.info("replication").get("master_link_status") == "up" and \
                    master.execute_command("WAIT", 1, 100) >= 1:
                return proc
        except redis.exceptions.ConnectionError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("gateway calls: the replica did not follow the stack's Redis in 30 s")


def http(method, path, body=None):
    req = urllib.request.Request("http://%s%s" % (HTTP, path), method=method,
                                 data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


class Fixture:
    """A voucher of three uses and a campaign of two codes, made anew for each phase."""

    def __init__(self, pg):
        stamp = "%d_%d_%d" % (os.getpid() % 10000, int(time.time()) % 100000,
                              random.randrange(1000))
        self.code, self.oid, self.customer = "GC" + stamp, "GC%s-o0" % stamp, 7
        self.coid = "GC%s-c0" % stamp
        rnd = random.SystemRandom()
        self.ccode, self.other = ("".join(rnd.choice(explorer.SAFE32) for _ in range(12))
                                  for _ in "ab")
        # A direct voucher: its reservations claim the orderId in Redis before dr_reserve.
        self.dcode, self.doid = "GD" + stamp, "GD%s-d0" % stamp
        with pg.cursor() as c:
            c.execute("INSERT INTO voucher (code, mode, discount_amount, min_order_amount,"
                      " total_limit, per_user_limit, starts_at, ends_at) VALUES (%s, 'flash', 100, 0, 3, 9,"
                      " now() - interval '1 hour', now() + interval '1 day')", (self.code,))
            # A campaign of two codes, as the explorer makes one (make_campaign()).
            c.execute("INSERT INTO campaign (name, state, alphabet, code_length, total_count,"
                      " generated_count, discount_amount, per_customer_limit, starts_at,"
                      " ends_at) VALUES (%s, 'ACTIVE', 'safe32', 12, 2, 2, 100, 2,"
                      " now() - interval '1 hour', now() + interval '1 day') RETURNING id",
                      ("gateway calls " + stamp,))
            self.cid = c.fetchone()[0]
            c.execute("INSERT INTO campaign_code (code, campaign_id, seq) VALUES (%s, %s, 1),"
                      " (%s, %s, 2)", (self.ccode, self.cid, self.other, self.cid))
            c.execute("INSERT INTO voucher (code, mode, discount_amount, min_order_amount,"
                      " total_limit, per_user_limit, starts_at, ends_at) VALUES (%s, 'direct',"
                      " 100, 0, 3, 9, now() - interval '1 hour', now() + interval '1 day')",
                      (self.dcode,))

    def requests(self, campaigns):
        """(name, method, path, body, the status wanted), in order."""
        out = []
        for name, code, oid in [("", self.code, self.oid)] + (
                [("campaign ", self.ccode, self.coid)] if campaigns else []):
            body = {"customerId": self.customer, "orderId": oid, "orderAmount": 500000}
            out += [(name + "reserve", "POST", "/vouchers/%s/reservations" % code, body, 201),
                    (name + "retry", "POST", "/vouchers/%s/reservations" % code, body, 201),
                    (name + "confirm", "POST",
                     "/vouchers/%s/reservations/%s/confirm" % (code, oid), {}, 200),
                    (name + "cancel", "DELETE", "/vouchers/%s/reservations/%s" % (code, oid),
                     None, 200)]
        if campaigns:
            # A direct voucher's: a new order, its retry, and the orderId the warm-up holds on the
            # flash voucher (its event in Kafka, not in PostgreSQL: no writer runs), which the
            # claim refuses before dr_reserve (409 ORDER_CONFLICT, another voucher code).
            path = "/vouchers/%s/reservations" % self.dcode
            body = {"customerId": self.customer, "orderId": self.doid, "orderAmount": 500000}
            out += [("direct reserve", "POST", path, body, 201),
                    ("direct retry", "POST", path, body, 201),
                    ("direct flash's order", "POST", path, dict(body, orderId=self.oid + "w"),
                     409)]
        return out

    def warm(self):
        """The voucher and the campaign loaded first (load.lua, the first take's mark, by another
        order), as the explorer's examples start: the monitored calls are the steps alone."""
        http("POST", "/vouchers/%s/reservations" % self.code,
             {"customerId": self.customer + 1, "orderId": self.oid + "w", "orderAmount": 500000})
        http("POST", "/vouchers/%s/reservations" % self.other,
             {"customerId": self.customer + 1, "orderId": self.coid + "w", "orderAmount": 500000})

    def retire(self, pg):
        with pg.cursor() as c:
            c.execute("UPDATE voucher SET starts_at = now() - interval '3 days',"
                      " ends_at = now() - interval '2 days' WHERE code = ANY(%s)",
                      ([self.code, self.dcode],))
            c.execute("UPDATE campaign SET state = 'FAILED' WHERE id = %s", (self.cid,))


def explorer_calls(f, texts, lua, waited):
    """What the explorer's adapter sends for each request: {name: [(script, keys, args)]}, with a
    ("WAIT", [], []) after each script of explorer.WAITED when waited."""
    rec = Recorder({t: n for n, t in texts.items()})
    adapter = explorer.CurrentScripts(rec, lua)
    k, ck = explorer.Keys(f.code), explorer.CampaignKeys(f.cid)
    adapter.campaign_loaded = lambda: True   # the warm-up's first take marked it
    c, oid, coid, code = f.customer, f.oid, f.coid, f.ccode
    steps = {"reserve": lambda: adapter.reserve(k, c, oid, 100, 1, 1, 500000),
             "retry": lambda: adapter.reserve(k, c, oid, 100, 1, 1, 500000),
             "confirm": lambda: adapter.confirm(k, oid, 1),
             "cancel": lambda: (adapter.cancel_begin(k, oid, 1), adapter.cancel_finish(k, oid)),
             "campaign reserve": lambda: adapter.c_reserve(ck, c, 2, coid, 100, 1, 1, 500000,
                                                           code, "1:1"),
             "campaign retry": lambda: adapter.c_reserve(ck, c, 2, coid, 100, 1, 1, 500000,
                                                         code, "1:1"),
             "campaign confirm": lambda: adapter.c_confirm(ck, coid, 1, code),
             "campaign cancel": lambda: (adapter.c_cancel_begin(ck, coid, 1, code),
                                         adapter.c_cancel_finish(ck, coid, code))}
    out = {}
    for name, run in steps.items():
        rec.calls = []
        run()
        calls = []
        for call in rec.calls:
            calls.append(call)
            if waited and call[0] in explorer.WAITED:
                calls.append(("WAIT", [], []))
        out[name] = calls
    # A direct voucher's, as the explorer's twin reserves (explorer.twin_take()): the claim finds
    # nothing, this code's claim, the flash voucher's; dr_reserve answers a new order and a retry.
    token = iter(range(1, 10))
    for name, prior, word in (("direct reserve", None, "RESERVED"),
                              ("direct retry", explorer.claim_value(f.dcode, 99), "RETRY"),
                              ("direct flash's order", explorer.claim_value(f.code, 99),
                               "RESERVED")):
        rec.calls, rec.prior = [], prior
        oid = f.oid + "w" if name == "direct flash's order" else f.doid
        _, _, status = explorer.twin_take(
            rec, adapter, f.dcode, next(token), 1, oid, lambda: (word, 100, None, 1, 1),
            claim_ignored=explorer.TWIN["claim_ignored"])
        out[name] = rec.calls
        out[name + " status"] = status
    return out


def phase(title, a, pg, texts, lua, replica_dir=None):
    """One run of the gateway and the requests; returns the differences found."""
    by_sha = {sha(t): n for n, t in texts.items()}
    f = Fixture(pg)
    env = dict(os.environ, VOUCHER_HTTP_ADDR=HTTP, VOUCHER_GUARD_CUSTOMER_TRIES="0",
               VOUCHER_GUARD_IP_TRIES="0", VOUCHER_LOG_LEVEL="warn")
    env.pop("VOUCHER_REDIS_FENCE", None)
    replica = None
    if replica_dir:
        replica = start_replica(replica_dir)
        env["VOUCHER_REDIS_WAIT_REPLICAS"] = "1"
        env["VOUCHER_REDIS_WAIT_TIMEOUT"] = "%dms" % explorer.WAIT_MS
    log = open(os.path.join(os.environ["VOUCHER_STACK_DIR"], "logs", "gateway-calls.log"), "a")
    gw = subprocess.Popen([os.path.join(a.build, "gateway", "voucher-gateway"), "--admin-addr",
                           ADMIN], env=env, stdout=log, stderr=subprocess.STDOUT)
    mon = Monitor(os.environ["VOUCHER_REDIS_URL"])
    bad = 0
    print("== %s" % title)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen("http://%s/healthz" % HTTP, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        f.warm()
        mon.start()
        mon.ready.wait(10)
        marks = []
        for name, method, path, body, want in f.requests(campaigns=not replica_dir):
            n = len(mon.calls)
            got = http(method, path, body)
            time.sleep(0.2)   # MONITOR's stream trails the answer: let it catch up
            marks.append((name, n, len(mon.calls), got))
            if got != want:
                print("  %s: the gateway answered %d, not %d (see %s)" % (name, got, want,
                                                                         log.name))
                bad += 1
        mon.stop = True
        calls = gateway_calls(mon.calls, by_sha)
        names = [(f.coid, "ORDER"), (f.oid, "ORDER"), (f.doid, "ORDER"), (f.ccode, "CCODE"),
                 (f.code, "CODE"), (f.dcode, "DCODE"), ("{c%d}" % f.cid, "{cID}")]
        exact = {str(f.customer): "CUSTOMER"}
        mine = explorer_calls(f, texts, lua, bool(replica_dir))
        for name, lo, hi, got in marks:
            # A campaign's confirm or cancel asks the code as a voucher's first (gw_holds.c:
            # no counter and no order, -8, nothing written), then the campaign's: the explorer
            # goes to the campaign's at once. A flash voucher's claim is the explorer's own step
            # (its rule reserve()); a direct voucher's is compared, and so is its answer.
            direct = name.startswith("direct")
            theirs = [(s, normal(keys, names, exact), normal(args, names, exact))
                      for s, keys, args in calls[lo:hi] if (direct or s not in ("claim", "SET"))
                      and not (name.startswith("campaign") and keys and keys[0].startswith(
                          explorer.Keys(f.ccode).remaining[:-len("remaining")]))]
            ours = [(s, normal(keys, names, exact), normal(args, names, exact))
                    for s, keys, args in mine[name]]
            if direct:
                theirs.append(("status", [], [got]))
                ours.append(("status", [], [mine[name + " status"]]))
            if theirs != ours:
                bad += 1
                print("DIFFERENT %s:\n  gateway:  %s\n  explorer: %s" % (name, theirs, ours))
            else:
                print("same %s: %s" % (name, ", ".join(
                    "WAIT" if s == "WAIT" else "%s %d keys %d args" % (s, len(keys), len(args))
                    for s, keys, args in ours)))
    finally:
        gw.terminate()
        gw.wait()
        log.close()
        if replica:
            replica.kill()
            replica.wait()
        f.retire(pg)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    lua = os.path.join(a.build, "common", "lua")
    texts = {}
    for f in os.listdir(lua):
        if f.endswith(".lua"):
            texts[f[:-4]] = explorer.embed.expand(os.path.join(lua, f))[0]
    pg = psycopg2.connect(os.environ["VOUCHER_PG_DSN"])
    pg.autocommit = True
    scratch = os.path.join(os.environ["VOUCHER_STACK_DIR"], "gateway-calls")
    os.makedirs(scratch, exist_ok=True)
    bad = phase("without a replica: a voucher's and a campaign code's", a, pg, texts, lua)
    bad += phase("with a replica and VOUCHER_REDIS_WAIT_REPLICAS=1: a voucher's", a, pg, texts,
                 lua, replica_dir=scratch)
    print("gateway calls: %s" % ("the explorer sends what the gateway sends" if not bad else
                                 "%d difference(s)" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
