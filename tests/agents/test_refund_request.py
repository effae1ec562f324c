"""Refund requests through the agent surface (SPEC §16): `refund_request_create` validates exactly
as the REST refund does (the same codes, in the same order), previews the last-in-first-out
refund without reserving anything, stores a request that expires on the shared clock, and writes
an audit event; `refund_request_get` reports it. No request moves money."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.core.cache import cache

from accounts.models import User
from agents.models import RefundRequest
from agents.services import RATE_SCOPE, refund_request_create, refund_request_get
from core.api.throttling import parse_rate, throttle_cache_key
from core.exceptions import VouchError
from core.models import AuditEvent, IdempotencyRecord
from envelopes.models import Envelope, RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db

ORIGIN = "http://testserver"


@pytest.fixture(autouse=True)
def _no_request_limit(settings: Any) -> None:
    """The per-buyer limit is tested on its own; elsewhere it must not get in the way."""
    settings.MCP_REFUND_REQUEST_RATE = "100000/hour"


def propose(api: Api, envelope_id: str, amount: Any = None, *, key: str = "k-1") -> dict[str, Any]:
    return refund_request_create(
        user=api.user,
        envelope_id=envelope_id,
        amount_micro=amount,
        idempotency_key=key,
        client_id="client-test",
        origin=ORIGIN,
    )


def refund_path(envelope_id: str) -> str:
    return f"/api/v1/escrow/envelopes/{envelope_id}/refund"


def refunds_at_the_provider(sandbox: SandboxControl) -> int:
    return int(sandbox.state()["counts"]["refunds"])


def test_a_request_previews_the_lifo_refund_and_moves_no_money(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope = alice.create(10_000_000)
    envelope_id = envelope["envelope_id"]
    top_up = alice.top_up(envelope_id, 3_000_000)
    before = Envelope.objects.get(public_id=envelope_id)
    result = propose(alice, envelope_id, 11_000_005)
    request = RefundRequest.objects.get()
    assert set(result) == {
        "request_id",
        "status",
        "envelope_id",
        "preview",
        "confirm_url",
        "expires_at",
    }
    assert result["request_id"] == request.public_id
    assert request.public_id.startswith("rrq_")
    assert result["status"] == "pending_confirmation"
    assert result["envelope_id"] == envelope_id
    assert result["confirm_url"] == f"{ORIGIN}/escrow/refund-requests/{request.public_id}/"
    assert result["expires_at"] == request.expires_at.isoformat()
    assert request.expires_at - request.created_at == pytest.approx(
        timedelta(seconds=900), abs=timedelta(seconds=2)
    )
    top_up_leg, original_leg = top_up["funding_legs"][1], top_up["funding_legs"][0]
    # Newest first: the top-up whole, then the original; 5 micro (sub-cent) stays.
    assert result["preview"] == {
        "requested_micro": 11_000_005,
        "requested_usd": 11.000005,
        "legs": [
            {
                "funding_id": top_up_leg["funding_id"],
                "kind": "top_up",
                "sequence": 2,
                "charge": top_up_leg["charge"],
                "amount_micro": 3_000_000,
                "amount_usd": 3.0,
            },
            {
                "funding_id": original_leg["funding_id"],
                "kind": "original",
                "sequence": 1,
                "charge": original_leg["charge"],
                "amount_micro": 8_000_000,
                "amount_usd": 8.0,
            },
        ],
        "total_micro": 11_000_000,
        "total_usd": 11.0,
        "remainder_micro": 5,
        "remainder_usd": 0.000005,
        "unspent_micro": 13_000_000,
        "unspent_usd": 13.0,
        "held_micro": 0,  # no dispute holds money (SPEC §18)
        "held_usd": 0.0,
        "held_note": None,
    }
    assert request.preview == result["preview"]
    assert (request.owner, request.envelope.public_id, request.amount_micro) == (
        alice.user,
        envelope_id,
        11_000_005,
    )
    assert request.client_id == "client-test"
    # Nothing reserved, nothing sent, nothing journaled.
    after = Envelope.objects.get(public_id=envelope_id)
    assert (after.unspent_micro, after.reserved_micro) == (before.unspent_micro, 0)
    assert after.journal.count() == before.journal.count()
    assert RefundOperation.objects.count() == 0
    assert refunds_at_the_provider(sandbox) == 0
    assert ledger_breaches() == []


def test_no_amount_previews_the_whole_unspent_balance(alice: Api) -> None:
    envelope_id = alice.create(10_000_000)["envelope_id"]
    preview = propose(alice, envelope_id)["preview"]
    assert (preview["requested_micro"], preview["total_micro"]) == (10_000_000, 10_000_000)
    assert RefundRequest.objects.get().amount_micro is None


def test_a_request_is_an_audit_event(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    result = propose(alice, envelope_id, 2_000_000)
    event = AuditEvent.objects.get(action="refund_request.create")
    assert (event.actor, event.target_type, event.target_id) == (
        alice.user,
        "refund_request",
        result["request_id"],
    )
    assert event.details["envelope"] == envelope_id
    assert event.details["amount_micro"] == 2_000_000
    assert event.details["client_id"] == "client-test"


# --- the same refusals as the REST refund -------------------------------------------------------

# (name, amount, key, which envelope) -> the REST refund's answer to the same input.
CASES = [
    ("zero", 0, "k", "own"),
    ("negative", -1, "k", "own"),
    ("float", 1.5, "k", "own"),
    ("integral float", 1_000_000.0, "k", "own"),
    ("string", "1000000", "k", "own"),
    ("boolean", True, "k", "own"),
    ("a list", [1_000_000], "k", "own"),
    ("past 64 bits", 2**63, "k", "own"),
    ("more than unspent", 10_000_001, "k", "own"),
    ("less than a cent", 9_999, "k", "own"),
    ("empty key", 1_000_000, "", "own"),
    ("key too long", 1_000_000, "k" * 256, "own"),
    ("key not printable ASCII", 1_000_000, "tab\tkey", "own"),
    ("another buyer's envelope", 1_000_000, "k", "bob"),
    ("missing envelope", 1_000_000, "k", "missing"),
    ("an envelope id with NUL", 1_000_000, "k", "nul"),
    # The order of the checks: key before amount, amount before lookup, lookup before balance.
    ("bad key and bad amount", 0, "", "own"),
    ("bad amount and missing envelope", 0, "k", "missing"),
    ("too much of another buyer's envelope", 10**9, "k", "bob"),
]


@pytest.mark.parametrize(("name", "amount", "key", "which"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_request_gets_the_rest_refunds_code_and_changes_nothing(
    alice: Api, bob: Api, sandbox: SandboxControl, name: str, amount: Any, key: str, which: str
) -> None:
    own = alice.create(10_000_000)["envelope_id"]
    bobs = bob.create(5_000_000)["envelope_id"]
    envelope_id = {"own": own, "bob": bobs, "missing": "env_doesnotexist", "nul": "env_\x00"}[which]
    with pytest.raises(VouchError) as refused:
        propose(alice, envelope_id, amount, key=key)
    if which == "nul":  # a NUL cannot be sent in a URL path: the REST refund's is an unknown id
        envelope_id = "env_doesnotexist"
    rest = alice.post(refund_path(envelope_id), {"amount_micro": amount}, key=key)
    assert rest.status_code >= 400, rest.content
    assert (refused.value.code, refused.value.status_code) == (
        rest.json()["error"]["code"],
        rest.status_code,
    ), name
    assert RefundRequest.objects.count() == 0
    assert IdempotencyRecord.objects.count() == 0  # nothing kept under the key on either surface
    assert AuditEvent.objects.filter(action="refund_request.create").count() == 0
    assert RefundOperation.objects.count() == 0
    assert refunds_at_the_provider(sandbox) == 0


EXPECTED = {
    "zero": "invalid_amount",
    "more than unspent": "amount_exceeds_unspent",
    "less than a cent": "invalid_amount",
    "empty key": "invalid_idempotency_key",
    "another buyer's envelope": "not_found",
    "bad key and bad amount": "invalid_idempotency_key",
    "bad amount and missing envelope": "invalid_amount",
    "too much of another buyer's envelope": "not_found",
}


@pytest.mark.parametrize(("name", "code"), EXPECTED.items())
def test_the_codes_are_the_ones_spec_3_names(alice: Api, bob: Api, name: str, code: str) -> None:
    """The table above compares the surfaces; this pins a few of the codes themselves."""
    _, amount, key, which = next(c for c in CASES if c[0] == name)
    own = alice.create(10_000_000)["envelope_id"]
    bobs = bob.create(5_000_000)["envelope_id"]
    envelope_id = {"own": own, "bob": bobs, "missing": "env_doesnotexist"}[which]
    with pytest.raises(VouchError) as refused:
        propose(alice, envelope_id, amount, key=key)
    assert refused.value.code == code


def test_nothing_to_refund_when_everything_was_debited(alice: Api, staff_api: Api) -> None:
    envelope_id = alice.create(2_000_000)["envelope_id"]
    debit = staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": 2_000_000, "reference": "job-1"},
    )
    assert debit.status_code == 201, debit.content
    with pytest.raises(VouchError) as refused:
        propose(alice, envelope_id)
    rest = alice.post(refund_path(envelope_id), {}, key="k-rest")
    assert refused.value.code == rest.json()["error"]["code"] == "nothing_to_refund"


def test_an_unverified_buyer_is_refused_first_as_over_rest(
    db: None, stripe_at_sandbox: Any
) -> None:
    carol = Api(User.objects.create_user("carol", "carol@example.com", "pw-carol-123"))
    envelope_id = carol.create(2_000_000)["envelope_id"]
    carol.user.emailaddress_set.update(verified=False)
    for target, amount, key in ((envelope_id, 0, ""), ("env_doesnotexist", None, "k")):
        with pytest.raises(VouchError) as refused:
            propose(carol, target, amount, key=key)
        rest = carol.post(refund_path(target), {"amount_micro": amount}, key=key)
        assert refused.value.code == rest.json()["error"]["code"] == "email_unverified"
        assert refused.value.status_code == rest.status_code == 403
    assert RefundRequest.objects.count() == IdempotencyRecord.objects.count() == 0


def test_another_buyers_envelope_answers_exactly_as_a_missing_one(alice: Api, bob: Api) -> None:
    bobs = bob.create(5_000_000)["envelope_id"]
    answers = []
    for envelope_id in (bobs, "env_doesnotexist"):
        with pytest.raises(VouchError) as refused:
            propose(alice, envelope_id, 1_000_000, key=f"k-{envelope_id}")
        error = refused.value
        answers.append((type(error), error.code, error.status_code, error.message, error.details))
    assert answers[0] == answers[1]
    assert answers[0][1] == "not_found"


def test_a_refused_request_keeps_nothing_so_the_corrected_one_runs(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    with pytest.raises(VouchError):
        propose(alice, envelope_id, 6_000_000, key="fix-me")
    result = propose(alice, envelope_id, 4_000_000, key="fix-me")
    assert result["preview"]["total_micro"] == 4_000_000


# --- the per-buyer limit ------------------------------------------------------------------------


def test_the_per_buyer_limit_refuses_with_retry_details_and_keeps_nothing(
    settings: Any, alice: Api, bob: Api
) -> None:
    settings.MCP_REFUND_REQUEST_RATE = "2/hour"
    _, window_s = parse_rate(settings.MCP_REFUND_REQUEST_RATE)
    for api in (alice, bob):
        cache.delete(throttle_cache_key(RATE_SCOPE, api.user.pk, int(time.time() // window_s)))
    envelope_id = alice.create(10_000_000)["envelope_id"]
    propose(alice, envelope_id, 1_000_000, key="a")
    propose(alice, envelope_id, 1_000_000, key="b")
    with pytest.raises(VouchError) as refused:
        propose(alice, envelope_id, 1_000_000, key="c")
    error = refused.value
    assert (error.code, error.status_code) == ("rate_limited", 429)
    assert 1 <= error.details["retry_after_s"] <= 3600
    assert RefundRequest.objects.count() == 2
    assert not IdempotencyRecord.objects.filter(key="c").exists()
    # Another buyer counts apart.
    bobs = bob.create(5_000_000)["envelope_id"]
    assert propose(bob, bobs, 1_000_000, key="c")["status"] == "pending_confirmation"
    # The window passes: alice may ask again.
    with time_machine.travel(time.time() + window_s, tick=False):
        assert propose(alice, envelope_id, 1_000_000, key="c")["status"] == "pending_confirmation"


def test_an_empty_rate_turns_the_limit_off(settings: Any, alice: Api) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    for n in range(12):
        propose(alice, envelope_id, 1_000_000, key=f"k-{n}")
    assert RefundRequest.objects.count() == 12


# --- reading it back, and expiry on the shared clock --------------------------------------------


def test_a_request_reads_back_and_expires_on_the_shared_clock(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    created = propose(alice, envelope_id, 2_000_000)
    request = RefundRequest.objects.get()
    got = refund_request_get(user=alice.user, request_id=created["request_id"], origin=ORIGIN)
    assert {k: got[k] for k in created} == created
    assert got["refund"] is None
    assert got["refusal_code"] is None
    assert got["confirmed_at"] is None
    with time_machine.travel(request.expires_at - timedelta(seconds=1), tick=False):
        status = refund_request_get(user=alice.user, request_id=request.public_id, origin=ORIGIN)
        assert status["status"] == "pending_confirmation"
    with time_machine.travel(request.expires_at, tick=False):
        status = refund_request_get(user=alice.user, request_id=request.public_id, origin=ORIGIN)
        assert status["status"] == "expired"


def test_another_buyers_request_reads_exactly_as_a_missing_one(alice: Api, bob: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    request_id = propose(alice, envelope_id)["request_id"]
    answers = []
    for target in (request_id, "rrq_doesnotexist"):
        with pytest.raises(VouchError) as refused:
            refund_request_get(user=bob.user, request_id=target, origin=ORIGIN)
        error = refused.value
        answers.append((type(error), error.code, error.status_code, error.message, error.details))
    assert answers[0] == answers[1]
    assert answers[0][1] == "not_found"
