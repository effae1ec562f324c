"""The adjustments queue in the admin, used as ops would (issue 10, item 5): a money escalation's
page offers "Propose an adjustment…" (not a note); one person proposes; the proposer cannot
approve; a second person confirms the amount and approves; refusals are messages that say what
is true, and change nothing."""

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from envelopes import services
from envelopes.models import Adjustment, Envelope, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import Escalation

pytestmark = pytest.mark.django_db

VIEW = [
    ("verification", "view_escalation"),
    ("reconciliation", "view_adjustment"),
    ("envelopes", "view_envelope"),
]


def staff(username: str, *perms: tuple[str, str]) -> User:
    user = User.objects.create_user(
        username, f"{username}@example.com", "pw-123-abc", is_staff=True
    )
    for app, codename in (*VIEW, *perms):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return user


def as_(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_ops_propose_and_a_second_person_approves_in_the_admin(
    alice: Api, sandbox: SandboxControl
) -> None:
    proposer = staff("pia", ("envelopes", "add_adjustment"), ("verification", "resolve_escalation"))
    approver = staff("aron", ("reconciliation", "approve_adjustment"))
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    sandbox.clear_faults()
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        services.stranded_resume(older_than_s=60)
        escalation = Escalation.objects.get()
        page = as_(proposer).get(
            reverse("admin:verification_escalation_change", args=[escalation.pk])
        )
        html = page.content.decode()
        assert "Propose an adjustment" in html
        assert "concerns money" in html
        assert reverse("admin:verification_escalation_resolve", args=[escalation.pk]) not in html
        propose = (
            reverse("admin:reconciliation_adjustment_propose") + f"?escalation={escalation.pk}"
        )
        form = as_(proposer).get(propose)
        assert form.status_code == 200
        assert "Release a refund leg the provider never made" in form.content.decode()
        empty = as_(proposer).post(propose, {"kind": "leg_release", "reason": ""}, follow=True)
        assert any("needs a reason" in m for m in messages_of(empty))
        assert not Adjustment.objects.exists()
        done = as_(proposer).post(
            propose, {"kind": "leg_release", "reason": "No refund in the Dashboard."}, follow=True
        )
        adjustment = Adjustment.objects.get()
        assert any("is proposed" in m for m in messages_of(done))
        page_url = reverse("admin:reconciliation_adjustment_change", args=[adjustment.pk])
        decide = reverse("admin:reconciliation_adjustment_decide", args=[adjustment.pk])
        own = as_(proposer).get(page_url).content.decode()
        assert "You proposed this adjustment" in own
        assert "Approve and write" not in own
        refused = as_(proposer).post(
            decide, {"approve": "1", "confirmed_amount": "2.00"}, follow=True
        )
        assert any("adjustment_self_approval" in m for m in messages_of(refused))
        theirs = as_(approver).get(page_url).content.decode()
        assert "Approve and write" in theirs
        assert 'title="2,000,000 micro-dollars">$2.00<' in theirs
        wrong = as_(approver).post(decide, {"approve": "1", "confirmed_amount": "200"}, follow=True)
        assert any("adjustment_amount_mismatch" in m for m in messages_of(wrong))
        assert Envelope.objects.get().reserved_micro == 2_000_000
        right = as_(approver).post(
            decide, {"approve": "1", "confirmed_amount": "$2.00"}, follow=True
        )
        assert any("approved and written" in m for m in messages_of(right))
    envelope = Envelope.objects.get()
    assert (envelope.reserved_micro, envelope.unspent_micro) == (0, 5_000_000)
    assert RefundLeg.objects.get().outcome == LegOutcome.VOID
    escalation.refresh_from_db()
    assert escalation.resolution == "adjusted"
    assert ledger_breaches() == []
    queue = as_(approver).get(reverse("admin:reconciliation_adjustment_changelist"))
    assert adjustment.public_id in queue.content.decode()


def test_proposing_needs_the_permission(alice: Api, sandbox: SandboxControl) -> None:
    viewer = staff("vic")
    response = as_(viewer).get(reverse("admin:reconciliation_adjustment_propose") + "?escalation=1")
    assert response.status_code == 403


def test_bad_input_to_the_adjustment_pages_changes_nothing(
    alice: Api, sandbox: SandboxControl
) -> None:
    """Unknown escalation, a kind that does not fit, an unknown or garbage provider object, an
    amount that is not an integer: each a clear refusal, nothing proposed or written."""
    proposer = staff("pia", ("envelopes", "add_adjustment"))
    approver = staff("aron", ("reconciliation", "approve_adjustment"))
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    sandbox.clear_faults()
    propose_base = reverse("admin:reconciliation_adjustment_propose")
    for query in ("?escalation=999999", "?escalation=abc", "?refund_leg=rfl_nope", ""):
        assert as_(proposer).get(propose_base + query).status_code == 404, query
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        services.stranded_resume(older_than_s=60)
        escalation = Escalation.objects.get()
        propose = propose_base + f"?escalation={escalation.pk}"
        not_offered = as_(proposer).post(propose, {"kind": "funding_abandon", "reason": "x"})
        assert not_offered.status_code == 200  # the form again, with the choice refused
        assert "Select a valid choice" in not_offered.content.decode()
        for refund_id in ("re_does_not_exist", "pi_wrong_kind", "' OR 1=1 --"):
            refused = as_(proposer).post(
                propose,
                {"kind": "leg_accept", "reason": "by hand", "provider_object_id": refund_id},
                follow=True,
            )
            assert any("Not proposed" in m for m in messages_of(refused)), refund_id
        huge = as_(proposer).post(
            propose, {"kind": "leg_accept", "reason": "x", "provider_object_id": "x" * 5000}
        )
        assert "at most 100 characters" in huge.content.decode()
        assert not Adjustment.objects.exists()
        as_(proposer).post(propose, {"kind": "leg_release", "reason": "nothing at Stripe"})
        adjustment = Adjustment.objects.get()
        decide = reverse("admin:reconciliation_adjustment_decide", args=[adjustment.pk])
        for amount in ("two million", "", "1e6", str(10**30), "2000000", "-2.00", "0.0000001"):
            response = as_(approver).post(
                decide, {"approve": "1", "confirmed_amount": amount}, follow=True
            )
            assert any(
                "Type the amount" in m or "adjustment_amount_mismatch" in m
                for m in messages_of(response)
            ), amount
        other = staff("olga", ("reconciliation", "approve_adjustment"))
        missing = reverse("admin:reconciliation_adjustment_decide", args=[999999])
        assert as_(other).post(missing, {"approve": "1", "confirmed_amount": "1"}).status_code in (
            302,
            404,
        )
    adjustment.refresh_from_db()
    assert adjustment.status == "proposed"
    assert Envelope.objects.get().reserved_micro == 2_000_000
