"""The ops admin for verification (SPEC §10): runs filtered by verdict, the run page with its
timeline and evidence, the escalations queue in order, and Resolve guarded by its permission."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from accounts.models import User
from core.models import AuditEvent
from verification.models import (
    Attempt,
    Escalation,
    EscalationStatus,
    Observation,
    ProviderEvent,
    Trigger,
    Verdict,
    VerificationRun,
)

CONTRACT = "stripe.refund.created"
START = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
VIEW = ("view_verificationrun", "view_escalation", "view_providerevent")


def make_staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(
        username, f"{username}@example.com", f"{username}-password-1", is_staff=True
    )
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="verification", codename__in=codenames)
    )
    return user


def make_run(operation_id: str = "erf_1:leg_1", **fields: object) -> VerificationRun:
    values: dict[str, object] = {
        "contract_id": CONTRACT,
        "contract_version": 1,
        "operation_id": operation_id,
        "operation_created_at": START,
        "input": {"charge": "ch_1", "amount": 876},
        "action_result": {"id": "re_1", "metadata": {"vouch_leg": "leg_1"}},
        "correlation": {"refund_id": "re_1", "idempotency_key": operation_id},
        "deadline_at": START + timedelta(days=7),
    }
    values.update(fields)
    return VerificationRun.objects.create(**values)


def condition(name: str, kind: str, result: str, actual: object, expected: object) -> dict:
    return {"name": name, "kind": kind, "result": result, "actual": actual, "expected": expected}


@pytest.fixture
def run(db: None) -> VerificationRun:
    """A contradicted run: a poll held back by the stale-read window, then an event-triggered
    attempt that decided. The later attempt is stored first, so id order is not time order."""
    run = make_run(
        verdict=Verdict.CONTRADICTED,
        verdict_class="wrong amount",
        verdict_reason="The provider refunded a different amount.",
        decided_at=START + timedelta(seconds=40),
        attempts_made=1,
    )
    second = Attempt.objects.create(
        run=run,
        number=None,
        trigger=Trigger.EVENT,
        started_at=START + timedelta(seconds=39),
        finished_at=START + timedelta(seconds=40),
        verdict=Verdict.CONTRADICTED,
        verdict_class="wrong amount",
        reason="The provider refunded a different amount.",
        conditions=[
            condition("refund_amount_mismatch", "contradicted", "true", 500, 876),
            condition("refund_present", "verified", "true", "re_1", "re_1"),
        ],
    )
    Observation.objects.create(
        attempt=second,
        channel="refund_created_events",
        level="E3",
        verifier="webhook",
        observed_at=START + timedelta(seconds=39),
        data={"count": 1, "types": ["refund.created"]},
        digest="e" * 64,
    )
    first = Attempt.objects.create(
        run=run,
        number=1,
        trigger=Trigger.POLL,
        started_at=START + timedelta(seconds=1),
        finished_at=START + timedelta(seconds=2),
        verdict=Verdict.PENDING,
        reason="Held by the stale-read window until 10:00:20: would be CONTRADICTED",
        held="CONTRADICTED: The provider refunded a different amount.",
        conditions=[
            condition("refund_amount_mismatch", "contradicted", "true", 500, 876),
            condition("duplicate_refund_present", "contradicted", "unknown", None, 1),
        ],
    )
    Observation.objects.create(
        attempt=first,
        channel="refund_readback",
        level="E2",
        verifier="http",
        observed_at=START + timedelta(seconds=1),
        data={"id": "re_1", "amount": 500, "status": "succeeded"},
        digest="d" * 64,
    )
    run.decided_by = second
    run.save(update_fields=["decided_by"])
    return run


@pytest.fixture
def escalation(run: VerificationRun) -> Escalation:
    return Escalation.objects.create(
        run=run,
        verdict=run.verdict,
        verdict_class=run.verdict_class,
        reason=run.verdict_reason,
    )


@pytest.fixture
def viewer(db: None) -> User:
    return make_staff("vera", *VIEW)


@pytest.fixture
def resolver(db: None) -> User:
    return make_staff("rosa", *VIEW, "resolve_escalation")


def resolve_url(escalation: Escalation) -> str:
    return reverse("admin:verification_escalation_resolve", args=[escalation.pk])


def change_url(escalation: Escalation) -> str:
    return reverse("admin:verification_escalation_change", args=[escalation.pk])


# --- runs -------------------------------------------------------------------------------------


def test_runs_changelist_filters_by_verdict(client: Client, viewer: User) -> None:
    contradicted = make_run("erf_1:leg_1", verdict=Verdict.CONTRADICTED)
    verified = make_run("erf_2:leg_1", verdict=Verdict.VERIFIED)
    client.force_login(viewer)

    response = client.get(
        reverse("admin:verification_verificationrun_changelist"), {"verdict": "CONTRADICTED"}
    )

    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [contradicted]
    assert contradicted.public_id in response.content.decode()
    assert verified.public_id not in response.content.decode()


def test_run_page_shows_the_timeline_conditions_evidence_and_escalation(
    client: Client, viewer: User, run: VerificationRun, escalation: Escalation
) -> None:
    client.force_login(viewer)

    response = client.get(reverse("admin:verification_verificationrun_change", args=[run.pk]))

    assert response.status_code == 200
    page = response.content.decode()
    # The header: the contract in its own words, the operation, the verdict.
    assert "Stripe holds the refund for the charge" in page
    assert "erf_1:leg_1" in page
    assert "The provider refunded a different amount." in page
    assert "wrong amount" in page
    # Attempts oldest first, although the later one was stored first.
    assert page.index("Attempt #1 (scheduled check)") < page.index("Attempt on a provider event")
    assert "Held back by the stale-read window" in page
    assert "decided the run" in page
    # Conditions with their results, marked; the contract's meaning beside the name.
    assert "refund_amount_mismatch" in page
    assert "duplicate_refund_present" in page
    assert "✗ holds" in page  # a contradiction that holds goes against the effect
    assert "✓ holds" in page  # a verification that holds supports it
    assert "? unknown" in page
    assert "The provider holds the refund with the returned id." in page
    # Evidence: channel, level, digest, the data pretty-printed and collapsible.
    assert "refund_readback" in page
    assert "d" * 64 in page
    assert "e" * 64 in page
    assert "<details>" in page
    assert "&quot;amount&quot;: 500" in page
    # The run's escalation, linked.
    assert change_url(escalation) in page


def test_pending_run_of_an_unloaded_contract_still_renders(client: Client, viewer: User) -> None:
    run = make_run(contract_id="retired.contract", next_attempt_at=START + timedelta(seconds=5))
    client.force_login(viewer)

    response = client.get(reverse("admin:verification_verificationrun_change", args=[run.pk]))

    assert response.status_code == 200
    page = response.content.decode()
    assert "This contract is not loaded" in page
    assert "2026-11-29 10:00:05 UTC" in page  # the next attempt
    assert "2026-12-06 10:00:00 UTC" in page  # the deadline
    assert "No attempt yet." in page


def test_runs_are_read_only_even_for_a_superuser(client: Client, run: VerificationRun) -> None:
    admin = User.objects.create_superuser("root", "root@example.com", "root-password-1")
    client.force_login(admin)

    add = client.get(reverse("admin:verification_verificationrun_add"))
    change = client.post(
        reverse("admin:verification_verificationrun_change", args=[run.pk]),
        {"operation_id": "tampered"},
    )
    delete = client.post(
        reverse("admin:verification_verificationrun_delete", args=[run.pk]), {"post": "yes"}
    )

    assert (add.status_code, change.status_code, delete.status_code) == (403, 403, 403)
    run.refresh_from_db()
    assert run.operation_id == "erf_1:leg_1"


# --- escalations ------------------------------------------------------------------------------


def test_escalation_queue_lists_open_first_then_oldest_first(client: Client, viewer: User) -> None:
    def escalate(operation_id: str, status: str, age_h: int) -> Escalation:
        escalation = Escalation.objects.create(
            run=make_run(operation_id),
            verdict=Verdict.UNVERIFIABLE,
            reason="evidence_unavailable_before_timeout",
            status=status,
        )
        Escalation.objects.filter(pk=escalation.pk).update(
            created_at=START - timedelta(hours=age_h)
        )
        return escalation

    resolved_oldest = escalate("op_a", EscalationStatus.RESOLVED, 30)
    open_newer = escalate("op_b", EscalationStatus.OPEN, 1)
    open_older = escalate("op_c", EscalationStatus.OPEN, 5)
    client.force_login(viewer)

    response = client.get(reverse("admin:verification_escalation_changelist"))

    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [open_older, open_newer, resolved_oldest]
    page = response.content.decode()
    run_page = reverse("admin:verification_verificationrun_change", args=[open_older.run_id])
    assert run_page in page


def test_resolve_is_forbidden_without_the_permission(
    client: Client, viewer: User, escalation: Escalation
) -> None:
    client.force_login(viewer)

    page = client.get(change_url(escalation))
    get = client.get(resolve_url(escalation))
    post = client.post(resolve_url(escalation), {"note": "Checked at Stripe, all good."})

    assert page.status_code == 200
    assert resolve_url(escalation) not in page.content.decode()
    assert (get.status_code, post.status_code) == (403, 403)
    escalation.refresh_from_db()
    assert escalation.status == EscalationStatus.OPEN
    assert escalation.resolved_by is None
    assert not AuditEvent.objects.filter(action="escalation.resolve").exists()


def test_resolve_page_confirms_the_run_and_verdict(
    client: Client, resolver: User, escalation: Escalation
) -> None:
    client.force_login(resolver)

    page = client.get(change_url(escalation)).content.decode()
    response = client.get(resolve_url(escalation))

    assert resolve_url(escalation) in page
    assert response.status_code == 200
    content = response.content.decode()
    assert escalation.run.public_id in content
    assert "CONTRADICTED" in content
    assert "wrong amount" in content
    assert 'name="note"' in content


def test_resolve_refuses_an_empty_note(
    client: Client, resolver: User, escalation: Escalation
) -> None:
    client.force_login(resolver)

    response = client.post(resolve_url(escalation), {"note": "   "})

    assert response.status_code == 200
    assert "a resolution needs a note" in response.content.decode()
    escalation.refresh_from_db()
    assert escalation.status == EscalationStatus.OPEN
    assert not AuditEvent.objects.filter(action="escalation.resolve").exists()


def test_resolve_with_a_note_resolves_and_audits(
    client: Client, resolver: User, escalation: Escalation
) -> None:
    client.force_login(resolver)

    response = client.post(
        resolve_url(escalation), {"note": "Partial refund agreed with the buyer."}, follow=True
    )

    assert response.redirect_chain == [(change_url(escalation), 302)]
    assert "is resolved" in response.content.decode()
    escalation.refresh_from_db()
    assert escalation.status == EscalationStatus.RESOLVED
    assert escalation.resolved_by == resolver
    assert escalation.resolved_at is not None
    assert escalation.resolution_note == "Partial refund agreed with the buyer."
    audit = AuditEvent.objects.get(action="escalation.resolve")
    assert audit.actor == resolver
    assert audit.target_id == str(escalation.pk)
    # Resolved: the page no longer offers Resolve.
    assert resolve_url(escalation) not in response.content.decode()


def test_resolving_twice_shows_an_error_and_keeps_the_first_note(
    client: Client, resolver: User, escalation: Escalation
) -> None:
    client.force_login(resolver)
    client.post(resolve_url(escalation), {"note": "First look: fine."})

    response = client.post(resolve_url(escalation), {"note": "Second look."})

    assert response.status_code == 200
    assert "already resolved" in response.content.decode()
    escalation.refresh_from_db()
    assert escalation.resolution_note == "First look: fine."
    assert AuditEvent.objects.filter(action="escalation.resolve").count() == 1


# --- provider events --------------------------------------------------------------------------


def test_provider_events_filter_by_processed_and_show_the_payload(
    client: Client, viewer: User
) -> None:
    payload = {"id": "evt_1", "type": "refund.created", "data": {"object": {"id": "re_1"}}}
    processed = ProviderEvent.objects.create(
        event_id="evt_1",
        type="refund.created",
        provider_created=int(START.timestamp()),
        payload=payload,
        raw="{}",
        processed_at=START,
    )
    waiting = ProviderEvent.objects.create(
        event_id="evt_2",
        type="refund.updated",
        provider_created=int(START.timestamp()),
        payload={"id": "evt_2"},
        raw="{}",
    )
    client.force_login(viewer)

    listing = client.get(
        reverse("admin:verification_providerevent_changelist"), {"processed": "no"}
    )
    detail = client.get(reverse("admin:verification_providerevent_change", args=[processed.pk]))

    assert list(listing.context["cl"].result_list) == [waiting]
    assert detail.status_code == 200
    assert "&quot;object&quot;: {" in detail.content.decode()
    assert "2026-11-29 10:00:00 UTC" in detail.content.decode()
