"""One discrepancy's page in the admin (SPEC §15.4, §15.5): Vouch's side and the provider's next
to each other with the differing fields marked; the observations behind it; and its actions, each
a form posting to its own view and calling one service: Acknowledge, Accept with a note (never for
money), Propose an adjustment (the kinds that fit its leg). Refusals are messages and change
nothing; every change is an audit event with its actor."""

from __future__ import annotations

import hashlib
import json
from html.parser import HTMLParser
from typing import Any

import pytest
import stripe
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from core.models import AuditEvent
from envelopes.adjustments import adjustment_approve
from envelopes.models import Adjustment, Envelope, FundingLeg
from envelopes.selectors import ledger_breaches
from reconciliation.models import Discrepancy, Observation, Run
from reconciliation.services import Finding, discrepancy_clear, discrepancy_record
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.drivers.reconciliation import a_run

pytestmark = pytest.mark.django_db

VIEW = ("reconciliation", "view_discrepancy")
WORK = ("reconciliation", "work_discrepancy")
PROPOSE = ("envelopes", "add_adjustment")
APPROVE = ("reconciliation", "approve_adjustment")


def staff(username: str, *perms: tuple[str, str]) -> User:
    user = User.objects.create_user(
        username, f"{username}@example.com", "pw-123-abc", is_staff=True
    )
    for app, codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return User.objects.get(pk=user.pk)


def as_(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def a_page(run: Run, data: Any, kind: str = "refunds") -> Observation:
    raw = json.dumps(data, sort_keys=True).encode()
    return Observation.objects.create(
        run=run,
        kind=kind,
        request={"path": f"/v1/{kind}", "params": {"limit": 100}},
        data=data,
        sha256=hashlib.sha256(raw).hexdigest(),
        observed_at=timezone.now(),
    )


def record(run: Run, **fields: Any) -> Discrepancy:
    fields.setdefault("summary", f"{fields['code']} on {fields['subject_id']}")
    discrepancy, created = discrepancy_record(run=run, finding=Finding(**fields))
    assert created
    return discrepancy


def page_of(discrepancy: Discrepancy) -> str:
    return reverse("admin:reconciliation_discrepancy_change", args=[discrepancy.pk])


def action(name: str, discrepancy: Discrepancy) -> str:
    return reverse(f"admin:reconciliation_discrepancy_{name}", args=[discrepancy.pk])


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def events(discrepancy: Discrepancy) -> list[tuple[str, str]]:
    return list(
        AuditEvent.objects.filter(target_type="discrepancy", target_id=discrepancy.public_id)
        .order_by("id")
        .values_list("action", "actor_label")
    )


class SideRows(HTMLParser):
    """The side-by-side table's rows: field → (classes, cell texts)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, tuple[set[str], list[str]]] = {}
        self._row: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "tr" and attributes.get("data-field") is not None:
            self._row = str(attributes["data-field"])
            self.rows[self._row] = (set(str(attributes.get("class", "")).split()), [])
        elif tag in ("th", "td") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._row is not None and self._cell is not None:
            self.rows[self._row][1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def side_rows(html: str) -> dict[str, tuple[set[str], list[str]]]:
    parser = SideRows()
    parser.feed(html)
    return parser.rows


def test_both_sides_next_to_each_other_with_the_differing_fields_marked() -> None:
    run = a_run()
    shown = a_page(run, {"object": "list", "data": [{"id": "re_1", "amount": 900}]})
    discrepancy = record(
        run,
        code="refund_mismatch",
        subject_type="refund_leg",
        subject_id="rfl_1",
        vouch_side={"amount": 1000, "status": "succeeded", "charge": "ch_123abc"},
        provider_side={"amount": 900, "status": "succeeded", "metadata": {"vouch_leg": "rfl_1"}},
        differing=["amount", "metadata"],
        charge_id="ch_123abc",
        amount_micro=1_000_000,
        observation=shown,
    )
    viewer = as_(staff("vic", VIEW))
    response = viewer.get(page_of(discrepancy))
    assert response.status_code == 200
    html = response.content.decode()
    rows = side_rows(html)
    assert list(rows) == ["amount", "charge", "metadata", "status"]  # the union, by name
    # Amounts in dollars, the raw cents both sides compare labelled as cents (issue 27, item 4).
    assert rows["amount"] == (
        {"vouch-side", "vouch-differs"},
        ["amount ≠ differs", "$10.00 1,000 cents (usd)", "$9.00 900 cents (usd)"],
    )
    assert rows["status"] == ({"vouch-side"}, ["status", "succeeded", "succeeded"])
    assert rows["charge"][1] == ["charge", "ch_123abc", "(absent)"]
    assert rows["metadata"][0] == {"vouch-side", "vouch-differs"}
    assert rows["metadata"][1] == ["metadata ≠ differs", "(absent)", '{"vouch_leg": "rfl_1"}']
    # The observation behind it, with its SHA-256 and its run.
    assert shown.sha256 in html
    assert reverse("admin:reconciliation_observation_change", args=[shown.pk]) in html
    assert reverse("admin:reconciliation_run_change", args=[run.pk]) in html
    # Provider ids link to the Stripe Dashboard (test mode under the test key).
    assert "https://dashboard.stripe.com/test/payments/ch_123abc" in html
    # Money: an escalation is linked, no Accept form is offered; no action for a mere viewer.
    assert reverse("admin:verification_escalation_change", args=[discrepancy.escalation_id]) in html
    assert 'id="accept-form"' not in html
    assert 'id="acknowledge-form"' not in html
    assert "needs the permission <code>reconciliation.work_discrepancy</code>" in html
    # The forms are not inside the admin's change form.
    assert 'id="discrepancy_form"' not in html


def test_a_cleared_one_cites_the_page_that_shows_it_gone() -> None:
    run = a_run()
    seen = a_page(run, {"data": [{"id": "dp_1", "status": "won"}]}, kind="disputes")
    discrepancy = record(
        run,
        code="dispute_status_drift",
        subject_type="dispute",
        subject_id="dp_1",
        observation=seen,
    )
    later = a_run()
    gone = a_page(later, {"data": [{"id": "dp_1", "status": "lost"}]}, kind="disputes")
    discrepancy_clear(discrepancy=discrepancy, run=later, observation=gone, why="agrees now")
    html = as_(staff("vic", VIEW)).get(page_of(discrepancy)).content.decode()
    assert "Last seen in" in html
    assert "Cleared by" in html
    assert seen.sha256 in html
    assert gone.sha256 in html
    assert "Resolved: cleared by a later run" in html
    assert 'id="discrepancy-actions"' not in html  # nothing left to do
    run_page = as_(staff("rob", ("reconciliation", "view_run"))).get(
        reverse("admin:reconciliation_run_change", args=[later.pk])
    )
    assert page_of(discrepancy) in run_page.content.decode()  # listed as cleared by its page


def test_acknowledge_then_accept_with_a_note_each_an_audit_event() -> None:
    discrepancy = record(
        a_run(), code="charge_mismatch", subject_type="charge", subject_id="ch_evidence"
    )
    worker = staff("wanda", VIEW, WORK)
    client = as_(worker)
    page = client.get(page_of(discrepancy)).content.decode()
    assert 'id="acknowledge-form"' in page
    assert 'id="accept-form"' in page
    assert f'action="{action("acknowledge", discrepancy)}"' in page
    done = client.post(action("acknowledge", discrepancy), follow=True)
    assert any("is acknowledged" in m for m in messages_of(done))
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.acknowledged_by) == ("acknowledged", worker)
    again = client.post(action("acknowledge", discrepancy), follow=True)
    assert any("only an open one is taken" in m for m in messages_of(again))
    empty = client.post(action("accept", discrepancy), {"note": "  "}, follow=True)
    assert any("needs a note" in m for m in messages_of(empty))
    assert Discrepancy.objects.get(pk=discrepancy.pk).status == "acknowledged"
    accepted = client.post(
        action("accept", discrepancy), {"note": "Description differs only."}, follow=True
    )
    assert any("is accepted" in m for m in messages_of(accepted))
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.resolution, discrepancy.note) == (
        "resolved",
        "accepted",
        "Description differs only.",
    )
    assert events(discrepancy) == [
        ("discrepancy.open", "system"),
        ("discrepancy.acknowledge", "wanda"),
        ("discrepancy.accept", "wanda"),
    ]
    accept_event = AuditEvent.objects.get(action="discrepancy.accept")
    assert accept_event.actor == worker
    assert accept_event.details["note"] == "Description differs only."
    history = client.get(page_of(discrepancy)).content.decode()
    assert "discrepancy.accept" in history


def test_acting_without_the_permission_is_refused_and_changes_nothing() -> None:
    discrepancy = record(a_run(), code="leg_stuck", subject_type="refund_leg", subject_id="rfl_x")
    viewer = as_(staff("vic", VIEW))
    for name, data in (("acknowledge", {}), ("accept", {"note": "fine"})):
        response = viewer.post(action(name, discrepancy), data, follow=True)
        assert response.status_code == 200
        assert any(
            "permission_denied" in m and "work_discrepancy" in m for m in messages_of(response)
        ), name
    proposed = viewer.post(
        action("propose", discrepancy), {"kind": "confirm", "reason": "x"}, follow=True
    )
    assert any("Not done" in m for m in messages_of(proposed))
    assert Discrepancy.objects.get(pk=discrepancy.pk).status == "open"
    assert events(discrepancy) == [("discrepancy.open", "system")]


def test_money_is_never_accepted_with_a_note() -> None:
    discrepancy = record(
        a_run(), code="refund_missing", subject_type="refund_leg", subject_id="rfl_money"
    )
    worker = as_(staff("wanda", VIEW, WORK))
    page = worker.get(page_of(discrepancy)).content.decode()
    assert 'id="accept-form"' not in page
    assert 'id="acknowledge-form"' in page
    assert "concerns money" in page
    refused = worker.post(action("accept", discrepancy), {"note": "looks fine"}, follow=True)
    assert any("validation_error" in m and "concerns money" in m for m in messages_of(refused))
    assert Discrepancy.objects.get(pk=discrepancy.pk).status == "open"
    assert not AuditEvent.objects.filter(action="discrepancy.accept").exists()


def test_actions_on_an_unknown_discrepancy_or_by_get() -> None:
    discrepancy = record(a_run(), code="leg_stuck", subject_type="refund_leg", subject_id="rfl_g")
    worker = as_(staff("wanda", VIEW, WORK))
    missing = reverse("admin:reconciliation_discrepancy_acknowledge", args=[999_999])
    assert worker.post(missing).status_code == 404
    by_get = worker.get(action("acknowledge", discrepancy))
    assert by_get.status_code == 302
    assert by_get["Location"] == page_of(discrepancy)
    assert Discrepancy.objects.get(pk=discrepancy.pk).status == "open"


@pytest.fixture
def funded(alice: Api) -> FundingLeg:
    alice.create(5_000_000)
    return FundingLeg.objects.get()


def foreign_refund(funded: FundingLeg, sdk: stripe.StripeClient, cents: int) -> Discrepancy:
    """A refund made outside Vouch (no metadata), found as a run would find it."""
    refund = sdk.v1.refunds.create(params={"charge": funded.charge_id, "amount": cents})
    run = a_run()
    shown = a_page(run, {"object": "list", "data": [refund.to_dict()]})
    return record(
        run,
        code="refund_foreign",
        subject_type="refund",
        subject_id=refund.id,
        summary=f"Refund {refund.id} on {funded.charge_id} names no leg.",
        vouch_side={"refund": None, "charge_refunded": 0},
        provider_side={"refund": refund.id, "amount": cents, "metadata": {}},
        differing=["refund", "charge_refunded"],
        charge_id=funded.charge_id,
        envelope_public_id=funded.envelope.public_id,
        amount_micro=cents * 10_000,
        observation=shown,
        escalate_as=("funding_leg", funded.public_id),
    )


def test_propose_a_foreign_refund_on_the_discrepancy_then_a_second_person_approves(
    funded: FundingLeg, sdk: stripe.StripeClient
) -> None:
    discrepancy = foreign_refund(funded, sdk, 150)
    proposer = staff("pia", VIEW, WORK, PROPOSE, ("reconciliation", "view_adjustment"))
    client = as_(proposer)
    page = client.get(page_of(discrepancy)).content.decode()
    assert 'id="propose-form"' in page
    assert '<option value="foreign_refund">' in page
    assert '<option value="confirm">' in page
    assert '<option value="leg_release">' not in page  # only the kinds that fit the leg
    assert f'value="{discrepancy.subject_id}"' in page  # the provider refund, prefilled
    assert funded.public_id in page
    done = client.post(
        action("propose", discrepancy),
        {
            "kind": "foreign_refund",
            "provider_object_id": discrepancy.subject_id,
            "reason": "Refunded in the Dashboard by support.",
        },
        follow=True,
    )
    adjustment = Adjustment.objects.get()
    assert done.redirect_chain[-1][0] == reverse(
        "admin:reconciliation_adjustment_change", args=[adjustment.pk]
    )
    assert any("is proposed" in m for m in messages_of(done))
    assert (adjustment.kind, adjustment.amount_micro, adjustment.funding_leg) == (
        "foreign_refund",
        1_500_000,
        funded,
    )
    discrepancy.refresh_from_db()
    assert (discrepancy.adjustment, discrepancy.status) == (adjustment, "open")
    assert events(discrepancy)[-1] == ("discrepancy.propose_adjustment", "pia")
    assert AuditEvent.objects.filter(action="adjustment.propose", actor=proposer).exists()
    waiting = client.get(page_of(discrepancy)).content.decode()
    assert 'id="propose-form"' not in waiting  # one proposal at a time
    assert "waits for a second person" in waiting
    approver = staff("aron", APPROVE)
    adjustment_approve(adjustment=adjustment, actor=approver, confirmed_amount_micro=1_500_000)
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.resolution, discrepancy.resolved_by) == (
        "resolved",
        "adjusted",
        approver,
    )
    envelope = Envelope.objects.get()
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (1_500_000, 3_500_000)
    assert ledger_breaches() == []
    resolved = client.get(page_of(discrepancy)).content.decode()
    assert "Resolved: corrected by an approved adjustment" in resolved
    assert events(discrepancy)[-1] == ("discrepancy.adjusted", "aron")


def test_propose_refusals_are_messages_and_change_nothing(
    funded: FundingLeg, sdk: stripe.StripeClient
) -> None:
    discrepancy = foreign_refund(funded, sdk, 100)
    url = action("propose", discrepancy)
    proposer = as_(staff("pia", VIEW, PROPOSE))
    tries: list[tuple[dict[str, str], str]] = [
        ({"kind": "leg_release", "reason": "x"}, "adjustment_not_applicable"),  # wrong kind
        ({"kind": "bogus", "reason": "x"}, "Select a valid choice"),
        ({"kind": "foreign_refund", "provider_object_id": discrepancy.subject_id}, "reason"),
        ({"kind": "foreign_refund", "reason": "x"}, "provider object"),
        (
            {"kind": "foreign_refund", "reason": "x", "provider_object_id": "re_nope"},
            "adjustment_provider_mismatch",
        ),
        (
            {"kind": "foreign_refund", "reason": "x", "provider_object_id": "x" * 500},
            "at most 100 characters",
        ),
    ]
    for data, said in tries:
        response = proposer.post(url, data, follow=True)
        assert any(said in m for m in messages_of(response)), (data, messages_of(response))
    no_permission = as_(staff("wanda", VIEW, WORK)).post(
        url,
        {"kind": "foreign_refund", "reason": "x", "provider_object_id": discrepancy.subject_id},
        follow=True,
    )
    assert any("permission_denied" in m for m in messages_of(no_permission))
    assert (
        'id="propose-form"'
        not in as_(staff("walt", VIEW, WORK)).get(page_of(discrepancy)).content.decode()
    )
    assert not Adjustment.objects.exists()
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.adjustment) == ("open", None)
    assert Envelope.objects.get().unspent_micro == 5_000_000
    assert events(discrepancy) == [("discrepancy.open", "system")]


def test_a_discrepancy_naming_no_leg_offers_no_adjustment(sandbox: SandboxControl) -> None:
    discrepancy = record(
        a_run(), code="charge_mismatch", subject_type="charge", subject_id="ch_noleg"
    )
    client = as_(staff("pia", VIEW, WORK, PROPOSE))
    page = client.get(page_of(discrepancy)).content.decode()
    assert 'id="propose-form"' not in page
    assert "names no leg to correct" in page
    refused = client.post(
        action("propose", discrepancy), {"kind": "confirm", "reason": "x"}, follow=True
    )
    assert any("names no leg" in m for m in messages_of(refused))
    assert not Adjustment.objects.exists()


def test_a_proposer_who_cannot_read_adjustments_comes_back_to_the_discrepancy(
    funded: FundingLeg, sdk: stripe.StripeClient
) -> None:
    discrepancy = foreign_refund(funded, sdk, 100)
    client = as_(staff("pia", VIEW, PROPOSE))
    done = client.post(
        action("propose", discrepancy),
        {"kind": "confirm", "reason": "The ledger is right; the refund is someone else's."},
        follow=True,
    )
    assert done.redirect_chain[-1][0] == page_of(discrepancy)
    assert any("is proposed" in m for m in messages_of(done))
    assert "waits for a second person" in done.content.decode()
    assert Adjustment.objects.get().kind == "confirm"
