"""Schemathesis hooks for the contract test (tests/integration/test_contract.sh).

A voucher generated at random almost never runs now, so its reservations
are all 422 and the stateful phase never reaches confirm and release: half
the generated vouchers get a window that runs now and no minimum order, the
rest stay as generated.

Rules proto/openapi.yaml states in words because JSON Schema cannot compare
two fields: a voucher's window must not be empty (endsAt after startsAt).
Generated bodies that break it are dropped, so that "the server refused a
body the schema allows" (positive_data_acceptance) means a real mismatch.
Bodies whose times are not both readable are kept: the server must refuse
those by itself.

The admin routes are served on the gateway's admin address only (issue 42;
the spec gives them its `servers`): their operations are sent to
VOUCHER_CONTRACT_ADMIN_URL, the others to the --url of the run.
"""
import os
import re
from datetime import datetime

import jsonschema
import schemathesis
import yaml
from hypothesis import strategies as st


def _instant(value):
    if not isinstance(value, str):
        return None
    try:
        # RFC 3339 as Python reads it; a leap second (:60) is read as :59, as the server does.
        return datetime.fromisoformat(value.replace(":60", ":59", 1).upper().replace("Z", "+00:00"))
    except ValueError:
        return None


def _window_ok(path, body):
    """False for a voucher body whose window is empty; True for everything else."""
    if path not in ("/vouchers", "/vouchers/{code}") or not isinstance(body, dict):
        return True
    starts, ends = _instant(body.get("startsAt")), _instant(body.get("endsAt"))
    if starts is None or ends is None:
        return True
    try:
        return ends > starts
    except TypeError:
        return True


def _is_admin(method, path):
    """Whether METHOD PATH is an admin route (gateway/gw_router.c, gw_route_auth)."""
    method = str(method).upper()
    return (path.startswith("/campaigns") or path == "/vouchers"
            or (path.startswith("/vouchers/") and method in ("GET", "PATCH")))


@schemathesis.hook
def before_init_operation(context, operation):
    admin_url = os.environ.get("VOUCHER_CONTRACT_ADMIN_URL")
    if admin_url and _is_admin(operation.method, operation.path):
        operation.base_url = admin_url


@schemathesis.hook
def filter_body(context, body):
    operation = context.operation
    return operation is None or _window_ok(operation.path, body)


@schemathesis.hook
def filter_failure(context, failure, case, response):
    # The coverage phase builds its bodies without filter_body: its empty windows are
    # refused (400) as the schema's description says, which is no mismatch.
    return not (getattr(failure, "code", None) == "ST202" and response.status_code == 400
                and not _window_ok(case.path, case.body))


_SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto", "openapi.yaml")
with open(_SPEC, encoding="utf-8") as f:
    _COMPONENTS = yaml.safe_load(f)["components"]
_CREATE = jsonschema.Draft202012Validator(
    {"$ref": "#/components/schemas/VoucherCreate", "components": _COMPONENTS})
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _valid_create(body):
    return (_CREATE.is_valid(body)
            and all(_RFC3339.match(body[k]) and _instant(body[k]) for k in ("startsAt", "endsAt")))


@schemathesis.hook
def flatmap_body(context, body):
    operation = context.operation
    if (operation is None or operation.path != "/vouchers" or operation.method.upper() != "POST"
            or not isinstance(body, dict) or not _valid_create(body)):
        return st.just(body)
    running = dict(body, startsAt="2020-01-01T00:00:00Z", endsAt="2099-01-01T00:00:00Z",
                   minOrderAmount=0)
    return st.sampled_from([body, running])
