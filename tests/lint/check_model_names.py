#!/usr/bin/env python3
"""Checks that the Redis order model is said by name, and that its page agrees with its
definition (proto/redis-model.json, issue 41).

1. No bare state letter in the daemons' code: in common/lua/*.lua (code, not comments) no
   string literal made only of state letters ('H', 'XE', ':C'); in the C of common/, gateway/,
   reconciler/, writer/ and admin/ no character literal of a state letter ('H'). Say
   STATE.HELD in Lua (embed.py puts the constants in) and VC_STATE_HELD in C (vc_model.h).
2. No bare answer number: in Lua no `return -N` nor `return {-N, ...}`; in C no
   `status == -N` (nor !=, nor a variable named st, nor `.integer == -N`) and no `case -N:`.
   Say RESERVE.NOT_LOADED in Lua and VC_RESERVE_NOT_LOADED in C. (0 and positive answers are
   named too where the code handles a script's answer, but the lint cannot tell a script's 1
   from a libuv status 0: it checks the negative ones, which mean something else per script.)
3. No order value read around its parser: in common/lua/*.lua other than order_value.lua (code,
   not comments) no string.sub(..., -N) (a state read from a value's last character) and no
   pattern with a field of a value ('[^:]*:', ':(.)$'). Say parse_order(), order_state() and
   order_value() (common/lua/order_value.lua, as vc_order_value.h in C).
4. proto/redis-keys.md against the definition: its order states table (each letter, and
   whether it is counted as taken) and its voucher keys table (voucher:{CODE}:NAME) name what
   the definition names, no more, no less.

The generated files (BUILD/common/vc_model.h, the constants before each script) are not read:
they are the definition's. A line the rule must let through is in ALLOWED, with why. TAP
output; exit 1 on any failure.
"""
import glob
import os
import re
import sys

root = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(root, "common"))
import redis_model  # noqa: E402

results = []


def check(ok, what, detail=""):
    results.append((bool(ok), what + ("" if ok or not detail else f": {detail}")))


MODEL = redis_model.load(os.path.join(root, "proto", "redis-model.json"))
LETTERS = "".join(s["letter"] for s in MODEL.states)

# (file, a piece of the line): a letter that is not a state.
ALLOWED = [
    ("common/vc_json.c", "*s == 'e' || *s == 'E'"),  # a JSON number's exponent
]

LUA_LETTERS = re.compile(r"""(['"]):?[%s]+\1""" % LETTERS)
LUA_ANSWER = re.compile(r"\breturn\s*\{?\s*-\s*\d")
C_LETTER = re.compile(r"'[%s]'" % LETTERS)
C_ANSWER = re.compile(r"(?:\b(?:status|st)\b|\.integer)\s*[!=]=\s*-\s*\d|\bcase\s+-\s*\d+\s*:")


def lua_code(line):
    """The line without its comment (a '--' outside a string; the scripts put none in one)."""
    out, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and line[i - 1] != "\\":
                quote = None
        elif ch in "'\"":
            quote = ch
        elif line.startswith("--", i):
            break
        out.append(ch)
    return "".join(out)


def c_code(text):
    """text with its comments and string literals blanked, line by line kept."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


LUA_PARSER = "order_value.lua"
LUA_ADHOC = re.compile(r"string\.sub\([^)]*,\s*-\s*\d|\[\^:\]|:\(\.\)\$")


def adhoc_parses(text):
    """The lines of text (Lua) that read an order's value without order_value.lua."""
    return [line.strip() for line in map(lua_code, text.splitlines()) if LUA_ADHOC.search(line)]


def lua_findings(text):
    return [line.strip() for line in map(lua_code, text.splitlines())
            if LUA_LETTERS.search(line) or LUA_ANSWER.search(line)]


def c_findings(path, text):
    raw = text.splitlines()
    out = []
    for n, line in enumerate(c_code(text).splitlines()):
        if not (C_LETTER.search(line) or C_ANSWER.search(line)):
            continue
        if any(path.endswith(f) and piece in raw[n] for f, piece in ALLOWED):
            continue
        out.append("%d: %s" % (n + 1, raw[n].strip()))
    return out


# The check finds what it is for, in samples.
sample = ("-- H held, -3 not loaded\nif state == 'H' then return {-3, false} end\n"
          "order = held .. ':C'\nlocal begun = 'XE'\nreturn -7\n"
          "if state == STATE.HELD then return {RESERVE.NOT_LOADED, false} end\n"
          "local s = string.sub(v, -1)\n")
got = lua_findings(sample)
check(got == ["if state == 'H' then return {-3, false} end", "order = held .. ':C'",
              "local begun = 'XE'", "return -7"],
      "the check finds bare letters and answers in a Lua sample", str(got))
sample = ("/* 'H' held, status == -3 */\nif (o.state == 'H')\nif (status == -3)\ncase -7:\n"
          "if (reply->item[0].integer == -1 &&\nlog(\"'C' in a string\");\n"
          "if (status == VC_RESERVE_NOT_LOADED)\nif (status < 0)\n")
got = c_findings("x.c", sample)
check(got == ["2: if (o.state == 'H')", "3: if (status == -3)", "4: case -7:",
              "5: if (reply->item[0].integer == -1 &&"],
      "the check finds bare letters and answers in a C sample", str(got))

sample = ("-- string.sub(v, -1) in a comment\nlocal s = string.sub(v, -1)\n"
          "local c, s = string.match(v, '^([^:]*):[^:]*:[^:]*:(.)$')\n"
          "local t = string.match(v, ':(.)$')\nlocal p = string.sub(k, 1, 8)\n"
          "local c, d, h, s = parse_order(v)\n")
got = adhoc_parses(sample)
check(got == ["local s = string.sub(v, -1)",
              "local c, s = string.match(v, '^([^:]*):[^:]*:[^:]*:(.)$')",
              "local t = string.match(v, ':(.)$')"],
      "the check finds order values read around the parser in a Lua sample", str(got))

scripts = sorted(glob.glob(os.path.join(root, "common", "lua", "*.lua")))
check(len(scripts) >= 30, f"the scripts are read ({len(scripts)} in common/lua)")
for path in scripts:
    with open(path) as f:
        text = f.read()
    found = lua_findings(text)
    check(not found, "%s says states and answers by name" % os.path.relpath(path, root),
          "; ".join(found))
    if os.path.basename(path) != LUA_PARSER:
        found = adhoc_parses(text)
        check(not found, "%s reads order values only through %s" % (
            os.path.relpath(path, root), LUA_PARSER), "; ".join(found))

sources = sorted(p for d in ("common", "gateway", "reconciler", "writer", "admin")
                 for p in glob.glob(os.path.join(root, d, "**", "*.[ch]"), recursive=True))
check(len(sources) >= 100, f"the C sources are read ({len(sources)})")
bad = []
for path in sources:
    with open(path, errors="replace") as f:
        for line in c_findings(path, f.read()):
            bad.append("%s:%s" % (os.path.relpath(path, root), line))
check(not bad, "the C says states and answers by name (vc_model.h)", "; ".join(bad))

# proto/redis-keys.md against the definition.
with open(os.path.join(root, "proto", "redis-keys.md")) as f:
    page = f.read()


def section(title):
    m = re.search(r"^## %s\n(.*?)(?=^## )" % re.escape(title), page, re.S | re.M)
    return m.group(1) if m else ""


rows = re.findall(r"^\| `([A-Z])` \| [^|]* \| (yes|no) \|", section("Order states"), re.M)
want = [(s["letter"], "yes" if s["taken"] else "no") for s in MODEL.states]
check(rows == want, "proto/redis-keys.md's order states table is the definition's "
      "(letters, in order, and counted as taken)", "page %s, definition %s" % (rows, want))
keys = re.findall(r"^\| `voucher:\{CODE\}:([a-z_]+)`", section("Keys"), re.M)
want = list(MODEL.families["voucher"]["keys"])
check(sorted(keys) == sorted(want), "proto/redis-keys.md's keys table names the definition's "
      "voucher keys", "page only %s, definition only %s" % (
          sorted(set(keys) - set(want)), sorted(set(want) - set(keys))))
check("`%s`" % MODEL.raw["order_value"] in page,
      "proto/redis-keys.md gives an order's value as the definition does",
      MODEL.raw["order_value"])

for n, (ok, what) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
print("1..%d" % len(results))
sys.exit(0 if all(ok for ok, _ in results) else 1)
