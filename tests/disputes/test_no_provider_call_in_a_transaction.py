"""STYLE §3 for disputes: recording a dispute (dispute.read), setting it to be submitted manually
(on the provider's event and on a staff entry), filing (dispute.file), resuming a filing and the
filing's readback call the provider outside any transaction. A spy on the adapter's
single request path records whether a transaction was open at each call."""

from typing import Any

import pytest

from core import db
from disputes import services
from disputes.services import filings_resume
from disputes.services.filing import _reserve_filing
from providers.stripe_provider import StripeProvider
from tests.drivers.api import Api
from tests.drivers.disputes import (
    CLERK,
    Ops,
    World,
    admit_file,
    contest_ready,
    current,
    pdf,
    staff_user,
)
from tests.helpers import settle_runs


@pytest.mark.django_db(transaction=True)
def test_no_dispute_flow_calls_the_provider_inside_a_transaction(
    world: World, ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, bool]] = []
    real_call = StripeProvider._call

    def spy(self: StripeProvider, request: Any, **kwargs: Any) -> Any:
        calls.append((str(kwargs.get("idempotency_key")), db.in_transaction()))
        return real_call(self, request, **kwargs)

    monkeypatch.setattr(StripeProvider, "_call", spy)
    packet = contest_ready(world, ops)  # payment, charge readback, dispute.read
    packet = services.packet_approve(
        packet=packet, actor=ops.approver, confirmed_digest=packet.digest
    )
    key = services.filing_key_proposal(packet)
    _reserve_filing(packet=packet, actor=ops.filer, confirmed_digest=packet.digest, key=key)
    filings_resume(older_than_s=-1)  # dispute.file, as after a crash
    services.packet_file(  # dispute.file again: the same key, a replay
        packet=packet, actor=ops.filer, confirmed_digest=packet.digest, idempotency_key=key
    )
    settle_runs()  # dispute.read by the stripe.dispute.filed readback
    # A staff entry of a dispute the provider holds: intended_submission_method=manual.
    world.fund()
    opened = world.sandbox.open_dispute(world.charge_id, reason="fraudulent")
    entered = Api(staff_user("clerk", *CLERK)).post(
        "/api/v1/disputes",
        {
            "dispute_id": opened["id"],
            "charge_id": world.charge_id,
            "amount_micro": 10_000_000,
            "reason": "fraudulent",
        },
    )
    assert entered.status_code == 201, entered.content
    filing_calls = [inside for k, inside in calls if k == key]
    assert len(filing_calls) == 2
    manual_calls = [k for k, _ in calls if k.endswith(":manual")]
    assert len(manual_calls) == 2  # the event's dispute and the entered one
    assert len(calls) >= 6
    assert not any(inside for _, inside in calls), calls


@pytest.mark.django_db(transaction=True)
def test_a_filing_with_a_file_uploads_it_outside_any_transaction(
    world: World, ops: Ops, monkeypatch: pytest.MonkeyPatch, settings: Any, tmp_path: Any
) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    calls: list[tuple[str, bool]] = []
    real_call = StripeProvider._call

    def spy(self: StripeProvider, request: Any, **kwargs: Any) -> Any:
        calls.append((getattr(request, "__qualname__", ""), db.in_transaction()))
        return real_call(self, request, **kwargs)

    monkeypatch.setattr(StripeProvider, "_call", spy)
    world.fund()
    dispute = world.dispute(reason="product_not_received")
    admit_file(dispute, ops.preparer, "pod:1", "delivery", pdf("pod"))
    packet = services.packet_approve(
        packet=current(dispute), actor=ops.approver, confirmed_digest=current(dispute).digest
    )
    filed = services.packet_file(
        packet=packet,
        actor=ops.filer,
        confirmed_digest=packet.digest,
        idempotency_key=services.filing_key_proposal(packet),
    )
    assert filed.provider_status == "answered"
    uploads = [inside for name, inside in calls if "file_upload" in name]
    assert uploads == [False]
    assert not any(inside for _, inside in calls), calls
