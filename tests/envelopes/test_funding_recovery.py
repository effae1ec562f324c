"""A pending funding leg is never charged twice (issue 10, item 1; SPEC §2, §3): past the provider's
24 h key life Vouch looks the PaymentIntent up (by its id when known, else by its metadata) and
records what it shows; nothing found is one escalation; `payment_intent.*` events settle pending
legs without waiting for the job; `charge.refunded` re-reads the charge."""

import json
from datetime import timedelta
from typing import Any

import pytest
import stripe
import time_machine
from django.contrib.auth.models import Group
from django.core import mail
from django.utils import timezone

from core.api.idempotent import operation_name
from core.idempotency import idempotency_claim
from core.models import IdempotencyRecord
from envelopes import services
from envelopes.models import Envelope, FundingLeg, FundingStatus
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import Escalation, ProviderEvent
from verification.services import provider_event_process, provider_event_store

pytestmark = pytest.mark.django_db

FUNDING: dict[str, Any] = {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
DAY_AND_A_BIT = timedelta(hours=25)


def counts(sandbox: SandboxControl) -> dict[str, int]:
    return sandbox.state()["counts"]


def _lost_answer_creation(alice: Api, sandbox: SandboxControl) -> str:
    """A creation whose PaymentIntent the provider made and charged, but whose answer never came
    back (and the provider is down for the retries): a pending leg."""
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post("/api/v1/escrow/envelopes", FUNDING)
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    assert counts(sandbox)["payment_intents"] == 1  # charged once, at the provider
    return str(response.json()["data"]["envelope_id"])


def _never_made_creation(alice: Api, sandbox: SandboxControl) -> str:
    """A creation the provider never saw: every attempt failed before anything was applied."""
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post("/api/v1/escrow/envelopes", FUNDING)
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    assert counts(sandbox)["payment_intents"] == 0
    return str(response.json()["data"]["envelope_id"])


def test_a_pending_leg_past_the_key_life_is_found_not_charged_again(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = _lost_answer_creation(alice, sandbox)
    with time_machine.travel(timezone.now() + DAY_AND_A_BIT, tick=True):  # the sandbox too
        services.stranded_resume(older_than_s=60)
        services.stranded_resume(older_than_s=60)  # a second tick changes nothing
    assert counts(sandbox)["payment_intents"] == 1  # never a second PaymentIntent
    leg = FundingLeg.objects.get()
    assert leg.status == FundingStatus.SUCCEEDED
    intent = sandbox_intent(sandbox, leg.payment_intent_id)
    assert intent["metadata"]["vouch_funding"] == leg.public_id
    assert leg.charge_id == intent["latest_charge"]
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_funded_micro, envelope.unspent_micro) == (2_000_000, 2_000_000)
    assert not Escalation.objects.exists()
    assert ledger_breaches() == []


def _died_pending(alice: Api, sandbox: SandboxControl, operation: str, key: str, run: Any) -> None:
    """A request whose provider call was applied but whose answer was lost, and whose process then
    died before it stored any answer: its record still runs, naming what it created."""
    claim = idempotency_claim(
        user=alice.user, key=key, operation=operation, surface="rest", body=FUNDING
    )
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    assert run(claim.record).pending
    sandbox.clear_faults()
    record = IdempotencyRecord.objects.get(pk=claim.record.pk)
    assert record.running
    assert record.resource


def test_an_api_retry_past_the_key_life_finds_the_payment_not_a_second_one(
    alice: Api, sandbox: SandboxControl
) -> None:
    """The buyer's own retry, a day later, with the same Idempotency-Key: the lease lapsed long
    ago, so the request resumes the pending leg, and must not create a PaymentIntent."""
    _died_pending(
        alice,
        sandbox,
        operation_name("envelope.create"),
        "fund-once",
        lambda record: services.envelope_create(owner=alice.user, idempotency=record, **FUNDING),
    )
    assert counts(sandbox)["payment_intents"] == 1
    with time_machine.travel(timezone.now() + DAY_AND_A_BIT, tick=True):
        retry = alice.post("/api/v1/escrow/envelopes", FUNDING, key="fund-once")
    assert retry.status_code == 201, retry.content
    assert retry.json()["data"]["total_funded_micro"] == 2_000_000
    assert counts(sandbox)["payment_intents"] == 1
    assert Envelope.objects.count() == FundingLeg.objects.count() == 1


def test_a_top_up_retried_past_the_key_life_is_found_not_charged_again(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    envelope = Envelope.objects.get(public_id=envelope_id)
    _died_pending(
        alice,
        sandbox,
        operation_name("envelope.top_up", envelope_id),
        "t",
        lambda record: services.envelope_top_up(envelope=envelope, idempotency=record, **FUNDING),
    )
    with time_machine.travel(timezone.now() + DAY_AND_A_BIT, tick=True):
        retry = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/top-ups", FUNDING, key="t")
    assert retry.status_code == 201, retry.content
    assert retry.json()["data"]["total_funded_micro"] == 7_000_000
    assert counts(sandbox)["payment_intents"] == 2  # the creation's and the top-up's, once each
    assert ledger_breaches() == []


def test_a_leg_with_a_known_payment_intent_is_read_by_its_id(
    alice: Api, sandbox: SandboxControl
) -> None:
    """The PaymentIntent id is known (recorded when an answer said it had not succeeded yet): past
    the key's life it is read by id, and what it shows is recorded."""
    _lost_answer_creation(alice, sandbox)
    intent_id = sandbox_intents(sandbox)[0]["id"]
    FundingLeg.objects.update(payment_intent_id=intent_id)
    sandbox.add_fault("/v1/payment_intents/search", "server_error", method="GET")
    with time_machine.travel(timezone.now() + DAY_AND_A_BIT, tick=True):
        services.stranded_resume(older_than_s=60)
    leg = FundingLeg.objects.get()
    assert (leg.status, leg.payment_intent_id) == (FundingStatus.SUCCEEDED, intent_id)
    assert counts(sandbox)["payment_intents"] == 1


def test_nothing_found_past_the_key_life_opens_one_escalation(
    alice: Api, sandbox: SandboxControl, django_capture_on_commit_callbacks: Any
) -> None:
    ops = Group.objects.create(name="ops")
    alice.user.groups.add(ops)  # someone in ops receives the notification
    envelope_id = _never_made_creation(alice, sandbox)
    with time_machine.travel(timezone.now() + DAY_AND_A_BIT, tick=True):
        for _ in range(3):  # every tick of the job
            with django_capture_on_commit_callbacks(execute=True):
                services.stranded_resume(older_than_s=60)
    assert counts(sandbox)["payment_intents"] == 0  # never created late
    leg = FundingLeg.objects.get()
    assert leg.status == FundingStatus.PENDING  # not funded money; a person decides
    escalation = Escalation.objects.get()
    assert escalation.subject_type == "funding_leg"
    assert escalation.subject_id == leg.public_id
    assert escalation.notifications.count() == 1
    assert len(mail.outbox) == 1
    assert leg.public_id in mail.outbox[0].body
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_funded_micro, envelope.unspent_micro) == (0, 0)
    assert ledger_breaches() == []


def test_a_declined_payment_found_past_the_key_life_is_recorded_as_declined(
    alice: Api, sandbox: SandboxControl
) -> None:
    """The first call was a decline whose answer was lost: the lookup shows the PaymentIntent
    without a successful charge, so the leg is declined, not retried and not charged."""
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post(
        "/api/v1/escrow/envelopes",
        {"amount_micro": 2_000_000, "payment_method": "pm_card_chargeDeclined"},
    )
    assert response.status_code == 202
    sandbox.clear_faults()
    with time_machine.travel(timezone.now() + DAY_AND_A_BIT, tick=True):
        services.stranded_resume(older_than_s=60)
    assert counts(sandbox)["payment_intents"] == 1
    assert not FundingLeg.objects.exists()  # a declined creation leaves nothing behind
    assert not Envelope.objects.exists()
    assert not Escalation.objects.exists()


def _events(sdk: stripe.StripeClient, event_type: str) -> list[dict[str, Any]]:
    return [e.to_dict() for e in sdk.v1.events.list(params={"type": event_type, "limit": 100})]


def _deliver(event: dict[str, Any]) -> None:
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)
    assert ProviderEvent.objects.get(pk=stored.pk).processed_at is not None


def test_payment_intent_succeeded_settles_a_pending_leg_without_the_job(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    envelope_id = _lost_answer_creation(alice, sandbox)
    (event,) = _events(sdk, "payment_intent.succeeded")
    _deliver(event)
    leg = FundingLeg.objects.get()
    assert leg.status == FundingStatus.SUCCEEDED
    assert leg.payment_intent_id == event["data"]["object"]["id"]
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 2_000_000
    _deliver({**event, "id": "evt_again"})  # a second delivery changes nothing
    assert Envelope.objects.get(public_id=envelope_id).total_funded_micro == 2_000_000
    assert counts(sandbox)["payment_intents"] == 1
    assert ledger_breaches() == []


def test_payment_intent_payment_failed_settles_a_pending_leg_as_declined(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": 2_000_000, "payment_method": "pm_card_chargeDeclined"},
    )
    assert response.status_code == 202
    sandbox.clear_faults()
    (event,) = _events(sdk, "payment_intent.payment_failed")
    _deliver(event)
    assert list(FundingLeg.objects.values_list("sequence", flat=True)) == [1]  # the top-up gone
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_funded_micro, envelope.unspent_micro) == (5_000_000, 5_000_000)
    services.stranded_resume(older_than_s=-1)  # nothing left for the job
    assert counts(sandbox)["payment_intents"] == 2
    assert ledger_breaches() == []


def test_an_event_for_a_payment_vouch_did_not_make_changes_nothing(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    alice.create(5_000_000)
    sdk.v1.payment_intents.create(
        params={
            "amount": 700,
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": True,
            "allowed_payment_method_types": ["card"],
        }
    )
    for event in _events(sdk, "payment_intent.succeeded"):
        _deliver(event)
    assert FundingLeg.objects.count() == 1
    assert Envelope.objects.get().total_funded_micro == 5_000_000


def test_charge_refunded_re_reads_the_charge(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    """`charge.refunded` is handled: the charge is read again from the provider (events may be
    stale), and a refund nobody here made is noticed (an audit event names it) without moving
    money: that is for a person (and for reconciliation)."""
    from core.models import AuditEvent

    data = alice.create(5_000_000)
    charge = data["funding_legs"][0]["charge"]
    sdk.v1.refunds.create(params={"charge": charge, "amount": 100})  # as in the Dashboard
    (event,) = _events(sdk, "charge.refunded")
    _deliver(event)
    audit = AuditEvent.objects.get(action="charge.refunded_elsewhere")
    assert audit.target_id == data["funding_legs"][0]["funding_id"]
    assert audit.details["provider_amount_refunded"] == 100
    assert audit.details["vouch_refunded_micro"] == 0
    assert Envelope.objects.get().unspent_micro == 5_000_000  # no money moved by itself


def _client(sandbox: SandboxControl) -> stripe.StripeClient:
    return stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
    )


def sandbox_intents(sandbox: SandboxControl) -> list[dict[str, Any]]:
    """Every PaymentIntent the sandbox holds for the one funding leg."""
    query = f"metadata['vouch_funding']:'{FundingLeg.objects.get().public_id}'"
    found = _client(sandbox).v1.payment_intents.search(params={"query": query})
    return [intent.to_dict() for intent in found.data]


def sandbox_intent(sandbox: SandboxControl, intent_id: str) -> dict[str, Any]:
    return dict(_client(sandbox).v1.payment_intents.retrieve(intent_id).to_dict())


def test_a_decline_recorded_by_an_event_is_the_answer_of_the_request_that_made_it(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    """The request's own answer was lost (its process died); the `payment_intent.payment_failed`
    event records the decline. The client's retry gets that decline (402), never a 500 about a
    leg that is gone, and nothing is charged again."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    envelope = Envelope.objects.get(public_id=envelope_id)
    declined = {"amount_micro": 2_000_000, "payment_method": "pm_card_chargeDeclined"}
    claim = idempotency_claim(
        user=alice.user,
        key="declined-top-up",
        operation=operation_name("envelope.top_up", envelope_id),
        surface="rest",
        body=declined,
    )
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    assert services.envelope_top_up(envelope=envelope, idempotency=claim.record, **declined).pending
    sandbox.clear_faults()
    (event,) = _events(sdk, "payment_intent.payment_failed")
    _deliver(event)
    retry = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups", declined, key="declined-top-up"
    )
    assert retry.status_code == 402, retry.content
    assert retry.json()["error"]["code"] == "card_declined"
    assert counts(sandbox)["payment_intents"] == 2
    assert FundingLeg.objects.count() == 1
