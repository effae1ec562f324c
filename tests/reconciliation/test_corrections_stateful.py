"""Issue 24, acceptance 2: a hypothesis state machine drives random refunds, refunds and top-ups
whose answers are all lost, Dashboard refunds, provider-side changes (a refund failed, canceled,
or succeeded later; its webhook delivered or lost), the passing of the provider's key life, the
resume job, proposals and approvals of every kind of adjustment on every leg (the provider
changing between the two), and reconciliation runs. After every step it checks:

- `check_ledger` is clean (stored balances = journal = legs);
- per charge, the provider's refunded amount equals the ledger's: every refund Vouch counts as
  refunded (an accepted leg, a recorded foreign refund) is live at the provider, unless the
  provider's change has not reached Vouch yet (its webhook lost, no run since); every live refund
  at the provider is counted, held in an open leg's reservation, or foreign and not recorded yet
  (and then, after a run, an open `refund_foreign` discrepancy names it);
- no money is counted twice (one provider refund behind at most one counting row; the funding
  leg's refunded amount is exactly the sum of what it counts);
- a funding leg is never abandoned while the provider holds its succeeded charge, and a charge
  carrying Vouch's funding metadata that no leg records is named by a `funding_unrecorded`
  discrepancy once a run has looked;
- every applied adjustment that moves money cites the provider reads made when it was proposed
  and when it was approved, each answer's bytes matching their SHA-256, and its journal entry
  cites the approval's read;
- chargebacks (issue 37, SPEC §18) — opened on a funded charge (in full or in part), as an inquiry
  later escalated, won, lost, lost then won on appeal, each event seen once or twice, with debits
  and refunds around them: funded = debited + refunded + reserved + unspent + held + charged back;
  the envelope's, each funding leg's and each dispute's held and charged-back money are what a
  model of the rule says (the disputed amount Stripe withdrew, bounded by what the charge still
  had unspent, the rest exposure; back to unspent when won; charged back when lost); the ledger's
  withdrawn and reinstated amounts are Stripe's; no refund made after a hold takes that charge's
  money while it is held or charged back, and a debit or refund of more than is unspent (held
  money) is refused."""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import stripe
import time_machine
from django.utils import timezone
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from accounts.models import User
from core.exceptions import VouchError
from disputes.services import dispute_on_provider_event
from envelopes import services
from envelopes.adjustments import adjustment_approve, adjustment_kinds_for, adjustment_propose
from envelopes.exceptions import AmountExceedsUnspent
from envelopes.models import (
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    DisputeFunds,
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
    LegOutcome,
    RefundLeg,
)
from envelopes.selectors import ledger_breaches
from reconciliation.engine import ReconciliationIncomplete, reconcile
from reconciliation.models import Discrepancy
from reconciliation.runs import RunInProgress
from stripe_sandbox.client import SandboxControl
from stripe_sandbox.resources import REFUND_TRANSITIONS
from tests.envelopes.people import person

pytestmark = pytest.mark.django_db

LIVE = ("pending", "requires_action", "succeeded")
KEY_LIFE = timedelta(hours=25)  # past the provider's 24 h key life
SEEN: Counter[str] = Counter()  # what the machine did, printed at the end (-s)
DOLLARS = st.integers(min_value=1, max_value=40).map(lambda d: d * 1_000_000)


# --- chargebacks: Stripe's disputes, and a model of what the ledger must make of them ----------

EVENT_NUMBERS = itertools.count(1)


@dataclass
class Chargeback:
    """One dispute opened by the machine, and what the ledger must show of it (micro-dollars)."""

    dispute: str
    charge: str
    leg: int  # the funding leg's pk
    status: str  # Stripe's status, as last moved
    withdrawn: int = 0
    reinstated: int = 0
    held: int = 0
    charged_back: int = 0
    exposure: int = 0
    legs_before_hold: int = 0  # the last refund leg's id when the money was held
    appealed: bool = False


class DisputeBook:
    """Opens and moves disputes at the sandbox, hands their events to Vouch as delivered webhooks
    are (once, or twice: a second observer), and keeps the model the invariants compare with."""

    def __init__(self, sandbox: SandboxControl, sdk: stripe.StripeClient) -> None:
        self.sandbox, self.sdk = sandbox, sdk
        self.chargebacks: dict[str, Chargeback] = {}

    def deliver(self, dispute_id: str, kinds: list[str], twice: bool) -> None:
        for kind in kinds:
            event = {
                "id": f"evt_stateful_{next(EVENT_NUMBERS)}",
                "type": kind,
                "data": {"object": {"id": dispute_id}},
            }
            for _ in range(2 if twice else 1):
                dispute_on_provider_event(event=event)

    def moved_at_stripe(self, dispute_id: str) -> tuple[int, int]:
        """What Stripe's balance transactions for the dispute withdrew and reinstated, in micro."""
        dispute = self.sdk.v1.disputes.retrieve(dispute_id)
        withdrawn = reinstated = 0
        for txn in dispute.balance_transactions:
            if txn.reporting_category == "dispute":
                withdrawn -= txn.amount
            elif txn.reporting_category == "dispute_reversal":
                reinstated += txn.amount
        return withdrawn * 10_000, reinstated * 10_000

    def disputed(self) -> set[str]:
        return {c.charge for c in self.chargebacks.values()}

    def _ledger_before(self, leg_pk: int) -> tuple[int, int, int]:
        leg = FundingLeg.objects.get(pk=leg_pk)
        unspent = Envelope.objects.get(pk=leg.envelope_id).unspent_micro
        last = RefundLeg.objects.order_by("-id").values_list("id", flat=True).first() or 0
        return leg.capacity_micro, unspent, last

    def _follow(self, case: Chargeback, before: tuple[int, int, int]) -> None:
        """The model after Stripe moved money: SPEC §18's rule applied to the ledger as it was."""
        withdrawn, reinstated = self.moved_at_stripe(case.dispute)
        capacity, unspent, last_leg = before
        if withdrawn and not case.withdrawn:  # the hold: what the charge still had unspent
            case.withdrawn = withdrawn
            case.held = max(0, min(withdrawn, capacity, unspent))
            case.exposure = withdrawn - case.held
            case.legs_before_hold = last_leg
        if case.status == "lost" and case.held and not case.reinstated:
            case.charged_back, case.held = case.charged_back + case.held, 0
        if reinstated and not case.reinstated:
            case.reinstated = reinstated
            from_held = min(reinstated, case.held)
            from_charged_back = min(reinstated - from_held, case.charged_back)
            case.exposure = max(0, case.exposure - (reinstated - from_held - from_charged_back))
            case.held -= from_held
            case.charged_back -= from_charged_back

    def open(self, leg: FundingLeg, cents: int | None, inquiry: bool, twice: bool) -> Chargeback:
        before = self._ledger_before(leg.pk)
        options = {"status": "warning_needs_response"} if inquiry else {}
        opened = self.sandbox.open_dispute(leg.charge_id, "fraudulent", cents, **options)
        case = Chargeback(str(opened["id"]), leg.charge_id, leg.pk, str(opened["status"]))
        self.chargebacks[case.dispute] = case
        kinds = ["charge.dispute.created"]
        if not inquiry:
            kinds.append("charge.dispute.funds_withdrawn")
        self.deliver(case.dispute, kinds, twice)
        self._follow(case, before)
        return case

    def move(self, case: Chargeback, status: str, twice: bool) -> None:
        before = self._ledger_before(case.leg)
        self.sandbox.set_dispute_status(case.dispute, status)
        case.status = status
        kinds = [
            "charge.dispute.closed" if status in ("won", "lost") else "charge.dispute.updated",
            "charge.dispute.funds_reinstated" if status == "won" else "charge.dispute.updated",
        ]
        self.deliver(case.dispute, kinds, twice)
        self._follow(case, before)

    def appeal(self, case: Chargeback, twice: bool) -> None:
        self.sandbox.appeal_dispute(case.dispute)
        case.status, case.appealed = "appeal_needs_response", True
        self.deliver(case.dispute, ["charge.dispute.updated"], twice)

    def check(self, envelope: Envelope) -> None:
        """What must hold of the envelope's disputed money after every step."""
        envelope.refresh_from_db()
        assert envelope.total_funded_micro == (
            envelope.total_debited_micro
            + envelope.total_refunded_micro
            + envelope.reserved_micro
            + envelope.unspent_micro
            + envelope.held_micro
            + envelope.charged_back_micro
        )
        mine = [
            c
            for c in self.chargebacks.values()
            if FundingLeg.objects.filter(pk=c.leg, envelope=envelope).exists()
        ]
        assert (envelope.held_micro, envelope.charged_back_micro) == (
            sum(c.held for c in mine),
            sum(c.charged_back for c in mine),
        ), [vars(c) for c in mine]
        for case in mine:
            leg = FundingLeg.objects.get(pk=case.leg)
            assert (leg.held_micro, leg.charged_back_micro) == (case.held, case.charged_back), vars(
                case
            )
            funds = DisputeFunds.objects.filter(provider_dispute_id=case.dispute).first()
            if not case.withdrawn:  # an inquiry (or nothing left to withdraw): nothing held
                assert funds is None, vars(case)
                continue
            assert funds is not None, vars(case)
            assert (
                funds.withdrawn_micro,
                funds.reinstated_micro,
                funds.held_micro,
                funds.charged_back_micro,
                funds.exposure_micro,
            ) == (
                case.withdrawn,
                case.reinstated,
                case.held,
                case.charged_back,
                case.exposure,
            ), vars(case)
            # The ledger follows Stripe's balance transactions.
            assert self.moved_at_stripe(case.dispute) == (case.withdrawn, case.reinstated)
            if case.exposure:
                assert funds.escalation_id is not None, vars(case)
            if not case.reinstated:
                # Held or charged back: no refund made since took any of this charge's money.
                taken = RefundLeg.objects.filter(
                    funding_leg_id=case.leg,
                    id__gt=case.legs_before_hold,
                    outcome=LegOutcome.ACCEPTED,
                )
                assert not taken.exists(), (vars(case), list(taken.values("public_id")))


def build_machine(
    sandbox: SandboxControl, sdk: stripe.StripeClient, buyer: User, people: tuple[User, User]
) -> type[RuleBasedStateMachine]:
    proposer, approver = people

    class Corrections(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.envelope: Envelope | None = None
            self.travels: list[Any] = []
            self.offset = timedelta(0)
            # Provider refunds whose change Vouch may not know yet (webhook lost, no run since).
            self.stale: set[str] = set()
            self.dirty = True  # something changed since the last run
            # Dashboard refunds made since the last completed run.
            self.unseen_foreign: set[str] = set()
            self.book = DisputeBook(sandbox, sdk)  # the chargebacks opened, and their model

        def teardown(self) -> None:
            sandbox.clear_faults()
            for travel in reversed(self.travels):
                travel.stop()

        # --- money in and out ---------------------------------------------------------------

        @initialize(amount=DOLLARS)
        def fund(self, amount: int) -> None:
            sandbox.clear_faults()
            self.envelope = services.envelope_create(
                owner=buyer, amount_micro=amount + 10_000_000, payment_method="pm_card_visa"
            ).envelope

        def _fresh(self) -> Envelope:
            assert self.envelope is not None
            self.envelope.refresh_from_db()
            return self.envelope

        @rule(amount=DOLLARS, lost=st.booleans())
        def top_up(self, amount: int, lost: bool) -> None:
            SEEN[f"top-up (answers lost: {lost})"] += 1
            self.dirty = True
            envelope = self._fresh()
            if envelope.total_funded_micro + amount > 1_000_000_000:
                return
            if lost:  # charged at the provider, every answer lost
                sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
                sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
            try:
                services.envelope_top_up(
                    envelope=envelope, amount_micro=amount, payment_method="pm_card_visa"
                )
            finally:
                sandbox.clear_faults()

        @rule(fraction=st.integers(min_value=1, max_value=100), lost=st.booleans())
        def refund(self, fraction: int, lost: bool) -> None:
            SEEN[f"refund (answers lost: {lost})"] += 1
            self.dirty = True
            envelope = self._fresh()
            amount = envelope.unspent_micro * fraction // 100 // 10_000 * 10_000
            if amount <= 0:
                return
            if lost:  # applied at the provider, every answer lost: the leg stays unknown
                sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
                sandbox.add_fault("/v1/refunds", "server_error", method="POST")
            try:
                with contextlib.suppress(VouchError):
                    services.envelope_refund(envelope=envelope, actor=buyer, amount_micro=amount)
            finally:
                sandbox.clear_faults()

        def _charges(self) -> list[FundingLeg]:
            return list(
                FundingLeg.objects.filter(
                    envelope=self.envelope, status=FundingStatus.SUCCEEDED
                ).order_by("id")
            )

        @rule(data=st.data())
        def dashboard_refund(self, data: Any) -> None:
            """Someone refunds part of a charge in the Stripe Dashboard (no Vouch metadata)."""
            funding = data.draw(st.sampled_from(self._charges()))
            charge = sdk.v1.charges.retrieve(funding.charge_id)
            left = charge.amount - charge.amount_refunded
            if left < 100:
                return
            cents = data.draw(st.integers(min_value=100, max_value=min(left, 1_000)))
            try:
                refund = sdk.v1.refunds.create(
                    params={"charge": funding.charge_id, "amount": cents}
                )
            except stripe.InvalidRequestError as exc:
                # Stripe refuses a refund of a chargeback's charge, the Dashboard's too.
                if exc.code != "charge_disputed" or funding.charge_id not in self.book.disputed():
                    raise
                SEEN["dashboard refund refused: charge_disputed"] += 1
                return
            SEEN["dashboard refund"] += 1
            self.dirty = True
            self.unseen_foreign.add(str(refund.id))

        @rule(
            data=st.data(), status=st.sampled_from(["failed", "canceled", "pending", "succeeded"])
        )
        def provider_changes_a_refund(self, data: Any, status: str) -> None:
            refunds = self._provider_refunds()
            if not refunds:
                return
            refund = data.draw(st.sampled_from(refunds))
            if status not in REFUND_TRANSITIONS[refund["status"]]:
                return  # the provider never moves a refund so
            reason = "expired_or_canceled_card" if status == "failed" else None
            sandbox.set_refund_status(str(refund["id"]), status, reason)
            SEEN[f"provider: refund {refund['status']} -> {status}"] += 1
            self.dirty = True
            if data.draw(st.booleans(), label="webhook delivered"):
                kind = "refund.failed" if status == "failed" else "refund.updated"
                event = {"type": kind, "data": {"object": {"id": refund["id"]}}}
                services.refund_leg_on_provider_event(event=event)
            else:
                self.stale.add(str(refund["id"]))

        @rule(percent=st.integers(min_value=1, max_value=130))
        def debit(self, percent: int) -> None:
            """Work paid for from the envelope: never with held or charged-back money."""
            envelope = self._fresh()
            amount = (envelope.unspent_micro + envelope.held_micro) * percent // 100
            if amount <= 0:
                return
            self.dirty = True
            try:
                services.debit_add(
                    envelope=envelope, amount_micro=amount, reference="stateful", actor=proposer
                )
            except AmountExceedsUnspent:
                assert amount > envelope.unspent_micro, (amount, envelope.unspent_micro)
                SEEN["debit refused: more than unspent"] += 1
            else:
                assert amount <= envelope.unspent_micro, (amount, envelope.unspent_micro)
                SEEN["debit"] += 1

        @precondition(lambda self: bool(self.book.chargebacks))
        @rule(data=st.data())
        def refund_of_held_money(self, data: Any) -> None:
            """A buyer asks for more than is unspent while a chargeback holds money: refused,
            and nothing reaches the provider."""
            envelope = self._fresh()
            if not envelope.held_micro:
                return
            extra = data.draw(st.integers(min_value=1, max_value=envelope.held_micro // 10_000))
            refunds = len(self._provider_refunds())
            try:
                services.envelope_refund(
                    envelope=envelope,
                    actor=buyer,
                    amount_micro=envelope.unspent_micro + extra * 10_000,
                )
            except AmountExceedsUnspent:
                SEEN["refund of held money refused"] += 1
            else:  # pragma: no cover - the failure this rule looks for
                raise AssertionError("a refund took money a chargeback holds")
            assert len(self._provider_refunds()) == refunds

        # --- chargebacks (issue 37, SPEC §18) -------------------------------------------------

        @rule(data=st.data(), inquiry=st.booleans(), part=st.booleans(), twice=st.booleans())
        def chargeback_opens(self, data: Any, inquiry: bool, part: bool, twice: bool) -> None:
            """The buyer's bank disputes a charge (a charge has at most one dispute): in full or
            in part, as a chargeback (Stripe withdraws the money) or an inquiry (nothing)."""
            free = [f for f in self._charges() if f.charge_id not in self.book.disputed()]
            if not free:
                return
            funding = data.draw(st.sampled_from(free))
            cents = None
            if part:
                top = funding.amount_micro // 10_000
                cents = data.draw(st.integers(min_value=1, max_value=top), label="disputed cents")
            case = self.book.open(funding, cents, inquiry, twice)
            self.dirty = True
            SEEN[
                "inquiry opened"
                if inquiry
                else f"chargeback opened (exposure: {bool(case.exposure)})"
            ] += 1

        def _disputes(self, *statuses: str) -> list[Chargeback]:
            return [c for c in self.book.chargebacks.values() if c.status in statuses]

        @precondition(lambda self: bool(self._disputes("warning_needs_response")))
        @rule(data=st.data(), twice=st.booleans())
        def inquiry_becomes_a_chargeback(self, data: Any, twice: bool) -> None:
            case = data.draw(st.sampled_from(self._disputes("warning_needs_response")))
            self.book.move(case, "needs_response", twice)
            self.dirty = True
            SEEN[f"inquiry escalated (withdrawn: {bool(case.withdrawn)})"] += 1

        @precondition(
            lambda self: bool(
                self._disputes("needs_response", "warning_needs_response", "appeal_needs_response")
            )
        )
        @rule(data=st.data(), outcome=st.sampled_from(["won", "lost"]), twice=st.booleans())
        def dispute_decided(self, data: Any, outcome: str, twice: bool) -> None:
            cases = self._disputes(
                "needs_response", "warning_needs_response", "appeal_needs_response"
            )
            case = data.draw(st.sampled_from(cases))
            was = case.status
            self.book.move(case, outcome, twice)
            self.dirty = True
            SEEN[f"dispute {was} -> {outcome}"] += 1

        @precondition(lambda self: any(not c.appealed for c in self._disputes("lost")))
        @rule(data=st.data(), twice=st.booleans())
        def lost_dispute_appealed(self, data: Any, twice: bool) -> None:
            case = data.draw(st.sampled_from([c for c in self._disputes("lost") if not c.appealed]))
            self.book.appeal(case, twice)
            self.dirty = True
            SEEN["lost dispute appealed"] += 1

        # --- time and jobs --------------------------------------------------------------------

        @precondition(lambda self: len(self.travels) < 3)
        @rule()
        def a_day_passes(self) -> None:
            """Past the provider's key life, for Vouch and the in-process sandbox alike."""
            self.offset += KEY_LIFE
            SEEN["a day passes"] += 1
            self.dirty = True
            travel = time_machine.travel(timezone.now() + KEY_LIFE, tick=True)
            travel.start()
            self.travels.append(travel)

        @rule(worker_up=st.integers(min_value=0, max_value=3))
        def resume_job(self, worker_up: int) -> None:
            """The resume job, whose worker is down three times in four: people meet the legs
            it has not resumed (the issue's own cases)."""
            if worker_up:
                return
            SEEN["resume job"] += 1
            self.dirty = True
            services.stranded_resume(older_than_s=60)

        @precondition(lambda self: self.dirty)
        @rule()
        def reconciliation_run(self) -> None:
            try:
                reconcile(kind="sweep")
            except (RunInProgress, ReconciliationIncomplete) as exc:  # pragma: no cover
                raise AssertionError(f"the run did not complete: {exc}") from exc
            SEEN["reconciliation run"] += 1
            self.dirty = False
            self.stale.clear()
            self.unseen_foreign.clear()

        # --- people ---------------------------------------------------------------------------

        @rule(data=st.data(), change_between=st.booleans())
        def propose_and_approve(self, data: Any, change_between: bool) -> None:
            subjects: list[tuple[RefundLeg | None, FundingLeg | None]] = [
                (leg, None) for leg in RefundLeg.objects.filter(operation__envelope=self.envelope)
            ] + [(None, f) for f in FundingLeg.objects.filter(envelope=self.envelope)]
            # Only the legs some correction fits now (inside the key's life, none does).
            fitting = [
                (refund_leg, funding_leg, kinds)
                for refund_leg, funding_leg in subjects
                if (kinds := adjustment_kinds_for(refund_leg=refund_leg, funding_leg=funding_leg))
            ]
            if not fitting:
                return
            # The legs stuck or accepted first: every funding leg offers a foreign refund.
            rare = [f for f in fitting if set(f[2]) - {AdjustmentKind.FOREIGN_REFUND, "confirm"}]
            if rare and data.draw(st.booleans(), label="a stuck or accepted leg"):
                fitting = rare
            refund_leg, funding_leg, kinds = data.draw(st.sampled_from(fitting))
            moving = [k for k in kinds if k != AdjustmentKind.CONFIRM]
            kind = data.draw(st.sampled_from(moving or kinds))
            SEEN[f"proposing {kind}"] += 1
            self.dirty = True
            named = ""
            if kind in (AdjustmentKind.LEG_ACCEPT, AdjustmentKind.FOREIGN_REFUND):
                charge = (refund_leg.funding_leg if refund_leg else funding_leg).charge_id  # type: ignore[union-attr]
                ids = [str(r["id"]) for r in self._provider_refunds() if _charge(r) == charge]
                if not ids:
                    return
                named = data.draw(st.sampled_from(ids))
            elif kind == AdjustmentKind.FUNDING_ACCEPT:
                assert funding_leg is not None
                found = sdk.v1.payment_intents.search(
                    params={"query": f"metadata['vouch_funding']:'{funding_leg.public_id}'"}
                )
                ids = [str(intent.id) for intent in found.data]
                if not ids:
                    return
                named = data.draw(st.sampled_from(ids))
            try:
                adjustment = adjustment_propose(
                    actor=proposer,
                    kind=kind,
                    reason="stateful test",
                    refund_leg=refund_leg,
                    funding_leg=funding_leg if refund_leg is None else None,
                    provider_object_id=named,
                )
            except VouchError as exc:
                SEEN[f"proposal refused: {kind} {exc.code}"] += 1
                return  # refused: the provider contradicts it, or it does not fit
            if change_between:
                self.provider_changes_a_refund(data, "failed")  # type: ignore[call-arg]
            try:
                adjustment_approve(
                    adjustment=adjustment,
                    actor=approver,
                    confirmed_amount_micro=adjustment.amount_micro,
                )
            except VouchError as exc:
                SEEN[f"approval refused: {kind} {exc.code}"] += 1
            else:
                SEEN[f"applied: {kind}"] += 1

        # --- what must hold after every step -----------------------------------------------------

        def _provider_refunds(self) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for funding in FundingLeg.objects.filter(envelope=self.envelope).exclude(charge_id=""):
                page = sdk.v1.refunds.list(params={"charge": funding.charge_id, "limit": 100})
                out.extend(r.to_dict() for r in page.data)
            return out

        @invariant()
        def ledger_is_clean(self) -> None:
            if self.envelope is None:
                return
            assert ledger_breaches() == []

        @invariant()
        def chargebacks_follow_the_model(self) -> None:
            if self.envelope is None:
                return
            self.book.check(self.envelope)

        @invariant()
        def provider_and_ledger_agree_per_charge(self) -> None:
            if self.envelope is None:
                return
            refunds = {str(r["id"]): r for r in self._provider_refunds()}
            counted: dict[str, tuple[str, int]] = {}  # provider refund id -> (who, micro)

            def count(refund_id: str, who: str, micro: int) -> None:
                assert refund_id not in counted, (
                    f"{refund_id} counted twice: {counted[refund_id]}, {who}"
                )
                counted[refund_id] = (who, micro)

            legs = RefundLeg.objects.filter(operation__envelope=self.envelope)
            for leg in legs.filter(outcome=LegOutcome.ACCEPTED, released=False):
                count(leg.provider_refund_id, leg.public_id, leg.amount_micro)
            foreign = Adjustment.objects.filter(
                envelope=self.envelope,
                kind=AdjustmentKind.FOREIGN_REFUND,
                status=AdjustmentStatus.APPLIED,
                released_at__isnull=True,
            )
            for adjustment in foreign:
                count(adjustment.provider_object_id, adjustment.public_id, adjustment.amount_micro)
            open_legs = {
                leg.public_id
                for leg in legs.filter(outcome__in=(LegOutcome.RESERVED, LegOutcome.UNKNOWN))
            }
            for funding in FundingLeg.objects.filter(envelope=self.envelope):
                mine = {
                    rid: micro
                    for rid, (_, micro) in counted.items()
                    if rid in refunds and _charge(refunds[rid]) == funding.charge_id
                }
                # no money counted twice: the leg's refunded amount is what it counts
                assert funding.refunded_micro == sum(mine.values()), funding.public_id
            for refund_id, (who, _) in counted.items():
                refund = refunds.get(refund_id)
                assert refund is not None, f"{who} counts {refund_id}, which the provider lacks"
                if refund_id not in self.stale:
                    assert refund["status"] in LIVE, (
                        f"{who} counts {refund_id} as refunded; the provider shows "
                        f"{refund['status']}"
                    )
            for refund_id, refund in refunds.items():
                if refund["status"] not in LIVE or refund_id in counted:
                    continue
                named = (refund.get("metadata") or {}).get("vouch_leg")
                if named:
                    assert named in open_legs, (
                        f"live refund {refund_id} of leg {named} is neither counted nor held"
                    )
                elif refund_id not in self.unseen_foreign:
                    assert (
                        Discrepancy.objects.unresolved()
                        .filter(code="refund_foreign", subject_id=refund_id)
                        .exists()
                    ), f"foreign refund {refund_id} is neither recorded nor open"

        @invariant()
        def no_charge_is_lost(self) -> None:
            """A funding leg is abandoned only when the provider holds no succeeded charge for it
            (a pending one waits for the resume job, which finds it by Vouch's metadata)."""
            if self.envelope is None:
                return
            for funding in FundingLeg.objects.filter(
                envelope=self.envelope, status=FundingStatus.ABANDONED
            ):
                found = sdk.v1.payment_intents.search(
                    params={"query": f"metadata['vouch_funding']:'{funding.public_id}'"}
                )
                charged = [str(i.id) for i in found.data if i.status == "succeeded"]
                assert not charged, f"{funding.public_id} abandoned; the provider charged {charged}"

        @invariant()
        def every_adjustment_cites_the_provider(self) -> None:
            if self.envelope is None:
                return
            applied = Adjustment.objects.filter(
                envelope=self.envelope, status=AdjustmentStatus.APPLIED
            ).exclude(kind=AdjustmentKind.CONFIRM)
            for adjustment in applied:
                for read in (adjustment.proposal_read, adjustment.approval_read):
                    assert read is not None, (
                        f"{adjustment.public_id} ({adjustment.kind}) cites no read"
                    )
                    answers = list(read.answers.all())
                    assert answers, read.public_id
                    assert all(answer.sha256_matches() for answer in answers)
                entry = JournalEntry.objects.get(
                    adjustment=adjustment, kind=JournalEntry.Kind.ADJUST
                )
                assert entry.provider_read_id == adjustment.approval_read_id

    return Corrections


def _charge(refund: dict[str, Any]) -> str:
    charge = refund.get("charge")
    return str((charge.get("id") if isinstance(charge, dict) else charge) or "")


def test_random_corrections_keep_the_ledger_and_the_provider_in_agreement(
    sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    buyer = User.objects.create_user("stateful", "s@example.com", "pw-stateful-1")
    from accounts.services import email_address_verify

    email_address_verify(user=buyer)
    people = (
        person("pia", "envelopes.add_adjustment", "verification.resolve_escalation"),
        person("aron", "reconciliation.approve_adjustment", "verification.resolve_escalation"),
    )
    machine = build_machine(sandbox, sdk, buyer, people)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=12,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            database=None,
            # Each step talks to the sandbox over HTTP: shrinking a failure would take many
            # minutes. The failing sequence is printed as it was drawn.
            phases=(Phase.explicit, Phase.reuse, Phase.generate),
        ),
    )
    print("\n".join(f"{n:4} {what}" for what, n in sorted(SEEN.items())))
