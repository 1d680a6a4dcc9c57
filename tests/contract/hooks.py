"""Schemathesis hooks for the contract test (tests/integration/test_contract.sh).

A voucher generated at random almost never runs now, so its reservations
are all 422 and the stateful phase never reaches confirm and release: half
the generated vouchers get a window that runs now and no minimum order, the
rest stay as generated.

Rules proto/openapi.yaml states in words because JSON Schema cannot compare
two fields: a voucher's or a campaign's window must not be empty (endsAt
after startsAt); a campaign's codes must be long enough for its count
(CampaignCreate's description), and it binds no more customers than codes.
Generated bodies that break it are dropped, so that "the server refused a
body the schema allows" (positive_data_acceptance) means a real mismatch.
Bodies whose times are not both readable are kept: the server must refuse
those by itself.

The admin routes, /readyz and /metrics are served on the gateway's admin
address only (issue 42): the spec gives their paths or operations `servers`
of their own, and those operations are sent to VOUCHER_CONTRACT_ADMIN_URL,
the others to the --url of the run (which replaces the spec's top `servers`).
"""
import itertools
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


def _campaign_min_length(alphabet, check_symbol, count):
    """The shortest length for count codes (common/vc_campaign.c, vc_campaign_min_length)."""
    size = 10 if alphabet == "digits" else 32
    need, have, r = count * 10 ** 9, 1, 0
    while have < need:
        have *= size
        r += 1
    return max(6, r + (1 if check_symbol else 0))


def _whole(value):
    """value as an int when JSON Schema calls it an integer (5 and 5.0), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if float(value).is_integer() else None


def _campaign_ok(body):
    """False for a campaign body that breaks a rule between its fields."""
    count, length = _whole(body.get("count")), _whole(body.get("length", 12))
    if count is None or length is None or count < 1:
        return True
    if length < _campaign_min_length(body.get("alphabet", "safe32"),
                                     body.get("checkSymbol") is True, count):
        return False
    customers = body.get("customerIds")
    return not (isinstance(customers, list) and len(customers) > count)


def _window_ok(path, body):
    """False for a voucher or campaign body whose window is empty; True for everything else."""
    if path not in ("/vouchers", "/vouchers/{code}", "/campaigns") or not isinstance(body, dict):
        return True
    starts, ends = _instant(body.get("startsAt")), _instant(body.get("endsAt"))
    if starts is None or ends is None:
        return True
    try:
        return ends > starts
    except TypeError:
        return True


def _on_admin_address(method, path):
    """Whether the spec serves METHOD PATH on servers of its own: the admin address."""
    item = _SPEC["paths"].get(path, {})
    return "servers" in item or "servers" in item.get(str(method).lower(), {})


@schemathesis.hook
def before_init_operation(context, operation):
    admin_url = os.environ.get("VOUCHER_CONTRACT_ADMIN_URL")
    if admin_url and _on_admin_address(operation.method, operation.path):
        operation.base_url = admin_url


def _rules_ok(path, body):
    """Whether body keeps the rules between fields that the spec states in words."""
    return _window_ok(path, body) and (path != "/campaigns" or not isinstance(body, dict)
                                       or _campaign_ok(body))


@schemathesis.hook
def filter_body(context, body):
    operation = context.operation
    return operation is None or _rules_ok(operation.path, body)


# The 503s of a voucher whose Redis keys are gone while PostgreSQL says it runs
# (gateway/gw_holds.c, gw_reserve.c, gw_admin.c): the spec documents them (Unavailable,
# "being restored"), and the reconciler restores the keys, but this test runs none. A PATCH
# that ends a voucher long ago makes its keys expire at once (its retention after the new
# end); a later PATCH that moves the end back leaves it so.
_RESTORED_BY_THE_RECONCILER = re.compile(
    r"in Redis were lost|counter is missing from Redis|voucher is being restored")


def _awaits_the_reconciler(response):
    try:
        detail = response.json().get("detail", "")
    except (ValueError, AttributeError):
        return False
    return response.status_code == 503 and bool(_RESTORED_BY_THE_RECONCILER.search(str(detail)))


@schemathesis.hook
def filter_failure(context, failure, case, response):
    code = getattr(failure, "code", None)
    # A 5xx is a failure, but for those 503s, which only a reconciler ends.
    if code == "ST101" and _awaits_the_reconciler(response):
        return False
    # The coverage phase builds its bodies without filter_body: what they break of those
    # rules is refused (400, 422) as the schema's descriptions say, which is no mismatch.
    return not (code == "ST202" and response.status_code in (400, 422)
                and not _rules_ok(case.path, case.body))


_RUNNING = os.environ.get("VOUCHER_CONTRACT_CODE")
_RUN = os.urandom(6).hex()
_turns = {}


def _campaign_sync_max():
    """Up to this many codes a campaign is made within the request: GW_CAMPAIGN_SYNC_MAX, read
    from the gateway's header so that the two cannot drift apart."""
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "gateway",
                          "gw_campaign.h")
    with open(header, encoding="utf-8") as f:
        m = re.search(r"^#define GW_CAMPAIGN_SYNC_MAX (\d+)$", f.read(), re.M)
    if not m:
        raise RuntimeError(f"{header}: no #define GW_CAMPAIGN_SYNC_MAX")
    return int(m.group(1))


_CAMPAIGN_SYNC_MAX = _campaign_sync_max()


@schemathesis.hook
def before_call(context, case, kwargs):
    # A campaign above 10,000 codes is generated in the background (10^7 codes take
    # minutes of a core), and another one meanwhile is 503 by design: the run's
    # campaigns are made within their request, so that a 5xx is always a failure.
    # test_campaign_admin covers the large ones.
    if (case.method.upper() == "POST" and case.path == "/campaigns" and isinstance(case.body, dict)
            and (_whole(case.body.get("count")) or 0) > _CAMPAIGN_SYNC_MAX):
        case.body = dict(case.body, count=_CAMPAIGN_SYNC_MAX)
        return
    # A code drawn at random is almost never a voucher, and one that is (made by an
    # earlier run) has ended: every quote and reservation would be 404 or 422, in every
    # phase. The first of each phase's bodies the schema allows, and every second one
    # after it, goes to a voucher that runs now, made by the test (VOUCHER_CONTRACT_CODE),
    # so that each phase also reaches 200 and 201.
    meta = getattr(case, "meta", None)
    if (not _RUNNING or case.method.upper() != "POST"
            or case.path not in ("/vouchers/{code}/quote", "/vouchers/{code}/reservations")
            or meta is None or str(meta.generation.mode.value) != "positive"):
        return
    turn = _turns.setdefault((case.path, str(getattr(meta.phase, "name", ""))), itertools.count())
    n = next(turn)
    if n % 2 != 0:
        return
    case.path_parameters = dict(case.path_parameters or {}, code=_RUNNING)
    # An orderId is an idempotency key for good: the spec's example (order-2026-0001) and the
    # coverage phase's smallest ones were taken by earlier runs, and would be 409
    # ORDER_CONFLICT for ever. The reservations sent to the running voucher get one of this
    # run's own; the others keep the generated one.
    if case.path.endswith("/reservations") and isinstance(case.body, dict):
        case.body = dict(case.body, orderId=f"contract-{_RUN}-{n}")


_SPEC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto",
                          "openapi.yaml")
with open(_SPEC_PATH, encoding="utf-8") as f:
    _SPEC = yaml.safe_load(f)
_COMPONENTS = _SPEC["components"]
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


@schemathesis.deserializer("text/csv")
def deserialize_csv(ctx, response):
    # GET /campaigns/{id}/codes: the spec's schema is a string (CampaignCodes), UTF-8 text.
    return response.content.decode("utf-8")
