#!/usr/bin/env python3
"""Checks that the Redis order model is said by name, and that its page agrees with its
definition (proto/redis-model.json, issue 41).

1. No bare state letter in the daemons' code: in common/lua/*.lua (code, not comments) no
   string literal made only of state letters ('H', 'XE', ':C'); in the C of common/, gateway/,
   reconciler/, writer/ and admin/ no character literal of a state letter ('H'). Say
   STATE.HELD in Lua (embed.py puts the constants in) and VC_STATE_HELD in C (vc_model.h).
2. No bare answer number: in Lua no `return -N` nor `return {-N, ...}`; in C no
   `status == -N` (nor !=, nor a variable named st, nor `.integer == -N`) and no `case -N:`.
   Say RESERVE.NOT_LOADED in Lua and VC_RESERVE_NOT_LOADED in C. (0 and positive answers
   are checked where the code handles a script's answer by name: rule 6. Elsewhere the lint
   cannot tell a script's 1 from a libuv status 0.)
3. No order value read around its parser: in common/lua/*.lua other than order_value.lua (code,
   not comments) no string.sub(..., -N) (a state read from a value's last character) and no
   pattern with a field of a value ('[^:]*:', ':(.)$'). Say parse_order(), order_state() and
   order_value() (common/lua/order_value.lua, as vc_order_value.h in C).
4. proto/redis-keys.md against the definition: its order states table (each letter, and
   whether it is counted as taken) and its keys tables (the voucher's keys voucher:{CODE}:NAME,
   a restore's staged keys, and the keys of no voucher or campaign, each with its arguments
   in capitals: voucher-order:{ORDERID}) name what the definition names, no more, no less;
   so does proto/campaigns.md's table of a campaign's keys (campaign:{cID}:NAME, a row may
   name several: `campaign:{cID}:holds`, `:releasing`).
5. No key built by hand: no string literal in the daemons' C (common/, gateway/, reconciler/,
   writer/, admin/) nor in common/lua/*.lua (code, not comments) holds a key's raw head, the
   text of its format before its first argument ("voucher:{", "campaign:{c", "guard:index"):
   a key is built by vc_model.h's builders (vc_voucher_key(), vc_campaign_key(),
   vc_key_claim()...) or named by its macro (VC_KEY_FENCE), and a script tells a family by
   KEY_HEAD (embed.py puts it in). A script that finds a key beside another by its name
   (string.gsub(orders_key, ':orders$', ':amounts')) names keys of the definition.
6. A script's answer handled by name, positive ones too: in a C function that compares a
   value with a script's named answer (status == VC_CONFIRM_CONFIRMED, case
   VC_RESERVE_TAKEN:), the same value compared with a bare number that the set names
   (status == 1), or a bare case label that it names (case 0:), is a finding; so is, in a
   function that runs a script with named answers (vc_lua_rc_restore, GW_SCRIPT_CONFIRM),
   status, *status or st compared with a bare number its set names.

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

# Rule 5: no key's raw head outside the generated files.
HEADS = sorted(set(MODEL.heads().values()), key=len, reverse=True)
C_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
LUA_STRING = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")


def c_strings_only(text):
    """text without its comments, line by line kept (string literals kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


# A literal that starts with a key's first word and a ':' or a conversion ("campaign%s",
# "guard:%s") builds one by pieces.
WORDS = sorted({re.split(r"[:{]", h)[0] for h in HEADS})
PIECE = re.compile(r"""^["'](?:%s)[:%%]""" % "|".join(map(re.escape, WORDS)))
# A script has no text but keys: its literal naming a family or key's first word and a ':'
# anywhere ('^(voucher:.*):remaining$') is a key built by hand.
LUA_PIECE = re.compile(r"(?:%s):" % "|".join(map(re.escape, WORDS)))
# (file, literal): a string of that shape that is no Redis key, with why.
NOT_KEYS = [
    ("gateway/gw_app.c", '"campaign:%lld"'),  # a campaign event's Kafka key (proto/events.md)
    ("reconciler/rc_kafka.c", '"campaign:%lld"'),  # the same, for the events it publishes
]


def raw_heads(lines, string_re, path="", piece=PIECE):
    """(line number, line) of lines whose string literals hold a key's raw head, or start
    with a key's first word and a ':' or a conversion (piece: a Lua script's anywhere)."""
    out = []
    for n, line in enumerate(lines, 1):
        for s in string_re.findall(line):
            if any(path.endswith(f) and s == lit for f, lit in NOT_KEYS):
                continue
            if any(h in s for h in HEADS) or piece.search(s):
                out.append("%d: %s" % (n, line.strip()))
                break
    return out


got = raw_heads(c_strings_only('/* "voucher:{%s}:x" in a comment */\n'
                               'snprintf(k, n, "voucher:{%s}:restoring:%s:orders", c, t);\n'
                               'bucket_key(k, "guard:{ip:v:", client);\n'
                               'snprintf(k, n, "campaign:%lld", id); /* a Kafka key */\n'
                               'x = "needs " VC_KEY_GUARD_INDEX;\n'
                               'const char *keys[] = {"voucher:fence"};\n'
                               'snprintf(k, n, "campaign%s", v + strlen("voucher"));\n'
                               'log("campaign %lld: %s", id, "voucher %s refused");\n'
                               ).splitlines(), C_STRING, "gateway/gw_app.c")
check([g.split(":")[0] for g in got] == ["2", "3", "6", "7"],
      "the check finds raw key heads in a C sample", str(got))
got = raw_heads([lua_code(line) for line in (
    "-- 'voucher:{' in a comment", "if string.sub(k, 1, 9) == 'voucher:{' then",
    "local k = KEY_HEAD.campaign .. id", 'local c = "voucher-order:{" .. id .. "}"',
    "local key = string.gsub(k, '^(voucher:.*):remaining$', '%1:' .. name)",
    "local p = '^(' .. KEY_HEAD.voucher .. '.*):remaining$'")],
    LUA_STRING, piece=LUA_PIECE)
check([g.split(":")[0] for g in got] == ["2", "4", "5"],
      "the check finds raw key heads in a Lua sample", str(got))
check(len(HEADS) >= 6 and "voucher:{" in HEADS and "voucher-order:{" in HEADS,
      "the heads are the definition's (%d)" % len(HEADS), str(HEADS))
bad = []
for path in sources:
    with open(path, errors="replace") as f:
        for line in raw_heads(c_strings_only(f.read()).splitlines(), C_STRING,
                              os.path.relpath(path, root)):
            bad.append("%s:%s" % (os.path.relpath(path, root), line))
check(not bad, "the C builds no key by hand: no raw key head in a string (vc_model.h's builders)",
      "; ".join(bad))
bad = []
for path in scripts:
    with open(path) as f:
        for line in raw_heads([lua_code(line) for line in f.read().splitlines()], LUA_STRING,
                              piece=LUA_PIECE):
            bad.append("%s:%s" % (os.path.relpath(path, root), line))
check(not bad, "the scripts hold no raw key head (KEY_HEAD)", "; ".join(bad))

# A script finds a sibling key by its name (string.gsub(orders_key, ':orders$', ':amounts')):
# each name so written is a key the definition names, so that renaming a key there is a
# finding here.
KEY_NAMES = {k for f in MODEL.families.values() for k in f["keys"]}
SIBLING = re.compile(r"^['\"]:([a-z_]+)\$?['\"]$")


def sibling_names(lines):
    """(line number, name) of each key name a script writes as ':NAME' or ':NAME$' that the
    definition does not name."""
    return [(n, m.group(1)) for n, line in enumerate(lines, 1)
            for m in map(SIBLING.match, LUA_STRING.findall(line))
            if m and m.group(1) not in KEY_NAMES]


got = sibling_names(["local a = string.gsub(k, ':orders$', ':amount')",
                     "local s = string.gsub(k, ':taken$', ':touched_codes')", "x = ':'"])
check(got == [(1, "amount")], "the check finds a sibling key the definition lacks in a Lua "
      "sample", str(got))
bad = []
for path in scripts:
    with open(path) as f:
        for n, name in sibling_names([lua_code(line) for line in f.read().splitlines()]):
            bad.append("%s:%d: %s" % (os.path.relpath(path, root), n, name))
check(not bad, "the scripts name sibling keys the definition names", "; ".join(bad))

# Rule 6: a script's answer, compared by name in a function, is not also compared by number.
ANSWER_NAMES = {"VC_%s_%s" % (s.upper(), a): (s, n) for s, answers in MODEL.sets.items()
                for a, (n, _) in answers.items()}
EXPR = r"\*?[A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*|\[[^\]\n]*\])*"
BY_NAME = re.compile(r"(%s)\s*[!=]=\s*(VC_[A-Z0-9_]+)\b" % EXPR)
CASE_NAME = re.compile(r"\bcase\s+(VC_[A-Z0-9_]+)\s*:")


SCRIPT_REF = re.compile(r"\b(?:vc_lua_(?:rc_)?([a-z_]+)|GW_SCRIPT_([A-Z_]+))\b")
STATUS_EXPRS = ("status", "*status", "st")


def functions(code):
    """(first line, body) of each top-level brace block of code (C, comments blanked)."""
    out, depth, start = [], 0, None
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append((code.count("\n", 0, start) + 1, code[start:i + 1]))
    return out


def bare_answers(text):
    """(line, what) where a function compares a value it also compares with a script's named
    answers with a bare number of those answers, or has a bare case label of them."""
    # Character literals blanked too: a '{' must not open a function.
    code = re.sub(r"'(?:\\.|[^'\\\n])+'", lambda m: "'%s'" % (" " * (len(m.group(0)) - 2)),
                  c_code(text))
    raw = text.splitlines()
    out = []
    for first, body in functions(code):
        numbers = {}  # the value compared -> the numbers its answer sets name
        for expr, name in BY_NAME.findall(body):
            if name in ANSWER_NAMES:
                s = ANSWER_NAMES[name][0]
                numbers.setdefault(expr, set()).update(n for n, _ in MODEL.sets[s].values())
        # A function that runs a script with named answers (vc_lua_rc_restore,
        # GW_SCRIPT_CONFIRM) handles its answer in the usual names too.
        for lua, gw in SCRIPT_REF.findall(body):
            sc = MODEL.scripts.get(lua or gw.lower())
            if sc and "answers" in sc:
                for expr in STATUS_EXPRS:
                    numbers.setdefault(expr, set()).update(
                        n for n, _ in MODEL.sets[sc["answers"]].values())
        cased = set()
        for name in CASE_NAME.findall(body):
            if name in ANSWER_NAMES:
                cased.update(n for n, _ in MODEL.sets[ANSWER_NAMES[name][0]].values())
        found = []
        for expr, nums in numbers.items():
            e = re.escape(expr)
            pat = re.compile(r"(?<![\w>.])%s\s*[!=]=\s*(\d+)\b|\b(\d+)\s*[!=]=\s*%s(?![\w\[.-])"
                             % (e, e))
            found += [m for m in pat.finditer(body) if int(m.group(1) or m.group(2)) in nums]
        if cased:
            found += [m for m in re.finditer(r"\bcase\s+(\d+)\s*:", body)
                      if int(m.group(1)) in cased]
        for m in found:
            n = first + body.count("\n", 0, m.start())
            out.append("%d: %s" % (n, raw[n - 1].strip()))
    return sorted(set(out), key=lambda s: int(s.split(":")[0]))


sample = ("static void a(int64_t status)\n{\n    if (status == VC_CONFIRM_CONFIRMED)\n"
          "        x();\n    else if (status == 0)\n        y();\n    if (status == 7)\n"
          "        z();\n}\n"
          "static void b(const r_t *reply)\n{\n    switch (reply->item[0].integer) {\n"
          "    case VC_RESERVE_TAKEN:\n        break;\n    case 0:\n        break;\n    }\n}\n"
          "static void c(int status)\n{\n    if (status == 0)\n        w();\n}\n"
          "static void d(int64_t *status)\n{\n    if (*status == VC_REPAIR_ORDERS_STATE || "
          "*status == 1)\n        v();\n    if (other == 1 && st == VC_LOWER_LOWERED)\n"
          "        u();\n}\n"
          "static int e(void)\n{\n    rc = eval(vc_lua_rc_restore, &status);\n"
          "    if (rc == 0 && status == 1)\n        t();\n}\n")
got = bare_answers(sample)
check([g.split(":")[0] for g in got] == ["5", "15", "34"],
      "the check finds bare positive answers in a C sample", str(got))
bad = []
for path in sources:
    with open(path, errors="replace") as f:
        for line in bare_answers(f.read()):
            bad.append("%s:%s" % (os.path.relpath(path, root), line))
check(not bad, "the C handles a script's answers by name wherever it names them, 0 and "
      "positive ones too", "; ".join(bad))

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


def rendered(fmt, args):
    """A key as the page writes it: each argument in capitals (order id: ORDERID)."""
    return fmt % tuple(a.upper().replace(" ", "") for a in args)


# The page's tables of keys (a campaign's are proto/campaigns.md's): the voucher's, a
# restore's staged ones, and the keys of no voucher or campaign.
page_keys = set(re.findall(r"^\| `([^`]+)` \|", section("Keys"), re.M))
for fam in ("voucher", "restoring"):
    f = MODEL.families[fam]
    shape = rendered(f["format"], f["args"] + ["name"])  # voucher:{CODE}:NAME
    want = {shape.replace("NAME", k) for k in f["keys"]}
    got = {k for k in page_keys if re.fullmatch(re.escape(shape).replace("NAME", "[a-z_]+"), k)}
    check(got == want, "proto/redis-keys.md's keys table names the definition's %s keys" % fam,
          "page only %s, definition only %s" % (sorted(got - want), sorted(want - got)))
    page_keys -= got
want = {rendered(k["format"], k["args"]) for k in MODEL.keys.values()}
check(page_keys == want, "proto/redis-keys.md's table of the keys of no voucher or campaign names "
      "the definition's other keys", "page only %s, definition only %s" % (
          sorted(page_keys - want), sorted(want - page_keys)))

# proto/campaigns.md's table of a campaign's keys: the first cell of a row names one key in
# full (`campaign:{cID}:taken`) and may add others by their names alone (`, :releasing`).
with open(os.path.join(root, "proto", "campaigns.md")) as f:
    cpage = f.read()
cm = re.search(r"^## Redis.*?\n(\| key \|.*?)\n\n", cpage, re.S | re.M)
cnames = set()
for cell in re.findall(r"^\| (`campaign:\{cID\}:[^|]*)\|", cm.group(1) if cm else "", re.M):
    cnames |= set(re.findall(r"`(?:campaign:\{cID\})?:([a-z_]+)`", cell))
cwant = set(MODEL.families["campaign"]["keys"])
check(cnames == cwant, "proto/campaigns.md's keys table names the definition's campaign keys",
      "page only %s, definition only %s" % (sorted(cnames - cwant), sorted(cwant - cnames)))
check("`%s`" % MODEL.raw["order_value"] in page,
      "proto/redis-keys.md gives an order's value as the definition does",
      MODEL.raw["order_value"])

for n, (ok, what) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
print("1..%d" % len(results))
sys.exit(0 if all(ok for ok, _ in results) else 1)
