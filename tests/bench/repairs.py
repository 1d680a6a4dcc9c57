#!/usr/bin/env python3
"""How long the reconciler's repairs of a large voucher or campaign hold Redis
(issue 17). Every repair script runs alone in Redis: while it runs, no other
command of any voucher is served, and past Redis's busy-reply-threshold (5 s by
default) every other client is answered BUSY.

    tests/bench/repairs.py [--redis HOST:PORT] [--orders N] [--repeat R]
        [--lua-dir DIR] [--against DIR] [--out FILE]

On the Redis at --redis (default: VOUCHER_REDIS_URL's, as deploy/stack env
gives it), for N orders (default 100,000), each scenario writes the keys a
voucher or a campaign of N orders has (one customer each, a quarter of them
holds, the rest confirmed), takes away what the repair rebuilds, runs the
script the reconciler would run with the arguments it would send, and reads
Redis's own time for it from the slowlog:

  restore       the voucher's counter lost (restore.lua, every order of the
                snapshot as arguments, each one Redis still holds)
  restore in steps  the counter and the orders hash lost, restored as the
                reconciler does above --orders-scan-above: restore_stage.lua
                per 1,000 orders, then restore_swap.lua; the longest step
  restore in slices  the counter lost, the orders kept, restored as the
                reconciler does above --orders-scan-above: scan_begin.lua,
                restore_slice.lua per 500 orders (a merge and an HSCAN piece),
                then restore_finish.lua; the longest step, and the total of
                the steps in the report's last lines
  rebuild       the voucher's orders hash lost (rebuild.lua, every order)
  rebuild in steps  the same in steps (restore_stage.lua, rebuild_swap.lua)
  retake        the voucher's users hash lost (retake.lua, no order lacking)
  retake in slices  the same, retaken as the reconciler does above
                --orders-scan-above: scan_begin.lua, retake_slice.lua per 500
                orders (an HSCAN piece), then retake_finish.lua; the longest
                step, and the total
  lower         a counter above the remaining rule (lower.lua)
  lower in slices  the same, lowered as the reconciler does above
                --orders-scan-above: scan_begin.lua, lower_slice.lua per 500
                orders (an HSCAN piece, counted), then lower_finish.lua; the
                longest step, and the total
  campaign      a campaign's taken hash lost (campaign_rebuild.lua, every
                order and its code)
  campaign in slices  the same, rebuilt as the reconciler does above
                --orders-scan-above: scan_begin.lua, campaign_rebuild_slice.lua
                per 500 orders (each with its code), then
                campaign_rebuild_finish.lua; the longest step, and the total

The scripts are read from --lua-dir (default $VOUCHER_BUILD_DIR/common/lua,
else build/common/lua): the expanded text the daemons send, so two builds can
be compared on one Redis: --against DIR runs a second build's scripts in turn
with the first's, R times each (default 3), and reports the ratio of their
least times. Keys are named after a made-up code and deleted at the end.
Each script's answer is checked, and what it wrote (exit 1 when one is not
what the repair must give: every order counted, the counter at the rule's
bound, the holds and codes written back). Speed is reported, never asserted:
the suite bench runs it with 2,500 orders, so that every bulk call of the
scripts crosses its slices of 1,000.
"""
import argparse
import os
import socket
import sys
import time


class Redis:
    """A minimal RESP client: enough to write keys in bulk and run EVAL."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port))
        self.buf = b""

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("Redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("Redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        self.sock.sendall(self.encode(args))
        return self.reply()

    def pipeline(self, commands, batch=2000):
        for i in range(0, len(commands), batch):
            part = commands[i:i + batch]
            self.sock.sendall(b"".join(self.encode(c) for c in part))
            for _ in part:
                self.reply()


def voucher_keys(code):
    return {k: "voucher:{%s}:%s" % (code, k)
            for k in ("remaining", "users", "orders", "holds", "releasing", "amounts",
                      "limit", "scan", "touched")}


def campaign_keys(cid):
    return {k: "campaign:{c%s}:%s" % (cid, k)
            for k in ("taken", "users", "orders", "holds", "releasing", "amounts",
                      "scan", "touched", "touched_codes")}


HELD_UNTIL = 4102444800000  # 2100-01-01: the holds never expire during the bench


def value(i):
    """Order i's value: one customer each, every fourth order a hold, the rest confirmed."""
    if i % 4 == 0:
        return "%d:500:%d:H" % (5000000 + i, HELD_UNTIL)
    return "%d:500:0:C" % (5000000 + i)


def held(i):
    return str(HELD_UNTIL) if i % 4 == 0 else "0"


def seed(r, k, n, codes=False):
    """The keys a voucher (or campaign, with codes) of n orders holds."""
    r.call("DEL", *k.values())
    cmds = []
    for i in range(n):
        cmds.append(("HSET", k["orders"], "o%d" % i, value(i)))
        cmds.append(("HSET", k["users"], str(5000000 + i), "1"))
        cmds.append(("HSET", k["amounts"], "o%d" % i, "100000"))
        if i % 4 == 0:
            cmds.append(("ZADD", k["holds"], HELD_UNTIL, "o%d" % i))
        if codes:
            cmds.append(("HSET", k["taken"], code_of(i), "o%d" % i))
    r.pipeline(cmds)


def snapshot(n):
    """The reconciler's fours for every order (rc_repair.c, repair_args())."""
    out = []
    for i in range(n):
        out += ["o%d" % i, value(i), held(i), "0"]
    return out


def code_of(i):
    return "B%011d" % i


def campaign_snapshot(n):
    """rc_campaign.c's fours: orderId, code, value, heldUntilMs."""
    out = []
    for i in range(n):
        out += ["o%d" % i, code_of(i), value(i), held(i)]
    return out


# A repair in slices' total of Redis's time over its steps (µs) and how many, per run.
TOTALS = {}
# A repair in slices' steps (µs), every run's: their median, and which step was the longest.
STEPS = {}


def timed_eval(r, script, keys, args):
    """Runs the script; returns its answer and Redis's time for it (µs, slowlog).
    Lua's garbage is collected first: what the script before it left would
    otherwise be collected, and counted, during this one."""
    r.call("EVAL", "collectgarbage('collect')", 0)
    r.call("SLOWLOG", "RESET")
    answer = r.call("EVAL", script, len(keys), *keys, *args)
    entries = r.call("SLOWLOG", "GET", "10")
    us = max((e[2] for e in entries if e[3] and e[3][0].upper() == "EVAL"), default=-1)
    return answer, us


def scenarios(n):
    """(name, case, scripts, run): run(r, texts) seeds the keys, runs the
    scripts (texts: name -> text) and returns (what to check, Redis's µs,
    what the check wants); for a repair in steps the µs of its longest step."""
    code = "REPAIRBENCH%d" % os.getpid()
    k = voucher_keys(code)
    ck = campaign_keys("9%d" % os.getpid())
    vkeys = [k["remaining"], k["users"], k["orders"], k["holds"], k["releasing"]]
    total = 2 * n

    def restore(r, script):
        seed(r, k, n)
        r.call("DEL", k["remaining"], k["holds"])
        ans, us = timed_eval(r, script, vkeys,
                             [total, 0, int(time.time() * 1000), 0] + snapshot(n))
        return [ans, r.call("ZCARD", k["holds"])], us, [[1, "%d:%d" % (n, total - n)],
                                                         (n + 3) // 4]

    def rebuild(r, script):
        seed(r, k, n)
        r.call("SET", k["remaining"], 7)
        r.call("DEL", k["orders"])
        ans, us = timed_eval(r, script, vkeys + [k["amounts"]], [total, 0, 0] + snapshot(n))
        return [ans, r.call("ZCARD", k["holds"])], us, [[n, "7:%d" % (total - n)],
                                                         (n + 3) // 4]

    def retake(r, script):
        seed(r, k, n)
        r.call("SET", k["remaining"], total - n)
        r.call("DEL", k["users"])
        ans, us = timed_eval(r, script, vkeys, [total, 0, 0])
        return [ans, r.call("HLEN", k["users"])], us, [[0, "%d:%d" % (total - n, total - n)], n]

    def lower(r, script):
        seed(r, k, n)
        r.call("SET", k["remaining"], total)
        ans, us = timed_eval(r, script, [k["remaining"], k["orders"]], [total, 0])
        return ans, us, [1, "%d:%d" % (total, total - n)]

    def campaign(r, script):
        seed(r, ck, n, codes=True)
        r.call("DEL", ck["taken"])
        ans, us = timed_eval(r, script, [ck["taken"], ck["users"], ck["orders"], ck["holds"],
                                         ck["releasing"]], [0] + campaign_snapshot(n))
        return [ans, r.call("HLEN", ck["taken"])], us, [[0, "%d:%d:0" % (n, n)], n + 1]

    def campaign_slices(r, texts):
        """As the reconciler's rebuild_in_slices() (rc_campaign.c): the notes begun,
        campaign_rebuild_slice.lua per 500 orders of the pass (each with its code),
        then campaign_rebuild_finish.lua."""
        seed(r, ck, n, codes=True)
        r.call("DEL", ck["taken"])
        token = "bench%d" % os.getpid()
        staged = ["campaign:{c%s}:rebuilding:%s:%s" % (ck["taken"].split("{c")[1].split("}")[0],
                                                       token, x)
                  for x in ("orders", "taken", "users")]
        fours = campaign_snapshot(n)
        ans, longest = timed_eval(r, texts["scan_begin"],
                                  [ck["orders"], ck["scan"], ck["touched"], ck["touched_codes"]],
                                  [token, -1, 600000])
        total_us, held, written, steps = longest, 0, 0, 1
        each = STEPS.setdefault("campaign in slices", [])
        each.append(("scan_begin", longest))
        for o in range(0, n, 500):
            ans, us = timed_eval(r, texts["campaign_rebuild_slice"],
                                 [ck["taken"], ck["users"], ck["orders"], ck["holds"],
                                  ck["releasing"], ck["scan"]] + staged,
                                 [token, 1, 600000] + fours[4 * o:4 * (o + 500)])
            longest, total_us, steps = max(longest, us), total_us + us, steps + 1
            each.append(("slice", us))
            if ans[0] != 1:
                return [ans], longest, [1]
            h, w = ans[1].split(":")
            held, written = held + int(h), written + int(w)
        ans, us = timed_eval(r, texts["campaign_rebuild_finish"],
                             [ck["taken"], ck["users"], ck["orders"], ck["holds"], ck["scan"],
                              ck["touched"], ck["touched_codes"]] + staged,
                             [token, 1, 0, held, written])
        each.append(("finish", us))
        longest, total_us = max(longest, us), total_us + us
        TOTALS.setdefault("campaign in slices", []).append((total_us, steps + 1))
        left = len(r.call("KEYS", staged[0].rsplit(":", 1)[0] + ":*"))
        return [ans, r.call("HLEN", ck["taken"]), left], longest, [[0, "%d:%d:0" % (n, n)],
                                                                    n + 1, 0]

    def in_steps(r, texts, counter, swap_keys):
        """As the reconciler's repair_in_steps(): restore_stage.lua per 1,000
        orders and customers, then the swap; the longest step's µs."""
        token = "bench%d" % os.getpid()
        staged = ["voucher:{%s}:restoring:%s:%s" % (code, token, x)
                  for x in ("orders", "holds", "users")]
        fours = snapshot(n)
        customers = [x for i in range(n) if value(i)[-1] in "HC"
                     for x in (str(5000000 + i), "1")]
        longest, nstaged, taken = 0, 0, 0
        for o in range(0, max(n, len(customers) // 2), 1000):
            pairs = customers[2 * o:2 * (o + 1000)]
            ans, us = timed_eval(r, texts["restore_stage"],
                                 staged + [k["releasing"], k["remaining"]],
                                 [counter, 600000, len(pairs) // 2] + pairs +
                                 fours[4 * o:4 * (o + 1000)])
            longest = max(longest, us)
            nstaged += ans[0]
            taken += int(ans[1])
        ans, us = timed_eval(r, texts[swap_keys[0]], swap_keys[1] + [staged[0], staged[2],
                                                                      staged[1]],
                             [total, 0, taken, nstaged, 0])
        left = len(r.call("KEYS", "voucher:{%s}:restoring:*" % code))
        return ans, max(longest, us), left

    def restore_steps(r, texts):
        seed(r, k, n)
        r.call("DEL", k["remaining"], k["holds"], k["orders"], k["users"])
        ans, us, left = in_steps(r, texts, 0, ("restore_swap", vkeys[:4]))
        return [ans, r.call("ZCARD", k["holds"]), left], us, [[1, "%d:%d" % (n, total - n)],
                                                               (n + 3) // 4, 0]

    def rebuild_steps(r, texts):
        seed(r, k, n)
        r.call("SET", k["remaining"], 7)
        r.call("DEL", k["orders"])
        ans, us, left = in_steps(r, texts, 1, ("rebuild_swap", vkeys + [k["amounts"]]))
        return [ans, r.call("ZCARD", k["holds"]), left], us, [[n, "7:%d" % (total - n)],
                                                               (n + 3) // 4, 0]

    def restore_slices(r, texts):
        """As the reconciler's restore_in_slices(): the notes begun, restore_slice.lua
        until the snapshot is merged and HSCAN is back at 0, then restore_finish.lua."""
        seed(r, k, n)
        r.call("DEL", k["remaining"], k["holds"])
        token = "bench%d" % os.getpid()
        staged = ["voucher:{%s}:restoring:%s:%s" % (code, token, x) for x in ("orders", "users")]
        now = int(time.time() * 1000)
        fours = snapshot(n)
        ans, longest = timed_eval(r, texts["scan_begin"], [k["orders"], k["scan"], k["touched"]],
                                  [token, -1, 600000])
        total_us, cursor, o, taken, steps = longest, "0", 0, 0, 1
        while o < n or cursor:
            ans, us = timed_eval(r, texts["restore_slice"],
                                 [k["remaining"], k["orders"], k["holds"], k["releasing"],
                                  k["scan"]] + staged,
                                 [token, cursor, now, 600000, 500] + fours[4 * o:4 * (o + 500)])
            longest, total_us, steps = max(longest, us), total_us + us, steps + 1
            if ans[0] != 1:
                return [ans], longest, [1]
            got, read = ans[1].split(":")
            taken += int(read)
            o = min(n, o + 500)
            cursor = "" if not cursor or got == "0" else got
        ans, us = timed_eval(r, texts["restore_finish"],
                             vkeys + [k["scan"], k["touched"]] + staged,
                             [total, 0, taken, now, 0, token])
        longest, total_us = max(longest, us), total_us + us
        TOTALS.setdefault("restore in slices", []).append((total_us, steps + 1))
        left = len(r.call("KEYS", "voucher:{%s}:restoring:*" % code))
        return [ans, r.call("ZCARD", k["holds"]), left], longest, [[1, "%d:%d" % (n, total - n)],
                                                                    (n + 3) // 4, 0]

    def in_slices(r, texts, name, slice_keys, finish_args):
        """As the reconciler's repair_in_slices() with nothing to merge (a retake with no
        order lacking, a lower): the notes begun, NAME_slice.lua (its keys after the staged
        ones: slice_keys) until HSCAN is back at 0, then NAME_finish.lua with
        finish_args(taken, token). Returns the last answer and the longest step (µs); the
        steps and their total go to STEPS and TOTALS."""
        token = "bench%d" % os.getpid()
        staged = ["voucher:{%s}:restoring:%s:%s" % (code, token, x) for x in ("orders", "users")]
        ans, longest = timed_eval(r, texts["scan_begin"], [k["orders"], k["scan"], k["touched"]],
                                  [token, -1, 600000])
        total_us, cursor, taken, steps = longest, "0", 0, 1
        each = STEPS.setdefault(name + " in slices", [])
        each.append(("scan_begin", longest))
        while cursor:
            ans, us = timed_eval(r, texts[name + "_slice"],
                                 [k["remaining"], k["orders"], k["holds"], k["releasing"],
                                  k["scan"]] + staged + slice_keys,
                                 [token, cursor, 600000, 500])
            longest, total_us, steps = max(longest, us), total_us + us, steps + 1
            each.append(("slice", us))
            if ans[0] != 1:
                return ans, longest
            got, read = ans[1].split(":")[:2]
            taken += int(read)
            cursor = "" if got == "0" else got
        ans, us = timed_eval(r, texts[name + "_finish"],
                             vkeys + [k["scan"], k["touched"]] + staged, finish_args(taken, token))
        each.append(("finish", us))
        longest, total_us = max(longest, us), total_us + us
        TOTALS.setdefault(name + " in slices", []).append((total_us, steps + 1))
        return ans, longest

    def staged_left(r):
        return len(r.call("KEYS", "voucher:{%s}:restoring:*" % code))

    def retake_slices(r, texts):
        """The retake in slices (in_slices()): no order lacking, nothing to merge."""
        seed(r, k, n)
        r.call("SET", k["remaining"], total - n)
        r.call("DEL", k["users"])
        ans, longest = in_slices(r, texts, "retake", [k["users"]],
                                 lambda taken, token: [total, 0, taken, 0, token, 0])
        return [ans, r.call("HLEN", k["users"]), staged_left(r)], longest, [
            [0, "%d:%d" % (total - n, total - n)], n, 0]

    def lower_slices(r, texts):
        """The lower in slices (in_slices()): the counter at the total, lowered by n."""
        seed(r, k, n)
        r.call("SET", k["remaining"], total)
        ans, longest = in_slices(r, texts, "lower", [],
                                 lambda taken, token: [total, 0, taken, token])
        return [ans, staged_left(r)], longest, [[1, "%d:%d" % (total, total - n)], 0]

    def clean(r):
        r.call("DEL", *k.values())
        r.call("DEL", *ck.values())

    def one(name, run):
        return lambda r, texts: run(r, texts[name])

    return [("restore", "counter lost; every order of the snapshot, each still in Redis",
             ["restore"], one("restore", restore)),
            ("restore in steps", "counter and orders lost; the longest of its steps "
             "(restore_stage.lua per 1,000 orders, restore_swap.lua)",
             ["restore_stage", "restore_swap"], restore_steps),
            ("restore in slices", "counter lost, orders kept; the longest of its steps "
             "(scan_begin.lua, restore_slice.lua per 500 orders, restore_finish.lua)",
             ["scan_begin", "restore_slice", "restore_finish"], restore_slices),
            ("rebuild", "orders hash lost; every order of the snapshot written again",
             ["rebuild"], one("rebuild", rebuild)),
            ("rebuild in steps", "orders hash lost; the longest of its steps "
             "(restore_stage.lua per 1,000 orders, rebuild_swap.lua)",
             ["restore_stage", "rebuild_swap"], rebuild_steps),
            ("retake", "users hash lost; no order lacking", ["retake"], one("retake", retake)),
            ("retake in slices", "users hash lost; the longest of its steps (scan_begin.lua, "
             "retake_slice.lua per 500 orders, retake_finish.lua)",
             ["scan_begin", "retake_slice", "retake_finish"], retake_slices),
            ("lower", "counter above the rule's bound", ["lower"], one("lower", lower)),
            ("lower in slices", "counter above the rule's bound; the longest of its steps "
             "(scan_begin.lua, lower_slice.lua per 500 orders, lower_finish.lua)",
             ["scan_begin", "lower_slice", "lower_finish"], lower_slices),
            ("campaign", "taken lost; every order and its code", ["campaign_rebuild"],
             one("campaign_rebuild", campaign)),
            ("campaign in slices", "taken lost; the longest of its steps (scan_begin.lua, "
             "campaign_rebuild_slice.lua per 500 orders, campaign_rebuild_finish.lua)",
             ["scan_begin", "campaign_rebuild_slice", "campaign_rebuild_finish"],
             campaign_slices)], clean


def read_scripts(lua_dir, names):
    """The scripts of lua_dir by name; a build without one (an older one) lacks it."""
    out = {}
    if not os.path.isfile(os.path.join(lua_dir, "reserve.lua")):
        sys.exit("repairs: no scripts in %s: build first, or give --lua-dir" % lua_dir)
    for name in names:
        try:
            with open(os.path.join(lua_dir, name + ".lua")) as f:
                out[name] = f.read()
        except OSError:
            pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", help="HOST:PORT (default: VOUCHER_REDIS_URL's)")
    ap.add_argument("--orders", type=int, default=100000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--lua-dir")
    ap.add_argument("--against", metavar="DIR",
                    help="another build's scripts, run in turn with --lua-dir's")
    ap.add_argument("--out")
    opts = ap.parse_args()

    hostport = opts.redis
    if not hostport:
        url = os.environ.get("VOUCHER_REDIS_URL", "")
        if not url:
            sys.exit("repairs: no Redis: give --redis HOST:PORT or VOUCHER_REDIS_URL")
        hostport = url.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    host, port = hostport.rsplit(":", 1)
    lua_dir = opts.lua_dir or os.path.join(os.environ.get("VOUCHER_BUILD_DIR", "build"),
                                           "common", "lua")
    n = opts.orders
    if n < 1 or opts.repeat < 1:
        sys.exit("repairs: --orders and --repeat must be at least 1")

    cases, clean = scenarios(n)
    dirs = [lua_dir] + ([opts.against] if opts.against else [])
    scripts = [read_scripts(d, [x for c in cases for x in c[2]]) for d in dirs]
    r = Redis(host, int(port))
    slower = r.call("CONFIG", "GET", "slowlog-log-slower-than")[1]
    r.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    times = {(c[0], d): [] for c in cases for d in range(len(dirs))}
    wrong = []
    try:
        for rep in range(opts.repeat):
            for name, _, needs, run in cases:
                for d in range(len(dirs)):
                    if any(x not in scripts[d] for x in needs):
                        continue
                    got, us, want = run(r, scripts[d])
                    times[(name, d)].append(us)
                    print("%d %-9s %-40s %8.1f ms %s" % (rep + 1, name, dirs[d], us / 1000.0,
                                                        "" if got == want else
                                                        "WRONG: %s, wanted %s" % (got, want)),
                          file=sys.stderr)
                    if got != want:
                        wrong.append("%s (%s): %s, wanted %s" % (name, dirs[d], got, want))
    finally:
        clean(r)
        r.call("CONFIG", "SET", "slowlog-log-slower-than", slower)

    load = " ".join(open("/proc/loadavg").read().split()[:3])
    head = "| repair | case | %s |" % " | ".join("`%s` least / most" % d for d in dirs)
    report = ["## The reconciler's repairs of a large voucher or campaign: Redis's time (slowlog)",
              "",
              "%d orders, one customer each, a quarter of them holds; each script run %d times%s;"
              " load average at the end %s." % (n, opts.repeat,
                                                " in turn with the other build's" if opts.against
                                                else "", load),
              "", head + (" ratio (least) |" if opts.against else ""),
              "|---|---|" + "---:|" * (len(dirs) + (1 if opts.against else 0))]
    def cell(t):
        return "%.0f / %.0f ms" % (min(t) / 1000.0, max(t) / 1000.0) if t else "–"

    for name, what, _, _ in cases:
        cells = [cell(times[(name, d)]) for d in range(len(dirs))]
        if opts.against:
            a, b = times[(name, 0)], times[(name, 1)]
            cells.append("%.2f×" % (min(a) / max(1, min(b))) if a and b else "–")
        report.append("| %s | %s | %s |" % (name, what, " | ".join(cells)))
    for name, runs in TOTALS.items():
        report += ["", "%s: %d steps, %.0f ms of Redis in all (least of %d runs; most %.0f ms)"
                   % (name, runs[0][1], min(t for t, _ in runs) / 1000.0, len(runs),
                      max(t for t, _ in runs) / 1000.0)]
    for name, steps in STEPS.items():
        us = sorted(t for _, t in steps)
        kind = max(steps, key=lambda x: x[1])[0]
        finishes = sorted(t for k, t in steps if k == "finish")
        report += ["", "%s: a step's median %.1f ms over %d steps of every run; the longest %.1f ms "
                   "(a %s); the last step %.1f ms at least" % (
                       name, us[len(us) // 2] / 1000.0, len(us), us[-1] / 1000.0, kind,
                       (finishes[0] if finishes else 0) / 1000.0)]
    if wrong:
        report += ["", "**Wrong answers:** " + "; ".join(wrong)]
    text = "\n".join(report) + "\n"
    print(text)
    if opts.out:
        with open(opts.out, "a") as f:
            f.write(text + "\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
