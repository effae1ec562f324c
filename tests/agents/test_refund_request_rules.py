"""Refund requests' rules, each on its own (agents/services.py, SPEC §16), in this process: what a
request stores and answers, the rate limit, how a confirmation ends in each case — refused,
changed, expired, in progress, confirmed, resumed — and what it leaves on the request, the audit
trail and the provider. The fast subset bench/mutation/agents.services.toml runs for every
mutant."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from agents import services
from agents.models import RefundRequest
from agents.selectors import preview_digest
from agents.services import refund_request_confirm, refund_request_create
from core.exceptions import VouchError
from core.idempotency import body_digest, lease_for, operation_name
from core.models import AuditEvent, IdempotencyRecord
from envelopes import services as envelopes_services
from envelopes.models import RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db

ORIGIN = "http://testserver"


@pytest.fixture(autouse=True)
def _no_request_limit(settings: Any) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""


def propose(api: Api, envelope_id: str, amount: Any = None, *, key: str = "k-1") -> str:
    return str(
        refund_request_create(
            user=api.user,
            envelope_id=envelope_id,
            amount_micro=amount,
            idempotency_key=key,
            client_id="client-test",
            origin=ORIGIN,
        )["request_id"]
    )


def provider_refunds(sandbox: SandboxControl) -> int:
    return int(sandbox.state()["counts"]["refunds"])


def debit(staff_api: Api, envelope_id: str, amount_micro: int, reference: str = "job") -> None:
    response = staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": amount_micro, "reference": reference},
    )
    assert response.status_code == 201, response.content


# --- a refund refused after the preview passed ------------------------------------------------


@pytest.mark.parametrize(
    ("cause", "requested", "debited"),
    [("amount_exceeds_unspent", 4_000_000, 2_000_000), ("nothing_to_refund", None, 5_000_000)],
)
def test_a_refund_refused_after_the_preview_passed_refuses_the_request(
    alice: Api,
    staff_api: Api,
    sandbox: SandboxControl,
    monkeypatch: pytest.MonkeyPatch,
    cause: str,
    requested: int | None,
    debited: int,
) -> None:
    """The preview is checked without the envelope's lock; a debit lands before the refund takes
    it, and the refund itself refuses. The request is refused with the refund's code (not left
    pending, leased or unanswered), the attempt is audited, and nothing moves."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    request_id = propose(alice, envelope_id, requested)
    shown = preview_digest(RefundRequest.objects.get().preview)
    real_preview_now = services.selectors.preview_now

    def preview_then_a_debit(request: RefundRequest) -> dict[str, Any]:
        preview = real_preview_now(request)  # passes: matches what the person was shown
        debit(staff_api, envelope_id, debited)
        return preview

    monkeypatch.setattr(services.selectors, "preview_now", preview_then_a_debit)
    confirmation = refund_request_confirm(
        user=alice.user, request_id=request_id, shown_digest=shown
    )
    assert (confirmation.outcome, confirmation.code, confirmation.refund) == (
        "refused",
        cause,
        None,
    )
    request = RefundRequest.objects.get()
    assert (request.status, request.refusal_code) == (RefundRequest.Status.REFUSED, cause)
    assert request.confirm_lease_until is None
    event = AuditEvent.objects.get(action="refund_request.confirm")
    assert (event.actor, event.target_type, event.target_id) == (
        alice.user,
        "refund_request",
        request_id,
    )
    assert event.details == {"outcome": "refused", "code": cause, "envelope": envelope_id}
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == 0
    # Refused for good: confirming again says so, and still moves nothing.
    monkeypatch.setattr(services.selectors, "preview_now", real_preview_now)
    again = refund_request_confirm(user=alice.user, request_id=request_id, shown_digest=shown)
    assert (again.outcome, again.code) == ("refused", cause)
    assert RefundOperation.objects.count() == 0
    assert ledger_breaches() == []


# --- the amount, as the REST refund parses it ----------------------------------------------------

INTEGER = "amount_micro must be an integer number of micro-dollars."
POSITIVE = "amount_micro must be a positive integer number of micro-dollars."

# amount -> (code, message, details) of the request; the REST refund answers the same code,
# status and message.
AMOUNT_EDGES = {
    -(2**63) - 1: ("invalid_amount", INTEGER, {"amount_micro": ["A valid integer is required."]}),
    -(2**63): ("invalid_amount", POSITIVE, {}),
    0: ("invalid_amount", POSITIVE, {}),
    1: ("invalid_amount", None, None),  # positive, less than a cent: no refund is that small
    2**63 - 1: ("amount_exceeds_unspent", None, None),  # the largest bigint is an integer
    2**63: ("invalid_amount", INTEGER, {"amount_micro": ["A valid integer is required."]}),
}


@pytest.mark.parametrize("amount", AMOUNT_EDGES, ids=[str(a) for a in AMOUNT_EDGES])
def test_an_amount_at_each_edge_of_a_bigint_and_of_positive_is_judged_as_rest_judges_it(
    alice: Api, amount: int
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    code, message, details = AMOUNT_EDGES[amount]
    with pytest.raises(VouchError) as refused:
        propose(alice, envelope_id, amount, key="edge")
    error = refused.value
    assert error.code == code
    if message is not None:
        assert (error.message, error.details) == (message, details)
    rest = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": amount}, key="edge"
    ).json()["error"]
    assert (rest["code"], rest["message"]) == (error.code, error.message)
    assert RefundRequest.objects.count() == 0


def test_the_same_key_with_another_amount_is_a_conflict_not_the_first_request(
    alice: Api,
) -> None:
    """The key's fingerprint is the REST refund's body: `{}` for the whole balance,
    `{"amount_micro": N}` otherwise; another amount under the key is refused, never answered
    with the first request."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    first = propose(alice, envelope_id, 1_000_000, key="same")
    assert propose(alice, envelope_id, 1_000_000, key="same") == first  # a replay
    for other in (2_000_000, None):
        with pytest.raises(VouchError) as refused:
            propose(alice, envelope_id, other, key="same")
        assert refused.value.code == "idempotency_key_conflict"
    whole = propose(alice, envelope_id, key="whole")
    assert propose(alice, envelope_id, None, key="whole") == whole
    with pytest.raises(VouchError) as refused:
        propose(alice, envelope_id, 5_000_000, key="whole")
    assert refused.value.code == "idempotency_key_conflict"
    assert RefundRequest.objects.count() == 2


# --- the per-buyer limit -------------------------------------------------------------------------


def test_the_limit_says_the_whole_seconds_to_the_windows_end_at_least_one(
    settings: Any, alice: Api
) -> None:
    settings.MCP_REFUND_REQUEST_RATE = "1/hour"
    envelope_id = alice.create(5_000_000)["envelope_id"]
    start = (int(time.time() // 3600) + 1) * 3600  # the next window's start: nothing counted yet
    # (seconds into a window, what retry_after_s must say)
    for into, retry_after in ((10.5, 3590), (3600 + 3599.75, 1)):
        with time_machine.travel(start + into, tick=False):
            propose(alice, envelope_id, 1_000_000, key=f"ok-{into}")
            with pytest.raises(VouchError) as refused:
                propose(alice, envelope_id, 1_000_000, key=f"over-{into}")
        error = refused.value
        assert (error.code, error.status_code) == ("rate_limited", 429)
        assert error.message == (
            "Too many refund requests; retry after the number of seconds in retry_after_s."
        )
        assert error.details == {"retry_after_s": retry_after}


# --- what a request keeps under its key -----------------------------------------------------------


def test_a_requests_key_keeps_the_rest_refunds_body_a_200_answer_and_no_provider_lease(
    alice: Api,
) -> None:
    """The key's record is the REST refund's operation, fingerprinted by the REST refund's body
    (`{}` for the whole balance, `{"amount_micro": N}` otherwise), answered 200 with the request,
    and leased for Vouch's own work only: making a request calls no provider."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    for key, amount, body in (
        ("part", 1_000_000, {"amount_micro": 1_000_000}),
        ("whole", None, {}),
    ):
        result = refund_request_create(
            user=alice.user,
            envelope_id=envelope_id,
            amount_micro=amount,
            idempotency_key=key,
            client_id="client-test",
            origin=ORIGIN,
        )
        record = IdempotencyRecord.objects.get(key=key)
        assert (record.surface, record.operation) == (
            "mcp",
            operation_name("envelope.refund", envelope_id),
        )
        assert record.request_digest == body_digest(body)
        assert (record.running, record.response_status) == (False, 200)
        assert json.loads(record.response_body) == result
        assert record.lease_until - record.created_at < lease_for(provider_calls=0) + timedelta(
            seconds=5
        )
        assert lease_for(provider_calls=1) - lease_for(provider_calls=0) > timedelta(seconds=5)


@pytest.mark.parametrize("key", [None, 7, ["k-1"]], ids=["none", "number", "list"])
def test_a_key_that_is_not_a_string_is_refused_and_keeps_nothing(alice: Api, key: Any) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    with pytest.raises(VouchError) as refused:
        refund_request_create(
            user=alice.user,
            envelope_id=envelope_id,
            amount_micro=1_000_000,
            idempotency_key=key,
            client_id="client-test",
            origin=ORIGIN,
        )
    assert refused.value.code == "invalid_idempotency_key"
    assert RefundRequest.objects.count() == IdempotencyRecord.objects.count() == 0


def test_a_request_records_its_whole_audit_trail_and_the_assistants_name_cut_to_100(
    alice: Api, settings: Any
) -> None:
    envelope_id = two_charge_envelope(alice)
    result = refund_request_create(
        user=alice.user,
        envelope_id=envelope_id,
        amount_micro=None,
        idempotency_key="audit",
        client_id="c" * 150,
        origin=ORIGIN,
    )
    request = RefundRequest.objects.get()
    assert request.client_id == "c" * 100
    lifetime = request.expires_at - request.created_at
    ttl = timedelta(seconds=settings.REFUND_REQUEST_TTL_S)
    assert ttl - timedelta(seconds=5) < lifetime <= ttl
    event = AuditEvent.objects.get(action="refund_request.create")
    assert (event.actor, event.target_type, event.target_id) == (
        alice.user,
        "refund_request",
        result["request_id"],
    )
    assert event.details == {
        "envelope": envelope_id,
        "amount_micro": None,
        "preview_total_micro": 13_000_000,
        "client_id": "c" * 100,
        "expires_at": request.expires_at.isoformat(),
    }


def test_a_call_sent_again_after_its_first_process_made_the_request_answers_that_request(
    alice: Api,
) -> None:
    """The first process made the request and died before keeping its answer under the key (its
    record still running, its lease over): the call sent again answers the same request, and
    makes no second one."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    first = propose(alice, envelope_id, 1_000_000, key="again")
    IdempotencyRecord.objects.filter(key="again").update(
        running=True,
        response_status=None,
        response_body="",
        lease_until=timezone.now() - timedelta(seconds=1),
    )
    again = refund_request_create(
        user=alice.user,
        envelope_id=envelope_id,
        amount_micro=1_000_000,
        idempotency_key="again",
        client_id="client-test",
        origin=ORIGIN,
    )
    assert again["request_id"] == first
    assert RefundRequest.objects.count() == 1
    record = IdempotencyRecord.objects.get(key="again")
    assert (record.running, json.loads(record.response_body)) == (False, again)


# --- confirming ---------------------------------------------------------------------------------


def two_charge_envelope(api: Api) -> str:
    envelope_id = api.create(10_000_000)["envelope_id"]
    api.top_up(envelope_id, 3_000_000)
    return str(envelope_id)


class LeaseSpy:
    """The real refund, run as confirming runs it; notes the request's lease when it starts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.leases: list[Any] = []
        self.real = services.envelope_refund
        monkeypatch.setattr(services, "envelope_refund", self)

    def __call__(self, **kwargs: Any) -> RefundOperation:
        self.leases.append(RefundRequest.objects.get().confirm_lease_until)
        return self.real(**kwargs)


@pytest.mark.parametrize(("amount", "legs"), [(1_000_000, 1), (None, 2)])
def test_confirming_holds_a_lease_for_every_leg_and_records_the_refund(
    alice: Api,
    sandbox: SandboxControl,
    monkeypatch: pytest.MonkeyPatch,
    amount: int | None,
    legs: int,
) -> None:
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id, amount)
    shown = preview_digest(RefundRequest.objects.get().preview)
    spy = LeaseSpy(monkeypatch)
    before = timezone.now()
    confirmation = refund_request_confirm(
        user=alice.user, request_id=request_id, shown_digest=shown
    )
    after = timezone.now()
    operation = RefundOperation.objects.get()
    assert (confirmation.outcome, confirmation.refund, confirmation.code) == (
        "confirmed",
        operation,
        "",
    )
    # While the refund runs, the request is held for its whole provider budget, leg by leg.
    (lease,) = spy.leases
    assert (
        before + lease_for(provider_calls=legs) <= lease <= after + lease_for(provider_calls=legs)
    )
    assert operation.legs.count() == provider_refunds(sandbox) == legs
    request = RefundRequest.objects.get()
    assert (request.status, request.refund, request.confirm_lease_until) == (
        RefundRequest.Status.CONFIRMED,
        operation,
        None,
    )
    assert request.confirmed_at is not None
    assert before <= request.confirmed_at <= after
    event = AuditEvent.objects.get(action="refund_request.confirm")
    assert (event.actor, event.target_type, event.target_id) == (
        alice.user,
        "refund_request",
        request_id,
    )
    assert event.details == {
        "outcome": "confirmed",
        "refund": operation.public_id,
        "envelope": envelope_id,
        "resumed": False,
    }
    again = refund_request_confirm(user=alice.user, request_id=request_id, shown_digest=shown)
    assert (again.outcome, again.refund) == ("already_confirmed", operation)
    assert RefundOperation.objects.count() == 1
    assert ledger_breaches() == []


def test_a_confirmation_whose_refund_failed_after_reserving_is_finished_by_the_next(
    alice: Api, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refund reserved its legs and then failed (no answer was sent to the provider): the
    request stays pending, free at once, its key naming the refund. The next confirmation finishes
    that refund, never a second, even once the request has expired or the page it came from is
    stale: the money is reserved, only sending it is left. Its lease covers every leg."""
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id)
    request = RefundRequest.objects.get()
    shown = preview_digest(request.preview)
    real_send = envelopes_services.refund_send

    def fails(**kwargs: Any) -> RefundOperation:
        raise RuntimeError("the process failed after reserving")

    monkeypatch.setattr(envelopes_services.refunds, "refund_send", fails)
    with pytest.raises(RuntimeError):
        refund_request_confirm(user=alice.user, request_id=request_id, shown_digest=shown)
    monkeypatch.setattr(envelopes_services.refunds, "refund_send", real_send)
    operation = RefundOperation.objects.get()
    request.refresh_from_db()
    assert (request.status, request.confirm_lease_until) == (RefundRequest.Status.PENDING, None)
    assert request.idempotency is not None
    assert request.idempotency.resource == operation.public_id
    assert provider_refunds(sandbox) == 0

    spy = LeaseSpy(monkeypatch)
    with time_machine.travel(request.expires_at + timedelta(seconds=5), tick=True):
        before = timezone.now()
        confirmation = refund_request_confirm(
            user=alice.user, request_id=request_id, shown_digest="stale"
        )
        after = timezone.now()
    assert (confirmation.outcome, confirmation.refund) == ("confirmed", operation)
    (lease,) = spy.leases
    assert before + lease_for(provider_calls=2) <= lease <= after + lease_for(provider_calls=2)
    assert RefundOperation.objects.count() == 1
    assert provider_refunds(sandbox) == 2
    event = AuditEvent.objects.get(action="refund_request.confirm")
    assert event.details == {
        "outcome": "confirmed",
        "refund": operation.public_id,
        "envelope": envelope_id,
        "resumed": True,
    }
    assert ledger_breaches() == []


def test_a_lease_that_ends_now_no_longer_holds_the_request(alice: Api) -> None:
    """A confirmation's lease holds the request until the instant it ends, not at it."""
    request_id = propose(alice, alice.create(5_000_000)["envelope_id"])
    request = RefundRequest.objects.get()
    ends = request.expires_at  # the request expires then too: nothing would move either way
    RefundRequest.objects.filter(pk=request.pk).update(confirm_lease_until=ends)
    with time_machine.travel(ends - timedelta(microseconds=1), tick=False):
        held = refund_request_confirm(user=alice.user, request_id=request_id, shown_digest="")
    with time_machine.travel(ends, tick=False):
        free = refund_request_confirm(user=alice.user, request_id=request_id, shown_digest="")
    assert (held.outcome, free.outcome) == ("in_progress", "expired")
    assert RefundOperation.objects.count() == 0
