"""A world with something in every one of the console's counts, built the way it happens: envelopes
funded through the API against the sandbox (their charge runs decided by the verification
engine), disputes opened at the sandbox and recorded from their events, packets prepared by the
disputes services (one approved), a funding charge and a refund left without an answer two hours
ago (the sandbox failing), escalations and discrepancies recorded by their services."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import time_machine
from django.utils import timezone

from disputes import services as disputes
from disputes.models import Dispute, Packet
from envelopes.models import FundingLeg, RefundLeg, RefundOperation
from reconciliation.models import Discrepancy
from reconciliation.services import Finding, discrepancy_record
from tests.drivers.disputes import Ops, World, contest_ready, current
from tests.drivers.reconciliation import a_run
from verification.models import Escalation, EscalationStatus, Verdict, VerificationRun

FUNDING = {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}


@dataclass
class Seeded:
    disputes: list[Dispute] = field(default_factory=list)
    awaiting_approval: list[Packet] = field(default_factory=list)
    awaiting_filing: list[Packet] = field(default_factory=list)
    stuck_funding_envelopes: list[int] = field(default_factory=list)
    stuck_refunds: list[int] = field(default_factory=list)
    fresh_pending_envelope: int = 0
    stuck_refund_envelope: int = 0
    escalations_open: list[int] = field(default_factory=list)
    discrepancies: dict[str, list[int]] = field(default_factory=dict)


def seed_console(world: World, ops: Ops) -> Seeded:
    seeded = Seeded()
    sandbox = world.sandbox
    # Two contest-ready disputes (new version prepared when evidence was admitted); the second
    # approved by a person who did not prepare it: one packet awaits approval, one filing.
    first = contest_ready(world, ops)
    second = contest_ready(world, ops)
    disputes.packet_approve(packet=second, actor=ops.approver, confirmed_digest=second.digest)
    seeded.awaiting_approval = [first]
    seeded.awaiting_filing = [Packet.objects.get(pk=second.pk)]
    # A third dispute, on a charge of its own, with no evidence: it awaits a response too.
    world.fund()
    third = world.dispute(reason="fraudulent", amount_cents=500)  # $5.00 held of $10 (SPEC §18)
    seeded.disputes = [first.dispute, second.dispute, third]
    # The drafter's first version of it is ready for review: it awaits approval too.
    assert (current(third).status, current(third).approval_status) == (
        "ready_for_review",
        "not_requested",
    ), current(third).validation
    seeded.awaiting_approval.append(current(third))

    # Two hours ago: a funding charge and a refund whose answers never came (the sandbox down).
    envelope_id = world.envelope_id
    with time_machine.travel(timezone.now() - timedelta(hours=2), tick=True):
        sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
        response = world.buyer.post("/api/v1/escrow/envelopes", FUNDING)
        assert response.status_code == 202, response.content
        sandbox.clear_faults()
        stuck_envelope = response.json()["data"]["envelope_id"]
        sandbox.add_fault("/v1/refunds", "server_error", method="POST")
        refund = world.buyer.post(
            f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000}
        )
        assert refund.status_code == 202, refund.content
        sandbox.clear_faults()
    seeded.stuck_funding_envelopes = [
        FundingLeg.objects.get(envelope__public_id=stuck_envelope).envelope_id
    ]
    operation = RefundOperation.objects.get(public_id=refund.json()["data"]["refund_id"])
    seeded.stuck_refunds = [operation.pk]
    seeded.stuck_refund_envelope = operation.envelope_id
    assert RefundLeg.objects.filter(operation_id__in=seeded.stuck_refunds).get().outcome == (
        "unknown"
    )
    # A funding charge without an answer just now: pending, not stuck yet.
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = world.buyer.post("/api/v1/escrow/envelopes", FUNDING)
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    seeded.fresh_pending_envelope = FundingLeg.objects.get(
        envelope__public_id=response.json()["data"]["envelope_id"]
    ).envelope_id

    # Escalations: two open, one resolved (not counted).
    run = VerificationRun.objects.filter(verdict=Verdict.VERIFIED).first()
    assert run is not None
    for n in range(3):
        Escalation.objects.create(
            run=run,
            verdict=Verdict.CONTRADICTED,
            verdict_class="duplicate side effect",
            reason=f"seeded {n}",
            subject_type="refund_leg",
            subject_id=f"rfl_seed_{n}",
            status=EscalationStatus.RESOLVED if n == 2 else EscalationStatus.OPEN,
            resolved_at=timezone.now() if n == 2 else None,
        )

    # Discrepancies: one money (it opens an escalation of its own), two hygiene, one evidence
    # acknowledged, and a resolved hygiene one (not counted).
    recon = a_run()
    codes = [
        ("refund_foreign", "refund", "re_seed_foreign"),
        ("leg_stuck", "refund_leg", "rfl_seed_a"),
        ("funding_stuck", "funding_leg", "fnd_seed_b"),
        ("run_overdue", "verification_run", "vrun_seed_c"),
        ("leg_stuck", "refund_leg", "rfl_seed_gone"),
    ]
    made: list[Discrepancy] = []
    for code, subject_type, subject_id in codes:
        discrepancy, created = discrepancy_record(
            run=recon,
            finding=Finding(
                code=code,
                subject_type=subject_type,
                subject_id=subject_id,
                summary=f"seeded {code}",
                charge_id=world.charge_id,
                amount_micro=1_000_000,
            ),
        )
        assert created
        made.append(discrepancy)
    Discrepancy.objects.filter(pk=made[3].pk).update(status="acknowledged")
    Discrepancy.objects.filter(pk=made[4].pk).update(status="resolved", resolution="cleared")
    seeded.discrepancies = {
        "money": [made[0].pk],
        "evidence": [made[3].pk],
        "hygiene": [made[1].pk, made[2].pk],
    }
    seeded.escalations_open = list(
        Escalation.objects.filter(status=EscalationStatus.OPEN).values_list("pk", flat=True)
    )
    # Ours (2) and the money discrepancy's (1); nothing else opened one.
    assert len(seeded.escalations_open) == 3, list(Escalation.objects.values("reason", "status"))
    return seeded
