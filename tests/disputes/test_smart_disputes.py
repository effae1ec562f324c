"""Stripe's Smart Disputes must never file a packet nobody approved (issue 10 item 14): a dispute
that arrives is set to `intended_submission_method=manual` at the provider, and the
`stripe.dispute.filed` readback contradicts a submission made by any other method."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import stripe
import time_machine
from django.utils import timezone

from disputes import services
from disputes.exceptions import PacketReadbackFailed
from disputes.models import Dispute, Packet
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.drivers.disputes import CLERK, Ops, World, contest_ready, staff_user
from tests.helpers import settle_runs
from verification.contracts import Verdict, get_contract
from verification.evaluation import decide
from verification.expressions import Context
from verification.models import VerificationRun


def at_provider(sandbox: SandboxControl, dispute_id: str) -> Any:
    """The dispute as the provider holds it, read through the SDK (not through Vouch)."""
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    return client.v1.disputes.retrieve(dispute_id)


def test_a_dispute_that_arrives_by_provider_event_is_set_to_manual(
    world: World, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund()
    dispute = world.dispute(reason="fraudulent")
    held = at_provider(stripe_at_sandbox, dispute.provider_dispute_id)
    assert held["intended_submission_method"] == "manual"
    assert held["evidence_details"]["submission_count"] == 0  # set, nothing submitted
    assert Dispute.objects.get(pk=dispute.pk).intended_submission_method == "manual"
    with pytest.raises(RuntimeError, match="submitted manually"):
        stripe_at_sandbox.smart_submit_dispute(dispute.provider_dispute_id)
    # A later event for the dispute, already manual, calls nothing more and changes nothing.
    services.dispute_on_provider_event(
        event={"type": "charge.dispute.updated", "data": {"object": {"id": held["id"]}}}
    )
    assert at_provider(stripe_at_sandbox, held["id"])["intended_submission_method"] == "manual"


def test_a_dispute_entered_by_staff_is_set_to_manual_when_the_provider_holds_it(
    world: World, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund()
    opened = stripe_at_sandbox.open_dispute(world.charge_id, reason="fraudulent")
    clerk = Api(staff_user("clerk", *CLERK))
    entered = clerk.post(
        "/api/v1/disputes",
        {
            "dispute_id": opened["id"],
            "charge_id": world.charge_id,
            "amount_micro": 10_000_000,
            "reason": "fraudulent",
        },
    )
    assert entered.status_code == 201, entered.content
    assert at_provider(stripe_at_sandbox, opened["id"])["intended_submission_method"] == "manual"
    assert entered.json()["data"]["intended_submission_method"] == "manual"
    # A dispute the provider does not hold is not entered at all (issue 37: recorded as Stripe
    # shows it, and Stripe shows none).
    unknown = clerk.post(
        "/api/v1/disputes",
        {
            "dispute_id": "dp_not_at_the_provider",
            "charge_id": "ch_unknown",
            "amount_micro": 1_000_000,
            "reason": "general",
        },
    )
    assert unknown.status_code == 404, unknown.content
    assert unknown.json()["error"]["code"] == "dispute_not_at_provider"
    assert not Dispute.objects.filter(provider_dispute_id="dp_not_at_the_provider").exists()


def test_a_smart_disputes_submission_makes_the_readback_contradicted(
    world: World, ops: Ops, stripe_at_sandbox: SandboxControl
) -> None:
    """Vouch's filing gets no answer (nothing reaches the provider); meanwhile the dispute was
    switched back to Smart Disputes (say, in the Dashboard), which submits its own evidence. The
    readback must not wait for a digest that never comes: it is CONTRADICTED, the packet is not
    filed, and the dispute stays held (something was submitted)."""
    packet = contest_ready(world, ops)
    packet = services.packet_approve(
        packet=packet, actor=ops.approver, confirmed_digest=packet.digest
    )
    dispute_id = packet.dispute.provider_dispute_id
    client = stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": stripe_at_sandbox.url}
    )
    client.v1.disputes.update(
        dispute_id, params={"intended_submission_method": "smart_disputes", "submit": False}
    )
    stripe_at_sandbox.add_fault(f"/v1/disputes/{dispute_id}", "server_error", method="POST")
    sent = services.packet_file(
        packet=packet,
        actor=ops.filer,
        confirmed_digest=packet.digest,
        idempotency_key=services.filing_key_proposal(packet),
    )
    stripe_at_sandbox.clear_faults()
    assert sent.provider_status == "unknown"
    stripe_at_sandbox.smart_submit_dispute(dispute_id)
    held = at_provider(stripe_at_sandbox, dispute_id)
    assert held["evidence_details"]["submission_method"] == "smart_disputes"

    with time_machine.travel(timezone.now() + timedelta(minutes=1), tick=True):
        verdicts = settle_runs(max_rounds=45)
    assert sent.filing_run is not None
    run = VerificationRun.objects.get(pk=sent.filing_run.pk)
    assert verdicts[run.pk] == "CONTRADICTED"
    assert run.verdict_class == "unapproved submission"
    failed = Packet.objects.get(pk=packet.pk)
    assert failed.filing_status == "readback_failed"
    with pytest.raises(PacketReadbackFailed, match="smart_disputes"):
        services.packet_prepare(dispute=packet.dispute, requested_by=None)


@pytest.mark.parametrize(
    ("method", "verdict"),
    [
        ("manual", Verdict.VERIFIED),
        ("smart_disputes", Verdict.CONTRADICTED),
        ("not_submitted", Verdict.CONTRADICTED),
    ],
)
def test_the_filed_contract_contradicts_any_submission_method_but_manual(
    method: str, verdict: Verdict
) -> None:
    """The contract on its own: a readback that otherwise proves the filing is VERIFIED only when
    the evidence was submitted manually (by Vouch)."""
    contract = get_contract("stripe.dispute.filed")
    start = timezone.now() - timedelta(minutes=5)
    observed = {
        "dispute_readback": {
            "id": "dp_1",
            "status": "under_review",
            "evidence_details": {"submission_count": 1, "submission_method": method},
            "metadata": {"vouch_packet_digest": "abc"},
        }
    }
    context = Context(
        observed=observed,
        action_result={"id": "dp_1"},
        input={"dispute": "dp_1", "packet_digest": "abc"},
        operation_id="pkt_1:abc",
        operation_created_at=start,
    )
    decision = decide(contract, context, now=timezone.now(), skew_s=0)
    assert decision.verdict == verdict, decision.reason
