"""Issue 24 item 10: the Smart Disputes guard on a dispute entered by staff (`dispute_enter` →
`dispute_submit_manually`) is retried like the event path's, until the provider shows `manual`:
an answer lost to a sandbox fault, or a process that died before asking, leaves the dispute to the
scheduled resume job, which sends the same update with the dispute's one key."""

from __future__ import annotations

from typing import Any

import pytest
import stripe

from disputes import tasks
from disputes.models import Dispute
from stripe_sandbox.client import SandboxControl
from tests.crashes import assert_died, past_the_lease, request_in_a_fresh_process
from tests.drivers.api import Api
from tests.drivers.disputes import CLERK, World, staff_user


def at_provider(sandbox: SandboxControl, dispute_id: str) -> Any:
    """The dispute as the provider holds it, read through the SDK (not through Vouch)."""
    client = stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
    return client.v1.disputes.retrieve(dispute_id)


def entry(dispute_id: str, charge_id: str) -> dict[str, Any]:
    return {
        "dispute_id": dispute_id,
        "charge_id": charge_id,
        "amount_micro": 10_000_000,
        "reason": "fraudulent",
    }


def calls_to(sandbox: SandboxControl, dispute_id: str) -> Any:
    """Counts every POST to the dispute from now on (a fault that changes nothing)."""
    sandbox.add_fault(f"/v1/disputes/{dispute_id}", "delay", method="POST", delay_ms=1)

    def count() -> int:
        return sum(f["hits"] for f in sandbox.faults() if f["kind"] == "delay")

    return count


@pytest.mark.parametrize("fault", ["server_error", "timeout"])
def test_a_staff_entered_dispute_whose_manual_answer_was_lost_is_retried_until_manual(
    world: World, stripe_at_sandbox: SandboxControl, fault: str
) -> None:
    world.fund()
    opened = stripe_at_sandbox.open_dispute(world.charge_id, reason="fraudulent")
    dispute_id = opened["id"]
    stripe_at_sandbox.add_fault(f"/v1/disputes/{dispute_id}", fault, method="POST")
    clerk = Api(staff_user("clerk", *CLERK))
    entered = clerk.post("/api/v1/disputes", entry(dispute_id, world.charge_id))
    assert entered.status_code == 201, entered.content
    assert entered.json()["data"]["intended_submission_method"] is None  # no answer came
    assert Dispute.objects.get(provider_dispute_id=dispute_id).intended_submission_method == ""

    tasks.resume_filings()  # the answers are still lost: it stays to be retried
    assert Dispute.objects.get(provider_dispute_id=dispute_id).intended_submission_method == ""

    stripe_at_sandbox.clear_faults()
    tasks.resume_filings()
    assert at_provider(stripe_at_sandbox, dispute_id)["intended_submission_method"] == "manual"
    recorded = Dispute.objects.get(provider_dispute_id=dispute_id)
    assert (recorded.intended_submission_method, recorded.submission_method_pending) == (
        "manual",
        False,
    )
    with pytest.raises(RuntimeError, match="submitted manually"):
        stripe_at_sandbox.smart_submit_dispute(dispute_id)
    assert at_provider(stripe_at_sandbox, dispute_id)["evidence_details"]["submission_count"] == 0

    count = calls_to(stripe_at_sandbox, dispute_id)
    tasks.resume_filings()  # manual now: nothing more is sent
    assert count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_staff_entry_that_died_before_asking_for_manual_is_set_to_manual_by_the_job(
    world: World, stripe_at_sandbox: SandboxControl
) -> None:
    """The entry's process died after its last commit, before the provider was asked, and the
    client never came back: the job asks."""
    world.fund()
    opened = stripe_at_sandbox.open_dispute(world.charge_id, reason="fraudulent")
    clerk = staff_user("clerk", *CLERK)
    process = request_in_a_fresh_process(
        username=clerk.get_username(),
        path="/api/v1/disputes",
        key="enter-1",
        crash_at="dispute_entry_after_prepare",
        body=entry(opened["id"], world.charge_id),
    )
    assert_died(process, "dispute_entry_after_prepare")
    assert at_provider(stripe_at_sandbox, opened["id"])["intended_submission_method"] != "manual"

    with past_the_lease("enter-1"):  # later: the job runs
        tasks.resume_filings()
    assert at_provider(stripe_at_sandbox, opened["id"])["intended_submission_method"] == "manual"
    assert Dispute.objects.get(provider_dispute_id=opened["id"]).intended_submission_method == (
        "manual"
    )


def test_a_dispute_the_provider_refuses_to_set_is_not_asked_again(
    world: World, stripe_at_sandbox: SandboxControl
) -> None:
    """A refusal is an answer (the provider holds the dispute, and refuses the update): nothing
    to retry."""
    world.fund()
    opened = stripe_at_sandbox.open_dispute(world.charge_id, reason="fraudulent")
    dispute_id = opened["id"]
    stripe_at_sandbox.add_fault(
        f"/v1/disputes/{dispute_id}", "refuse", method="POST", error_code="invalid_request"
    )
    clerk = Api(staff_user("clerk", *CLERK))
    entered = clerk.post("/api/v1/disputes", entry(dispute_id, world.charge_id))
    assert entered.status_code == 201, entered.content
    recorded = Dispute.objects.get(provider_dispute_id=dispute_id)
    assert (recorded.intended_submission_method, recorded.submission_method_pending) == ("", False)
    stripe_at_sandbox.clear_faults()
    count = calls_to(stripe_at_sandbox, dispute_id)
    tasks.resume_filings()
    assert count() == 0
