"""Issue 37's mutation bullet for `dispute_funds_mismatch` (reconciliation/engine/disputes.py,
`_funds_compare`; bench/mutation/reconciliation.engine.disputes.toml), rule by rule: what a run
shows of both sides (the dispute, its charge, withdrawn and reinstated cents), the money the
difference is worth (net moved at Stripe against net recorded), a dispute Vouch recorded that
moved no money in the ledger (an inquiry that Stripe turned into a chargeback, unheard), and the
grace period measured from the dispute's newest balance transaction.

Stripe's side is the sandbox's dispute; where a shape Stripe allows (a partial reinstatement, a
reinstatement a moment ago) is not one the sandbox's controls make, the stored dispute's
`balance_transactions` are overwritten (`tamper`: no event, nothing else touched), as Stripe would
show them."""

from __future__ import annotations

import time
from typing import Any

import pytest
import stripe
from django.core.management import call_command

from envelopes.models import DisputeFunds
from reconciliation.catch_up import catch_up_run
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db(transaction=True)

DOLLAR = 1_000_000
CLASS = "dispute_funds_mismatch"


def _chargeback(alice: Api, sandbox: SandboxControl, **options: Any) -> tuple[str, str]:
    data = alice.create(30 * DOLLAR)
    settle_runs()
    charge = data["funding_legs"][0]["charge"]
    opened = sandbox.open_dispute(charge, reason="fraudulent", **options)
    catch_up_run()  # its events processed
    return opened["id"], charge


def _transactions(sdk: stripe.StripeClient, dispute_id: str) -> list[dict[str, Any]]:
    shown = sdk.v1.disputes.retrieve(dispute_id).to_dict()
    return [dict(txn) for txn in shown["balance_transactions"]]


def _reinstatement(like: dict[str, Any], cents: int, created: int) -> dict[str, Any]:
    return {
        **like,
        "id": f"txn_reinstated_{cents}_{created}",
        "amount": cents,
        "net": cents,
        "fee": 0,
        "fee_details": [],
        "reporting_category": "dispute_reversal",
        "created": created,
    }


def test_a_partial_reinstatement_no_event_told_shows_both_sides_and_the_net_difference(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    dispute_id, charge = _chargeback(alice, stripe_at_sandbox)
    (withdrawal,) = _transactions(sdk, dispute_id)
    assert withdrawal["reporting_category"] == "dispute"
    reinstated = _reinstatement(withdrawal, 1000, int(withdrawal["created"]))
    stripe_at_sandbox.tamper(dispute_id, balance_transactions=[withdrawal, reinstated])
    settings.RECONCILIATION_GRACE_S = 0

    reconcile(kind="manual")

    found = Discrepancy.objects.get(code=CLASS)
    assert (found.subject_type, found.subject_id, found.charge_id) == (
        "dispute",
        dispute_id,
        charge,
    )
    assert found.provider_side == {
        "dispute": dispute_id,
        "charge": charge,
        "withdrawn": 3000,
        "reinstated": 1000,
    }
    assert found.vouch_side == {
        "dispute": dispute_id,
        "charge": charge,
        "withdrawn": 3000,
        "reinstated": 0,
    }
    assert found.differing == ["reinstated"]
    # Net: Stripe took $20.00 in the end, the ledger $30.00: $10.00 apart.
    assert found.amount_micro == 10 * DOLLAR
    assert found.summary == (
        f"For dispute {dispute_id} Stripe withdrew 3000 and reinstated 1000 cents; the ledger "
        "recorded 3000 and 0."
    )


def test_the_difference_is_net_of_what_the_ledger_reinstated_already(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    dispute_id, _ = _chargeback(alice, stripe_at_sandbox)
    (withdrawal,) = _transactions(sdk, dispute_id)
    created = int(withdrawal["created"])
    stripe_at_sandbox.tamper(
        dispute_id, balance_transactions=[withdrawal, _reinstatement(withdrawal, 1000, created)]
    )
    call_command("dispute_funds_follow", dispute_id)  # the ledger: $30.00 withdrawn, $10.00 back
    funds = DisputeFunds.objects.get(provider_dispute_id=dispute_id)
    assert (funds.withdrawn_micro, funds.reinstated_micro) == (30 * DOLLAR, 10 * DOLLAR)
    # Then Stripe gives back the rest ($20.00 more), no event told.
    stripe_at_sandbox.tamper(
        dispute_id,
        balance_transactions=[
            withdrawal,
            _reinstatement(withdrawal, 1000, created),
            _reinstatement(withdrawal, 2000, created),
        ],
    )
    settings.RECONCILIATION_GRACE_S = 0

    reconcile(kind="manual")

    found = Discrepancy.objects.get(code=CLASS)
    assert (found.provider_side["withdrawn"], found.provider_side["reinstated"]) == (3000, 3000)
    assert (found.vouch_side["withdrawn"], found.vouch_side["reinstated"]) == (3000, 1000)
    assert found.amount_micro == 20 * DOLLAR  # Stripe nets 0, the ledger $20.00


def test_an_inquiry_stripe_turned_into_a_chargeback_unheard_has_no_ledger_side(
    alice: Api, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    dispute_id, charge = _chargeback(alice, stripe_at_sandbox, status="warning_needs_response")
    assert not DisputeFunds.objects.exists()  # an inquiry moves no money
    stripe_at_sandbox.set_dispute_status(dispute_id, "needs_response")  # no event processed
    settings.RECONCILIATION_GRACE_S = 0

    reconcile(kind="manual")

    found = Discrepancy.objects.get(code=CLASS)
    assert found.vouch_side == {"dispute": "", "charge": "", "withdrawn": 0, "reinstated": 0}
    assert found.provider_side == {
        "dispute": dispute_id,
        "charge": charge,
        "withdrawn": 3000,
        "reinstated": 0,
    }
    assert found.differing == ["withdrawn"]
    assert found.amount_micro == 30 * DOLLAR


def test_grace_runs_from_the_newest_balance_transaction_each_counted_once(
    alice: Api, sdk: stripe.StripeClient, stripe_at_sandbox: SandboxControl, settings: Any
) -> None:
    dispute_id, _ = _chargeback(alice, stripe_at_sandbox)
    (withdrawal,) = _transactions(sdk, dispute_id)
    settings.RECONCILIATION_GRACE_S = 600
    before = reconcile(kind="manual")  # the ledger agrees with Stripe: nothing about the funds
    assert not Discrepancy.objects.filter(code=CLASS).exists()

    now = int(time.time())
    old = {**withdrawal, "created": now - 7200}  # the withdrawal two hours ago
    other = {  # a balance transaction of no category the ledger follows, without a time
        "id": "txn_other",
        "object": "balance_transaction",
        "amount": 0,
        "reporting_category": "other_adjustment",
    }
    stripe_at_sandbox.tamper(
        dispute_id,
        balance_transactions=[old, other, "txn_an_id", _reinstatement(withdrawal, 3000, now)],
    )

    within_grace = reconcile(kind="manual")

    # The reinstatement a moment ago is in flight (its event on its way), however old the
    # withdrawal: expected once more than the run before, not a discrepancy.
    assert not Discrepancy.objects.filter(code=CLASS).exists()
    assert within_grace.expected == before.expected + 1
