"""POST /webhooks/stripe (SPEC §7): signature, storage once, duplicates, and a correlated event
waking its run at once."""

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from django.test import Client
from django.utils import timezone

from config.celery_app import app
from stripe_sandbox.webhooks import sign
from verification.models import ProviderEvent, VerificationRun

from .conftest import Refunds

SECRET = "whsec_vouch_sandbox"  # settings.STRIPE_WEBHOOK_SECRET under test settings


def _event(event_id: str = "evt_1", **data: Any) -> bytes:
    return json.dumps(
        {
            "id": event_id,
            "object": "event",
            "type": "refund.created",
            "created": int(time.time()),
            "data": {"object": {"id": "re_1", "object": "refund", "charge": "ch_1", **data}},
            "request": {"id": "req_1", "idempotency_key": "k"},
        }
    ).encode()


def _post(body: bytes, signature: str | None) -> Any:
    headers = {} if signature is None else {"HTTP_STRIPE_SIGNATURE": signature}
    return Client().post("/webhooks/stripe", body, content_type="application/json", **headers)


@pytest.mark.django_db
def test_a_signed_event_is_stored_raw_and_acknowledged() -> None:
    body = _event()
    response = _post(body, sign(body, SECRET, int(time.time())))
    assert response.status_code == 200
    assert response.json() == {"received": True, "duplicate": False}
    stored = ProviderEvent.objects.get()
    assert (stored.event_id, stored.type, stored.raw) == ("evt_1", "refund.created", body.decode())
    assert stored.payload["data"]["object"]["id"] == "re_1"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "signature",
    [
        None,
        "",
        "t=123",
        "garbage",
        "SIGNED_WITH_OTHER_SECRET",
        "SIGNED_TOO_OLD",
        "SIGNED_IN_THE_FUTURE",
        "SIGNED_OTHER_BODY",
    ],
)
def test_bad_signatures_get_400_and_store_nothing(signature: str | None) -> None:
    body = _event()
    now = int(time.time())
    signature = {
        "SIGNED_WITH_OTHER_SECRET": sign(body, "whsec_other", now),
        "SIGNED_TOO_OLD": sign(body, SECRET, now - 301),
        "SIGNED_IN_THE_FUTURE": sign(body, SECRET, now + 301),
        "SIGNED_OTHER_BODY": sign(_event("evt_2"), SECRET, now),
    }.get(signature or "", signature)
    response = _post(body, signature)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_signature"
    assert not ProviderEvent.objects.exists()


@pytest.mark.django_db
def test_tolerance_is_configurable_and_the_clock_is_ours(settings: Any) -> None:
    import time_machine

    body = _event()
    signed_at = int(time.time())
    signature = sign(body, SECRET, signed_at)
    with time_machine.travel(timezone.now() + timedelta(seconds=200)):
        settings.STRIPE_WEBHOOK_TOLERANCE_S = 100
        assert _post(body, signature).status_code == 400
        settings.STRIPE_WEBHOOK_TOLERANCE_S = 300
        assert _post(body, signature).status_code == 200


@pytest.mark.django_db
def test_a_duplicate_delivery_is_acknowledged_counted_and_changes_nothing() -> None:
    body = _event()
    signature = sign(body, SECRET, int(time.time()))
    assert _post(body, signature).json()["duplicate"] is False
    second = _post(body, signature)
    assert second.status_code == 200
    assert second.json() == {"received": True, "duplicate": True}
    stored = ProviderEvent.objects.get()
    assert stored.duplicates == 1
    assert stored.raw == body.decode()


@pytest.mark.django_db
def test_secret_rotation_accepts_the_previous_secret(settings: Any) -> None:
    settings.STRIPE_WEBHOOK_SECRETS = ["whsec_new", SECRET]
    body = _event()
    assert _post(body, sign(body, SECRET, int(time.time()))).status_code == 200
    body2 = _event("evt_2")
    assert _post(body2, sign(body2, "whsec_new", int(time.time()))).status_code == 200
    assert ProviderEvent.objects.count() == 2


@pytest.mark.django_db
def test_only_post() -> None:
    assert Client().get("/webhooks/stripe").status_code == 405


@pytest.mark.django_db(transaction=True)
def test_a_correlated_event_starts_an_attempt_at_once_not_at_the_next_poll(
    refunds: Refunds, celery_broker: str
) -> None:
    run = refunds.make(refunds.charge())
    far = timezone.now() + timedelta(hours=1)
    VerificationRun.objects.filter(pk=run.pk).update(next_attempt_at=far)  # a long poll interval
    event = refunds.sdk.v1.events.list(params={"type": "refund.created", "limit": 1}).data[0]
    body = json.dumps(event.to_dict()).encode()
    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge(app.conf.task_default_queue)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        posted = timezone.now()
        assert _post(body, sign(body, SECRET, int(time.time()))).status_code == 200
        deadline = time.monotonic() + 10
        while not run.attempts.exists():
            assert time.monotonic() < deadline, "no attempt within 10 s"
            time.sleep(0.02)
    attempt = run.attempts.get()
    assert attempt.trigger == "event"
    assert attempt.number is None
    assert (attempt.started_at - posted).total_seconds() < 1.0
    run.refresh_from_db()
    assert run.verdict == "VERIFIED"
    assert run.next_attempt_at is None
