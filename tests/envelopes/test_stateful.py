"""A hypothesis state machine drives random sequences of funding, top-ups, debits, refunds and
provider-side refund failures, and chargebacks (issue 37: opened in full or in part, as inquiries,
won, lost, appealed; their events seen once or twice), and checks the money invariant after every
step: the stored balances add up (funded = debited + refunded + reserved + unspent + held +
charged back), equal what the journal and the legs say, the ledger's refunded amount per charge
equals the sandbox's, and the held and charged-back money is what the model of SPEC §18 says."""

import contextlib
from typing import Any

import pytest
import stripe
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from accounts.models import User
from envelopes import services
from envelopes.exceptions import AmountExceedsUnspent, InvalidAmount, NothingToRefund
from envelopes.models import MICRO_PER_CENT, Envelope, FundingLeg, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.reconciliation.test_corrections_stateful import Chargeback, DisputeBook

CENTS = st.integers(min_value=100, max_value=50_000).map(lambda cents: cents * 10_000)


def build_machine(
    sandbox: SandboxControl, sdk: stripe.StripeClient, buyer: User, staff: User
) -> type[RuleBasedStateMachine]:
    class Money(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.envelope: Envelope | None = None
            self.book = DisputeBook(sandbox, sdk)

        @rule(amount=CENTS)
        def fund(self, amount: int) -> None:
            if self.envelope is None:
                self.envelope = services.envelope_create(
                    owner=buyer, amount_micro=amount, payment_method="pm_card_visa"
                ).envelope
            else:
                self.envelope.refresh_from_db()
                if self.envelope.total_funded_micro + amount <= 5_000_000_000:
                    services.envelope_top_up(
                        envelope=self.envelope, amount_micro=amount, payment_method="pm_card_visa"
                    )

        @precondition(lambda self: self.envelope is not None)
        @rule(fraction=st.floats(min_value=0.0, max_value=1.0))
        def debit(self, fraction: float) -> None:
            assert self.envelope is not None
            self.envelope.refresh_from_db()
            amount = int(self.envelope.unspent_micro * fraction)
            if amount > 0:
                services.debit_add(
                    envelope=self.envelope, amount_micro=amount, reference="job", actor=staff
                )

        @precondition(lambda self: self.envelope is not None)
        @rule(whole=st.booleans(), fraction=st.floats(min_value=0.0, max_value=1.0))
        def refund(self, whole: bool, fraction: float) -> None:
            assert self.envelope is not None
            self.envelope.refresh_from_db()
            amount = None if whole else max(1, int(self.envelope.unspent_micro * fraction))
            try:
                with contextlib.suppress(AmountExceedsUnspent, NothingToRefund):
                    services.envelope_refund(
                        envelope=self.envelope, actor=buyer, amount_micro=amount
                    )
            except InvalidAmount:  # less than a cent asked for: refused, nothing moved
                assert amount is not None
                assert amount < MICRO_PER_CENT, amount

        def live_legs(self) -> list[RefundLeg]:
            """This example's accepted, unreleased legs (earlier examples' rows stay in the
            database)."""
            return list(
                RefundLeg.objects.filter(
                    operation__envelope=self.envelope, outcome=LegOutcome.ACCEPTED, released=False
                ).order_by("id")
            )

        @precondition(lambda self: self.envelope is not None and bool(self.live_legs()))
        @rule(data=st.data())
        def provider_fails_a_refund(self, data: Any) -> None:
            legs = self.live_legs()
            leg = data.draw(st.sampled_from(legs))
            sandbox.set_refund_status(leg.provider_refund_id, "failed", "expired_or_canceled_card")
            event = {"type": "refund.failed", "data": {"object": {"id": leg.provider_refund_id}}}
            services.refund_leg_on_provider_event(event=event)
            services.refund_leg_on_provider_event(event=event)  # a second observer releases nothing

        @precondition(lambda self: self.envelope is not None)
        @rule(data=st.data(), inquiry=st.booleans(), part=st.booleans(), twice=st.booleans())
        def chargeback_opens(self, data: Any, inquiry: bool, part: bool, twice: bool) -> None:
            free = [
                f
                for f in FundingLeg.objects.filter(envelope=self.envelope, status="succeeded")
                if f.charge_id not in self.book.disputed()
            ]
            if not free:
                return
            funding = data.draw(st.sampled_from(free))
            cents = None
            if part:
                top = funding.amount_micro // 10_000
                cents = data.draw(st.integers(min_value=1, max_value=top), label="disputed cents")
            self.book.open(funding, cents, inquiry, twice)

        def cases(self, *statuses: str) -> list[Chargeback]:
            return [c for c in self.book.chargebacks.values() if c.status in statuses]

        @precondition(lambda self: bool(self.cases("warning_needs_response")))
        @rule(data=st.data(), twice=st.booleans())
        def inquiry_becomes_a_chargeback(self, data: Any, twice: bool) -> None:
            case = data.draw(st.sampled_from(self.cases("warning_needs_response")))
            self.book.move(case, "needs_response", twice)

        @precondition(
            lambda self: bool(
                self.cases("needs_response", "warning_needs_response", "appeal_needs_response")
            )
        )
        @rule(data=st.data(), outcome=st.sampled_from(["won", "lost"]), twice=st.booleans())
        def dispute_decided(self, data: Any, outcome: str, twice: bool) -> None:
            cases = self.cases("needs_response", "warning_needs_response", "appeal_needs_response")
            self.book.move(data.draw(st.sampled_from(cases)), outcome, twice)

        @precondition(lambda self: any(not c.appealed for c in self.cases("lost")))
        @rule(data=st.data(), twice=st.booleans())
        def lost_dispute_appealed(self, data: Any, twice: bool) -> None:
            case = data.draw(st.sampled_from([c for c in self.cases("lost") if not c.appealed]))
            self.book.appeal(case, twice)

        @invariant()
        def chargebacks_follow_the_model(self) -> None:
            if self.envelope is not None:
                self.book.check(self.envelope)

        @invariant()
        def money_adds_up(self) -> None:
            assert ledger_breaches() == []
            charges = sandbox.state()["charges"]
            for funding in FundingLeg.objects.filter(status="succeeded"):
                assert (
                    charges[funding.charge_id]["amount_refunded"] * 10_000 == funding.refunded_micro
                )

    return Money


@pytest.mark.django_db
def test_random_sequences_keep_the_money_invariant(
    sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    from django.conf import settings as django_settings

    django_settings.STRIPE_API_BASE = sandbox.url
    buyer = User.objects.create_user("hypo", "h@example.com", "pw-hypo-123")
    staff = User.objects.create_user("ops", "o@example.com", "pw-ops-123", is_staff=True)
    machine = build_machine(sandbox, sdk, buyer, staff)
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=12,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
            database=None,
        ),
    )
