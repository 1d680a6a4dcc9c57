#!/usr/bin/env python3
"""Checks the contracts under proto/: the OpenAPI document is strict YAML (no
key given twice in a mapping: PyYAML keeps the last, a client generator's
loader refuses the file) and valid OpenAPI 3.1, with an operationId on every
operation, a named schema for every body and answer, and examples that
satisfy their schemas; the event schema is valid JSON Schema, and events as
the codec writes them (given as arguments or read from stdin, one JSON object
per line) satisfy it, while events the codec must refuse do not. Every error name and reason the
daemons' HTTP answers can carry (read from their sources) is one of the
spec's: a reason added to the gateway and not to proto/openapi.yaml fails.
TAP output; exit 1 on any failure.
"""
import glob
import json
import os
import re
import sys
from datetime import datetime

import jsonschema
import yaml
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

root = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
results = []


def check(ok, what):
    results.append((bool(ok), what))


class StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping, as the
    loaders of the client generators do (PyYAML's own keeps the last)."""


def _strict_mapping(loader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping", node.start_mark,
                f"the key {key!r} is given twice (first at line {seen[key] + 1})",
                key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)

spec_path = os.path.join(root, "proto", "openapi.yaml")
try:
    with open(spec_path, encoding="utf-8") as f:
        yaml.load(f, Loader=StrictLoader)
    check(True, "proto/openapi.yaml is strict YAML (no key twice in a mapping)")
except yaml.YAMLError as e:
    check(False, f"proto/openapi.yaml is strict YAML: {e}")

try:
    spec_dict, _ = read_from_filename(spec_path)
except yaml.YAMLError as e:
    check(False, f"proto/openapi.yaml is YAML at all: {e}")
    print(f"1..{len(results)}")
    for i, (ok, what) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
    sys.exit(1)
try:
    validate(spec_dict)
    check(True, "proto/openapi.yaml is valid OpenAPI 3.1")
except Exception as e:  # the validator raises several kinds
    check(False, f"proto/openapi.yaml is valid OpenAPI 3.1: {e}")

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def resolve(node):
    """The node a local $ref names (one level at a time, until no $ref is left)."""
    while isinstance(node, dict) and "$ref" in node:
        target = spec_dict
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def operations():
    for path, item in spec_dict.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def media_types(op):
    """(what, media type object, whether it is a request body or a 2xx answer) of an operation."""
    body = resolve(op.get("requestBody"))
    if body:
        for mt, media in body.get("content", {}).items():
            yield "request body", mt, media, True
    for status, response in op.get("responses", {}).items():
        for mt, media in resolve(response).get("content", {}).items():
            yield f"{status} answer", mt, media, str(status).startswith("2")


# Generated clients name their functions after operationId, and their models after the
# components' names: a path-named function (post_vouchers_code_reservations_order_id_confirm)
# or an inline schema (a model named after its path) is what the order service would call.
op_ids = [op.get("operationId") for _, _, op in operations()]
missing_ids = [f"{m.upper()} {p}" for p, m, op in operations() if not op.get("operationId")]
check(not missing_ids, f"every operation has an operationId (missing: {missing_ids or 'none'})")
twice = sorted({i for i in op_ids if i and op_ids.count(i) > 1})
check(not twice, f"operationIds are unique (twice: {twice or 'none'})")
inline = [f"{m.upper()} {p} {what} {mt}" for p, m, op in operations()
          for what, mt, media, _ in media_types(op) if "$ref" not in media.get("schema", {})]
check(not inline, f"every request body and answer has a named schema (inline: {inline or 'none'})")


RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _date_time(value):
    if not isinstance(value, str):
        return True
    if not RFC3339.match(value):
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


formats = jsonschema.FormatChecker()
formats.checks("date-time")(_date_time)
components = {"components": spec_dict.get("components", {})}
no_example = []
for path, method, op in operations():
    for what, mt, media, main in media_types(op):
        examples = [("example", media["example"])] if "example" in media else []
        examples += [(name, resolve(ex).get("value")) for name, ex in
                     media.get("examples", {}).items()]
        if main and not examples:
            no_example.append(f"{method.upper()} {path} {what}")
        schema = dict(media.get("schema", {}), **components)
        validator = jsonschema.Draft202012Validator(schema, format_checker=formats)
        for name, value in examples:
            errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                      for e in validator.iter_errors(value)]
            check(not errors, f"{op.get('operationId')} {what} example {name} satisfies its "
                  f"schema {errors if errors else ''}")
check(not no_example, "every request body and 2xx answer has an example "
      f"(missing: {no_example or 'none'})")

with open(os.path.join(root, "proto", "event-v1.schema.json")) as f:
    schema = json.load(f)
try:
    jsonschema.Draft202012Validator.check_schema(schema)
    check(True, "proto/event-v1.schema.json is valid JSON Schema 2020-12")
except jsonschema.SchemaError as e:
    check(False, f"event schema is valid: {e.message}")
validator = jsonschema.Draft202012Validator(schema)

encoded = [line for line in sys.stdin.read().splitlines() if line.strip()]
check(len(encoded) >= 4, "the codec wrote sample events of every type, and a confirm with its figures")
for line in encoded:
    ev = json.loads(line)
    errors = [e.message for e in validator.iter_errors(ev)]
    check(not errors, f"codec output {ev.get('type')} satisfies the schema {errors if errors else ''}")

refused = [
    {"type": "VoucherReserved", "version": 2, "code": "A", "customerId": 1, "orderId": "o"},
    {"type": "VoucherReserved", "version": 1, "code": "lower", "customerId": 1, "orderId": "o",
     "discountAmount": 1, "orderAmount": 1, "reservedAt": "2026-01-01T00:00:00Z"},
    {"type": "VoucherReleased", "version": 1, "code": "A", "customerId": 1, "orderId": "o",
     "releasedAt": "2026-01-01T00:00:00Z"},
    {"type": "VoucherConfirmed", "version": 1, "code": "A", "customerId": 1, "orderId": "o",
     "confirmedAt": "2026-01-01T00:00:00Z", "orderAmount": 5},
]
for ev in refused:
    check(not validator.is_valid(ev), f"the schema refuses what the codec refuses: {json.dumps(ev)[:60]}")



def spec_names(node, names):
    """Collects the enum and const values of every property named error or reason."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("error", "reason") and isinstance(value, dict):
                names.update(v for v in value.get("enum", []) if isinstance(v, str))
                if isinstance(value.get("const"), str):
                    names.add(value["const"])
            spec_names(value, names)
    elif isinstance(node, list):
        for value in node:
            spec_names(value, names)
    return names


def call_args(text, name):
    """The argument lists of every call of name(...) in text, split at top-level commas."""
    for m in re.finditer(r"\b" + name + r"\(", text):
        depth, i, args, cur = 1, m.end(), [], ""
        while i < len(text) and depth:
            c = text[i]
            if c == '"':  # a string literal, escapes included
                j = i + 1
                while j < len(text) and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                cur += text[i:j + 1]
                i = j + 1
                continue
            depth += c == "("
            depth -= c == ")"
            if depth == 1 and c == ",":
                args.append(cur.strip())
                cur = ""
            elif depth:
                cur += c
            i += 1
        args.append(cur.strip())
        yield args


def emitted_names():
    """Error names and reasons the HTTP answers can carry, from the sources that write them."""
    name = re.compile(r'^"([A-Z][A-Z_]+)"$')
    found = {}
    files = sorted(glob.glob(os.path.join(root, "gateway", "*.c"))) + [
        os.path.join(root, "common", "vc_http.c"), os.path.join(root, "common", "vc_admin.c")]
    for path in files:
        text = open(path).read()
        where = os.path.relpath(path, root)
        hits = re.findall(r'\*(?:error|reason)\s*=\s*"([A-Z][A-Z_]+)"', text)
        hits += re.findall(r'kv_str\(&g,\s*"error",\s*"([A-Z][A-Z_]+)"\)', text)
        hits += re.findall(r'\\"error\\":\\"([A-Z][A-Z_]+)\\"', text)
        for m in re.finditer(r"const char \*error\s*=([^;]*);", text):
            hits += re.findall(r'"([A-Z][A-Z_]+)"', m.group(1))
        for args in call_args(text, "reply_plain"):
            hits += [name.match(a).group(1) for a in args[2:3] if name.match(a)]
        for args in call_args(text, "gw_body_error"):
            hits += [name.match(a).group(1) for a in args[2:3] + args[4:5] if name.match(a)]
        for h in hits:
            found.setdefault(h, where)
    return found


documented = spec_names(spec_dict, set())
emitted = emitted_names()
known = {"EXISTS", "CAMPAIGN_CODE", "TOO_MANY_ATTEMPTS", "HEADERS_TOO_LARGE", "NOT_READY",
         "UNPROCESSABLE", "METHOD_NOT_ALLOWED", "ORDER_TOO_SMALL", "LIMIT_CONFLICT"}
check(known <= set(emitted),
      f"the sources' error names and reasons are found ({len(emitted)}; missed: "
      f"{sorted(known - set(emitted)) or 'none'})")
for n, where in sorted(emitted.items()):
    check(n in documented, f"{n} ({where}) is an error or reason of proto/openapi.yaml")

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
