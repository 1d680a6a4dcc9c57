#!/usr/bin/env python3
"""Checks that every voucher script writes an order through orders_write.lua.

The reconciler reads a large orders hash in pieces and trusts the scripts to
note each order they write meanwhile (proto/redis-keys.md, "Reading a large
orders hash"); a script that writes voucher:{CODE}:orders directly would leave
it a stale order, and no test of that script would notice. So: in
common/lua/*.lua (a campaign's own scripts aside: their orders are never read
in pieces), no HSET, HSETNX, HMSET, HDEL, DEL or UNLINK may name the orders
key, as a KEYS[n] the script's header calls orders or as a variable named
orders_key, outside orders_write.lua. TAP output; exit 1 on any failure.
"""
import glob
import os
import re
import sys

root = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
LUA = os.path.join(root, "common", "lua")
WRITES = r"""redis\.call\(\s*['"](?:HSET|HSETNX|HMSET|HDEL|DEL|UNLINK)['"]\s*,\s*"""
results = []


def check(ok, what, detail=""):
    results.append((bool(ok), what + ("" if ok or not detail else f": {detail}")))


def direct_writes(text):
    """The lines of text that write its orders key without orders_write.lua."""
    comments = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("--"))
    keys = set(re.findall(r"KEYS\[(\d+)\]\s+(?:voucher:\{CODE\}:)?orders\b", comments))
    names = [r"orders_key\b"] + [r"KEYS\[%s\]" % n for n in sorted(keys)]
    pattern = re.compile(WRITES + "(?:" + "|".join(names) + ")")
    return [line.strip() for line in text.splitlines()
            if not line.lstrip().startswith("--") and pattern.search(line)]


# The check finds what it is for: a direct write in a sample.
sample = ("-- KEYS[1] voucher:{CODE}:remaining  KEYS[3] voucher:{CODE}:orders\n"
          "redis.call('HSET', KEYS[3], ARGV[1], 'x')\nredis.call('HSET', KEYS[1], 'y')\n")
check(direct_writes(sample) == ["redis.call('HSET', KEYS[3], ARGV[1], 'x')"],
      "the check finds a direct write of the orders key in a sample", str(direct_writes(sample)))

scripts = sorted(p for p in glob.glob(os.path.join(LUA, "*.lua"))
                 if not os.path.basename(p).startswith("campaign_")
                 and os.path.basename(p) != "orders_write.lua")
check(len(scripts) >= 20, f"the voucher scripts are read ({len(scripts)} in common/lua)")
for path in scripts:
    with open(path) as f:
        found = direct_writes(f.read())
    check(not found, f"{os.path.basename(path)} writes orders only through orders_write.lua",
          "; ".join(found))

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
