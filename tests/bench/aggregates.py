#!/usr/bin/env python3
"""What the aggregates cost and what they save (proto/redis-keys.md, "Aggregates"; issue 43).

    tests/bench/aggregates.py reserve --before FILE --after FILE [--calls N] [--rounds R]
    tests/bench/aggregates.py reconciler --reconciler BIN [--orders N] [--secs S] [--rounds R]
    tests/bench/aggregates.py sizes --reconciler BIN [--sizes N,N,...] [--secs S] [--out PREFIX]

reserve: Redis's own time per call of reserve.lua (INFO commandstats, usec_per_call of
EVALSHA: the script's run, not the round trip, in wall time: a loaded machine inflates it) and
the commands the script ran per call (commandstats counts them too: a figure no load moves),
the success path, for two expansions of the
script (--before: main's BUILD/common/lua/reserve.lua, --after: this build's), alternated
R times (3), N calls each (100,000) from redis-benchmark (50 clients, unpipelined, distinct
customers and orders, as bench scenario 6b). Prints each round and the medians.

reconciler: the reconciler's CPU per pass (user + system, from /proc) with one quiet voucher
of N orders (100,000: one customer each, a quarter of them holds that end in 2100, the rest
confirmed) consistent in Redis and PostgreSQL, and nothing else active, run S seconds (60)
at --interval 1s and its defaults otherwise, alternated R times (2) with
--audit-every 0 (before: a quiet voucher read in full every --full-every, 30 s) and
without (after: its aggregates compared, read in full every 6 h). Prints CPU per pass, passes,
and how many passes read the voucher in full. Needs the stack (deploy/stack env) with no other
active voucher (run it after the explorer, which moves every voucher out of the window), and
the writer's group caught up.

sizes: the reconciler's CPU per pass and its PostgreSQL session's (the backend whose
application_name is voucher-reconciler, /proc), at --interval 1s for S seconds (60) with one
quiet voucher of each size (10,000, 100,000 and 1,000,000 by default; made as for
reconciler), in two settings: its defaults (steady state: the voucher judged by its
aggregates) and --full-every 0 --audit-every 0 (every pass reads every voucher in full, as
before issue 43). Prints a table; with --out PREFIX writes PREFIX.dat and a log-log plot
PREFIX.png (gnuplot). Same needs as reconciler.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repairs import HELD_UNTIL, Redis  # noqa: E402


def redis_addr():
    url = os.environ.get("VOUCHER_REDIS_URL", "redis://127.0.0.1:6379/0")
    m = re.match(r"redis://(?:[^@]*@)?([^:/]+):(\d+)", url)
    return m.group(1), int(m.group(2))


def usec_per_call(r):
    """EVALSHA's usec_per_call and calls, and the commands its scripts ran per call, by name."""
    info = r.call("INFO", "commandstats")
    m = re.search(r"cmdstat_evalsha:calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)", info)
    calls = int(m.group(1))
    inner = {c: int(n) / calls for c, n in re.findall(r"cmdstat_(\w+):calls=(\d+)", info)
             if c not in ("evalsha", "config", "info")}
    return float(m.group(3)), calls, inner


def reserve(args):
    host, port = redis_addr()
    r = Redis(host, port)
    results = {"before": [], "after": []}
    for rnd in range(args.rounds):
        for name in ("before", "after"):
            with open(getattr(args, name)) as f:
                sha = r.call("SCRIPT", "LOAD", f.read())
            code = "AGGB_%s_%d" % (name, rnd)
            k = ["voucher:{%s}:%s" % (code, s)
                 for s in ("remaining", "users", "orders", "holds", "resent", "amounts")]
            r.call("SET", k[0], 2000000000)
            now = int(time.time() * 1000)
            r.call("CONFIG", "RESETSTAT")
            subprocess.run(
                ["redis-benchmark", "-h", host, "-p", str(port), "-c", "50", "-n",
                 str(args.calls), "-r", "1000000000", "-q", "EVALSHA", sha, "6", *k,
                 "__rand_int__", "1", "rb-__rand_int__", "100000", str(now + 900000), str(now),
                 "250000", "take"], check=True, stdout=subprocess.DEVNULL)
            usec, calls, inner = usec_per_call(r)
            taken = 2000000000 - int(r.call("GET", k[0]))
            results[name].append(usec)
            print("round %d %-6s %.2f us per EVALSHA (%d calls, %d uses taken); commands per"
                  " call %.2f: %s" % (rnd + 1, name, usec, calls, taken, sum(inner.values()),
                                      " ".join("%s %.2f" % kv for kv in sorted(inner.items()))),
                  flush=True)
            r.call("DEL", *k, "voucher:{%s}:agg" % code)
    b, a = statistics.median(results["before"]), statistics.median(results["after"])
    print("median: before %.2f us, after %.2f us: +%.2f us (%.0f%%) per reservation"
          % (b, a, a - b, 100 * (a - b) / b))


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-d",
                           os.environ["VOUCHER_PG_DSN"], "-c", sql],
                          check=True, capture_output=True, text=True).stdout.strip()


def make_voucher(code, n):
    """N orders, consistent on both sides: customer 1000000+i, every fourth a hold."""
    host, port = redis_addr()
    r = Redis(host, port)
    psql("INSERT INTO voucher (code, mode, discount_amount, total_limit, per_user_limit, starts_at,"
         " ends_at, used_count, redis_loaded_at) VALUES ('%s', 'flash', 100000, %d, 1,"
         " now() - interval '1 hour', now() + interval '1 day', %d, now())" % (code, n + 10, n))
    psql("INSERT INTO voucher_redemption (voucher_code, customer_id, order_id, status,"
         " discount_amount, order_amount, held_until)"
         " SELECT '%s', 1000000 + i, '%s-' || i,"
         " CASE WHEN i %% 4 = 0 THEN 'RESERVED' ELSE 'CONFIRMED' END, 100000, 500000,"
         " to_timestamp(%d / 1000.0) FROM generate_series(0, %d) i" % (code, code, HELD_UNTIL,
                                                                     n - 1))
    k = {s: "voucher:{%s}:%s" % (code, s) for s in
         ("remaining", "users", "orders", "holds", "amounts", "limit", "agg")}
    orders, users, holds, amounts = [], [], [], []
    agg = {"H": 0, "C": 0, "H_customers": 0, "C_customers": 0}
    for i in range(n):
        c = 1000000 + i
        st = "H" if i % 4 == 0 else "C"
        orders += ["%s-%d" % (code, i), "%d:100000:%d:%s" % (c, HELD_UNTIL, st)]
        users += [str(c), "1"]
        amounts += ["%s-%d" % (code, i), "500000"]
        agg[st] += 1
        agg[st + "_customers"] += int(str(c)[-6:])
        if st == "H":
            holds += [str(HELD_UNTIL), "%s-%d" % (code, i)]
    cmds = [["SET", k["remaining"], 10], ["SET", k["limit"], n + 10]]
    for key, flat, cmd in ((k["orders"], orders, "HSET"), (k["users"], users, "HSET"),
                           (k["amounts"], amounts, "HSET"), (k["holds"], holds, "ZADD")):
        for i in range(0, len(flat), 2000):
            cmds.append([cmd, key] + flat[i:i + 2000])
    cmds.append(["HSET", k["agg"]] + [x for f, v in agg.items() for x in (f, v)])
    r.pipeline(cmds)


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def metric(addr, name):
    out = subprocess.run(["curl", "-s", "--max-time", "2", "http://%s/metrics" % addr],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return line
    return None


def passes(addr):
    line = metric(addr, 'voucher_reconciler_passes_total{result="ok"}')
    return int(float(line.split()[-1])) if line else 0


def reconciler(args):
    code = "AGGR_%d" % int(time.time())
    print("making a quiet voucher of %d orders (%s)" % (args.orders, code), flush=True)
    make_voucher(code, args.orders)
    addr = "127.0.0.1:%d" % (int(os.environ.get("VOUCHER_PORT_BASE", "15400")) + 90)
    rows = {"before": [], "after": []}
    for rnd in range(args.rounds):
        for name in ("before", "after"):
            extra = ["--audit-every", "0"] if name == "before" else []
            full = [0]

            def read_full():
                line = metric(addr, 'voucher_reconciler_read{code="%s"}' % code)
                full[0] += line is not None and line.split()[-1] == "2"
            per, _, n = run_reconciler(args.reconciler, addr, extra, args.secs, read_full)
            rows[name].append(per)
            print("round %d %-6s %.1f ms CPU per pass over %d passes, %d read the voucher in"
                  " full" % (rnd + 1, name, per, n, full[0]), flush=True)
    b, a = statistics.median(rows["before"]), statistics.median(rows["after"])
    print("median: before %.1f ms, after %.1f ms of the reconciler's CPU per pass" % (b, a))
    psql("UPDATE voucher SET ends_at = now() - interval '2 days', starts_at = now() -"
         " interval '3 days' WHERE code = '%s'" % code)


def backend_pids():
    out = psql("SELECT pid FROM pg_stat_activity WHERE application_name = 'voucher-reconciler'")
    return [int(x) for x in out.split()]


def run_reconciler(binary, addr, extra, secs, on_pass=None):
    """CPU ms per pass of the reconciler and of its PostgreSQL sessions, and the passes, over
    secs seconds after its first pass; on_pass() is called after each pass ends."""
    p = subprocess.Popen([binary, "--interval", "1s", "--admin-addr", addr] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(3000):
            if passes(addr) >= 1:
                break
            if p.poll() is not None:
                sys.exit("the reconciler exited (%d) before its first pass" % p.returncode)
            time.sleep(0.1)
        # The first pass reads every voucher in full, whatever the settings: left out.
        pg = backend_pids()
        p0, c0 = passes(addr), cpu_ticks(p.pid)
        g0 = sum(cpu_ticks(x) for x in pg)
        end, last = time.time() + secs, p0
        while time.time() < end:
            time.sleep(0.2)
            now = passes(addr)
            if now != last and on_pass:
                on_pass()
            last = now
        p1, c1 = passes(addr), cpu_ticks(p.pid)
        g1 = sum(cpu_ticks(x) for x in pg)
        if backend_pids() != pg:
            print("  (its PostgreSQL session changed during the round: its CPU is partial)")
    finally:
        p.terminate()
        p.wait()
    hz = os.sysconf("SC_CLK_TCK")
    n = max(p1 - p0, 1)
    return (c1 - c0) / hz / n * 1000, (g1 - g0) / hz / n * 1000, p1 - p0


def sizes(args):
    addr = "127.0.0.1:%d" % (int(os.environ.get("VOUCHER_PORT_BASE", "15400")) + 90)
    settings = (("steady", []), ("full", ["--full-every", "0", "--audit-every", "0"]))
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        code = "AGGS_%d_%d" % (n, int(time.time()))
        t0 = time.time()
        make_voucher(code, n)
        print("a quiet voucher of %d orders (%s) made in %.0f s" % (n, code, time.time() - t0),
              flush=True)
        row = [n]
        for name, extra in settings:
            rec, pg, k = run_reconciler(args.reconciler, addr, extra, args.secs)
            row += [rec, pg]
            print("  %-6s reconciler %.1f ms, PostgreSQL %.1f ms CPU per pass (%d passes)"
                  % (name, rec, pg, k), flush=True)
        rows.append(row)
        psql("UPDATE voucher SET ends_at = now() - interval '2 days', starts_at = now() -"
             " interval '3 days' WHERE code = '%s'" % code)
        host, port = redis_addr()
        Redis(host, port).call("DEL", *["voucher:{%s}:%s" % (code, s) for s in (
            "remaining", "users", "orders", "holds", "amounts", "limit", "agg")])
    print("\n| orders | reconciler ms/pass, steady | PostgreSQL ms/pass, steady |"
          " reconciler ms/pass, every pass in full | PostgreSQL ms/pass, every pass in full |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %d | %.1f | %.1f | %.1f | %.1f |" % tuple(r))
    if args.out:
        with open(args.out + ".dat", "w") as f:
            f.write("# orders rec_steady pg_steady rec_full pg_full (CPU ms per pass)\n")
            for r in rows:
                f.write("%d %.2f %.2f %.2f %.2f\n" % tuple(r))
        plot = """set terminal pngcairo size 960,600 font ",10"
set output "%(o)s.png"
set title "CPU per reconciler pass against a quiet voucher's size (--interval 1s)"
set logscale xy
set xlabel "orders of the voucher"
set ylabel "CPU ms per pass"
set key top left
set grid
plot "%(o)s.dat" using 1:2 with linespoints title "reconciler, steady (aggregates)", \\
     "" using 1:3 with linespoints title "PostgreSQL, steady", \\
     "" using 1:4 with linespoints title "reconciler, every pass in full", \\
     "" using 1:5 with linespoints title "PostgreSQL, every pass in full"
""" % {"o": args.out}
        subprocess.run(["gnuplot"], input=plot, text=True, check=True)
        print("wrote %s.dat and %s.png" % (args.out, args.out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("reserve")
    a.add_argument("--before", required=True)
    a.add_argument("--after", required=True)
    a.add_argument("--calls", type=int, default=100000)
    a.add_argument("--rounds", type=int, default=3)
    b = sub.add_parser("reconciler")
    b.add_argument("--reconciler", required=True)
    b.add_argument("--orders", type=int, default=100000)
    b.add_argument("--secs", type=int, default=60)
    b.add_argument("--rounds", type=int, default=2)
    c = sub.add_parser("sizes")
    c.add_argument("--reconciler", required=True)
    c.add_argument("--sizes", default="10000,100000,1000000")
    c.add_argument("--secs", type=int, default=60)
    c.add_argument("--out")
    args = ap.parse_args()
    {"reserve": reserve, "reconciler": reconciler, "sizes": sizes}[args.what](args)


if __name__ == "__main__":
    main()
