"""The money a dispute moves (https://docs.stripe.com/disputes/how-disputes-work): a chargeback
withdraws the disputed amount and Stripe's dispute fee from the balance, in one balance transaction
(https://support.stripe.com/questions/dispute-fees-faq) listed in the dispute's
`balance_transactions`, with `charge.dispute.funds_withdrawn`; a won dispute reinstates the amount
with `charge.dispute.funds_reinstated` (the dispute fee is not returned:
https://support.stripe.com/topics/disputes); a lost one moves nothing more. An inquiry withdraws
nothing, and its charge stays refundable until fully refunded (`is_charge_refundable`)."""

from __future__ import annotations

from typing import Any

from stripe_sandbox.objects import INQUIRY_STATUSES
from stripe_sandbox.objects.balance import fee_detail
from stripe_sandbox.resources.balance import balance_transaction_add
from stripe_sandbox.state import State, snapshot

# Stripe's dispute fee in the US: USD 15.00 per dispute received (https://stripe.com/pricing).
DISPUTE_FEE = 1500
WITHDRAWAL = "dispute"
REINSTATEMENT = "dispute_reversal"


def _moved(dispute: dict[str, Any], category: str) -> dict[str, Any] | None:
    for txn in dispute["balance_transactions"]:
        if txn["reporting_category"] == category:
            return txn
    return None


def _fully_refunded(state: State, dispute: dict[str, Any]) -> bool:
    charge = state.world.charges.get(dispute["charge"])
    return charge is None or state.live_refunded(charge["id"]) >= charge["amount"]


def is_charge_refundable(state: State, dispute: dict[str, Any]) -> bool:
    """Stripe's `is_charge_refundable`: an inquiry's charge can still be refunded until it is
    fully refunded (https://stripe.com/docs/disputes, "Inquiries and retrievals"); a chargeback's
    cannot (https://docs.stripe.com/error-codes, `charge_disputed`)."""
    case_type = dispute["payment_method_details"]["card"]["case_type"]
    return case_type == "inquiry" and not _fully_refunded(state, dispute)


def dispute_refresh(state: State, dispute: dict[str, Any]) -> dict[str, Any]:
    """Bring what the dispute shows of its charge's refunds up to date (before it is shown)."""
    dispute["is_charge_refundable"] = is_charge_refundable(state, dispute)
    return dispute


def funds_withdraw(state: State, dispute: dict[str, Any]) -> str | None:
    """A chargeback takes the disputed amount and the dispute fee, once; nothing after the
    payment has been fully refunded (SDK `Dispute.is_charge_refundable`). Answers the event the
    withdrawal calls for (the caller emits it), or None when nothing moved."""
    if _moved(dispute, WITHDRAWAL) is not None or _fully_refunded(state, dispute):
        return None
    txn = balance_transaction_add(
        state,
        amount=-dispute["amount"],
        currency=dispute["currency"],
        type="adjustment",
        reporting_category=WITHDRAWAL,
        source=dispute["id"],
        fee_details=[
            fee_detail(amount=DISPUTE_FEE, currency=dispute["currency"], description="Dispute fee")
        ],
        description=f"Chargeback withdrawal for {dispute['charge']}",
    )
    dispute["balance_transactions"].append(snapshot(txn))
    return "charge.dispute.funds_withdrawn"


def funds_reinstate(state: State, dispute: dict[str, Any]) -> str | None:
    """A won dispute gives back what was withdrawn (not the fee), once."""
    withdrawal = _moved(dispute, WITHDRAWAL)
    if withdrawal is None or _moved(dispute, REINSTATEMENT) is not None:
        return None
    txn = balance_transaction_add(
        state,
        amount=-withdrawal["amount"],
        currency=dispute["currency"],
        type="adjustment",
        reporting_category=REINSTATEMENT,
        source=dispute["id"],
        description=f"Chargeback reversal for {dispute['charge']}",
    )
    dispute["balance_transactions"].append(snapshot(txn))
    return "charge.dispute.funds_reinstated"


def funds_follow_status(
    state: State, dispute: dict[str, Any], previous: dict[str, Any]
) -> str | None:
    """The money a move of status brings, the changed fields noted in `previous` (with
    `previous["status"]` the status left): an inquiry escalated to a chargeback (a chargeback
    status entered from a `warning_*` one) becomes a chargeback and withdraws then; `won`
    reinstates what was withdrawn; `lost` moves nothing more. Answers the funds event to emit
    after the status's own, or None."""
    card = dispute["payment_method_details"]["card"]
    before = {
        "balance_transactions": list(dispute["balance_transactions"]),
        "is_charge_refundable": dispute["is_charge_refundable"],
    }
    event = None
    if (
        card["case_type"] == "inquiry"
        and previous["status"] in INQUIRY_STATUSES
        and dispute["status"] in ("needs_response", "under_review", "lost")
    ):
        card["case_type"] = "chargeback"
        previous["payment_method_details"] = {"card": {"case_type": "inquiry"}}
        event = funds_withdraw(state, dispute)
    elif dispute["status"] == "won":
        event = funds_reinstate(state, dispute)
    dispute_refresh(state, dispute)
    for name, value in before.items():
        if dispute[name] != value:
            previous[name] = value
    return event


def disputes_allow_refund(state: State, charge_id: str) -> bool:
    """A disputed charge may be refunded while every dispute on it says `is_charge_refundable`
    (an inquiry whose charge is not fully refunded); a chargeback's charge may not
    (`charge_disputed`, https://docs.stripe.com/error-codes)."""
    disputes = [
        state.world.disputes[d]
        for d in state.world.disputes_by_charge.get(charge_id, [])
        if d in state.world.disputes
    ]
    return bool(disputes) and all(is_charge_refundable(state, d) for d in disputes)
