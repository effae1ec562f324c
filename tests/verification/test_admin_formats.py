"""The verification pages read in one format (issue 27, item 4): a condition compares times as
`2026-12-01 22:18:10 UTC` on both sides (the provider's epoch and the operation's ISO time
alike), and a run shows how many attempts it made, counted from its attempts."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import User
from tests.reconciliation.test_admin_formats import a_refund_leg
from tests.verification.test_admin import CONTRACT, START, VIEW, condition, make_run, make_staff
from verification.models import Attempt, Escalation, Trigger, Verdict, VerificationRun

pytestmark = pytest.mark.django_db

# The provider's `created` of the refund, as Stripe writes it: seconds since the epoch.
CREATED_EPOCH = 1796163490  # 2026-12-01 22:18:10 UTC


@pytest.fixture
def viewer() -> User:
    return make_staff("vera", *VIEW)


def verified_by_an_event(operation_id: str = "erf_9:leg_1") -> VerificationRun:
    """A run decided VERIFIED by one event-triggered attempt: no scheduled poll was needed."""
    run = make_run(
        operation_id,
        verdict=Verdict.VERIFIED,
        verdict_reason="Every verification condition holds.",
        decided_at=START + timedelta(seconds=3),
    )
    attempt = Attempt.objects.create(
        run=run,
        number=None,
        trigger=Trigger.EVENT,
        started_at=START + timedelta(seconds=2),
        finished_at=START + timedelta(seconds=3),
        verdict=Verdict.VERIFIED,
        reason="Every verification condition holds.",
        conditions=[
            condition(
                "refund_created_in_window",
                "verified",
                "true",
                CREATED_EPOCH,
                START.isoformat(),
            ),
            condition("refund_present", "verified", "true", "re_1", "re_1"),
        ],
    )
    run.decided_by = attempt
    run.save(update_fields=["decided_by"])
    return run


def test_a_conditions_times_read_in_one_format_epoch_and_iso_alike(
    client: Client, viewer: User
) -> None:
    run = verified_by_an_event()
    client.force_login(viewer)

    page = client.get(
        reverse("admin:verification_verificationrun_change", args=[run.pk])
    ).content.decode()

    assert run.contract_id == CONTRACT
    assert "2026-12-01 22:18:10 UTC" in page  # the provider's epoch, as a moment
    assert "2026-11-29 10:00:00 UTC" in page  # the operation's ISO time, the same way
    assert str(CREATED_EPOCH) not in page
    assert START.isoformat() not in page
    assert "re_1" in page  # a value that is not a time stays as it is


def test_a_time_condition_of_an_unloaded_contract_still_reads_as_a_moment(
    client: Client, viewer: User
) -> None:
    """Without the contract to say the condition compares times, an epoch beside an ISO time is
    still read as the time it is."""
    run = verified_by_an_event("erf_8:leg_1")
    VerificationRun.objects.filter(pk=run.pk).update(contract_id="retired.contract")
    client.force_login(viewer)

    page = client.get(
        reverse("admin:verification_verificationrun_change", args=[run.pk])
    ).content.decode()

    assert "2026-12-01 22:18:10 UTC" in page
    assert str(CREATED_EPOCH) not in page


def test_a_verified_run_shows_the_attempts_it_made_not_zero(client: Client, viewer: User) -> None:
    run = verified_by_an_event()
    assert run.attempts_made == 0  # no scheduled poll: the event decided it
    client.force_login(viewer)

    listing = client.get(reverse("admin:verification_verificationrun_changelist"))
    page = client.get(
        reverse("admin:verification_verificationrun_change", args=[run.pk])
    ).content.decode()

    row = next(r for r in listing.context["cl"].result_list if r.pk == run.pk)
    tries = listing.context["cl"].model_admin.tries(row)
    assert str(tries) == "1"
    assert '<th scope="row">Attempts</th><td>1 ' in page
    assert "Scheduled attempts</th><td>0" not in page


def test_a_runs_page_links_the_ids_of_its_operation_and_its_escalations(
    client: Client, viewer: User
) -> None:
    leg = a_refund_leg()
    operation_id = f"{leg.operation.public_id}:{leg.public_id}"
    run = make_run(operation_id, verdict=Verdict.UNVERIFIABLE)
    Escalation.objects.create(
        run=run,
        verdict=run.verdict,
        reason=f"No evidence for refund leg {leg.public_id} before the deadline.",
    )
    client.force_login(viewer)

    page = client.get(
        reverse("admin:verification_verificationrun_change", args=[run.pk])
    ).content.decode()

    refund_page = reverse("admin:envelopes_refundoperation_change", args=[leg.operation_id])
    operation = page[page.index('id="run-operation"') : page.index('id="run-escalations"')]
    assert f'href="{refund_page}">{leg.operation.public_id}</a>' in operation
    assert f'href="{refund_page}#leg-{leg.public_id}">{leg.public_id}</a>' in operation
    escalations = page[page.index('id="run-escalations"') : page.index('id="run-timeline"')]
    assert f'href="{refund_page}#leg-{leg.public_id}">{leg.public_id}</a>' in escalations


def test_the_resolve_page_links_what_it_resolves(client: Client) -> None:
    leg = a_refund_leg()
    run = make_run(f"{leg.operation.public_id}:{leg.public_id}", verdict=Verdict.UNVERIFIABLE)
    escalation = Escalation.objects.create(
        run=run,
        subject_type="refund_leg",
        subject_id=leg.public_id,
        verdict=run.verdict,
        reason=f"No evidence for refund leg {leg.public_id} before the deadline.",
    )
    client.force_login(make_staff("rosa", *VIEW, "resolve_escalation"))

    page = client.get(
        reverse("admin:verification_escalation_resolve", args=[escalation.pk])
    ).content.decode()

    refund_page = reverse("admin:envelopes_refundoperation_change", args=[leg.operation_id])
    leg_link = f'href="{refund_page}#leg-{leg.public_id}">{leg.public_id}</a>'
    assert page.count(leg_link) == 3  # the operation, what it is about, the reason
    assert f'href="{refund_page}">{leg.operation.public_id}</a>' in page


def test_a_conditions_amounts_read_as_dollars_with_the_providers_cents_labelled(
    client: Client, viewer: User
) -> None:
    """The contract compares the provider's amount in cents: shown as dollars, the raw cents
    labelled as cents, never a bare `500` beside micro-dollars elsewhere."""
    run = make_run("erf_7:leg_1", verdict=Verdict.CONTRADICTED)
    Attempt.objects.create(
        run=run,
        number=1,
        trigger=Trigger.POLL,
        started_at=START,
        finished_at=START + timedelta(seconds=1),
        verdict=Verdict.CONTRADICTED,
        conditions=[condition("refund_amount_mismatch", "contradicted", "true", 500, 876)],
    )
    client.force_login(viewer)

    page = client.get(
        reverse("admin:verification_verificationrun_change", args=[run.pk])
    ).content.decode()

    assert "$5.00 · 500 cents" in page
    assert "$8.76 · 876 cents" in page
    assert '<td class="vouch-mono">500</td>' not in page
    assert "As the provider takes it: amounts in cents." in page  # the raw input, labelled
