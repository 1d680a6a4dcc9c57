#!/usr/bin/env python3
"""What a wave of holds due costs Redis (issue 43): one voucher of N holds, all
past heldUntil and the grace, released by the reconciler's passes.

    tests/bench/wave.py [--redis HOST:PORT] [--holds N] [--batch B] [--repeat R]
        [--lua-dir DIR] [--out FILE]

On the Redis at --redis (default: VOUCHER_REDIS_URL's), each run writes the
keys a voucher of N holds has (one customer each, every hold due, heldUntil
one ms apart), then replays, command for command, what the reconciler sends
for them, and reads Redis's own time for each command from the slowlog:

  wave          a pass with a wave read (rc_wave.c): the targeted read's MULTI
                (GET remaining, EXISTS orders, ZREVRANGE holds 0 999,
                ZRANGEBYSCORE holds -inf DUE LIMIT 0 B), then per due hold
                rc_release_begin.lua "expire" and rc_release_finish.lua, the
                oldest first; passes until no hold is left
  full read     what it replaces, per pass: the orders read in pieces (the
                default above 10,000 orders: scan_begin.lua, HSCAN COUNT 1000
                to the end, scan_finish.lua) and the same B releases

Reported: the longest single command of each, its Redis time per pass and in
all (the full read: its read per pass times the passes the wave takes, with
the same releases). Least of R runs (the machine may be shared). Speed is
reported, never asserted. Keys are named after a made-up code and deleted.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from repairs import Redis  # noqa: E402  (the bench's minimal RESP client)

GEN = "7"  # the leader key's generation the rc_ scripts check (leader.lua)


def keys(code):
    return {k: "voucher:{%s}:%s" % (code, k)
            for k in ("remaining", "users", "orders", "holds", "releasing", "resent", "amounts",
                      "scan", "touched", "leader")}


def seed(r, k, n, due0):
    r.call("DEL", *k.values())
    cmds = [("SET", k["remaining"], "0"), ("SET", k["leader"], GEN)]
    for i in range(n):
        cmds.append(("HSET", k["orders"], "o%d" % i, "%d:500:%d:H" % (5000000 + i, due0 + i)))
        cmds.append(("HSET", k["users"], str(5000000 + i), "1"))
        cmds.append(("ZADD", k["holds"], due0 + i, "o%d" % i))
    r.pipeline(cmds)


def slowlog(r):
    """Redis's µs of every command since the last reset: [(name, µs)]."""
    out = [(e[3][0].upper(), e[2]) for e in r.call("SLOWLOG", "GET", "-1")
           # this client's only (the stack may serve others), not the bench's own SLOWLOG
           if e[3] and e[4] == r.addr and e[3][0].upper() != "SLOWLOG"]
    r.call("SLOWLOG", "RESET")
    return out


def release(r, k, texts, ids, now, slice_=500):
    """The releases of one pass, as rc_wave.c sends them (in slices: the begins, then the
    finishes); Redis's µs of each script. Sent pipelined: Redis's time per script is the
    same, the bench's round trips fewer."""
    times = []
    begin = [k["orders"], k["holds"], k["releasing"], k["resent"], k["leader"]]
    finish = [k["remaining"], k["users"], k["orders"], k["releasing"], k["leader"]]
    for at in range(0, len(ids), slice_):
        part = ids[at:at + slice_]
        for cmds in ([("EVAL", texts["rc_release_begin"], len(begin), *begin,
                       oid, "expire", now, "%s:H" % held, GEN) for oid, held in part],
                     [("EVAL", texts["rc_release_finish"], len(finish), *finish, oid, GEN)
                      for oid, _ in part]):
            r.sock.sendall(b"".join(Redis.encode(c) for c in cmds))
            for oid, _ in part:
                ans = r.reply()
                if ans[0] != 1:
                    sys.exit("wave: %s of %s answered %s" % (cmds[0][1][:20], oid, ans))
            times += [us for _, us in slowlog(r)]
    return times


def wave_run(r, k, texts, n, batch):
    now = int(time.time() * 1000)
    seed(r, k, n, now - 3600000)
    r.call("SLOWLOG", "RESET")
    longest_read = longest_script = total = reads = passes = 0
    while True:
        r.sock.sendall(b"".join(Redis.encode(c) for c in (
            ("MULTI",), ("GET", k["remaining"]), ("EXISTS", k["orders"]),
            ("ZREVRANGE", k["holds"], 0, 999, "WITHSCORES"),
            ("ZRANGEBYSCORE", k["holds"], "-inf", now - 30000, "WITHSCORES", "LIMIT", 0, batch),
            ("EXEC",))))
        replies = [r.reply() for _ in range(6)]
        due = replies[-1][3]
        read = sum(us for _, us in slowlog(r))
        longest_read = max(longest_read, read)
        total += read
        reads += read
        if not due:
            break
        passes += 1
        times = release(r, k, texts, list(zip(due[0::2], due[1::2])), now)
        longest_script = max([longest_script] + times)
        total += sum(times)
    return {"passes": passes, "read": longest_read, "script": longest_script, "total": total,
            "reads": reads, "releases": total - reads}


def full_read(r, k, texts, n):
    """One full read in pieces of the same voucher (before any release): its µs."""
    now = int(time.time() * 1000)
    seed(r, k, n, now - 3600000)
    token = "bench%d" % os.getpid()
    r.call("SLOWLOG", "RESET")
    r.call("EVAL", texts["scan_begin"], 3, k["orders"], k["scan"], k["touched"], token, -1,
           60000)
    cursor = "0"
    while True:
        cursor, _ = r.call("HSCAN", k["orders"], cursor, "COUNT", 1000)
        if cursor == "0":
            break
    r.call("EVAL", texts["scan_finish"], 6, k["remaining"], k["orders"], k["users"],
           k["amounts"], k["scan"], k["touched"], token)
    times = [us for _, us in slowlog(r)]
    return {"longest": max(times), "total": sum(times), "steps": len(times)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis")
    ap.add_argument("--holds", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--lua-dir")
    ap.add_argument("--out")
    o = ap.parse_args()
    hostport = o.redis or os.environ.get("VOUCHER_REDIS_URL", "").split("://", 1)[-1].split("/")[0]
    if not hostport:
        sys.exit("wave: no Redis: give --redis HOST:PORT or VOUCHER_REDIS_URL")
    host, port = hostport.rsplit("@", 1)[-1].rsplit(":", 1)
    lua = o.lua_dir or os.path.join(os.environ.get("VOUCHER_BUILD_DIR", "build"), "common", "lua")
    texts = {}
    for name in ("rc_release_begin", "rc_release_finish", "scan_begin", "scan_finish"):
        with open(os.path.join(lua, name + ".lua")) as f:
            texts[name] = f.read()
    r = Redis(host, int(port))
    r.addr = r.call("CLIENT", "INFO").split("addr=", 1)[1].split()[0]
    k = keys("WAVEBENCH%d" % os.getpid())
    slower = r.call("CONFIG", "GET", "slowlog-log-slower-than")[1]
    size = r.call("CONFIG", "GET", "slowlog-max-len")[1]
    r.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
    r.call("CONFIG", "SET", "slowlog-max-len", "8192")
    waves, fulls = [], []
    try:
        for rep in range(o.repeat):
            waves.append(wave_run(r, k, texts, o.holds, o.batch))
            fulls.append(full_read(r, k, texts, o.holds))
            print("%d wave %s full read %s" % (rep + 1, waves[-1], fulls[-1]), file=sys.stderr)
    finally:
        r.call("DEL", *k.values())
        r.call("CONFIG", "SET", "slowlog-log-slower-than", slower)
        r.call("CONFIG", "SET", "slowlog-max-len", size)
    least = lambda xs, key: min(x[key] for x in xs) / 1000.0  # noqa: E731
    most = lambda xs, key: max(x[key] for x in xs) / 1000.0  # noqa: E731
    passes = waves[0]["passes"]
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    text = "\n".join([
        "## A wave of %d holds due: Redis's time (slowlog), least of %d runs (most after /)"
        % (o.holds, o.repeat), "",
        "Batch %d a pass: %d passes. Load average at the end %s." % (o.batch, passes, load), "",
        "| | longest command | the longest read of a pass | the reads, in all |",
        "|---|---:|---:|---:|",
        "| wave read (rc_wave.c) | %.2f / %.2f ms (a release script) | %.2f / %.2f ms "
        "(the MULTI) | %.0f / %.0f ms |"
        % (least(waves, "script"), most(waves, "script"), least(waves, "read"),
           most(waves, "read"), least(waves, "reads"), most(waves, "reads")),
        "| full read in pieces, every pass (before) | %.2f / %.2f ms | %.1f / %.1f ms "
        "(%d steps) | %.0f ms (%d passes) |"
        % (least(fulls, "longest"), most(fulls, "longest"), least(fulls, "total"),
           most(fulls, "total"), fulls[0]["steps"], least(fulls, "total") * passes, passes),
        "",
        "The releases, the same either way (rc_release_begin.lua and rc_release_finish.lua per "
        "hold, %d scripts): %.0f / %.0f ms in all. The wave, reads and releases: %.0f / %.0f ms."
        % (2 * o.holds, least(waves, "releases"), most(waves, "releases"),
           least(waves, "total"), most(waves, "total")),
        ""])
    print(text)
    if o.out:
        with open(o.out, "a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
