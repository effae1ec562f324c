"""A refund's reference at the card network (its ARN, issue 41 item 9), against the real sandbox
over HTTP: the verified readback records it on the leg, the follow-up reads it again until Stripe
settles it (bounded), and a `refund_reference` receipt names the refund and verifies."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from envelopes.models import ProviderRead, ReferenceStatus, RefundLeg
from envelopes.services import refund_references_follow_up
from envelopes.services.refund_references import (
    FIRST_READ_AFTER,
    MAX_SPACING,
    REFERENCE_WINDOW,
    next_read_at,
)
from receipts.models import Receipt
from receipts.selectors import receipt_verify
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.receipts.conftest import Shop, refund_receipt
from verification.models import Observation

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop(alice: Api, stripe_at_sandbox: SandboxControl) -> Shop:
    return Shop(alice, stripe_at_sandbox)


def test_the_verified_readback_records_an_available_reference_and_its_receipt(
    shop: Shop, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(0)
    shop.fund(10_000_000)
    shop.refund(3_000_000)
    leg = RefundLeg.objects.get()
    assert leg.verification_run.verdict == "VERIFIED"
    assert leg.refund_reference_status == ReferenceStatus.AVAILABLE
    assert re.fullmatch(r"\d{23}", leg.refund_reference)
    assert leg.refund_reference_type == "acquirer_reference_number"
    deciding = Observation.objects.get(
        attempt_id=leg.verification_run.decided_by_id, channel="refund_readback"
    )
    assert leg.refund_reference_sha256 == deciding.digest
    assert leg.refund_reference_next_at is None  # settled: nothing to follow

    refund = refund_receipt(leg)
    card = refund.body["detail"]["destination_details"]["card"]
    assert (card["reference"], card["reference_status"]) == (leg.refund_reference, "available")
    reference = Receipt.objects.get(kind="refund_reference")
    assert (reference.parent, reference.provider_object_id) == (refund, leg.provider_refund_id)
    assert reference.body["detail"]["destination_details"]["card"]["reference"] == (
        leg.refund_reference
    )
    assert receipt_verify(reference).ok


def test_a_reference_that_comes_after_the_receipt_gets_a_receipt_of_its_own(
    shop: Shop, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(5000)
    shop.fund(10_000_000)
    shop.refund(2_000_000)
    leg = RefundLeg.objects.get()
    assert leg.refund_reference_status == ReferenceStatus.PENDING
    assert leg.refund_reference == ""
    assert leg.refund_reference_next_at is not None
    refund = refund_receipt(leg)
    signed = (refund.id, refund.canonical)
    assert refund.body["detail"]["destination_details"]["card"]["reference_status"] == "pending"
    assert not Receipt.objects.filter(kind="refund_reference").exists()

    # Not due yet: nothing read.
    assert refund_references_follow_up(now=timezone.now()) == 0
    sandbox.advance_clock(6)  # the network assigns it
    assert refund_references_follow_up(now=timezone.now() + timedelta(minutes=1)) == 1
    leg.refresh_from_db()
    assert leg.refund_reference_status == ReferenceStatus.AVAILABLE
    assert re.fullmatch(r"\d{23}", leg.refund_reference)
    assert leg.refund_reference_next_at is None
    read = ProviderRead.objects.get(purpose="refund_reference", subject=leg.public_id)
    assert read.sha256 == leg.refund_reference_sha256
    assert read.shows["reference"]["reference"] == leg.refund_reference

    reference = Receipt.objects.get(kind="refund_reference")
    assert reference.parent_id == refund.id
    assert receipt_verify(reference).ok
    assert reference.body["detail"]["read_sha256"] == read.sha256
    refund = Receipt.objects.get(pk=refund.pk)
    assert (refund.id, refund.canonical) == signed  # the refund's receipt never re-signed
    # A second follow-up reads nothing more, writes nothing more.
    assert refund_references_follow_up(now=timezone.now() + timedelta(days=1)) == 0
    assert Receipt.objects.filter(kind="refund_reference").count() == 1


def test_a_refund_that_fails_first_never_gets_a_reference(
    shop: Shop, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(600_000)
    shop.fund(10_000_000)
    shop.refund(2_000_000)
    leg = RefundLeg.objects.get()
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "expired_or_canceled_card")
    assert refund_references_follow_up(now=timezone.now() + timedelta(minutes=1)) == 1
    leg.refresh_from_db()
    assert (leg.refund_reference_status, leg.refund_reference) == ("unavailable", "")
    assert leg.refund_reference_next_at is None
    assert not Receipt.objects.filter(kind="refund_reference").exists()


def test_past_the_window_vouch_stops_asking_and_says_not_available(
    shop: Shop, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(600_000)
    shop.fund(10_000_000)
    shop.refund(2_000_000)
    # The sandbox's request log names the route as the SDK does; the verification read it once.
    requests_before = sandbox.state()["requests"].get("GET /v1/refunds/{id}", 0)
    assert requests_before >= 1
    later = timezone.now() + REFERENCE_WINDOW + timedelta(minutes=1)
    assert refund_references_follow_up(now=later) == 0
    leg = RefundLeg.objects.get()
    assert (leg.refund_reference_status, leg.refund_reference_next_at) == ("not_available", None)
    assert sandbox.state()["requests"].get("GET /v1/refunds/{id}", 0) == requests_before


def test_reads_space_out_as_a_refund_ages_and_stop_at_the_window() -> None:
    start = timezone.now()
    assert next_read_at(started=start, now=start) == start + FIRST_READ_AFTER
    hour = start + timedelta(hours=1)
    assert next_read_at(started=start, now=hour) == hour + timedelta(minutes=30)
    day = start + timedelta(days=2)
    assert next_read_at(started=start, now=day) == day + MAX_SPACING
    edge = start + REFERENCE_WINDOW - timedelta(hours=1)
    assert next_read_at(started=start, now=edge) == start + REFERENCE_WINDOW
    assert next_read_at(started=start, now=start + REFERENCE_WINDOW) is None
    # Over the whole window, a bounded number of reads.
    reads, now = 0, start
    while (after := next_read_at(started=start, now=now)) is not None and reads < 1000:
        reads, now = reads + 1, after
    assert reads <= 110  # four a day after the first day, a dozen in the first
