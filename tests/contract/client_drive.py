"""The order service's path through a client generated from proto/openapi.yaml.

tests/integration/test_contract.sh generates the client with openapi-python-client
(a maintained generator nobody here wrote: what the order service's developers
will do) into a folder, and runs this with that folder as the first argument,
then the API's and the admin address's base URLs, the admin token and a new
voucher code. Every call
goes through the generated functions (named after the spec's operationIds) and
every answer is parsed into the generated models: quote, reserve, the retry of
the reservation, confirm with the final total, cancel, a look at the order as
support staff, and an error answer parsed as the Error model.

Prints one line per check, "0 what" when it holds and "1 what (why)" when not,
for the test to turn into TAP. An exception is a check that failed: its line
says what was being done.
"""
import datetime
import os
import sys

client_dir, api_url, admin_url, admin_token, code = sys.argv[1:6]
sys.path.insert(0, client_dir)

from voucher_client import AuthenticatedClient, Client  # noqa: E402
from voucher_client.api.default import (  # noqa: E402
    cancel_reservation, confirm_reservation, create_voucher, get_reservation, quote, reserve)
from voucher_client.models import (  # noqa: E402
    ConfirmRequest, Error, OrderView, Quote, QuoteRequest, Reservation, ReservationRequest,
    Status, Voucher, VoucherCreate)
from voucher_client.models.error_error import ErrorError  # noqa: E402
from voucher_client.models.status_status import StatusStatus  # noqa: E402
from voucher_client.models.voucher_mode import VoucherMode  # noqa: E402

checks = []


def check(ok, what, why=""):
    checks.append(f"{0 if ok else 1} {what}{f' ({why})' if not ok and why else ''}")


api = Client(base_url=api_url, raise_on_unexpected_status=True)
admin = AuthenticatedClient(base_url=admin_url, token=admin_token,
                            raise_on_unexpected_status=True)
run = os.urandom(4).hex().upper()
customer = int.from_bytes(os.urandom(4), "big") + 1
step = "createVoucher"
try:
    now = datetime.datetime.now(datetime.timezone.utc)
    answer = create_voucher.sync_detailed(client=admin, body=VoucherCreate(
        code=code, discount_percent=10, max_discount_amount=500, min_order_amount=1000,
        total_limit=10, per_user_limit=2, starts_at=now - datetime.timedelta(days=1),
        ends_at=now + datetime.timedelta(days=1), mode=VoucherMode.FLASH))
    voucher = answer.parsed
    check(answer.status_code == 201 and isinstance(voucher, Voucher) and voucher.code == code
          and voucher.remaining == 10,
          "createVoucher: 201 parsed as Voucher, 10 remaining", f"{answer.status_code} {voucher}")

    step = "quote"
    answer = quote.sync_detailed(code, client=api,
                                 body=QuoteRequest(customer_id=customer, order_amount=4500))
    check(answer.status_code == 200 and isinstance(answer.parsed, Quote)
          and answer.parsed.discount_amount == 450,
          "quote: 200 parsed as Quote, 10% of 4500 is 450", f"{answer.status_code} {answer.parsed}")

    step = "reserve"
    order = f"gen-{run}-1"
    body = ReservationRequest(customer_id=customer, order_id=order, order_amount=4500)
    answer = reserve.sync_detailed(code, client=api, body=body)
    first = answer.parsed
    check(answer.status_code == 201 and isinstance(first, Reservation)
          and first.order_id == order and first.discount_amount == 450
          and first.held_until > datetime.datetime.now(datetime.timezone.utc) and not first.replayed,
          "reserve: 201 parsed as Reservation, held until a time to come",
          f"{answer.status_code} {first}")

    step = "reserve again (the retry)"
    answer = reserve.sync_detailed(code, client=api, body=body)
    again = answer.parsed
    check(answer.status_code == 201 and isinstance(again, Reservation) and again.replayed is True
          and again.discount_amount == first.discount_amount
          and again.held_until == first.held_until,
          "the retry with the same orderId: 201 replayed, the same discount and heldUntil",
          f"{answer.status_code} {again}")

    step = "reserve with another amount"
    answer = reserve.sync_detailed(code, client=api, body=ReservationRequest(
        customer_id=customer, order_id=order, order_amount=4600))
    refusal = answer.parsed
    check(answer.status_code == 409 and isinstance(refusal, Error)
          and refusal.error == ErrorError.ORDER_CONFLICT and "orderAmount" in refusal.detail,
          "the same orderId with another amount: 409 parsed as Error, ORDER_CONFLICT",
          f"{answer.status_code} {refusal}")

    step = "confirmReservation"
    answer = confirm_reservation.sync_detailed(code, order, client=api,
                                               body=ConfirmRequest(order_amount=4200))
    done = answer.parsed
    check(answer.status_code == 200 and isinstance(done, Status)
          and done.status == StatusStatus.CONFIRMED and done.order_amount == 4200
          and done.discount_amount == 420,
          "confirmReservation with the final total: 200 parsed as Status, CONFIRMED at 4200 - 420",
          f"{answer.status_code} {done}")

    step = "getReservation"
    answer = get_reservation.sync_detailed(code, order, client=admin)
    view = answer.parsed
    check(answer.status_code == 200 and isinstance(view, OrderView)
          and view.redis.state.value == "CONFIRMED",
          "getReservation (admin): 200 parsed as OrderView, CONFIRMED in Redis",
          f"{answer.status_code} {view}")

    step = "cancelReservation"
    second = f"gen-{run}-2"
    answer = reserve.sync_detailed(code, client=api, body=ReservationRequest(
        customer_id=customer, order_id=second, order_amount=2000))
    taken = answer.status_code == 201
    answer = cancel_reservation.sync_detailed(code, second, client=api)
    gone = answer.parsed
    check(taken and answer.status_code == 200 and isinstance(gone, Status)
          and gone.status == StatusStatus.RELEASED,
          "cancelReservation of a second order: 200 parsed as Status, RELEASED",
          f"{answer.status_code} {gone}")
except Exception as e:  # the generated client raises on what the spec does not allow
    check(False, f"the generated client failed at {step}", f"{type(e).__name__}: {e}")

print("\n".join(checks))
