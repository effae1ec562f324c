"""A refund's reference at the card network (issue 41 item 9), its edges, against the real sandbox
over HTTP: one leg that cannot be read (another worker has it, it is past the window, Stripe gave
no answer) never stops the others; a claimed leg is left alone while its read is in flight; a
refund is read again by its own age, not by how long its leg waited to be sent; and recording
never takes another refund's reference, follows a refund without card details, or reopens a
settled one."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from envelopes.models import ProviderRead, ReferenceStatus, RefundLeg
from envelopes.services import (
    refund_leg_reference_on_verdict,
    refund_leg_reference_record,
    refund_references_follow_up,
)
from envelopes.services import refund_references as module
from envelopes.services.journal import _provider
from envelopes.services.refund_references import CLAIM_FOR, REFERENCE_WINDOW, next_read_at
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.receipts.conftest import Shop

pytestmark = pytest.mark.django_db

READS = "GET /v1/refunds/{id}"  # the sandbox's request log names routes so


@pytest.fixture
def shop(alice: Api, stripe_at_sandbox: SandboxControl) -> Shop:
    return Shop(alice, stripe_at_sandbox)


def _reads(sandbox: SandboxControl) -> int:
    return int(sandbox.state()["requests"].get(READS, 0))


def _two_pending_legs(shop: Shop, sandbox: SandboxControl) -> tuple[RefundLeg, RefundLeg]:
    """Two refunds of one envelope (two fundings, one refund of both), their references still
    pending, both due now; the first is due first."""
    sandbox.reference_delay(600_000)
    shop.fund(5_000_000)
    shop.top_up(5_000_000)
    shop.refund(10_000_000)
    first, second = RefundLeg.objects.order_by("id")
    runs = [leg.verification_run for leg in (first, second)]
    assert [run.verdict if run else None for run in runs] == ["VERIFIED", "VERIFIED"]
    assert first.refund_reference_status == second.refund_reference_status == "pending"
    due = timezone.now()
    RefundLeg.objects.filter(pk=first.pk).update(refund_reference_next_at=due - timedelta(1))
    RefundLeg.objects.filter(pk=second.pk).update(refund_reference_next_at=due)
    first.refresh_from_db()
    second.refresh_from_db()
    return first, second


def _wait_before_sent(leg: RefundLeg, wait: timedelta) -> None:
    """The leg was reserved `wait` before Stripe made its refund (it waited for room at Stripe)."""
    assert leg.decided_at is not None
    RefundLeg.objects.filter(pk=leg.pk).update(reserved_at=leg.decided_at - wait)
    leg.refresh_from_db()


def test_a_leg_another_worker_holds_does_not_stop_the_others(
    shop: Shop, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _two_pending_legs(shop, sandbox)
    now = timezone.now() + timedelta(minutes=1)
    theirs = now + CLAIM_FOR
    real_due = module.refund_references_due

    def due_then_taken(*, now: datetime, limit: int) -> list[RefundLeg]:
        legs = real_due(now=now, limit=limit)
        # Another worker claims the first leg between this worker's listing and its claim.
        RefundLeg.objects.filter(pk=first.pk).update(refund_reference_next_at=theirs)
        return legs

    monkeypatch.setattr(module, "refund_references_due", due_then_taken)
    before = _reads(sandbox)
    assert refund_references_follow_up(now=now) == 1
    assert _reads(sandbox) == before + 1
    first.refresh_from_db()
    assert first.refund_reference_next_at == theirs  # left to the worker that has it
    assert not ProviderRead.objects.filter(subject=first.public_id).exists()
    assert ProviderRead.objects.filter(purpose="refund_reference", subject=second.public_id)


def test_a_leg_past_the_window_does_not_stop_the_others(
    shop: Shop, sandbox: SandboxControl
) -> None:
    first, second = _two_pending_legs(shop, sandbox)
    assert first.decided_at is not None
    old = first.decided_at - REFERENCE_WINDOW - timedelta(days=1)
    RefundLeg.objects.filter(pk=first.pk).update(decided_at=old, reserved_at=old)
    now = timezone.now() + timedelta(minutes=1)
    before = _reads(sandbox)
    assert refund_references_follow_up(now=now) == 1
    assert _reads(sandbox) == before + 1
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.refund_reference_status, first.refund_reference_next_at) == (
        "not_available",
        None,
    )
    assert second.refund_reference_status == ReferenceStatus.PENDING
    seen = second.refund_reference_seen_at
    assert seen is not None
    assert second.refund_reference_next_at is not None
    assert second.refund_reference_next_at > seen  # read, and followed on
    assert ProviderRead.objects.filter(purpose="refund_reference", subject=second.public_id)


def test_a_read_with_no_answer_is_asked_again_by_the_refunds_age_and_the_others_are_read(
    shop: Shop, sandbox: SandboxControl
) -> None:
    first, second = _two_pending_legs(shop, sandbox)
    _wait_before_sent(first, timedelta(hours=2))
    sandbox.forget(first.provider_refund_id)  # Stripe answers 404 for it
    now = timezone.now() + timedelta(minutes=1)
    assert refund_references_follow_up(now=now) == 2
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.decided_at is not None
    # Asked again after half the refund's age (a minute or so), not half the leg's wait.
    assert first.refund_reference_next_at == next_read_at(started=first.decided_at, now=now)
    assert first.refund_reference_next_at is not None
    assert first.refund_reference_next_at < now + timedelta(minutes=5)
    assert first.refund_reference_status == ReferenceStatus.PENDING
    assert not ProviderRead.objects.filter(subject=first.public_id).exists()
    assert ProviderRead.objects.filter(purpose="refund_reference", subject=second.public_id)


def test_a_pending_reference_is_read_again_by_the_refunds_age_not_the_legs_wait(
    shop: Shop, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(600_000)
    shop.fund(10_000_000)
    shop.refund(2_000_000)
    leg = RefundLeg.objects.get()
    _wait_before_sent(leg, timedelta(hours=2))
    assert refund_references_follow_up(now=timezone.now() + timedelta(minutes=1)) == 1
    leg.refresh_from_db()
    assert leg.refund_reference_status == ReferenceStatus.PENDING
    seen = leg.refund_reference_seen_at
    assert leg.decided_at is not None
    assert seen is not None
    assert leg.refund_reference_next_at == next_read_at(started=leg.decided_at, now=seen)
    assert leg.refund_reference_next_at is not None
    assert leg.refund_reference_next_at < seen + timedelta(minutes=5)


def test_a_claimed_leg_is_left_alone_while_its_read_is_in_flight(
    shop: Shop, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox.reference_delay(600_000)
    shop.fund(10_000_000)
    shop.refund(2_000_000)
    leg = RefundLeg.objects.get()
    now = timezone.now() + timedelta(minutes=1)
    real = _provider()
    seen: dict[str, Any] = {}

    class Provider:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def refund_read(self, refund_id: str, **options: Any) -> Any:
            if not seen:  # what another worker finds while this read is in flight
                seen["next_at"] = RefundLeg.objects.get(pk=leg.pk).refund_reference_next_at
                seen["other_read"] = refund_references_follow_up(now=now)
            return real.refund_read(refund_id, **options)

    provider: Callable[[], Any] = Provider
    monkeypatch.setattr(module, "_provider", provider)
    before = _reads(sandbox)
    assert refund_references_follow_up(now=now) == 1
    assert seen == {"next_at": now + CLAIM_FOR, "other_read": 0}
    assert _reads(sandbox) == before + 1
    # The read is stored as what it was: the refund asked for, about this leg.
    read = ProviderRead.objects.get(purpose="refund_reference", subject=leg.public_id)
    assert read.kind == "refund_leg"
    assert [a.request for a in read.answers.all()] == [
        {"path": f"/v1/refunds/{leg.provider_refund_id}"}
    ]


def test_recording_keeps_to_its_own_refund_and_hands_back_the_leg(
    shop: Shop, sandbox: SandboxControl
) -> None:
    first, second = _two_pending_legs(shop, sandbox)
    now = timezone.now()
    theirs = _provider().refund_read(second.provider_refund_id).require()
    assert theirs["destination_details"]["card"]["reference_status"] == "pending"

    # Another refund's answer is never recorded on this leg; the leg stops being followed.
    got = refund_leg_reference_record(leg=first, refund=theirs, sha256="a" * 64, seen_at=now)
    assert (got.pk, got.refund_reference_next_at) == (first.pk, None)
    stored = RefundLeg.objects.get(pk=first.pk)
    assert stored.refund_reference_next_at is None
    assert stored.refund_reference_sha256 == first.refund_reference_sha256
    assert stored.refund_reference_seen_at == first.refund_reference_seen_at

    # Its own refund without card details: nothing to record, nothing to wait for.
    bare = {k: v for k, v in theirs.items() if k != "destination_details"}
    got = refund_leg_reference_record(leg=second, refund=bare, sha256="b" * 64, seen_at=now)
    assert (got.pk, got.refund_reference_next_at) == (second.pk, None)
    stored = RefundLeg.objects.get(pk=second.pk)
    assert stored.refund_reference_next_at is None
    assert stored.refund_reference_sha256 == second.refund_reference_sha256

    # Its own refund, pending: recorded, and read again by its age.
    got = refund_leg_reference_record(leg=second, refund=theirs, sha256="c" * 64, seen_at=now)
    assert second.decided_at is not None
    assert got.refund_reference_sha256 == "c" * 64
    assert got.refund_reference_next_at == next_read_at(started=second.decided_at, now=now)
    assert RefundLeg.objects.get(pk=second.pk).refund_reference_next_at == (
        got.refund_reference_next_at
    )

    # Settled unavailable: a later pending answer never reopens it, and the leg comes back as is.
    unavailable = copy.deepcopy(theirs)
    unavailable["destination_details"]["card"]["reference_status"] = "unavailable"
    got = refund_leg_reference_record(leg=second, refund=unavailable, sha256="d" * 64, seen_at=now)
    assert (got.refund_reference_status, got.refund_reference_next_at) == ("unavailable", None)
    got = refund_leg_reference_record(leg=second, refund=theirs, sha256="e" * 64, seen_at=now)
    assert (got.pk, got.refund_reference_status, got.refund_reference_sha256) == (
        second.pk,
        "unavailable",
        "d" * 64,
    )
    stored = RefundLeg.objects.get(pk=second.pk)
    assert (stored.refund_reference_status, stored.refund_reference_next_at) == (
        "unavailable",
        None,
    )


def test_a_verdict_for_a_leg_that_is_not_accepted_records_nothing(
    shop: Shop, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(600_000)
    shop.fund(10_000_000)
    shop.refund(2_000_000)
    leg = RefundLeg.objects.get()
    RefundLeg.objects.filter(pk=leg.pk).update(outcome="unknown", refund_reference_next_at=None)
    assert leg.verification_run is not None
    refund_leg_reference_on_verdict(run=leg.verification_run)
    stored = RefundLeg.objects.get(pk=leg.pk)
    assert stored.refund_reference_next_at is None
    assert stored.refund_reference_seen_at == leg.refund_reference_seen_at
