#!/usr/bin/env python3
"""A simulated guessing attack against the guessing limits (issue 16), with
legitimate customers redeeming at the same time.

    tests/bench/guessing.py --addr 127.0.0.1:PORT --real CODE [--guesses 100000]
        [--ips 1000] [--accounts 100] [--legit 200] [--threads 16]
        [--customer-tries 5] [--ip-tries 100]

The gateway at --addr must trust 127.0.0.1 as a proxy (--trusted-proxies
127.0.0.1/32): each request names its client in X-Forwarded-For. The attack
sends --guesses reservations of made-up codes (12 random symbols of safe32,
the campaign code scheme of proto/campaigns.md), each from one of --accounts
accounts and --ips addresses at random; legitimate customers (each its own
account and address) reserve the real code --real once each, spread over the
attack. Prints a Markdown report; exits 1 when a fact fails:
- the attack hits nothing (no answer but 404 and 429);
- the failures let through stay within the buckets' allowance (accounts x
  customer-tries, plus what refilled during the run, plus the tries that were in
  flight together on one account: at most --threads more), and every other
  guess got 429;
- no legitimate customer saw a 429 (all 201).
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time

SAFE32 = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--real", required=True)
    ap.add_argument("--guesses", type=int, default=100000)
    ap.add_argument("--ips", type=int, default=1000)
    ap.add_argument("--accounts", type=int, default=100)
    ap.add_argument("--legit", type=int, default=200)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--customer-tries", type=int, default=5)
    ap.add_argument("--customer-window", type=float, default=3600.0, help="seconds")
    ap.add_argument("--ip-tries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    rnd = random.Random(a.seed)
    run = rnd.randrange(1 << 30)
    base = 10_000_000 + (run % 1000) * 100_000  # accounts apart from other runs
    ips = ["198.%d.%d.%d" % (18 + i % 2, (run // 7 + i // 254) % 256, i % 254 + 1) for i in range(a.ips)]
    legit_ips = ["198.19.%d.%d" % (200 + i // 254 % 50, i % 254 + 1) for i in range(a.legit)]
    work = []
    for i in range(a.guesses):
        code = "".join(rnd.choice(SAFE32) for _ in range(12))
        work.append(("guess", code, base + rnd.randrange(a.accounts), rnd.choice(ips)))
    # Legitimate customers spread evenly through the attack.
    step = max(1, a.guesses // max(1, a.legit))
    for j in range(a.legit):
        work.insert(min(len(work), j * step + j), ("legit", a.real, base + 50_000 + j, legit_ips[j]))
    lock = threading.Lock()
    counts = {"guess": {}, "legit": {}}
    nxt = [0]

    def worker():
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        while True:
            with lock:
                if nxt[0] >= len(work):
                    break
                kind, code, customer, ip = work[nxt[0]]
                idx = nxt[0]
                nxt[0] += 1
            body = json.dumps({"customerId": customer, "orderId": "atk-%d-%d" % (run, idx),
                               "orderAmount": 1000})
            for attempt in range(3):
                try:
                    conn.request("POST", "/vouchers/%s/reservations" % code, body,
                                 {"Content-Type": "application/json", "X-Forwarded-For": ip})
                    r = conn.getresponse()
                    r.read()
                    status = r.status
                    break
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = http.client.HTTPConnection(host, int(port), timeout=10)
                    status = "error"
            with lock:
                counts[kind][status] = counts[kind].get(status, 0) + 1
        conn.close()

    t0 = time.time()
    threads = [threading.Thread(target=worker) for _ in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.time() - t0

    g, l = counts["guess"], counts["legit"]
    hits = sum(n for s, n in g.items() if s not in (404, 429))
    let_through = g.get(404, 0)
    refilled = a.accounts * a.customer_tries * secs / a.customer_window
    allowance = a.accounts * a.customer_tries + refilled
    facts = [
        (hits == 0, "the attack hit nothing: every guess got 404 or 429 (%d other)" % hits),
        (let_through <= allowance + a.threads,
         "failures let through (404): %d, within the accounts' allowance %.0f (+%d in flight)"
         % (let_through, allowance, a.threads)),
        (g.get(429, 0) == a.guesses - let_through - hits,
         "every other guess got 429: %d" % g.get(429, 0)),
        (l.get(201, 0) == a.legit and not l.get(429),
         "legitimate customers: %s of %d got 201, %d got 429" % (l.get(201, 0), a.legit, l.get(429, 0))),
    ]
    print("# Guessing attack\n")
    print("| setting | value |\n|---|---|")
    for k in ("guesses", "ips", "accounts", "legit", "threads", "customer_tries", "ip_tries"):
        print("| %s | %s |" % (k, getattr(a, k)))
    print("| duration | %.1f s (%.0f requests/s) |" % (secs, len(work) / secs))
    print("\n| answers | count |\n|---|---|")
    for kind in ("guess", "legit"):
        for s in sorted(counts[kind], key=str):
            print("| %s %s | %d |" % (kind, s, counts[kind][s]))
    print("\n## Facts\n")
    for ok, text in facts:
        print("- %s %s" % ("✅" if ok else "❌", text))
    return 0 if all(ok for ok, _ in facts) else 1


if __name__ == "__main__":
    sys.exit(main())
