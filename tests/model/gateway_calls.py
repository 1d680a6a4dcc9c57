#!/usr/bin/env python3
"""The explorer's gateway steps against the real gateway: the same scripts, keys and arguments.

The explorer writes the gateway's side in Python (CurrentScripts in explorer.py): it sends the
build's scripts with the keys and arguments gw_reserve.c, gw_holds.c and gw_campaign_redeem.c
send. This check runs the real voucher-gateway against the stack, drives a reservation, its
retry, a confirm, a cancel (voucher and campaign code alike) over HTTP, records every script call
Redis receives (MONITOR), and compares each with what the explorer's adapter sends for the same
request: the script (by its text's SHA-1), the keys (the code and orderId put back as
placeholders) and the arguments (numbers as N, the code, orderId and customer as placeholders;
words kept). Any difference fails, naming the script and both lists.

    gateway_calls.py --build BUILD        (tests/model/run --gateway-calls; suite model)

It needs the stack (eval "$(deploy/stack env)") and, while it runs, owns it as the explorer does.
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
import urllib.request

import psycopg2
import redis

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import explorer  # noqa: E402

PORT_BASE = int(os.environ.get("VOUCHER_PORT_BASE", "15400"))
HTTP = "127.0.0.1:%d" % (PORT_BASE + 17)
ADMIN = "127.0.0.1:%d" % (PORT_BASE + 18)


class Monitor(threading.Thread):
    """Redis's MONITOR on a connection of its own: every EVAL and EVALSHA, as argument lists."""

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
                if words and words[0].upper() in ("EVAL", "EVALSHA"):
                    self.calls.append(words)


def sha(text):
    return hashlib.sha1(text.encode()).hexdigest()


def normal(words, names, exact):
    """An argument list with the request's identities as placeholders (names: inside a word, as
    the code in a key; exact: a whole word only, as a customer's number), numbers as N, and a
    gateway's lease id (hex) as ID."""
    out = []
    for w in words:
        w = str(w)
        for value, name in names:
            w = w.replace(value, name)
        w = exact.get(w, w)
        if re.fullmatch(r"[0-9a-f]{16,}", w) and not w.isdigit():
            w = "ID"
        else:
            w = re.sub(r"-?\d+", "N", w)
        out.append(w)
    return out


def gateway_calls(monitor, by_sha):
    """The script calls the gateway made: (script, keys, args), each normalised later."""
    out = []
    for words in monitor.calls:
        cmd, body, n = words[0].upper(), words[1], int(words[2])
        name = by_sha.get(body if cmd == "EVALSHA" else sha(body), "?")
        out.append((name, words[3:3 + n], words[3 + n:]))
    return out


class Recorder:
    """Stands for the explorer's Redis connection: records each script call the adapter makes and
    answers what the gateway's run answered (its steps need an answer to go on)."""

    def __init__(self, by_text):
        self.by_text = by_text
        self.calls = []

    def eval(self, text, n, *rest):
        self.calls.append((self.by_text.get(text, "?"), list(rest[:n]), list(rest[n:])))
        return [1, "1:100:1:H"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    lua = os.path.join(a.build, "common", "lua")
    texts = {}
    for f in os.listdir(lua):
        if f.endswith(".lua"):
            texts[f[:-4]] = explorer.embed.expand(os.path.join(lua, f))[0]
    by_sha = {sha(t): n for n, t in texts.items()}
    pg = psycopg2.connect(os.environ["VOUCHER_PG_DSN"])
    pg.autocommit = True
    stamp = "%d_%d" % (os.getpid() % 10000, int(time.time()) % 100000)
    code, oid, customer = "GC" + stamp, "GC%s-o0" % stamp, 7
    with pg.cursor() as c:
        c.execute("INSERT INTO voucher (code, discount_amount, min_order_amount, total_limit,"
                  " per_user_limit, starts_at, ends_at) VALUES (%s, 100, 0, 3, 9,"
                  " now() - interval '1 hour', now() + interval '1 day')", (code,))
        # A campaign of two codes, as the explorer makes one (make_campaign()).
        c.execute("INSERT INTO campaign (name, state, alphabet, code_length, total_count,"
                  " generated_count, discount_amount, per_customer_limit, starts_at, ends_at)"
                  " VALUES (%s, 'ACTIVE', 'safe32', 12, 2, 2, 100, 2,"
                  " now() - interval '1 hour', now() + interval '1 day') RETURNING id",
                  ("gateway calls " + stamp,))
        cid = c.fetchone()[0]
        rnd = random.SystemRandom()
        ccode, other = ("".join(rnd.choice(explorer.SAFE32) for _ in range(12)) for _ in "ab")
        c.execute("INSERT INTO campaign_code (code, campaign_id, seq) VALUES (%s, %s, 1),"
                  " (%s, %s, 2)", (ccode, cid, other, cid))
    coid = "GC%s-c0" % stamp
    env = dict(os.environ, VOUCHER_HTTP_ADDR=HTTP, VOUCHER_GUARD_CUSTOMER_TRIES="0",
               VOUCHER_GUARD_IP_TRIES="0", VOUCHER_LOG_LEVEL="warn")
    env.pop("VOUCHER_REDIS_FENCE", None)
    log = open(os.path.join(os.environ["VOUCHER_STACK_DIR"], "logs", "gateway-calls.log"), "w")
    gw = subprocess.Popen([os.path.join(a.build, "gateway", "voucher-gateway"), "--admin-addr",
                           ADMIN], env=env, stdout=log, stderr=subprocess.STDOUT)
    mon = Monitor(os.environ["VOUCHER_REDIS_URL"])
    bad = 0
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen("http://%s/healthz" % HTTP, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        def call(method, path, body=None):
            req = urllib.request.Request("http://%s%s" % (HTTP, path), method=method,
                                         data=json.dumps(body).encode() if body else None,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        # The voucher loaded first (load.lua, by a reservation of another order), as the explorer's
        # examples start with it loaded: the monitored calls are the steps themselves.
        call("POST", "/vouchers/%s/reservations" % code,
             {"customerId": customer + 1, "orderId": oid + "w", "orderAmount": 500000})
        call("POST", "/vouchers/%s/reservations" % other,
             {"customerId": customer + 1, "orderId": coid + "w", "orderAmount": 500000})
        mon.start()
        mon.ready.wait(10)

        steps = [("reserve", "POST", "/vouchers/%s/reservations" % code,
                  {"customerId": customer, "orderId": oid, "orderAmount": 500000}, 201),
                 ("retry", "POST", "/vouchers/%s/reservations" % code,
                  {"customerId": customer, "orderId": oid, "orderAmount": 500000}, 201),
                 ("confirm", "POST", "/vouchers/%s/reservations/%s/confirm" % (code, oid),
                  {}, 200),
                 ("cancel", "DELETE", "/vouchers/%s/reservations/%s" % (code, oid), None, 200),
                 ("campaign reserve", "POST", "/vouchers/%s/reservations" % ccode,
                  {"customerId": customer, "orderId": coid, "orderAmount": 500000}, 201),
                 ("campaign retry", "POST", "/vouchers/%s/reservations" % ccode,
                  {"customerId": customer, "orderId": coid, "orderAmount": 500000}, 201),
                 ("campaign confirm", "POST",
                  "/vouchers/%s/reservations/%s/confirm" % (ccode, coid), {}, 200),
                 ("campaign cancel", "DELETE", "/vouchers/%s/reservations/%s" % (ccode, coid),
                  None, 200)]
        marks = []
        for name, method, path, body, want in steps:
            n = len(mon.calls)
            got = call(method, path, body)
            time.sleep(0.2)   # MONITOR's stream trails the answer: let it catch up
            marks.append((name, n, len(mon.calls)))
            print("%s: %d" % (name, got))
            if got != want:
                print("  the gateway answered %d, not %d: see %s" % (got, want, log.name))
                bad += 1
        mon.stop = True
        calls = gateway_calls(mon, by_sha)
        names = [(coid, "ORDER"), (oid, "ORDER"), (ccode, "CCODE"), (code, "CODE"),
                 ("{c%d}" % cid, "{cID}")]
        exact = {str(customer): "CUSTOMER"}
        # The explorer's adapter for the same requests.
        rec = Recorder({t: n for n, t in texts.items()})
        adapter = explorer.CurrentScripts(rec, lua)
        k = explorer.Keys(code)
        ck = explorer.CampaignKeys(cid)
        adapter.campaign_loaded = lambda: True   # the first take marked it (the warm-up's)
        mine = {"campaign reserve": lambda: adapter.c_reserve(
                    ck, customer, 2, coid, 100, 1, 1, 500000, ccode, "1:1"),
                "campaign retry": lambda: adapter.c_reserve(
                    ck, customer, 2, coid, 100, 1, 1, 500000, ccode, "1:1"),
                "campaign confirm": lambda: adapter.c_confirm(ck, coid, 1, ccode),
                "campaign cancel": lambda: (adapter.c_cancel_begin(ck, coid, 1, ccode),
                                            adapter.c_cancel_finish(ck, coid, ccode)),"reserve": lambda: adapter.reserve(k, customer, oid, 100, 1, 1, 500000),
                "retry": lambda: adapter.reserve(k, customer, oid, 100, 1, 1, 500000),
                "confirm": lambda: adapter.confirm(k, oid, 1),
                "cancel": lambda: (adapter.cancel_begin(k, oid, 1),
                                   adapter.cancel_finish(k, oid))}
        for name, lo, hi in marks:
            rec.calls = []
            mine[name]()
            # A campaign's confirm or cancel asks the code as a voucher's first (gw_holds.c:
            # no counter and no order, -8, nothing written), then the campaign's: the explorer
            # goes to the campaign's at once.
            theirs = [(s, normal(keys, names, exact), normal(args, names, exact))
                      for s, keys, args in calls[lo:hi] if s not in ("claim",) and
                      not (name.startswith("campaign") and keys and keys[0].startswith(
                          "voucher:{%s}" % ccode))]
            ours = [(s, normal(keys, names, exact), normal(args, names, exact))
                    for s, keys, args in rec.calls]
            if theirs != ours:
                bad += 1
                print("DIFFERENT %s:\n  gateway:  %s\n  explorer: %s" % (name, theirs, ours))
            else:
                print("same %s: %s" % (name, ", ".join("%s %d keys %d args" % (
                    s, len(keys), len(args)) for s, keys, args in ours)))
    finally:
        gw.terminate()
        gw.wait()
        log.close()
        with pg.cursor() as c:
            c.execute("UPDATE voucher SET starts_at = now() - interval '3 days',"
                      " ends_at = now() - interval '2 days' WHERE code = %s", (code,))
    print("gateway calls: %s" % ("the explorer sends what the gateway sends" if not bad else
                                 "%d difference(s)" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
