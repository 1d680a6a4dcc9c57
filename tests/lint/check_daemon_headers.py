#!/usr/bin/env python3
"""Checks that no PostgreSQL type reaches a daemon header.

Only the adapters speak libpq (STYLE.md, "One adapter per library"): the
gateway's pool and store, the writer's wr_pg.c and wr_letters.c, the
reconciler's rc_pg.c and rc_campaign.c include libpq-fe.h in their .c files,
and a header that needs a connection names it as the opaque struct pg_conn
(rc_pg.h, rc_raise.h, gw_pgpool.h). A header of gateway/, writer/ or
reconciler/ that includes libpq's headers or names its types (PGconn,
PGresult, ExecStatusType...) hands PostgreSQL to every file that includes it,
the pure cores and the unit tests too: rc_pass.h did once, rc_raise.h again
(issue 41).
Comments do not count. TAP output; exit 1 on any failure.
"""
import glob
import os
import re
import sys

root = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
DAEMONS = ("gateway", "writer", "reconciler")
INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]"
                     r"(libpq-fe\.h|libpq/[^>\"]*|postgres_ext\.h|pg_config[^>\"]*)[>\"]", re.M)
TYPE = re.compile(r"\b(PGconn|PGresult|PGnotify|PGcancel|PQconninfoOption|PQprintOpt|"
                  r"ExecStatusType|ConnStatusType|PostgresPollingStatusType|"
                  r"PGTransactionStatusType)\b")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
results = []


def check(ok, what, detail=""):
    results.append((bool(ok), what + ("" if ok or not detail else f": {detail}")))


def libpq_in(text):
    """What of libpq a header's code (its comments left out) includes or names."""
    code = COMMENT.sub(" ", text)
    return sorted(set(INCLUDE.findall(code)) | set(TYPE.findall(code)))


check(libpq_in("#include <libpq-fe.h>\nint f(PGconn *c); /* a PGresult */\n")
      == ["PGconn", "libpq-fe.h"], "the check finds libpq in a sample header")
check(libpq_in("/* libpq's PGconn */\nstruct pg_conn;\nint f(struct pg_conn *c);\n") == [],
      "an opaque struct pg_conn and a comment naming PGconn pass")
headers = sorted(h for d in DAEMONS for h in glob.glob(os.path.join(root, d, "*.h")))
names = [os.path.relpath(h, root) for h in headers]
check(len(headers) >= 20 and "reconciler/rc_raise.h" in names,
      f"the daemons' headers are read ({len(headers)}, rc_raise.h among them)")
for path, name in zip(headers, names):
    with open(path) as f:
        found = libpq_in(f.read())
    check(not found, f"{name} includes and names nothing of libpq", ", ".join(found))

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
