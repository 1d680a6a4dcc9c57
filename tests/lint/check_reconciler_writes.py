#!/usr/bin/env python3
"""Checks that every script the reconciler writes with carries its fencing token.

The reconciler's repairs are fenced (proto/redis-keys.md, "Leadership and
fencing"): a script it writes with is an rc_ script (common/lua/leader.lua put
first by the build), to which rc_redis_eval() appends the leader key and the
generation, checked inside the script. A voucher script named there instead
(vc_lua_restore for vc_lua_rc_restore) would be sent without a token and run
for a reconciler that no longer leads, and nothing else would notice: the
tests pass with one reconciler. So: in reconciler/*.c, every vc_lua_NAME is
vc_lua_rc_NAME, or a read listed below (the scripts that write only a read's
own notes, or nothing). TAP output; exit 1 on any failure.
"""
import glob
import os
import re
import sys

root = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
# Reads: campaign_due writes nothing; the reads in pieces write only their own notes
# (scan, touched, touched_codes); leader_mark is the mark, its check its own; leader is
# the guard's text, which rc_redis_eval() tells the rc_ scripts by.
READS = {"campaign_due", "scan_begin", "scan_finish", "campaign_scan_finish", "leader_mark",
         "leader"}
NAME = re.compile(r"\bvc_lua_(\w+)")
results = []


def check(ok, what, detail=""):
    results.append((bool(ok), what + ("" if ok or not detail else f": {detail}")))


def unfenced(text):
    """The vc_lua_ names of text that are neither rc_ scripts nor reads."""
    return sorted({n for n in NAME.findall(text) if not n.startswith("rc_") and n not in READS})


check(unfenced("rc_redis_eval(r, vc_lua_restore, 5, ...); vc_lua_rc_lower; vc_lua_campaign_due")
      == ["restore"], "the check finds a voucher script named in a sample")
sources = sorted(glob.glob(os.path.join(root, "reconciler", "*.c")))
check(len(sources) >= 10, f"the reconciler's sources are read ({len(sources)})")
for path in sources:
    with open(path) as f:
        found = unfenced(f.read())
    check(not found, f"{os.path.basename(path)} writes to Redis only with rc_ scripts",
          ", ".join("vc_lua_" + n for n in found))

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
