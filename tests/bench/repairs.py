#!/usr/bin/env python3
"""How long the reconciler's repairs of a large voucher or campaign hold Redis
(issue 17). Every repair script runs alone in Redis: while it runs, no other
command of any voucher is served, and past Redis's busy-reply-threshold (5 s by
default) every other client is answered BUSY.

    tests/bench/repairs.py [--redis HOST:PORT] [--orders N] [--lua-dir DIR]
        [--out FILE]

On the Redis at --redis (default: VOUCHER_REDIS_URL's, as deploy/stack env
gives it), for N orders (default 100,000), each scenario writes the keys a
voucher or a campaign of N confirmed orders has (one customer each), takes away
what the repair rebuilds, runs the script the reconciler would run with the
arguments it would send, and reads Redis's own time for it from the slowlog:

  restore       the voucher's counter lost (restore.lua, every order of the
                snapshot as arguments, each one Redis still holds)
  rebuild       the voucher's orders hash lost (rebuild.lua, every order)
  retake        the voucher's users hash lost (retake.lua, no order lacking)
  lower         a counter above the remaining rule (lower.lua)
  campaign      a campaign's taken hash lost (campaign_rebuild.lua, every
                order and its code)

The scripts are read from --lua-dir (default $VOUCHER_BUILD_DIR/common/lua,
else build/common/lua): the expanded text the daemons send, so two builds can
be compared on one Redis. Keys are named after a made-up code and deleted at
the end. Each script's answer is checked (exit 1 when one is not what the
repair must give: every order counted, the counter at the rule's bound).
Speed is reported, never asserted.
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


def value(i):
    return "%d:500:0:C" % (5000000 + i)


def seed_voucher(r, k, n):
    r.call("DEL", *k.values())
    cmds = []
    for i in range(n):
        cmds.append(("HSET", k["orders"], "o%d" % i, value(i)))
        cmds.append(("HSET", k["users"], str(5000000 + i), "1"))
        cmds.append(("HSET", k["amounts"], "o%d" % i, "100000"))
    r.pipeline(cmds)


def snapshot(n):
    """The reconciler's fours for every order (repair_args(), every_order)."""
    out = []
    for i in range(n):
        out += ["o%d" % i, value(i), "0", "0"]
    return out


def code_of(i):
    return "B%011d" % i


def seed_campaign(r, k, n):
    r.call("DEL", *k.values())
    cmds = []
    for i in range(n):
        cmds.append(("HSET", k["orders"], "o%d" % i, value(i)))
        cmds.append(("HSET", k["users"], str(5000000 + i), "1"))
        cmds.append(("HSET", k["amounts"], "o%d" % i, "100000"))
        cmds.append(("HSET", k["taken"], code_of(i), "o%d" % i))
    r.pipeline(cmds)


def campaign_snapshot(n):
    out = []
    for i in range(n):
        out += ["o%d" % i, code_of(i), value(i), "0"]
    return out


def timed_eval(r, script, keys, args):
    """Runs the script; returns its answer and Redis's time for it (µs, slowlog)."""
    r.call("SLOWLOG", "RESET")
    answer = r.call("EVAL", script, len(keys), *keys, *args)
    entries = r.call("SLOWLOG", "GET", "10")
    us = max((e[2] for e in entries if e[3] and e[3][0].upper() == "EVAL"), default=-1)
    return answer, us


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", help="HOST:PORT (default: VOUCHER_REDIS_URL's)")
    ap.add_argument("--orders", type=int, default=100000)
    ap.add_argument("--lua-dir")
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
    if n < 1:
        sys.exit("repairs: --orders must be at least 1")

    def lua(name):
        path = os.path.join(lua_dir, name + ".lua")
        try:
            with open(path) as f:
                return f.read()
        except OSError as e:
            sys.exit("repairs: cannot read %s (%s): build first, or give --lua-dir" % (path, e))

    r = Redis(host, int(port))
    slower = r.call("CONFIG", "GET", "slowlog-log-slower-than")[1]
    r.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    code = "REPAIRBENCH%d" % os.getpid()
    k = voucher_keys(code)
    ck = campaign_keys("9%d" % os.getpid())
    total = 2 * n
    rows, failed = [], False

    def record(name, what, answer, us, want):
        nonlocal failed
        ok = answer == want
        failed |= not ok
        rows.append((name, what, us, answer, ok))
        print("%-9s %8.1f ms  %s%s" % (name, us / 1000.0, answer,
                                       "" if ok else "  (wanted %s)" % (want,)),
              file=sys.stderr)

    try:
        seed_voucher(r, k, n)
        r.call("DEL", k["remaining"])
        ans, us = timed_eval(r, lua("restore"),
                             [k["remaining"], k["users"], k["orders"], k["holds"],
                              k["releasing"]],
                             [total, 0, int(time.time() * 1000), 0] + snapshot(n))
        record("restore", "counter lost; every order of the snapshot, each still in Redis",
               ans, us, [1, "%d:%d" % (n, total - n)])

        seed_voucher(r, k, n)
        r.call("SET", k["remaining"], 7)
        r.call("DEL", k["orders"])
        ans, us = timed_eval(r, lua("rebuild"),
                             [k["remaining"], k["users"], k["orders"], k["holds"],
                              k["releasing"], k["amounts"]],
                             [total, 0, 0] + snapshot(n))
        record("rebuild", "orders hash lost; every order of the snapshot written again",
               ans, us, [n, "7:%d" % (total - n)])

        seed_voucher(r, k, n)
        r.call("SET", k["remaining"], total - n)
        r.call("DEL", k["users"])
        ans, us = timed_eval(r, lua("retake"),
                             [k["remaining"], k["users"], k["orders"], k["holds"],
                              k["releasing"]], [total, 0, 0])
        users = r.call("HLEN", k["users"])
        record("retake", "users hash lost; no order lacking", [ans, users], us,
               [[0, "%d:%d" % (total - n, total - n)], n])

        seed_voucher(r, k, n)
        r.call("SET", k["remaining"], total)
        ans, us = timed_eval(r, lua("lower"), [k["remaining"], k["orders"]], [total, 0])
        record("lower", "counter above the rule's bound", ans, us,
               [1, "%d:%d" % (total, total - n)])

        seed_campaign(r, ck, n)
        r.call("DEL", ck["taken"])
        ans, us = timed_eval(r, lua("campaign_rebuild"),
                             [ck["taken"], ck["users"], ck["orders"], ck["holds"],
                              ck["releasing"]], [0] + campaign_snapshot(n))
        taken = r.call("HLEN", ck["taken"])
        record("campaign", "taken lost; every order and its code", [ans, taken], us,
               [[0, "%d:%d:0" % (n, n)], n + 1])
    finally:
        r.call("DEL", *k.values())
        r.call("DEL", *ck.values())
        r.call("CONFIG", "SET", "slowlog-log-slower-than", slower)

    load = open("/proc/loadavg").read().split()[:3]
    report = ["## The reconciler's repairs of a large voucher or campaign: Redis's time (slowlog)",
              "",
              "%d orders (one customer each), scripts from `%s`; load average %s." %
              (n, lua_dir, " ".join(load)),
              "",
              "| repair | case | Redis held | answer checked |",
              "|---|---|---:|---|"]
    for name, what, us, _, ok in rows:
        report.append("| %s | %s | %.0f ms | %s |" % (name, what, us / 1000.0,
                                                       "yes" if ok else "**WRONG**"))
    text = "\n".join(report) + "\n"
    print(text)
    if opts.out:
        with open(opts.out, "a") as f:
            f.write(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
