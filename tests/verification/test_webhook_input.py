"""Signed webhook payloads that are not events Vouch can store (SPEC §7, §13): each answers 400
with a stable code in the JSON error envelope and stores nothing — never a 500. The same check
guards the events reconciliation's catch-up finds in the provider's event list: a bad one is
skipped and counted, the run goes on."""

import copy
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
import stripe
from django.test import Client

from reconciliation.catch_up import catch_up_run
from reconciliation.models import Run
from stripe_sandbox.client import SandboxControl
from stripe_sandbox.webhooks import sign
from verification import services
from verification.models import ProviderEvent

from .conftest import Refunds

pytestmark = pytest.mark.django_db

SECRET = "whsec_vouch_sandbox"  # settings.STRIPE_WEBHOOK_SECRET under test settings
YEAR_9999_ENDS = 253_402_300_800  # 10000-01-01T00:00:00Z


def _event() -> dict[str, Any]:
    return {
        "id": "evt_1",
        "object": "event",
        "type": "refund.created",
        "created": int(time.time()),
        "data": {"object": {"id": "re_1", "object": "refund", "charge": "ch_1"}},
        "request": {"id": "req_1", "idempotency_key": "k"},
    }


def _post(body: bytes) -> Any:
    return Client().post(
        "/webhooks/stripe",
        body,
        content_type="application/json",
        HTTP_STRIPE_SIGNATURE=sign(body, SECRET, int(time.time())),
    )


def _changed(change: Callable[[dict[str, Any]], None]) -> bytes:
    event = _event()
    change(event)
    return json.dumps(event).encode()


def _assert_refused(response: Any, code: str, field: str | None = None) -> None:
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    if field is not None:
        assert body["error"]["details"]["field"] == field
    assert not ProviderEvent.objects.exists()


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(event: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = event
        for part in parents:
            node = node[part]
        node[last] = value

    return change


def _drop(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda event: event.pop(name)


BAD_FIELDS = {
    "id over 255": (_set("id", "e" * 256), "id"),
    "id empty": (_set("id", ""), "id"),
    "id a number": (_set("id", 12345), "id"),
    "type over 100": (_set("type", "t" * 101), "type"),
    "type a list": (_set("type", ["refund.created"]), "type"),
    "created a string": (_set("created", "1700000000"), "created"),
    "created a float": (_set("created", 1700000000.5), "created"),
    "created true": (_set("created", True), "created"),
    "created null": (_set("created", None), "created"),
    "created missing": (_drop("created"), "created"),
    "created negative": (_set("created", -1), "created"),
    "created after year 9999": (_set("created", YEAR_9999_ENDS), "created"),
    "created beyond bigint": (_set("created", 2**63), "created"),
    "created huge": (_set("created", 10**40), "created"),
    "data missing": (_drop("data"), "data"),
    "data a string": (_set("data", "refund"), "data"),
    "data a list": (_set("data", [{"object": {}}]), "data"),
    "data.object missing": (_set("data", {}), "data.object"),
    "data.object a number": (_set("data.object", 7), "data.object"),
}


@pytest.mark.parametrize("case", sorted(BAD_FIELDS))
def test_a_signed_event_with_a_bad_field_is_refused_with_400_and_nothing_stored(case: str) -> None:
    change, field = BAD_FIELDS[case]
    _assert_refused(_post(_changed(change)), "invalid_event", field)


NUL = "\u0000"
NUL_PLACES = {
    "in the id": _set("id", f"evt_{NUL}1"),
    "in the type": _set("type", f"refund.created{NUL}"),
    "in a value deep in data": _set("data.object.charge", f"ch_{NUL}"),
    "in a key": _set("data.object", {"id": "re_1", f"meta{NUL}": "x"}),
    "in a list": _set("data.object.refunds", ["ok", [f"{NUL}"]]),
    "in an unknown top-level field": _set("livemode_note", NUL),
}


@pytest.mark.parametrize("place", sorted(NUL_PLACES))
def test_a_nul_anywhere_is_refused(place: str) -> None:
    body = _changed(NUL_PLACES[place])
    assert b"\\u0000" in body
    _assert_refused(_post(body), "invalid_event")


def test_a_lone_surrogate_is_refused() -> None:
    # Valid JSON, but no UTF-8 encoding exists for it: the database cannot store it.
    body = _changed(_set("data.object.charge", "ch_\ud800"))
    assert b"\\ud800" in body
    _assert_refused(_post(body), "invalid_event")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_a_number_json_does_not_define_is_refused(number: str) -> None:
    body = _changed(_set("data.object.amount", "__NUMBER__")).replace(
        b'"__NUMBER__"', number.encode()
    )
    _assert_refused(_post(body), "invalid_event")


@pytest.mark.parametrize("depth", [200, 1_000, 100_000])
def test_json_nested_deep_is_refused(depth: int) -> None:
    nested = "[" * depth + "]" * depth
    body = _changed(_set("data.object.deep", "__DEEP__")).replace(b'"__DEEP__"', nested.encode())
    response = _post(body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] in {"invalid_event", "malformed_request"}
    assert not ProviderEvent.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'"evt_1"',
        b"1",
        b"null",
        b"{not json",
        _changed(_drop("id")),
        _changed(_drop("type")),
    ],
    ids=["a list", "a string", "a number", "null", "not JSON", "no id", "no type"],
)
def test_a_signed_body_that_is_not_an_event_object_is_refused(body: bytes) -> None:
    # The provider adapter refuses these itself (as `invalid_signature`) before Vouch looks.
    response = _post(body)
    assert response.status_code == 400
    assert response.json()["success"] is False
    assert response.json()["error"]["code"]
    assert not ProviderEvent.objects.exists()


def test_a_body_over_the_upload_limit_is_413_in_the_envelope(settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = _changed(_set("data.object.description", "x" * 20_000))
    response = _post(body)
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "payload_too_large"
    assert not ProviderEvent.objects.exists()


@pytest.mark.parametrize(
    "change",
    [
        _set("id", "e" * 255),
        _set("type", "t" * 100),
        _set("created", 0),
        _set("created", YEAR_9999_ENDS - 1),
    ],
    ids=["id of 255", "type of 100", "created 0", "created at the end of 9999"],
)
def test_the_limits_themselves_are_accepted(change: Callable[[dict[str, Any]], None]) -> None:
    body = _changed(change)
    response = _post(body)
    assert response.status_code == 200, response.content
    assert ProviderEvent.objects.get().raw == body.decode()


def test_the_store_refuses_the_same_events_whoever_calls_it() -> None:
    event = _event()
    event["data"]["object"]["charge"] = "ch_\u0000"
    with pytest.raises(services.InvalidProviderEvent) as refused:
        services.provider_event_store(
            event=copy.deepcopy(event), raw=json.dumps(event), source="catch_up"
        )
    assert refused.value.code == "invalid_event"
    assert not ProviderEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_bad_event_in_the_providers_list_is_skipped_and_the_catch_up_finishes(
    refunds: Refunds,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    charge = refunds.charge()
    for amount in (100, 200, 300):
        refunds.provider.refund_create(
            charge=charge, amount_cents=amount, idempotency_key=f"k{amount}", metadata={}
        ).require()
    listed = sdk.v1.events.list(params={"type": "refund.created", "limit": 10}).data
    with_nul, not_an_object, good = (event.id for event in listed[:3])
    sandbox.tamper(with_nul, data={"object": {"id": f"re_{NUL}", "object": "refund"}})
    sandbox.tamper(not_an_object, data="refund")

    with caplog.at_level(logging.INFO, logger="vouch.reconciliation"):
        run = catch_up_run()

    run = Run.objects.get(pk=run.pk)
    assert run.status == "completed"
    skipped = [r.getMessage() for r in caplog.records if "skipped (" in r.getMessage()]
    assert len(skipped) == 2
    assert with_nul in skipped[0] + skipped[1]
    assert not_an_object in skipped[0] + skipped[1]
    assert any("2 skipped as not storable" in r.getMessage() for r in caplog.records)
    stored = set(ProviderEvent.objects.values_list("event_id", flat=True))
    assert good in stored
    assert not stored & {with_nul, not_an_object}
    assert ProviderEvent.objects.get(event_id=good).processed_at is not None
