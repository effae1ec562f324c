"""Corrections on a transactional database (issue 24; SPEC §15.4), apart so that the mutation
runs of envelopes.adjustments stay fast: callers noticing one failure of a recorded foreign refund
at the same moment (the webhook, `charge.refunded`, reconciliation) give it back once — the
envelope lock and one release entry per adjustment; and every read of the provider behind a
correction happens outside any transaction."""

import threading
from datetime import timedelta
from typing import Any

import pytest
import stripe
import time_machine
from django.db import connection
from django.utils import timezone

from accounts.models import User
from envelopes import services
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.envelopes.people import person

from .test_adjustments_provider_reads import (
    _assert_given_back_once,
    _recorded_foreign_refund,
)


@pytest.fixture
def proposer(db: None) -> User:
    return person("pia", "envelopes.add_adjustment")


@pytest.fixture
def approver(db: None) -> User:
    return person("aron", "reconciliation.approve_adjustment", "envelopes.add_adjustment")


@pytest.mark.django_db(transaction=True)
def test_concurrent_callers_release_a_failed_foreign_refund_once(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    sandbox.set_refund_status(refund_id, "failed")
    failed = sdk.v1.refunds.retrieve(refund_id).to_dict()
    barrier = threading.Barrier(8)
    results: list[Any] = [None] * 8

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = services.foreign_refund_release(
                provider_refund=failed, source=f"caller {index}"
            )
        except BaseException as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results, key=repr) == [False] * 7 + [True], results
    _assert_given_back_once(envelope_id, funding, adjustment)


@pytest.mark.django_db(transaction=True)
def test_the_reads_behind_a_release_a_reverse_and_an_abandon_are_outside_transactions(
    alice: Api,
    sandbox: SandboxControl,
    proposer: User,
    approver: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """STYLE §3: each proposal and approval reads the provider (the charge, its refunds, the
    PaymentIntent search) with no transaction open and no row locked."""
    from core import db
    from envelopes.adjustments import adjustment_approve, adjustment_propose
    from envelopes.models import FundingLeg, RefundLeg
    from providers.stripe_provider import StripeProvider

    calls: list[tuple[str, bool]] = []
    real_call = StripeProvider._call

    def spy(self: StripeProvider, request: Any, **kwargs: Any) -> Any:
        calls.append((request.__qualname__, db.in_transaction()))
        return real_call(self, request, **kwargs)

    envelope_id = alice.create(5_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000})
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000})
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
    )
    sandbox.clear_faults()
    accepted = RefundLeg.objects.get(outcome="accepted")
    stuck = RefundLeg.objects.get(outcome="unknown")
    sandbox.forget(accepted.provider_refund_id)
    monkeypatch.setattr(StripeProvider, "_call", spy)
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        for kind, subject in (
            ("leg_reverse", {"refund_leg": accepted}),
            ("leg_release", {"refund_leg": stuck}),
            ("funding_abandon", {"funding_leg": FundingLeg.objects.get(sequence=2)}),
        ):
            adjustment = adjustment_propose(actor=proposer, kind=kind, reason="x", **subject)
            adjustment_approve(
                adjustment=adjustment,
                actor=approver,
                confirmed_amount_micro=adjustment.amount_micro,
            )
    sites = {name.split(".")[1] for name, _ in calls if name.startswith("StripeProvider.")}
    assert {
        "refund_read",
        "charge_read",
        "refund_pages_of_charge",
        "payment_intent_pages_with_metadata",
    } <= sites, sites
    inside = [name for name, in_transaction in calls if in_transaction]
    assert inside == [], f"provider calls inside a transaction: {inside}"
