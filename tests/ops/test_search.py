"""The console's search box (issue 27): any Vouch or provider id, or an e-mail, finds every object
that carries it (ops/search/), the id's own object first; one object opens straight away; an
unknown id says so; a person sees only what their admin lists show, and a table they may not read
is not asked. The world is made the way it happens: an envelope funded and refunded through the
API against the sandbox (its runs verified, its receipts signed), a dispute opened there, the
sandbox's events stored as the webhook stores them, a foreign refund found by reconciliation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
import stripe
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import User
from agents.models import RefundRequest
from agents.services import refund_request_create
from disputes.models import Dispute
from envelopes.models import Envelope, FundingLeg, RefundLeg
from ops.search import Hit, kind_of, search, search_term
from receipts.models import Receipt
from reconciliation.models import Discrepancy
from reconciliation.models import Run as ReconciliationRun
from reconciliation.services import Finding, discrepancy_record
from tests.drivers.disputes import World
from tests.drivers.reconciliation import a_run
from verification.models import Escalation, ProviderEvent
from verification.services import provider_event_store

pytestmark = pytest.mark.django_db


def everything(_: str) -> bool:
    return True


@dataclass
class Seeded:
    envelope: Envelope
    funding: FundingLeg
    leg: RefundLeg
    dispute: Dispute
    charge_receipt: Receipt
    refund_receipt: Receipt
    foreign_refund: str
    foreign: Discrepancy
    escalation: Escalation
    recon: ReconciliationRun
    request: RefundRequest
    events: list[ProviderEvent]

    @property
    def charge(self) -> str:
        return self.funding.charge_id

    @property
    def payment_intent(self) -> str:
        return self.funding.payment_intent_id


def seed_search(world: World, sdk: stripe.StripeClient, settings: Any) -> Seeded:
    """An envelope funded, partly refunded and disputed at the sandbox; its events stored; a
    refund made outside Vouch found by reconciliation (a money discrepancy and its escalation);
    a refund proposed through MCP."""
    world.fund(10_000_000)
    world.refund(2_000_000)
    # $5.00 disputed: held (SPEC §18), leaving money for the refund an assistant proposes.
    dispute = world.dispute(reason="fraudulent", amount_cents=500)
    envelope = Envelope.objects.get(public_id=world.envelope_id)
    funding = FundingLeg.objects.get(envelope=envelope)
    leg = RefundLeg.objects.get(funding_leg=funding)
    events = []
    for event in sdk.v1.events.list(params={"limit": 100}).data:
        data = event.to_dict()
        events.append(provider_event_store(event=data, raw=json.dumps(data))[0])
    recon = a_run()
    foreign = "re_3SearchForeignRefund01"
    discrepancy, created = discrepancy_record(
        run=recon,
        finding=Finding(
            code="refund_foreign",
            subject_type="refund",
            subject_id=foreign,
            summary=f"A refund made outside Vouch: {foreign}",
            charge_id=funding.charge_id,
            envelope_public_id=envelope.public_id,
            amount_micro=1_000_000,
            escalate_as=("funding_leg", funding.public_id),
        ),
    )
    assert created
    assert discrepancy.escalation is not None
    settings.MCP_REFUND_REQUEST_RATE = ""
    request = refund_request_create(
        user=world.buyer.user,
        envelope_id=envelope.public_id,
        amount_micro=1_000_000,
        idempotency_key="search-1",
        client_id="client-test",
        origin="http://testserver",
    )
    return Seeded(
        envelope=envelope,
        funding=funding,
        leg=leg,
        dispute=dispute,
        charge_receipt=Receipt.objects.get(kind="charge", charge_id=funding.charge_id),
        refund_receipt=Receipt.objects.get(
            kind="refund", provider_object_id=leg.provider_refund_id
        ),
        foreign_refund=foreign,
        foreign=discrepancy,
        escalation=discrepancy.escalation,
        recon=recon,
        request=RefundRequest.objects.get(public_id=request["request_id"]),
        events=events,
    )


def found(term: str, can_view: Any = everything) -> list[tuple[str, str]]:
    return [(hit.kind, hit.ident) for hit in search(term, can_view=can_view).hits]


def urls(term: str) -> dict[tuple[str, str], str]:
    return {hit.key: hit.url for hit in search(term, can_view=everything).hits}


def change(model: str, pk: Any) -> str:
    return reverse(f"admin:{model}_change", args=[quote(pk)])


def events_about(seeded: Seeded, *fields: str, value: str) -> set[tuple[str, str]]:
    return {
        ("Provider event", event.event_id)
        for event in seeded.events
        if any(event.payload["data"]["object"].get(name) == value for name in fields)
    }


@pytest.fixture
def seeded(world: World, sdk: stripe.StripeClient, settings: Any) -> Seeded:
    return seed_search(world, sdk, settings)


def test_each_vouch_id_finds_its_own_object_first_and_what_names_it(seeded: Seeded) -> None:
    envelope, funding, leg = seeded.envelope, seeded.funding, seeded.leg
    operation = leg.operation
    own = {
        envelope.public_id: ("Envelope", change("envelopes_envelope", envelope.pk)),
        funding.public_id: (
            "Funding leg",
            change("envelopes_envelope", envelope.pk) + f"#funding-{funding.public_id}",
        ),
        operation.public_id: ("Refund", change("envelopes_refundoperation", operation.pk)),
        leg.public_id: (
            "Refund leg",
            change("envelopes_refundoperation", operation.pk) + f"#leg-{leg.public_id}",
        ),
        seeded.dispute.public_id: ("Dispute", change("disputes_dispute", seeded.dispute.pk)),
        seeded.recon.public_id: (
            "Reconciliation run",
            change("reconciliation_run", seeded.recon.pk),
        ),
        seeded.foreign.public_id: (
            "Discrepancy",
            change("reconciliation_discrepancy", seeded.foreign.pk),
        ),
        seeded.request.public_id: (
            "Refund request",
            change("agents_refundrequest", seeded.request.pk),
        ),
        seeded.charge_receipt.pk: (
            "Receipt",
            change("receipts_receipt", seeded.charge_receipt.pk),
        ),
        seeded.events[0].event_id: (
            "Provider event",
            change("verification_providerevent", seeded.events[0].pk),
        ),
    }
    for term, (kind, url) in own.items():
        result = search(term, can_view=everything)
        first = result.hits[0]
        assert (first.kind, first.url, first.own) == (kind, url, True), term
        assert [hit for hit in result.hits if hit.own] == [first], term

    # The envelope and its funding leg are named by the foreign refund's discrepancy (its
    # envelope) and escalation (its subject): listed after the object itself.
    assert found(envelope.public_id) == [
        ("Envelope", envelope.public_id),
        ("Discrepancy", seeded.foreign.public_id),
        ("Escalation", f"#{seeded.escalation.pk}"),
    ]
    assert found(funding.public_id) == [
        ("Funding leg", funding.public_id),
        ("Escalation", f"#{seeded.escalation.pk}"),
    ]
    # Nothing else names the refund leg or the dispute: one hit, opened straight away.
    assert search(leg.public_id, can_view=everything).single is not None
    assert search(seeded.dispute.public_id, can_view=everything).single is not None


def test_a_charge_lists_its_envelope_legs_runs_events_receipts_disputes_discrepancies(
    seeded: Seeded,
) -> None:
    hits = found(seeded.charge)
    kinds = {kind for kind, _ in hits}
    assert kinds == {
        "Envelope",
        "Funding leg",
        "Refund leg",
        "Dispute",
        "Receipt",
        "Verification run",
        "Provider event",
        "Discrepancy",
        "Escalation",
    }
    assert ("Envelope", seeded.envelope.public_id) in hits
    assert ("Funding leg", seeded.funding.public_id) in hits
    assert ("Refund leg", seeded.leg.public_id) in hits
    assert ("Dispute", seeded.dispute.public_id) in hits
    assert ("Receipt", seeded.charge_receipt.pk) in hits
    assert ("Discrepancy", seeded.foreign.public_id) in hits
    # The charge's run (keyed by charge_id) and the refund's (keyed by its charge).
    assert ("Verification run", seeded.leg.verification_run.public_id) in hits
    events = events_about(seeded, "id", "charge", value=seeded.charge)
    assert events
    assert events <= set(hits)
    assert not any(hit.own for hit in search(seeded.charge, can_view=everything).hits)


def test_a_payment_intent_finds_the_envelope_and_the_disputes_of_its_charge(
    seeded: Seeded,
) -> None:
    hits = found(seeded.payment_intent)
    assert ("Envelope", seeded.envelope.public_id) in hits
    assert ("Funding leg", seeded.funding.public_id) in hits
    assert ("Dispute", seeded.dispute.public_id) in hits  # "pi_… in disputes: nothing" before
    assert ("Receipt", seeded.charge_receipt.pk) in hits
    events = events_about(seeded, "id", "payment_intent", value=seeded.payment_intent)
    assert events
    assert events <= set(hits)


def test_a_provider_refund_and_a_foreign_one(seeded: Seeded) -> None:
    refund = seeded.leg.provider_refund_id
    hits = found(refund)
    assert hits[:2] == [("Refund leg", seeded.leg.public_id), ("Receipt", seeded.refund_receipt.pk)]
    assert ("Verification run", seeded.leg.verification_run.public_id) in hits
    assert urls(refund)[("Refund leg", seeded.leg.public_id)].endswith(
        f"#leg-{seeded.leg.public_id}"
    )
    events = events_about(seeded, "id", value=refund)
    assert events
    assert events <= set(hits)
    # A refund made outside Vouch: its discrepancy, and the escalation about the funding leg it
    # was taken from ("a foreign re_… in escalations: nothing" before).
    assert found(seeded.foreign_refund) == [
        ("Discrepancy", seeded.foreign.public_id),
        ("Escalation", f"#{seeded.escalation.pk}"),
    ]


def test_a_provider_dispute_finds_the_envelope_of_its_charge(seeded: Seeded) -> None:
    provider_id = seeded.dispute.provider_dispute_id
    hits = found(provider_id)
    assert hits[:3] == [
        ("Dispute", seeded.dispute.public_id),
        ("Envelope", seeded.envelope.public_id),
        ("Refund leg", seeded.leg.public_id),
    ]
    events = events_about(seeded, "id", value=provider_id)
    assert events
    assert events <= set(hits)


def test_an_email_finds_the_person_their_envelopes_and_requests(seeded: Seeded) -> None:
    email = seeded.envelope.owner.email
    assert found(email.upper()) == [
        ("Person", email),
        ("Envelope", seeded.envelope.public_id),
        ("Refund request", seeded.request.public_id),
    ]
    assert found("nobody@example.com") == []


def test_the_page_opens_one_object_lists_several_and_says_when_none(
    seeded: Seeded, client: Client
) -> None:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-pw-123"))
    page = reverse("admin-search")

    one = client.get(page, {"q": f"  {seeded.dispute.public_id} "})
    assert (one.status_code, one["Location"]) == (
        302,
        change("disputes_dispute", seeded.dispute.pk),
    )
    # A Stripe Dashboard address pasted whole: its last part is the id.
    url = f"https://dashboard.stripe.com/test/disputes/{seeded.dispute.provider_dispute_id}"
    several = client.get(page, {"q": url})
    assert several.status_code == 200
    html = several.content.decode()
    assert 'id="search-results"' in html
    assert f'href="{change("envelopes_envelope", seeded.envelope.pk)}"' in html
    assert f'href="{change("disputes_dispute", seeded.dispute.pk)}"' in html

    missing = client.get(page, {"q": "env_000000000000000000000000"})
    assert 'id="search-none"' in missing.content.decode()
    assert "Vouch envelope" in missing.content.decode()
    unknown = client.get(page, {"q": "xyz_123"})
    assert 'id="search-unknown"' in unknown.content.decode()
    assert client.get(page, {"q": " "})["Location"] == reverse("admin:index")

    # The console's home page carries the box, sending to this page.
    home = client.get(reverse("admin:index")).content.decode()
    assert f'action="{page}"' in home
    assert 'name="q"' in home


def staff_with(*codenames: str) -> User:
    user = User.objects.create_user("vic", "vic@example.com", "pw-vic-123", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=user.pk)


def test_a_person_sees_only_what_their_lists_show_and_other_tables_are_not_asked(
    seeded: Seeded, client: Client
) -> None:
    client.force_login(staff_with("view_envelope"))
    response = client.get(reverse("admin-search"), {"q": seeded.charge})
    assert response.status_code == 200
    hits: list[Hit] = response.context["result"].hits
    assert {(hit.kind, hit.ident) for hit in hits} == {
        ("Envelope", seeded.envelope.public_id),
        ("Funding leg", seeded.funding.public_id),
    }
    with CaptureQueriesContext(connection) as queries:
        client.get(reverse("admin-search"), {"q": seeded.charge})
    sql = " ".join(query["sql"] for query in queries.captured_queries)
    for table in ("disputes_dispute", "receipts_receipt", "reconciliation_discrepancy"):
        assert table not in sql

    # An object they may not see reads as no object at all; so does a page for nobody's staff.
    denied = client.get(reverse("admin-search"), {"q": seeded.dispute.public_id})
    assert 'id="search-none"' in denied.content.decode()
    client.logout()
    anonymous = client.get(reverse("admin-search"), {"q": seeded.dispute.public_id})
    assert anonymous.status_code == 302
    assert "/admin/login/" in anonymous["Location"]


def test_a_search_is_a_handful_of_queries(seeded: Seeded) -> None:
    """Each lookup is one indexed equality (and a few read a second table by id): the count does
    not grow with the data (bench/search.py times them at 100,000 rows a table)."""
    for term in (
        seeded.charge,
        seeded.payment_intent,
        seeded.leg.provider_refund_id,
        seeded.dispute.provider_dispute_id,
        seeded.envelope.public_id,
        seeded.envelope.owner.email,
    ):
        with CaptureQueriesContext(connection) as queries:
            search(term, can_view=everything)
        assert len(queries) <= 14, (term, len(queries))
        assert not any(" LIKE " in query["sql"] for query in queries.captured_queries), term


@pytest.mark.parametrize(
    ("query", "term", "prefix"),
    [
        ("  env_0123abcd  ", "env_0123abcd", "env_"),
        ('"ch_3Abc"', "ch_3Abc", "ch_"),
        ("https://dashboard.stripe.com/test/payments/pi_3Xyz", "pi_3Xyz", "pi_"),
        ("https://dashboard.stripe.com/test/refunds/pyr_1Q/", "pyr_1Q", "pyr_"),
        ("rec_ab", "rec_ab", "rec_"),
        ("re_ab", "re_ab", "re_"),
        ("rcpt_" + "a" * 64, "rcpt_" + "a" * 64, "rcpt_"),
        ("vrun_1", "vrun_1", "vrun_"),
        ("evt_1", "evt_1", "evt_"),
        ("dp_1", "dp_1", "dp_"),
    ],
)
def test_what_a_pasted_id_is(query: str, term: str, prefix: str) -> None:
    assert search_term(query) == term
    kind = kind_of(term)
    assert kind is not None
    assert kind.prefix == prefix


@pytest.mark.parametrize("term", ["", "env_", "xyz_1", "env_ 1", "ch_1;drop", "e" * 300, "12.50"])
def test_anything_else_is_no_id(term: str) -> None:
    assert kind_of(term) is None
    assert search(term, can_view=everything).hits == []
    assert not search(term, can_view=everything).recognised
