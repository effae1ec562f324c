"""A funding charge carries Vouch's data elements for Visa Compelling Evidence 3.0 (SPEC §17;
docs/decisions/0012-ce3-data-elements-in-receipts.md): the buyer's account, the connection's IP
address and the device cookie's digest, fixed on the funding leg when it is made and sent as
PaymentIntent metadata, which the provider copies onto the charge and the charge's signed receipt
keeps. Through the API, against the sandbox over HTTP, read back with the real SDK."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
import stripe
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from core.request_facts import DEVICE_COOKIE, FundingFacts, request_facts
from envelopes import services
from envelopes.models import FundingLeg, FundingStatus
from receipts.models import Receipt
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db

FUNDING: dict[str, Any] = {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
TWO_YEARS_S = 2 * 365 * 24 * 3600


def account_of(api: Api) -> str:
    digest = hmac.new(
        django_settings.SECRET_KEY.encode(),
        f"vouch-account:{api.user.pk}".encode(),
        hashlib.sha256,
    ).hexdigest()
    return "acct_" + digest[:24]


def device_of(api: Api) -> str:
    return hashlib.sha256(api.client.cookies[DEVICE_COOKIE].value.encode()).hexdigest()[:32]


def charge_metadata(sdk: stripe.StripeClient, leg: FundingLeg) -> dict[str, str]:
    return dict(sdk.v1.charges.retrieve(leg.charge_id).metadata.to_dict())


def test_funding_sends_account_ip_and_device_to_the_charge_and_keeps_them_on_the_leg(
    alice: Api, sdk: stripe.StripeClient
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    leg = FundingLeg.objects.get()
    elements = {
        "vouch_account": account_of(alice),
        "vouch_ip": "127.0.0.1",  # REMOTE_ADDR of the test client
        "vouch_device": device_of(alice),
    }
    assert leg.provider_metadata == elements
    assert charge_metadata(sdk, leg) == {
        "vouch_envelope": envelope_id,
        "vouch_funding": leg.public_id,
        **elements,
    }
    intent = sdk.v1.payment_intents.retrieve(leg.payment_intent_id)
    assert intent.metadata.to_dict() == charge_metadata(sdk, leg)

    # ... and the charge's signed receipt keeps them, as the provider's charge showed them.
    settle_runs()
    receipt = Receipt.objects.get(kind="charge", provider_object_id=leg.charge_id)
    assert {k: receipt.body["detail"]["metadata"][k] for k in elements} == elements
    assert receipt.body["detail"]["payment_method_details"]["card"]["fingerprint"]


def test_the_account_is_the_owners_and_stable_while_another_buyer_has_another(
    alice: Api, bob: Api
) -> None:
    alice.create(2_000_000)
    alice.create(2_000_000)
    bob.create(2_000_000)
    accounts = [
        (leg.envelope.owner.username, leg.provider_metadata["vouch_account"])
        for leg in FundingLeg.objects.select_related("envelope__owner").order_by("id")
    ]
    alices, bobs = account_of(alice), account_of(bob)
    assert accounts == [("alice", alices), ("alice", alices), ("bob", bobs)]
    assert alices != bobs


def test_a_top_up_carries_the_same_account_and_device(alice: Api, sdk: stripe.StripeClient) -> None:
    envelope_id = alice.create(2_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    original, top_up = FundingLeg.objects.order_by("sequence")
    assert top_up.provider_metadata == original.provider_metadata
    assert set(top_up.provider_metadata) == {"vouch_account", "vouch_ip", "vouch_device"}
    assert charge_metadata(sdk, top_up)["vouch_account"] == account_of(alice)
    assert charge_metadata(sdk, top_up)["vouch_funding"] == top_up.public_id


def test_the_device_cookie_is_set_once_and_reused(alice: Api, settings: Any) -> None:
    # Set by the first response (the session's GET /api/v1/me), then only sent back.
    cookie = alice.client.cookies[DEVICE_COOKIE]
    token = cookie.value
    assert len(token) == 43
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Lax"
    assert cookie["max-age"] == TWO_YEARS_S
    assert not cookie["secure"]  # SESSION_COOKIE_SECURE is off in tests
    response = alice.post("/api/v1/escrow/envelopes", FUNDING)
    assert response.status_code == 201
    assert DEVICE_COOKIE not in response.cookies
    alice.top_up(response.json()["data"]["envelope_id"], 2_000_000)
    assert alice.client.cookies[DEVICE_COOKIE].value == token
    assert {leg.provider_metadata["vouch_device"] for leg in FundingLeg.objects.all()} == {
        hashlib.sha256(token.encode()).hexdigest()[:32]
    }

    settings.SESSION_COOKIE_SECURE = True
    browser = APIClient()
    browser.force_login(alice.user)
    fresh = browser.get("/api/v1/me")
    assert fresh.cookies[DEVICE_COOKIE]["secure"] is True
    assert fresh.cookies[DEVICE_COOKIE].value != token


def test_without_the_cookie_a_funding_names_no_device_and_gets_one_for_next_time(
    alice: Api, sdk: stripe.StripeClient
) -> None:
    del alice.client.cookies[DEVICE_COOKIE]
    response = alice.post("/api/v1/escrow/envelopes", FUNDING)
    assert response.status_code == 201
    leg = FundingLeg.objects.get()
    assert leg.provider_metadata == {"vouch_account": account_of(alice), "vouch_ip": "127.0.0.1"}
    assert "vouch_device" not in charge_metadata(sdk, leg)
    assert len(response.cookies[DEVICE_COOKIE].value) == 43


@pytest.mark.parametrize("value", ["", "short", "x" * 44, "a" * 42 + "!"])
def test_a_cookie_vouch_did_not_make_names_no_device_and_is_replaced(
    alice: Api, value: str
) -> None:
    alice.client.cookies[DEVICE_COOKIE] = value
    response = alice.post("/api/v1/escrow/envelopes", FUNDING)
    assert response.status_code == 201
    assert "vouch_device" not in FundingLeg.objects.get().provider_metadata
    assert response.cookies[DEVICE_COOKIE].value != value


def test_an_error_answer_sets_no_cookie() -> None:
    # SPEC §5: an error's answer is the same for every caller (no random cookie in it).
    response = APIClient().get("/api/v1/escrow/envelopes")
    assert response.status_code in (401, 403)
    assert DEVICE_COOKIE not in response.cookies


def test_the_request_facts_are_the_connection_address_and_the_cookie_digest(rf: Any) -> None:
    token = "T" * 43
    request = rf.get("/", REMOTE_ADDR="2001:db8:0:0::1", HTTP_X_FORWARDED_FOR="198.51.100.9")
    request.COOKIES[DEVICE_COOKIE] = token
    assert request_facts(request) == FundingFacts(
        ip="2001:db8::1", device=hashlib.sha256(token.encode()).hexdigest()[:32]
    )
    assert request_facts(rf.get("/", REMOTE_ADDR="not an address")) == FundingFacts()


def test_a_resend_of_a_pending_leg_sends_identical_metadata(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    """The provider made the PaymentIntent but its answer was lost: the resume job sends again,
    without a request, under the leg's key. The sandbox refuses a key reused with other
    parameters, so the leg succeeding on the one PaymentIntent shows the metadata was the same."""
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post("/api/v1/escrow/envelopes", FUNDING)
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    leg = FundingLeg.objects.get()
    assert leg.status == FundingStatus.PENDING
    assert set(leg.provider_metadata) == {"vouch_account", "vouch_ip", "vouch_device"}

    services.stranded_resume(older_than_s=0)
    leg.refresh_from_db()
    assert leg.status == FundingStatus.SUCCEEDED
    assert sandbox.state()["counts"]["payment_intents"] == 1
    assert charge_metadata(sdk, leg) == {
        "vouch_envelope": leg.envelope.public_id,
        "vouch_funding": leg.public_id,
        **leg.provider_metadata,
    }


def test_a_leg_made_before_data_elements_resends_what_it_sent(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    """A pending leg from before this change holds no data elements: it sends only the two
    markers every funding sent then (so the provider's key sees the same request again)."""
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post("/api/v1/escrow/envelopes", FUNDING)
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    FundingLeg.objects.update(provider_metadata={})  # as migration 0007 left older legs
    services.stranded_resume(older_than_s=0)
    leg = FundingLeg.objects.get()
    assert leg.status == FundingStatus.SUCCEEDED
    assert charge_metadata(sdk, leg) == {
        "vouch_envelope": leg.envelope.public_id,
        "vouch_funding": leg.public_id,
    }
