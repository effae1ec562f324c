"""Search never confirms an object its person may not view (issue 38 item 2, SPEC §19's last
point): for every id kind search knows that names one of Vouch's objects (a Vouch id, a Stripe
dispute, a Stripe event), a real id the person may not view answers exactly as an unknown id of
the same kind: the same status, no redirect, the same page but for the id itself."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import stripe
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from accounts.models import User
from disputes.models import Dispute
from ops.search import KINDS
from tests.drivers.disputes import World
from tests.ops.test_search import Seeded, seed_search
from verification.models import VerificationRun

pytestmark = pytest.mark.django_db

# A real id of each kind in the seeded world; None where the seed makes no such row (the kind's
# lookups are then covered by another kind's: du_ by dp_, whose lookups are the same).
ENVELOPE, REFUNDS, DISPUTE = "envelopes.envelope", "envelopes.refundoperation", "disputes.dispute"
REAL: dict[str, tuple[str, Callable[[Seeded], str | None]]] = {
    "env_": (ENVELOPE, lambda s: s.envelope.public_id),
    "fnd_": (ENVELOPE, lambda s: s.funding.public_id),
    "dbt_": (ENVELOPE, lambda s: None),
    "erf_": (REFUNDS, lambda s: s.leg.operation.public_id),
    "rfl_": (REFUNDS, lambda s: s.leg.public_id),
    "adj_": ("reconciliation.adjustment", lambda s: None),
    "dsp_": (DISPUTE, lambda s: s.dispute.public_id),
    "pkt_": ("disputes.packet", lambda s: s.dispute.packets.order_by("version")[0].public_id),
    "evd_": ("disputes.evidence", lambda s: None),
    "vrun_": (
        "verification.verificationrun",
        lambda s: VerificationRun.objects.order_by("id")[0].public_id,
    ),
    "rec_": ("reconciliation.run", lambda s: s.recon.public_id),
    "dsc_": ("reconciliation.discrepancy", lambda s: s.foreign.public_id),
    "rrq_": ("agents.refundrequest", lambda s: s.request.public_id),
    "rcpt_": ("receipts.receipt", lambda s: s.charge_receipt.pk),
    "dp_": (DISPUTE, lambda s: s.dispute.provider_dispute_id),
    "du_": (DISPUTE, lambda s: None),
    "evt_": ("verification.providerevent", lambda s: s.events[0].event_id),
}
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"')


@pytest.fixture
def seeded(world: World, sdk: stripe.StripeClient, settings: Any) -> Seeded:
    return seed_search(world, sdk, settings)


def staff_seeing_all_but(model: str, username: str) -> User:
    """Staff holding every view permission but the named model's (and, for the disputes app,
    none of it: any packet permission reads disputes, disputes/permissions.py)."""
    app, name = model.split(".")
    user = User.objects.create_user(
        username, f"{username}@example.com", "pw-x-12345", is_staff=True
    )
    perms = Permission.objects.filter(codename__startswith="view_").exclude(
        content_type__app_label=app, content_type__model=name
    )
    if app == "disputes":
        perms = perms.exclude(content_type__app_label="disputes")
    user.user_permissions.add(*perms)
    return User.objects.get(pk=user.pk)


def staff_with(username: str, *codenames: str) -> User:
    user = User.objects.create_user(
        username, f"{username}@example.com", "pw-x-12345", is_staff=True
    )
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=user.pk)


def unknown_like(real: str, prefix: str) -> str:
    """An id of the same kind and length that names nothing."""
    return prefix + "Z" * (len(real) - len(prefix))


def answer(client: Client, term: str) -> tuple[int, str | None, str]:
    response = client.get(reverse("admin-search"), {"q": term})
    body = _CSRF.sub("csrf", response.content.decode()).replace(term, "<ID>")
    return response.status_code, response.get("Location"), body


def test_every_kind_that_names_an_object_has_a_real_id_here() -> None:
    """A new id kind naming an object fails here until this test knows how to find one."""
    assert {kind.prefix for kind in KINDS if getattr(kind, "names", "")} == set(REAL)


def test_a_real_id_the_person_may_not_view_answers_as_an_unknown_one(
    seeded: Seeded, client: Client
) -> None:
    """Issue 38 item 2: with envelope permissions only, a `dp_…` id redirected to the disputed
    envelope while an unknown `dp_…` said "No object you can see"."""
    checked, leaks = [], []
    for prefix, (model, real_of) in REAL.items():
        real = real_of(seeded)
        if real is None:
            continue
        assert real.startswith(prefix)
        client.force_login(staff_seeing_all_but(model, f"s-{prefix.rstrip('_')}"))
        hidden, missing = answer(client, real), answer(client, unknown_like(real, prefix))
        if hidden != missing:
            leaks.append((prefix, hidden[:2]))
        assert missing[0] == 200
        assert missing[1] is None
        assert 'id="search-none"' in missing[2]
        checked.append(prefix)
    assert leaks == []
    assert len(checked) >= 12, checked

    # The issue's own case: envelope permissions only, the dispute's Stripe id.
    client.force_login(staff_with("eva", "view_envelope", "view_refundoperation"))
    dispute: Dispute = seeded.dispute
    real = dispute.provider_dispute_id
    assert answer(client, real) == answer(client, unknown_like(real, "dp_"))


def test_who_may_view_still_finds_it(seeded: Seeded, client: Client) -> None:
    """The same people, given the view, find what the id names (the refusal is not blanket)."""
    client.force_login(staff_with("dora", "view_dispute", "view_envelope"))
    found = client.get(reverse("admin-search"), {"q": seeded.dispute.provider_dispute_id})
    assert found.status_code == 200
    assert {hit.model for hit in found.context["result"].hits} >= {
        "disputes.dispute",
        "envelopes.envelope",
    }
