#!/usr/bin/env python3
"""Checks the contracts under proto/: the OpenAPI document is valid OpenAPI
3.1, the event schema is valid JSON Schema, and events as the codec writes them
(given as arguments or read from stdin, one JSON object per line) satisfy it,
while events the codec must refuse do not. TAP output; exit 1 on any failure.
"""
import json
import os
import sys

import jsonschema
import yaml
from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

root = os.environ.get("VOUCHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
results = []


def check(ok, what):
    results.append((bool(ok), what))


spec_dict, _ = read_from_filename(os.path.join(root, "proto", "openapi.yaml"))
try:
    validate(spec_dict)
    check(True, "proto/openapi.yaml is valid OpenAPI 3.1")
except Exception as e:  # the validator raises several kinds
    check(False, f"proto/openapi.yaml is valid OpenAPI 3.1: {e}")

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

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
