"""Every provider id the ops admin shows links to the object in the Stripe Dashboard (issue 13,
SPEC §10): the run page and list, the stored events, the receipts list and page, a discrepancy's
subject; a value that is not a Stripe id stays text."""

from __future__ import annotations

import json

import pytest
import stripe
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from accounts.models import User
from envelopes.models import RefundLeg
from receipts.models import Receipt
from reconciliation.admin import provider_id
from tests.drivers.api import Api
from tests.helpers import settle_runs
from verification.models import ProviderEvent
from verification.services import provider_event_store

pytestmark = pytest.mark.django_db
TEST = "https://dashboard.stripe.com/test"


@pytest.fixture
def superuser(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-pw-123"))
    return client


def test_provider_ids_link_to_the_stripe_dashboard(
    superuser: Client,
    alice: Api,
    sdk: stripe.StripeClient,
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    refund = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000}
    )
    assert refund.status_code == 200, refund.content
    settle_runs()
    leg = RefundLeg.objects.get()
    charge = leg.funding_leg.charge_id
    run = leg.verification_run
    assert run is not None

    page = superuser.get(
        reverse("admin:verification_verificationrun_change", args=[run.pk])
    ).content.decode()
    objects = page.split('class="vouch-provider-objects"', 1)[1].split("</td>", 1)[0]
    assert f'href="{TEST}/refunds/{leg.provider_refund_id}"' in objects
    assert f'href="{TEST}/payments/{charge}"' in objects
    listing = superuser.get(reverse("admin:verification_verificationrun_changelist")).content
    assert f'href="{TEST}/refunds/{leg.provider_refund_id}"' in listing.decode()

    for event in sdk.v1.events.list(params={"type": "refund.created"}).data:
        data = event.to_dict()
        provider_event_store(event=data, raw=json.dumps(data))
    stored = ProviderEvent.objects.get(type="refund.created")
    events = superuser.get(reverse("admin:verification_providerevent_changelist")).content.decode()
    assert f'href="{TEST}/events/{stored.event_id}"' in events
    assert f'href="{TEST}/refunds/{leg.provider_refund_id}"' in events

    receipts = superuser.get(reverse("admin:receipts_receipt_changelist")).content.decode()
    assert f'href="{TEST}/payments/{charge}"' in receipts
    assert f'href="{TEST}/refunds/{leg.provider_refund_id}"' in receipts
    receipt = Receipt.objects.get(provider_object_id=leg.provider_refund_id)
    response = superuser.get(reverse("admin:receipts_receipt_change", args=[quote(receipt.pk)]))
    assert response.status_code == 200, (response.status_code, response.get("Location"))
    detail = response.content.decode()
    assert f'href="{TEST}/refunds/{leg.provider_refund_id}"' in detail
    assert receipt.pk in detail


def test_a_value_that_is_not_a_stripe_id_stays_text() -> None:
    assert "href" not in provider_id("rfl_0123abc")
    assert "href" not in provider_id("re_seed_foreign")
    assert f'href="{TEST}/refunds/re_123abc"' in provider_id("re_123abc")
