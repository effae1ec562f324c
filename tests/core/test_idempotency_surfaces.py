"""One idempotency mechanism on both surfaces (SPEC §4, §16; issue 14, acceptance 2): the REST
refund and the MCP refund request of one envelope are one operation. A key used on one surface is
refused on the other (`idempotency_key_other_surface`, never run twice, never the other's answer
replayed); the same key and arguments on MCP replay the same request; other arguments are a
conflict; a tool call re-sent after a dropped stream — or by two racing clients, or after the
first process died — makes one request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from agents.models import RefundRequest
from agents.services import refund_request_create
from core.exceptions import NotFound, VouchError
from core.idempotency import (
    SURFACE_MCP,
    SURFACE_REST,
    IdempotencyKeyConflict,
    IdempotencyKeyInUse,
    IdempotencyKeyOtherSurface,
    StoredAnswer,
    idempotency_attach,
    idempotent_run,
    operation_name,
    render_json,
)
from core.models import AuditEvent, IdempotencyRecord
from envelopes.exceptions import CardDeclined
from envelopes.models import RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.crashes import ROOT, assert_died, database_url, past_the_lease
from tests.drivers.api import Api
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db

ORIGIN = "http://testserver"


@pytest.fixture(autouse=True)
def _no_request_limit(settings: Any) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""


def propose(api: Api, envelope_id: str, amount: Any = None, *, key: str) -> dict[str, Any]:
    return refund_request_create(
        user=api.user,
        envelope_id=envelope_id,
        amount_micro=amount,
        idempotency_key=key,
        client_id="client-test",
        origin=ORIGIN,
    )


def refund_path(envelope_id: str, prefix: str = "/api/v1/") -> str:
    return f"{prefix}escrow/envelopes/{envelope_id}/refund"


def provider_refunds(sandbox: SandboxControl) -> int:
    return int(sandbox.state()["counts"]["refunds"])


def two_charge_envelope(api: Api) -> str:
    envelope_id = api.create(10_000_000)["envelope_id"]
    api.top_up(envelope_id, 3_000_000)
    return envelope_id


# --- the runner both surfaces share --------------------------------------------------------------


def test_the_operation_is_named_once_for_both_surfaces() -> None:
    from core.api import idempotent as rest

    assert rest.operation_name is operation_name
    assert (SURFACE_REST, SURFACE_MCP, rest.SURFACE) == ("rest", "mcp", "rest")
    assert operation_name("envelope.refund", "env_A") == "envelope.refund:env_A"


def test_the_runner_stores_an_answer_only_when_something_happened(alice: Api) -> None:
    ran: list[str] = []

    def run(key: str, action: Any) -> Any:
        return idempotent_run(
            user=alice.user,
            key=key,
            operation="test.op:x",
            surface=SURFACE_MCP,
            body={"a": 1},
            action=action,
            answer=lambda result: (200, render_json(result)),
            provider_calls=0,
        )

    def refused(record: IdempotencyRecord) -> Any:
        ran.append("refused")
        raise NotFound()

    def declined(record: IdempotencyRecord) -> Any:
        ran.append("declined")
        raise CardDeclined("card_declined")

    def made(record: IdempotencyRecord) -> dict[str, Any]:
        ran.append("made")
        idempotency_attach(record, "thing_1")
        return {"made": "thing_1"}

    with pytest.raises(NotFound):  # a refusal that changed nothing: the key is free again
        run("k-1", refused)
    assert not IdempotencyRecord.objects.filter(key="k-1").exists()
    assert run("k-1", made) == {"made": "thing_1"}
    again = run("k-1", made)
    assert again == StoredAnswer(200, '{"made":"thing_1"}', True)
    with pytest.raises(CardDeclined):  # the provider answered: kept, and replayed
        run("k-2", declined)
    replay = run("k-2", declined)
    assert isinstance(replay, StoredAnswer)
    assert replay.status == 402
    assert json.loads(replay.body)["error"]["code"] == "card_declined"
    assert ran == ["refused", "made", "declined"]


# --- REST first, then MCP ------------------------------------------------------------------------


def test_a_rest_key_is_refused_on_mcp_and_nothing_is_requested(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = two_charge_envelope(alice)
    rest = alice.post(refund_path(envelope_id), {"amount_micro": 2_000_000}, key="K")
    assert rest.status_code == 200, rest.content
    refunds = provider_refunds(sandbox)
    # The same body, another body, no body: the other surface comes before the conflict.
    for amount in (2_000_000, 1_000_000, None):
        with pytest.raises(IdempotencyKeyOtherSurface) as refused:
            propose(alice, envelope_id, amount, key="K")
        assert (refused.value.code, refused.value.status_code) == (
            "idempotency_key_other_surface",
            422,
        )
    assert RefundRequest.objects.count() == 0
    assert AuditEvent.objects.filter(action="refund_request.create").count() == 0
    assert RefundOperation.objects.count() == 1
    assert provider_refunds(sandbox) == refunds
    # The REST answer is intact and still replays over REST.
    again = alice.post(refund_path(envelope_id), {"amount_micro": 2_000_000}, key="K")
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.content == rest.content


# --- MCP first, then REST ------------------------------------------------------------------------


def test_an_mcp_key_is_refused_over_rest_and_never_refunds(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = two_charge_envelope(alice)
    proposed = propose(alice, envelope_id, key="K")
    record = IdempotencyRecord.objects.get(key="K")
    assert (record.surface, record.operation) == ("mcp", f"envelope.refund:{envelope_id}")
    encoded = envelope_id.replace("_", "%5F")
    for path, body in (
        (refund_path(envelope_id), {}),
        (refund_path(envelope_id), {"amount_micro": 1_000_000}),
        (refund_path(envelope_id, "/api/"), {}),
        (refund_path(encoded), {}),  # compared percent-decoded: the same operation
    ):
        response = alice.post(path, body, key="K")
        assert response.status_code == 422, (path, response.content)
        assert response.json()["error"]["code"] == "idempotency_key_other_surface"
        assert response.headers.get("Idempotent-Replayed") is None
        assert proposed["request_id"] not in response.content.decode()  # never MCP's answer
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == 0
    assert RefundRequest.objects.get().status == RefundRequest.Status.PENDING
    # MCP itself still replays its request.
    assert propose(alice, envelope_id, key="K") == proposed


def test_a_percent_encoded_envelope_id_is_the_same_operation_on_mcp(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    first = propose(alice, envelope_id.replace("_", "%5F"), 1_000_000, key="enc")
    assert first["envelope_id"] == envelope_id
    assert propose(alice, envelope_id, 1_000_000, key="enc") == first
    assert RefundRequest.objects.count() == 1


# --- MCP on its own: replay, conflict, one request per call -------------------------------------


def test_the_same_key_and_arguments_replay_the_same_request(alice: Api) -> None:
    envelope_id = two_charge_envelope(alice)
    first = propose(alice, envelope_id, 4_000_000, key="K")
    for _ in range(3):  # a client re-sending after a dropped stream
        assert propose(alice, envelope_id, 4_000_000, key="K") == first
    assert RefundRequest.objects.count() == 1
    assert AuditEvent.objects.filter(action="refund_request.create").count() == 1


def test_other_arguments_under_the_same_key_are_a_conflict(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    propose(alice, envelope_id, 1_000_000, key="K")
    for other in (2_000_000, 1_000_001, None):
        with pytest.raises(IdempotencyKeyConflict) as refused:
            propose(alice, envelope_id, other, key="K")
        assert (refused.value.code, refused.value.status_code) == ("idempotency_key_conflict", 422)
    assert RefundRequest.objects.count() == 1


def test_the_key_is_scoped_to_the_envelope_and_the_buyer(alice: Api, bob: Api) -> None:
    first = alice.create(5_000_000)["envelope_id"]
    second = alice.create(5_000_000)["envelope_id"]
    bobs = bob.create(5_000_000)["envelope_id"]
    a = propose(alice, first, key="K")
    b = propose(alice, second, key="K")
    c = propose(bob, bobs, key="K")
    assert len({a["request_id"], b["request_id"], c["request_id"]}) == 3


@pytest.mark.django_db(transaction=True)
def test_two_racing_identical_calls_make_one_request(alice: Api) -> None:
    envelope_id = two_charge_envelope(alice)
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def call() -> None:
        try:
            barrier.wait(timeout=10)
            outcomes.append(propose(alice, envelope_id, 5_000_000, key="race"))
        except VouchError as exc:
            outcomes.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(outcomes) == 2
    answers = [o for o in outcomes if isinstance(o, dict)]
    refusals = [o for o in outcomes if not isinstance(o, dict)]
    assert answers, outcomes
    assert all(isinstance(r, IdempotencyKeyInUse) for r in refusals), refusals
    request = RefundRequest.objects.get()
    assert {a["request_id"] for a in answers} == {request.public_id}
    # Afterwards, the loser's retry replays the winner's answer.
    assert propose(alice, envelope_id, 5_000_000, key="race") == answers[0]


_SCRIPT = """
import json, sys
import django
django.setup()
from accounts.models import User
from agents.services import refund_request_create
spec = json.loads(sys.argv[1])
result = refund_request_create(
    user=User.objects.get(username=spec["username"]), envelope_id=spec["envelope_id"],
    amount_micro=spec["amount_micro"], idempotency_key=spec["key"], client_id="client-test",
    origin="http://testserver",
)
print(json.dumps(result))
"""


@pytest.mark.django_db(transaction=True)
def test_a_call_whose_process_died_before_storing_is_resumed_into_the_same_request(
    alice: Api,
) -> None:
    """The first call made the request, then its process died before keeping the answer; the
    client re-sends once the lease lapsed: the same request comes back, no second one."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    spec = {"username": "alice", "envelope_id": envelope_id, "amount_micro": None, "key": "dead"}
    died = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(spec)],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url(),
            "STRIPE_API_BASE": settings.STRIPE_API_BASE,
            "MCP_REFUND_REQUEST_RATE": "",
            "VOUCH_CRASH_AT": "idempotent_before_store",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert_died(died, "idempotent_before_store")
    made = RefundRequest.objects.get()
    with pytest.raises(IdempotencyKeyInUse):  # its lease has not lapsed yet
        propose(alice, envelope_id, key="dead")
    with past_the_lease("dead"):
        resumed = propose(alice, envelope_id, key="dead")
    assert resumed["request_id"] == made.public_id
    assert RefundRequest.objects.count() == 1
    assert AuditEvent.objects.filter(action="refund_request.create").count() == 1
    assert propose(alice, envelope_id, key="dead") == resumed


# --- in use comes first, across surfaces ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_key_running_over_rest_is_in_use_on_mcp(
    alice: Api, sandbox: SandboxControl, settings: Any
) -> None:
    settings.STRIPE_READ_TIMEOUT_S = 5.0
    envelope_id = two_charge_envelope(alice)
    sandbox.add_fault("/v1/refunds", "delay", method="POST", times=1, delay_ms=1500)
    results: dict[str, Any] = {}

    def rest_request() -> None:
        try:
            results["rest"] = alice.post(refund_path(envelope_id), {}, key="slow")
        finally:
            connection.close()

    thread = threading.Thread(target=rest_request)
    thread.start()
    wait_until(
        lambda: IdempotencyRecord.objects.filter(key="slow", resource__startswith="erf_").exists(),
        what="the REST refund to reach the provider",
    )
    with pytest.raises(IdempotencyKeyInUse):
        propose(alice, envelope_id, key="slow")
    thread.join(timeout=15)
    assert results["rest"].status_code == 200
    with pytest.raises(IdempotencyKeyOtherSurface):
        propose(alice, envelope_id, key="slow")
    assert RefundRequest.objects.count() == 0
    assert RefundOperation.objects.count() == 1
    assert provider_refunds(sandbox) == 2
    assert ledger_breaches() == []
