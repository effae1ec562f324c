"""Charges: retrieve and list (with `refunds` only when expanded), and the balance transaction a
succeeded charge makes."""

from __future__ import annotations

from typing import Any

from stripe_sandbox.objects.balance import card_fee
from stripe_sandbox.params import Params
from stripe_sandbox.resources.balance import balance_transaction_add
from stripe_sandbox.resources.common import Result, _expand, _get, _page
from stripe_sandbox.state import RequestContext, State


def charge_book(state: State, charge: dict[str, Any]) -> None:
    """A succeeded charge's balance transaction: type `charge`, its amount less Stripe's fee."""
    txn = balance_transaction_add(
        state,
        amount=charge["amount"],
        currency=charge["currency"],
        type="charge",
        reporting_category="charge",
        source=charge["id"],
        fee_details=card_fee(amount=charge["amount"], currency=charge["currency"]),
        description=charge["description"],
        created=charge["created"],
    )
    charge["balance_transaction"] = txn["id"]


def _charge_body(state: State, charge: dict[str, Any], expand: list[str]) -> dict[str, Any]:
    """A charge as the API answers it: `refunds` only when expanded (an includable field, not an
    id), the other expansions as every object has them."""
    body = state.render(charge)
    if "refunds" in expand:
        state.embed_refunds(body)
    rest = [name for name in expand if name != "refunds"]
    return _expand(state, body, Params({"expand": rest})) if rest else body


def charge_retrieve(
    state: State, ctx: RequestContext, data: dict[str, Any], charge_id: str
) -> Result:
    params = Params(data)
    charge = _get(state, state.world.charges, "charge", charge_id)
    return 200, _charge_body(state, charge, params.expand())


def charge_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    """Newest first, by `payment_intent`; `expand[]=data.refunds` (and other `data.` expansions)
    apply to each charge of the page."""
    params = Params(data)
    pi_id = params.string("payment_intent")
    keys = None
    if pi_id is not None:
        keys = state.world.timelines["charge"].keys_of(state.world.charges_by_pi.get(pi_id, []))
    status, page = _page(state, "charge", params, "/v1/charges", keys)
    expand = [name.removeprefix("data.") for name in params.expand() if name.startswith("data.")]
    if expand:
        page["data"] = [
            _charge_body(state, state.world.charges[item["id"]], expand) for item in page["data"]
        ]
    return status, page
