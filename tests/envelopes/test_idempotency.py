"""Idempotency-Key on the money-moving endpoints (SPEC §4), through the API and against the sandbox:
replay, conflict, in use, one operation across prefixes and percent-encoding, independent
operations, the other surface, what is (not) stored, invalid keys, and resumption after a lapsed
lease."""

import threading
from datetime import timedelta
from typing import Any

import pytest
import stripe
from django.db import connection
from django.utils import timezone

from core.api.idempotent import operation_name
from core.idempotency import (
    IdempotencyKeyConflict,
    IdempotencyKeyOtherSurface,
    idempotency_claim,
    idempotency_store,
)
from core.models import IdempotencyRecord
from envelopes import services
from envelopes.models import Envelope, FundingLeg, RefundOperation
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db

FUNDING: dict[str, Any] = {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
DECLINED: dict[str, Any] = {"amount_micro": 2_000_000, "payment_method": "pm_card_chargeDeclined"}


def refund_path(envelope_id: str, prefix: str = "/api/v1/") -> str:
    return f"{prefix}escrow/envelopes/{envelope_id}/refund"


def top_up_path(envelope_id: str, prefix: str = "/api/v1/") -> str:
    return f"{prefix}escrow/envelopes/{envelope_id}/top-ups"


def raw_post(api: Api, path: str, raw: str, key: str) -> Any:
    """A body sent exactly as written (spacing, key order, or nothing at all)."""
    return api.client.post(
        path,
        data=raw,
        content_type="application/json",
        HTTP_X_CSRFTOKEN=api.csrf,
        HTTP_IDEMPOTENCY_KEY=key,
    )


def counts(sandbox: SandboxControl) -> dict[str, int]:
    return sandbox.state()["counts"]


def replayed(response: Any) -> bool:
    return response.headers.get("Idempotent-Replayed") == "true"


def two_charge_envelope(alice: Api) -> str:
    """$10 original + $3 top-up: a whole refund spans both charges."""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    return envelope_id


# --- replay --------------------------------------------------------------------------------------


def test_a_refund_replays_and_the_provider_refunds_once(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = two_charge_envelope(alice)
    first = alice.post(refund_path(envelope_id), {"amount_micro": 5_000_000}, key="refund-1")
    assert first.status_code == 200, first.content
    assert len(first.json()["data"]["legs"]) == 2  # $3 from the top-up, $2 from the original
    assert not replayed(first)
    for _ in range(2):
        again = alice.post(refund_path(envelope_id), {"amount_micro": 5_000_000}, key="refund-1")
        assert again.status_code == 200
        assert replayed(again)
        assert again.json() == first.json()
    assert counts(sandbox)["refunds"] == 2  # one per leg, once
    assert RefundOperation.objects.count() == 1
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 8_000_000


def test_a_replay_is_the_original_body_byte_for_byte(alice: Api) -> None:
    """Fails today: the stored answer is a jsonb value, which reorders object keys, so the replay
    is the same JSON but not the same bytes as the original answer."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    first = alice.post(refund_path(envelope_id), {"amount_micro": 1_000_000}, key="bytes")
    again = alice.post(refund_path(envelope_id), {"amount_micro": 1_000_000}, key="bytes")
    assert replayed(again)
    assert again.json() == first.json()
    assert again.content == first.content


def test_a_top_up_replays_and_charges_once(alice: Api, sandbox: SandboxControl) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    first = alice.post(top_up_path(envelope_id), FUNDING, key="top-up-1")
    assert first.status_code == 201, first.content
    again = alice.post(top_up_path(envelope_id), FUNDING, key="top-up-1")
    assert (again.status_code, again.json()) == (201, first.json())
    assert replayed(again)
    assert not replayed(first)
    assert counts(sandbox)["payment_intents"] == 2
    assert FundingLeg.objects.count() == 2
    assert Envelope.objects.get(public_id=envelope_id).total_funded_micro == 7_000_000


def test_a_creation_replays_the_same_envelope(alice: Api, sandbox: SandboxControl) -> None:
    body = {"amount_micro": 3_000_000, "payment_method": "pm_card_visa"}
    first = alice.post("/api/v1/escrow/envelopes", body, key="create-1")
    again = alice.post("/api/escrow/envelopes", body, key="create-1")
    assert first.status_code == again.status_code == 201
    assert replayed(again)
    assert again.json()["data"]["envelope_id"] == first.json()["data"]["envelope_id"]
    assert Envelope.objects.count() == 1
    assert counts(sandbox)["payment_intents"] == 1


# --- conflict and the canonical body -------------------------------------------------------------


def test_the_same_key_with_another_body_is_a_conflict(alice: Api, sandbox: SandboxControl) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    first = alice.post(refund_path(envelope_id), {"amount_micro": 1_000_000}, key="k")
    assert first.status_code == 200
    for other in ({"amount_micro": 2_000_000}, {}, {"amount_micro": 1_000_001}):
        response = alice.post(refund_path(envelope_id), other, key="k")
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "idempotency_key_conflict"
        assert not replayed(response)
    top_up = alice.post(top_up_path(envelope_id), FUNDING, key="t")
    conflict = alice.post(top_up_path(envelope_id), {**FUNDING, "amount_micro": 3_000_000}, key="t")
    assert top_up.status_code == 201
    assert (conflict.status_code, conflict.json()["error"]["code"]) == (
        422,
        "idempotency_key_conflict",
    )
    assert counts(sandbox)["refunds"] == 1
    assert counts(sandbox)["payment_intents"] == 2


def test_no_body_equals_an_empty_object_and_bodies_compare_as_canonical_json(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    first = raw_post(alice, refund_path(envelope_id), "", key="empty")
    assert first.status_code == 200, first.content
    assert first.json()["data"]["requested_micro"] == 5_000_000
    same = raw_post(alice, refund_path(envelope_id), "{}", key="empty")
    assert same.status_code == 200
    assert replayed(same)
    assert same.json() == first.json()

    other = alice.create(5_000_000)["envelope_id"]
    spaced = raw_post(alice, refund_path(other), '{"amount_micro":1000000}', key="canon")
    assert spaced.status_code == 200, spaced.content
    again = raw_post(alice, refund_path(other), '{ "amount_micro" : 1000000 }\n', key="canon")
    assert again.status_code == 200
    assert replayed(again)
    top_up = raw_post(
        alice, top_up_path(other), '{"amount_micro":2000000,"payment_method":"pm_card_visa"}', "tu"
    )
    reordered = raw_post(
        alice,
        top_up_path(other),
        '{"payment_method": "pm_card_visa", "amount_micro": 2000000}',
        "tu",
    )
    assert top_up.status_code == reordered.status_code == 201
    assert replayed(reordered)
    assert counts(sandbox)["refunds"] == 2
    assert counts(sandbox)["payment_intents"] == 3


# --- in use --------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_same_key_while_the_first_request_runs_is_in_use(
    alice: Api, sandbox: SandboxControl, settings: Any
) -> None:
    settings.STRIPE_READ_TIMEOUT_S = 5.0  # the slow answer must arrive, not time out
    envelope_id = two_charge_envelope(alice)
    sandbox.add_fault("/v1/refunds", "delay", method="POST", times=1, delay_ms=1500)
    results: dict[str, Any] = {}

    def first_request() -> None:
        try:
            results["first"] = alice.post(refund_path(envelope_id), {}, key="slow")
        finally:
            connection.close()

    thread = threading.Thread(target=first_request)
    thread.start()
    # The first request has reserved its legs and is waiting for the provider.
    wait_until(
        lambda: IdempotencyRecord.objects.filter(key="slow", resource__startswith="erf_").exists(),
        what="the first request to reach the provider",
    )
    other_session = Api(alice.user)
    second = other_session.post(refund_path(envelope_id), {}, key="slow")
    conflicting = other_session.post(refund_path(envelope_id), {"amount_micro": 1}, key="slow")
    thread.join(timeout=15)
    assert not thread.is_alive()

    # In use comes before conflict; neither ran anything.
    for response in (second, conflicting):
        assert response.status_code == 409, response.content
        assert response.json()["error"]["code"] == "idempotency_key_in_use"
    first = results["first"]
    assert first.status_code == 200, first.content
    assert first.json()["data"]["status"] == "refunded"
    assert sandbox.faults()[0]["hits"] == 1  # the delay struck the first request's refund
    after = other_session.post(refund_path(envelope_id), {}, key="slow")
    assert (after.status_code, after.json()) == (200, first.json())
    assert replayed(after)
    assert counts(sandbox)["refunds"] == 2  # two legs, each refunded once
    assert RefundOperation.objects.count() == 1


# --- one operation, however it is addressed ------------------------------------------------------


def test_percent_encoding_and_the_alias_are_the_same_operation(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    body = {"amount_micro": 1_000_000}
    encoded = envelope_id.replace("_", "%5F")
    first = alice.post(refund_path(encoded), body, key="enc")
    assert first.status_code == 200, first.content
    for path in (
        refund_path(envelope_id, "/api/"),
        refund_path(envelope_id.replace("_", "%5f"), "/api/"),
        refund_path(envelope_id),
    ):
        again = alice.post(path, body, key="enc")
        assert (again.status_code, again.json()) == (200, first.json()), path
        assert replayed(again)
    top_up = alice.post(top_up_path(envelope_id, "/api/"), FUNDING, key="enc-top-up")
    again = alice.post(top_up_path(encoded), FUNDING, key="enc-top-up")
    assert top_up.status_code == again.status_code == 201
    assert replayed(again)
    assert counts(sandbox)["refunds"] == 1
    assert counts(sandbox)["payment_intents"] == 2
    assert sorted(IdempotencyRecord.objects.values_list("operation", flat=True)) == [
        f"envelope.refund:{envelope_id}",
        f"envelope.top_up:{envelope_id}",
    ]


def test_the_same_key_on_another_operation_or_by_another_user_is_independent(
    alice: Api, bob: Api, sandbox: SandboxControl
) -> None:
    a = alice.create(5_000_000)["envelope_id"]
    b = alice.create(5_000_000)["envelope_id"]
    body = {"amount_micro": 1_000_000}
    refund_a = alice.post(refund_path(a), body, key="shared")
    refund_b = alice.post(refund_path(b), body, key="shared")
    top_up_a = alice.post(top_up_path(a), FUNDING, key="shared")
    assert (refund_a.status_code, refund_b.status_code, top_up_a.status_code) == (200, 200, 201)
    assert not any(replayed(r) for r in (refund_a, refund_b, top_up_a))
    assert refund_a.json()["data"]["refund_id"] != refund_b.json()["data"]["refund_id"]
    assert counts(sandbox)["refunds"] == 2
    # A key is the caller's: bob's creation under alice's key is his own.
    create = {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"}
    alices = alice.post("/api/v1/escrow/envelopes", create, key="create-shared")
    bobs = bob.post("/api/v1/escrow/envelopes", create, key="create-shared")
    assert alices.status_code == bobs.status_code == 201
    assert not replayed(bobs)
    assert alices.json()["data"]["envelope_id"] != bobs.json()["data"]["envelope_id"]
    assert Envelope.objects.filter(owner=bob.user).count() == 1


# --- the other surface ---------------------------------------------------------------------------


def test_a_key_first_used_over_rest_is_refused_on_another_surface(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    body = {"amount_micro": 1_000_000}
    assert alice.post(refund_path(envelope_id), body, key="surface").status_code == 200
    operation = operation_name("envelope.refund", envelope_id)
    for mcp_body in (body, {"amount_micro": 2_000_000}):  # other surface comes before conflict
        with pytest.raises(IdempotencyKeyOtherSurface):
            idempotency_claim(
                user=alice.user, key="surface", operation=operation, surface="mcp", body=mcp_body
            )
    with pytest.raises(IdempotencyKeyConflict):  # on its own surface, a conflict as usual
        idempotency_claim(
            user=alice.user, key="surface", operation=operation, surface="rest", body={}
        )
    assert RefundOperation.objects.count() == 1


def test_a_key_first_used_on_another_surface_is_refused_over_rest(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    operation = operation_name("envelope.refund", envelope_id)
    # Still running on the other surface: in use comes first.
    running = idempotency_claim(
        user=alice.user, key="mcp-key", operation=operation, surface="mcp", body={}
    )
    in_use = alice.post(refund_path(envelope_id), {"amount_micro": 5}, key="mcp-key")
    assert (in_use.status_code, in_use.json()["error"]["code"]) == (409, "idempotency_key_in_use")
    # Finished there: never replayed here, never run again.
    idempotency_store(running.record, status=200, body={"success": True, "data": {"via": "mcp"}})
    for body in ({}, {"amount_micro": 1_000_000}):
        response = alice.post(refund_path(envelope_id, "/api/"), body, key="mcp-key")
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "idempotency_key_other_surface"
        assert "mcp" not in response.json().get("data", {})
    # Its process died there with the lease lapsed: still not resumed by another surface.
    lapsed = idempotency_claim(
        user=alice.user, key="mcp-dead", operation=operation, surface="mcp", body={}
    )
    IdempotencyRecord.objects.filter(pk=lapsed.record.pk).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )
    response = alice.post(refund_path(envelope_id), {}, key="mcp-dead")
    assert response.json()["error"]["code"] == "idempotency_key_other_surface"
    assert counts(sandbox)["refunds"] == 0
    assert not RefundOperation.objects.exists()


# --- what is stored ------------------------------------------------------------------------------


def test_a_refused_refund_is_not_stored_so_the_corrected_request_runs(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    path = refund_path(envelope_id)
    invalid = alice.post(path, {"amount_micro": -1}, key="fix-me")
    assert (invalid.status_code, invalid.json()["error"]["code"]) == (400, "invalid_amount")
    too_much = alice.post(path, {"amount_micro": 6_000_000}, key="fix-me")
    assert (too_much.status_code, too_much.json()["error"]["code"]) == (
        422,
        "amount_exceeds_unspent",
    )
    assert not IdempotencyRecord.objects.exists()
    fixed = alice.post(path, {"amount_micro": 5_000_000}, key="fix-me")
    assert fixed.status_code == 200
    assert not replayed(fixed)
    # Nothing left: refused, not stored either.
    nothing = alice.post(path, {}, key="later")
    assert (nothing.status_code, nothing.json()["error"]["code"]) == (409, "nothing_to_refund")
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fix-me"]
    assert counts(sandbox)["refunds"] == 1


def test_a_404_is_not_stored(alice: Api) -> None:
    missing = "env_" + "0" * 24
    response = alice.post(refund_path(missing), {}, key="nowhere")
    assert response.status_code == 404
    top_up = alice.post(top_up_path(missing), FUNDING, key="nowhere")
    assert top_up.status_code == 404
    assert not IdempotencyRecord.objects.exists()


def test_a_refused_top_up_is_not_stored_so_the_corrected_request_runs(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    path = top_up_path(envelope_id)
    for bad in ({**FUNDING, "amount_micro": 1_000_001}, {**FUNDING, "currency": "eur"}, {}):
        response = alice.post(path, bad, key="top-up-fix")
        assert response.status_code == 400
    assert not IdempotencyRecord.objects.exists()
    fixed = alice.post(path, FUNDING, key="top-up-fix")
    assert fixed.status_code == 201
    assert not replayed(fixed)
    assert counts(sandbox)["payment_intents"] == 2


def test_a_declined_card_is_stored_and_replayed(alice: Api, sandbox: SandboxControl) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    path = top_up_path(envelope_id)
    declined = alice.post(path, DECLINED, key="declined")
    assert (declined.status_code, declined.json()["error"]["code"]) == (402, "card_declined")
    asked = counts(sandbox)["payment_intents"]
    again = alice.post(path, DECLINED, key="declined")
    assert (again.status_code, again.json()) == (402, declined.json())
    assert replayed(again)
    assert counts(sandbox)["payment_intents"] == asked  # the provider was not asked again
    other_card = alice.post(path, FUNDING, key="declined")
    assert other_card.json()["error"]["code"] == "idempotency_key_conflict"
    assert FundingLeg.objects.count() == 1
    # The same for a creation: stored, replayed, and no envelope.
    body = {"amount_micro": 5_000_000, "payment_method": "pm_card_chargeDeclined"}
    first = alice.post("/api/v1/escrow/envelopes", body, key="declined-create")
    replay = alice.post("/api/escrow/envelopes", body, key="declined-create")
    assert first.status_code == replay.status_code == 402
    assert replayed(replay)
    assert replay.json() == first.json()
    assert Envelope.objects.count() == 1


# --- invalid keys --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("", id="empty"),
        pytest.param("k" * 256, id="256-chars"),
        pytest.param("clé", id="non-ascii"),
        pytest.param("bell\x07", id="control"),
        pytest.param("tab\tkey", id="tab"),
        pytest.param("del\x7f", id="del"),
    ],
)
@pytest.mark.parametrize("route", ["refund", "top-ups"])
def test_an_invalid_key_is_refused_and_nothing_happens(
    alice: Api, sandbox: SandboxControl, key: str, route: str
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    before = counts(sandbox)
    body = FUNDING if route == "top-ups" else {}
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/{route}", body, key=key)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_idempotency_key"
    assert counts(sandbox) == before
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 5_000_000
    assert not IdempotencyRecord.objects.exists()


def test_the_longest_key_and_every_printable_character_are_valid(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    printable = "".join(chr(c) for c in range(0x20, 0x7F))
    for key in ("k" * 255, printable[:255]):
        response = alice.post(refund_path(envelope_id), {"amount_micro": 1_000_000}, key=key)
        assert response.status_code == 200, (key, response.content)
    assert IdempotencyRecord.objects.count() == 2


# --- resumption after a lapsed lease -------------------------------------------------------------


def test_a_refund_whose_process_died_is_resumed_not_repeated(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    envelope_id = two_charge_envelope(alice)
    envelope = Envelope.objects.get(public_id=envelope_id)
    claim = idempotency_claim(
        user=alice.user,
        key="crashed",
        operation=operation_name("envelope.refund", envelope_id),
        surface="rest",
        body={},
    )
    # The first leg reaches the provider but its answer is lost; after that the provider is down.
    sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    operation = services.envelope_refund(
        envelope=envelope, actor=alice.user, idempotency=claim.record
    )
    # ... and the process died before it could store an answer: the record still runs.
    assert {leg.outcome for leg in operation.legs.all()} == {"unknown"}
    assert counts(sandbox)["refunds"] == 1
    record = IdempotencyRecord.objects.get(pk=claim.record.pk)
    assert (record.running, record.resource) == (True, operation.public_id)

    # While the lease holds, the key is in use.
    in_use = alice.post(refund_path(envelope_id), {}, key="crashed")
    assert (in_use.status_code, in_use.json()["error"]["code"]) == (409, "idempotency_key_in_use")

    IdempotencyRecord.objects.filter(pk=record.pk).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )
    sandbox.clear_faults()
    resumed = alice.post(refund_path(envelope_id), {}, key="crashed")
    assert resumed.status_code == 200, resumed.content
    data = resumed.json()["data"]
    assert data["refund_id"] == operation.public_id  # the same operation, not a new one
    assert data["status"] == "refunded"
    assert [leg["outcome"] for leg in data["legs"]] == ["accepted", "accepted"]
    assert RefundOperation.objects.count() == 1
    assert counts(sandbox)["refunds"] == 2  # one provider refund per leg
    for leg in data["legs"]:
        at_provider = sdk.v1.refunds.list(params={"charge": leg["charge"]}).data
        assert [r.id for r in at_provider] == [leg["provider_refund_id"]]
    assert data["balances"]["unspent_micro"] == 0
    assert data["balances"]["total_refunded_micro"] == 13_000_000
    replay = alice.post(refund_path(envelope_id, "/api/"), {}, key="crashed")
    assert replayed(replay)
    assert replay.json() == resumed.json()


def test_a_top_up_whose_process_died_is_resumed_not_repeated(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    envelope = Envelope.objects.get(public_id=envelope_id)
    claim = idempotency_claim(
        user=alice.user,
        key="crashed-top-up",
        operation=operation_name("envelope.top_up", envelope_id),
        surface="rest",
        body=FUNDING,
    )
    sandbox.add_fault("/v1/payment_intents", "apply_then_drop", method="POST", times=1)
    sandbox.add_fault("/v1/payment_intents", "server_error", method="POST")
    result = services.envelope_top_up(envelope=envelope, idempotency=claim.record, **FUNDING)
    assert result.pending  # charged at the provider, unknown here
    assert counts(sandbox)["payment_intents"] == 2
    IdempotencyRecord.objects.filter(pk=claim.record.pk).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )
    sandbox.clear_faults()
    resumed = alice.post(top_up_path(envelope_id), FUNDING, key="crashed-top-up")
    assert resumed.status_code == 201, resumed.content
    assert resumed.json()["data"]["total_funded_micro"] == 7_000_000
    assert FundingLeg.objects.filter(envelope=envelope).count() == 2
    assert counts(sandbox)["payment_intents"] == 2  # the same charge, not a second one


def test_without_a_key_a_retried_refund_refunds_again(alice: Api, sandbox: SandboxControl) -> None:
    """What the README and docs/api.md say of the optional header (issue 27), as at Stripe: a
    request sent twice without a key is two requests; the same two under one key, one refund."""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    body = {"amount_micro": 2_000_000}
    first = alice.post(refund_path(envelope_id), body)
    again = alice.post(refund_path(envelope_id), body)
    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json()["data"]["refund_id"] != again.json()["data"]["refund_id"]
    assert not replayed(again)
    assert counts(sandbox)["refunds"] == 2
    keyed = alice.post(refund_path(envelope_id), body, key="refund-claim-7")
    retried = alice.post(refund_path(envelope_id), body, key="refund-claim-7")
    assert replayed(retried)
    assert retried.json() == keyed.json()
    assert counts(sandbox)["refunds"] == 3
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 4_000_000
