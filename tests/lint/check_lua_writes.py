#!/usr/bin/env python3
"""Checks that every script writes an order through orders_write.lua, and a
campaign's taken code through taken_write.lua.

The reconciler reads a large orders hash (a voucher's or a campaign's) and a
campaign's taken hash in pieces, and trusts the scripts to note each order and
code they write meanwhile (proto/redis-keys.md, "Reading a large orders hash";
proto/campaigns.md, "Reading a large campaign"); a script that wrote one of
those hashes directly would leave it a stale value, and no test of that script
would notice. So: in common/lua/*.lua, no HSET, HSETNX, HMSET, HDEL, DEL or
UNLINK may name the orders or the taken key, as a KEYS[n] the script's header
calls orders or taken, or as a variable named orders_key, taken_key or
campaign_taken, outside orders_write.lua and taken_write.lua. The orders'
aggregate beside the hash (voucher:{CODE}:agg, proto/redis-keys.md
"Aggregates") is kept by orders_write.lua alone: no script writes agg_key()
with HINCRBY, HSET, HDEL, DEL, UNLINK or RENAME elsewhere. TAP output; exit 1
on any failure.
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
    """The lines of text that write its orders or taken key without the helpers."""
    comments = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("--"))
    keys = set(re.findall(r"KEYS\[(\d+)\]\s+(?:voucher:\{CODE\}:|campaign:\{cID\}:)?"
                          r"(?:orders|taken)\b", comments))
    names = [r"orders_key\b", r"taken_key\b", r"campaign_taken\b"] + \
        [r"KEYS\[%s\]" % n for n in sorted(keys)]
    pattern = re.compile(WRITES + "(?:" + "|".join(names) + ")")
    return [line.strip() for line in text.splitlines()
            if not line.lstrip().startswith("--") and pattern.search(line)]


AGG_WRITES = re.compile(r"""redis\.call\(\s*['"](?:HINCRBY|HSET|HDEL|DEL|UNLINK|RENAME)['"]"""
                        r"""\s*,\s*agg_key\(""")


def agg_writes(text):
    """The lines of text that write an orders hash's aggregate."""
    return [line.strip() for line in text.splitlines()
            if not line.lstrip().startswith("--") and AGG_WRITES.search(line)]


# The check finds what it is for: direct writes in samples.
sample = ("-- KEYS[1] voucher:{CODE}:remaining  KEYS[3] voucher:{CODE}:orders\n"
          "redis.call('HSET', KEYS[3], ARGV[1], 'x')\nredis.call('HSET', KEYS[1], 'y')\n")
check(direct_writes(sample) == ["redis.call('HSET', KEYS[3], ARGV[1], 'x')"],
      "the check finds a direct write of the orders key in a sample", str(direct_writes(sample)))
sample = ("-- KEYS[1] campaign:{cID}:taken    hash code -> orderId\n-- KEYS[2] users\n"
          "redis.call('HSET', KEYS[1], ARGV[9], ARGV[3])\nredis.call('HSET', KEYS[2], 'y')\n"
          "redis.call('HDEL', campaign_taken, campaign_code)\n")
check(direct_writes(sample) == ["redis.call('HSET', KEYS[1], ARGV[9], ARGV[3])",
                                "redis.call('HDEL', campaign_taken, campaign_code)"],
      "the check finds direct writes of a campaign's taken key in a sample",
      str(direct_writes(sample)))

sample = ("redis.call('HINCRBY', agg_key(KEYS[3]), 'H', 1)\n"
          "redis.call('PEXPIRE', agg_key(KEYS[1]), ARGV[2])\n")
check(agg_writes(sample) == ["redis.call('HINCRBY', agg_key(KEYS[3]), 'H', 1)"],
      "the check finds a direct write of the aggregate in a sample", str(agg_writes(sample)))

HELPERS = ("orders_write.lua", "taken_write.lua")
scripts = sorted(p for p in glob.glob(os.path.join(LUA, "*.lua"))
                 if os.path.basename(p) not in HELPERS)
check(len(scripts) >= 28, f"the scripts are read ({len(scripts)} in common/lua)")
for path in scripts:
    with open(path) as f:
        found = direct_writes(f.read())
        f.seek(0)
        agg = agg_writes(f.read())
    check(not found, f"{os.path.basename(path)} writes orders and taken codes only through "
          "orders_write.lua and taken_write.lua", "; ".join(found))
    check(not agg, f"{os.path.basename(path)} writes the orders' aggregate only through "
          "orders_write.lua", "; ".join(agg))

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
