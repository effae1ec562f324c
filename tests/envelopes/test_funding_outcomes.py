"""What a funding call's answer means (envelopes.services.funding), case by case: a PaymentIntent
that shows a refusal (a decline, canceled, or waiting for a 3-D Secure authentication that cannot
come), the error each refusal becomes for the buyer, which PaymentIntent a leg records of several,
which PaymentIntent is a leg's at all, and what the lookup past the key's life does with what it
finds. Issue 36; the cases the mutation run (bench/mutation) showed untold."""

from datetime import timedelta
from typing import Any

import pytest
import stripe
import time_machine
from django.utils import timezone

from envelopes import services
from envelopes.exceptions import (
    CardDeclined,
    InvalidPaymentMethod,
    PaymentRefused,
    ProviderUnavailable,
)
from envelopes.models import FundingLeg, FundingStatus
from envelopes.services.funding import (
    AUTHENTICATION_MESSAGE,
    _chosen,
    _funding_refusal,
    _refusal_of,
    intent_is_the_legs,
)
from providers import Outcome, OutcomeKind
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import Escalation

CARD_ERROR = {"type": "card_error", "code": "expired_card", "message": "Declined, said Stripe."}


# --- a PaymentIntent's refusal ------------------------------------------------------------------


def test_a_payment_intent_waiting_for_authentication_is_a_402_refusal() -> None:
    refusal = _refusal_of({"id": "pi_1", "status": "requires_action"})
    assert refusal == Outcome(
        OutcomeKind.REFUSED,
        error_code="authentication_required",
        error_message=AUTHENTICATION_MESSAGE,
        http_status=402,
        error_detail={"payment_intent": "pi_1", "status": "requires_action"},
    )


@pytest.mark.parametrize("status", ["succeeded", "processing", "requires_confirmation"])
def test_a_payment_intent_on_its_way_or_done_is_no_refusal(status: str) -> None:
    assert _refusal_of({"id": "pi_1", "status": status, "last_payment_error": CARD_ERROR}) is None


def test_a_payment_intent_never_confirmed_is_no_refusal_yet() -> None:
    assert _refusal_of({"id": "pi_1", "status": "requires_payment_method"}) is None


def test_a_declined_payment_intent_is_the_card_error_it_shows() -> None:
    refusal = _refusal_of(
        {"id": "pi_1", "status": "requires_payment_method", "last_payment_error": CARD_ERROR}
    )
    assert refusal is not None
    assert (refusal.kind, refusal.error_code, refusal.error_message, refusal.http_status) == (
        OutcomeKind.REFUSED,
        "expired_card",  # the card error's own code, not a generic decline
        "Declined, said Stripe.",
        402,
    )
    assert refusal.error_detail == CARD_ERROR


def test_a_card_error_without_a_code_is_card_declined() -> None:
    refusal = _refusal_of(
        {
            "id": "pi_1",
            "status": "requires_payment_method",
            "last_payment_error": {"type": "card_error"},
        }
    )
    assert refusal is not None
    assert (refusal.error_code, refusal.error_message, refusal.http_status) == (
        "card_declined",
        "The payment failed.",
        402,
    )


def test_a_canceled_payment_intent_is_a_400_refusal_named_by_its_status() -> None:
    refusal = _refusal_of({"id": "pi_1", "status": "canceled"})
    assert refusal is not None
    assert (refusal.kind, refusal.error_code, refusal.error_message, refusal.http_status) == (
        OutcomeKind.REFUSED,
        "canceled",
        "The payment failed.",
        400,
    )


# --- the error the buyer gets -------------------------------------------------------------------


def _refused(status: int, code: str | None, **detail: Any) -> Outcome:
    return Outcome(
        OutcomeKind.REFUSED,
        error_code=code,
        error_message="Stripe's words.",
        http_status=status,
        error_detail=detail,
    )


def test_a_card_asking_for_authentication_is_told_in_vouchs_words() -> None:
    error = _funding_refusal(_refused(402, "authentication_required", decline_code="x"))
    assert isinstance(error, CardDeclined)
    assert (error.code, error.message, error.details) == (
        "authentication_required",
        AUTHENTICATION_MESSAGE,
        {"decline_code": "x"},
    )


def test_a_decline_keeps_stripes_code_words_and_decline_code() -> None:
    error = _funding_refusal(_refused(402, "card_declined", decline_code="insufficient_funds"))
    assert isinstance(error, CardDeclined)
    assert (error.code, error.message, error.details) == (
        "card_declined",
        "Stripe's words.",
        {"decline_code": "insufficient_funds"},
    )
    assert _funding_refusal(_refused(402, None)).code == "card_declined"


def test_an_unknown_payment_method_is_an_invalid_payment_method() -> None:
    error = _funding_refusal(_refused(400, "resource_missing", param="payment_method"))
    assert isinstance(error, InvalidPaymentMethod)
    assert error.details == {"provider_code": "resource_missing"}


@pytest.mark.parametrize("status", [401, 403])
def test_our_credentials_refused_is_provider_unavailable(status: int) -> None:
    assert isinstance(_funding_refusal(_refused(status, "x")), ProviderUnavailable)


@pytest.mark.parametrize("status", [400, 404])
def test_any_other_refusal_is_payment_refused_naming_stripes_code(status: int) -> None:
    error = _funding_refusal(_refused(status, "parameters_exclusive", param="amount"))
    assert isinstance(error, PaymentRefused)
    assert error.details == {"provider_code": "parameters_exclusive"}


# --- which PaymentIntent ------------------------------------------------------------------------


def test_of_several_payment_intents_the_oldest_succeeded_one_is_chosen() -> None:
    intents = [
        {"id": "pi_failed_oldest", "status": "requires_payment_method", "created": 1},
        {"id": "pi_late", "status": "succeeded", "created": 30},
        {"id": "pi_early", "status": "succeeded", "created": 20},
    ]
    assert _chosen(intents)["id"] == "pi_early"


def test_with_none_succeeded_the_oldest_is_chosen_and_no_created_counts_as_oldest() -> None:
    assert _chosen([{"id": "b", "created": 5}, {"id": "a", "created": 3}])["id"] == "a"
    assert _chosen([{"id": "b", "created": 1}, {"id": "undated"}])["id"] == "undated"


@pytest.mark.django_db
def test_a_payment_intent_is_the_legs_only_by_its_metadata_amount_and_usd(alice: Api) -> None:
    alice.create(2_000_000)
    leg = FundingLeg.objects.get()
    mine = {"metadata": {"vouch_funding": leg.public_id}, "amount": 200, "currency": "usd"}
    assert intent_is_the_legs(leg, mine)
    assert intent_is_the_legs(leg, {**mine, "currency": "USD"})
    assert not intent_is_the_legs(leg, {**mine, "metadata": {"vouch_funding": "fnd_other"}})
    assert not intent_is_the_legs(leg, {**mine, "amount": 201})
    assert not intent_is_the_legs(leg, {**mine, "currency": "eur"})
    assert not intent_is_the_legs(leg, {**mine, "currency": None})


# --- the leg's own path -------------------------------------------------------------------------


def _lost_answer(alice: Api, sandbox: SandboxControl) -> FundingLeg:
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
    )
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    return FundingLeg.objects.get()


def _requests(sandbox: SandboxControl) -> dict[str, int]:
    return dict(sandbox.state()["requests"])


@pytest.mark.django_db
def test_a_succeeded_leg_is_sent_nowhere(alice: Api, sandbox: SandboxControl) -> None:
    alice.create(2_000_000)
    leg = FundingLeg.objects.get()
    before = _requests(sandbox)
    result = services.funding_send(leg=leg)
    assert (result.leg, result.envelope) == (leg, leg.envelope)
    assert _requests(sandbox) == before


@pytest.mark.django_db
def test_an_abandoned_leg_is_refused_naming_it(alice: Api, sandbox: SandboxControl) -> None:
    leg = _lost_answer(alice, sandbox)
    FundingLeg.objects.filter(pk=leg.pk).update(status=FundingStatus.ABANDONED)
    leg.refresh_from_db()
    with pytest.raises(PaymentRefused) as refused:
        services.funding_send(leg=leg)
    assert refused.value.details == {"funding_id": leg.public_id}
    assert refused.value.message == (
        "No payment was made for this funding charge: the provider holds none, as a person "
        "confirmed."
    )


@pytest.mark.django_db
def test_at_the_very_end_of_its_keys_life_a_leg_is_sent_again_not_looked_up(
    alice: Api, sandbox: SandboxControl
) -> None:
    leg = _lost_answer(alice, sandbox)
    before = _requests(sandbox)
    with time_machine.travel(leg.created_at + services.PROVIDER_KEY_TTL, tick=False):
        services.funding_send(leg=leg)
    after = _requests(sandbox)
    assert after["POST /v1/payment_intents"] == before["POST /v1/payment_intents"] + 1
    assert after.get("GET /v1/payment_intents/search", 0) == before.get(
        "GET /v1/payment_intents/search", 0
    )
    leg.refresh_from_db()
    assert leg.status == FundingStatus.SUCCEEDED


@pytest.mark.django_db
def test_a_leg_whose_payment_intent_vanished_is_escalated_as_not_at_the_provider(
    alice: Api, sandbox: SandboxControl
) -> None:
    """Looked up by its known id past the key's life, the PaymentIntent is gone (404): a person
    decides, the money is not counted as funded."""
    leg = _lost_answer(alice, sandbox)
    intent_id = (
        stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})
        .v1.payment_intents.list()
        .data[0]
        .id
    )
    FundingLeg.objects.filter(pk=leg.pk).update(payment_intent_id=intent_id)
    sandbox.forget(intent_id)
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        result = services.funding_send(leg=FundingLeg.objects.get(pk=leg.pk))
    assert result.leg.status == FundingStatus.PENDING
    escalation = Escalation.objects.get()
    assert (escalation.verdict_class, escalation.subject_type, escalation.subject_id) == (
        "not at the provider",
        "funding_leg",
        leg.public_id,
    )
    assert escalation.money is True
    assert f"for it (looked up by id {intent_id}). Nothing is counted as funded." in (
        escalation.reason
    )


@pytest.mark.django_db
def test_a_leg_charged_twice_records_the_oldest_and_escalates_the_duplicate(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    leg = _lost_answer(alice, sandbox)
    first = sdk.v1.payment_intents.list().data[0]
    sandbox.advance_clock(10)  # a later second: the oldest is the first, by its `created`
    second = sdk.v1.payment_intents.create(  # as older code might have made it, by mistake
        params={
            "amount": 200,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "allowed_payment_method_types": ["card"],
            "metadata": first.metadata.to_dict(),
        }
    )
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        services.funding_send(leg=FundingLeg.objects.get(pk=leg.pk))
    leg.refresh_from_db()
    assert (leg.status, leg.payment_intent_id) == (FundingStatus.SUCCEEDED, first.id)
    escalation = Escalation.objects.get()
    assert (
        escalation.verdict_class,
        escalation.subject_type,
        escalation.subject_id,
        escalation.money,
    ) == ("duplicate side effect", "funding_leg", leg.public_id, True)
    assert f"{first.id}, {second.id}" in escalation.reason or (
        f"{second.id}, {first.id}" in escalation.reason
    )
    assert "The provider holds 2 succeeded PaymentIntents" in escalation.reason


class _Died(Exception):
    pass


@pytest.mark.django_db
def test_the_crash_point_after_the_payment_call_stands_between_call_and_record(
    alice: Api, sandbox: SandboxControl, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process (the crash tests of test_crash_retry.py die in a child process): the point
    `funding_after_provider_call` is reached with the PaymentIntent made and the leg pending."""
    import core.crash

    def died(status: int) -> None:
        raise _Died(status)

    monkeypatch.setattr(core.crash.os, "_exit", died)
    settings.VOUCH_CRASH_AT = "funding_after_provider_call"
    with pytest.raises(_Died):
        services.envelope_create(
            owner=alice.user, amount_micro=2_000_000, payment_method="pm_card_visa"
        )
    assert sandbox.state()["counts"]["payment_intents"] == 1
    assert FundingLeg.objects.get().status == FundingStatus.PENDING


@pytest.mark.django_db
def test_a_leg_never_made_is_escalated_naming_the_lookup_by_metadata(
    alice: Api, sandbox: SandboxControl
) -> None:
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
    )
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        services.funding_send(leg=FundingLeg.objects.get())
    escalation = Escalation.objects.get()
    assert "(looked up by Vouch's metadata). Nothing is counted as funded." in escalation.reason


@pytest.mark.django_db
def test_a_lookup_that_cannot_read_leaves_the_leg_pending_for_the_next_tick(
    alice: Api, sandbox: SandboxControl
) -> None:
    leg = _lost_answer(alice, sandbox)
    sandbox.add_fault("/v1/payment_intents/search", "server_error", method="GET")
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        result = services.funding_send(leg=FundingLeg.objects.get(pk=leg.pk))
    assert (result.leg.pk, result.leg.status) == (leg.pk, FundingStatus.PENDING)
    assert result.envelope.pk == leg.envelope_id
    assert not Escalation.objects.exists()
