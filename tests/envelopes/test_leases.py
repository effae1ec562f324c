"""How long a request holds its Idempotency-Key (issue 10, item 3; SPEC §4): an error the server
caught ends the lease at once; a dead process's lease is sized from the provider adapter's retry
budget (about two minutes for a one-leg refund), not a constant quarter of an hour; a worker
still working renews it before each provider call."""

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from core.api.idempotent import operation_name
from core.idempotency import idempotency_claim, lease_for
from core.models import IdempotencyRecord
from envelopes import selectors, services
from envelopes.models import RefundOperation
from providers import provider_from_settings
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db


@pytest.fixture
def production_timing(settings: Any) -> None:
    """The adapter's timing as deployed (base settings), and the old fixed lease beside it."""
    settings.STRIPE_CONNECT_TIMEOUT_S = 5.0
    settings.STRIPE_READ_TIMEOUT_S = 30.0
    settings.STRIPE_MAX_ATTEMPTS = 3
    settings.STRIPE_RETRY_BASE_S = 0.5
    settings.STRIPE_RETRY_MAX_S = 8.0
    settings.IDEMPOTENCY_LEASE_S = 900.0  # the constant this replaces (ignored now)


def refund_path(envelope_id: str) -> str:
    return f"/api/v1/escrow/envelopes/{envelope_id}/refund"


def test_after_a_server_error_the_retry_resumes_at_once(
    alice: Api, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refund committed, then rendering its answer failed (a 500). The work is over: the
    retry must resume it now, not answer 409 for the rest of a lease."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    real = selectors.refund_data
    failures = iter([RuntimeError("the answer could not be rendered")])

    def flaky(operation: RefundOperation) -> dict[str, Any]:
        error = next(failures, None)
        if error is not None:
            raise error
        return real(operation)

    monkeypatch.setattr(selectors, "refund_data", flaky)
    alice.client.raise_request_exception = False
    failed = alice.post(refund_path(envelope_id), {}, key="after-500")
    assert failed.status_code == 500
    retry = alice.post(refund_path(envelope_id), {}, key="after-500")  # at once, no waiting
    assert retry.status_code == 200, retry.content
    data = retry.json()["data"]
    assert data["refund_id"] == RefundOperation.objects.get().public_id  # resumed, not repeated
    assert data["status"] == "refunded"
    assert sandbox.state()["counts"]["refunds"] == 1


def test_a_one_leg_refund_lease_is_about_two_minutes(production_timing: None) -> None:
    budget = provider_from_settings().retry_budget_s
    assert budget == 3 * (5 + 30) + 2 * 10  # three attempts, two waits of at most 10 s
    assert lease_for(provider_calls=1) == timedelta(seconds=budget + 10)
    assert timedelta(minutes=2) <= lease_for(provider_calls=1) < timedelta(minutes=3)
    assert lease_for(provider_calls=0) == timedelta(seconds=10)  # a debit calls no provider


def test_a_dead_one_leg_refund_is_resumed_after_its_lease_not_a_quarter_hour(
    alice: Api, sandbox: SandboxControl, production_timing: None
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    claim = idempotency_claim(
        user=alice.user,
        key="dead",
        operation=operation_name("envelope.refund", envelope_id),
        surface="rest",
        body={},
    )
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    services.envelope_refund(
        envelope_id=envelope_id, actor=alice.user, idempotency=claim.record
    )  # ... and the process dies before storing an answer
    sandbox.clear_faults()
    started = timezone.now()
    with time_machine.travel(started + timedelta(seconds=100), tick=False):
        in_use = alice.post(refund_path(envelope_id), {}, key="dead")
    assert (in_use.status_code, in_use.json()["error"]["code"]) == (409, "idempotency_key_in_use")
    with time_machine.travel(started + timedelta(seconds=150), tick=True):
        resumed = alice.post(refund_path(envelope_id), {}, key="dead")
    assert resumed.status_code == 200, resumed.content
    assert resumed.json()["data"]["status"] == "refunded"
    assert RefundOperation.objects.count() == 1
    assert sandbox.state()["counts"]["refunds"] == 1


def test_a_worker_still_working_renews_its_lease(alice: Api, sandbox: SandboxControl) -> None:
    """A request that reaches a provider call late in its lease extends it by that call's budget,
    so a retry arriving after the first lease ends still finds the key in use."""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        claim = idempotency_claim(
            user=alice.user,
            key="slow",
            operation=operation_name("envelope.refund", envelope_id),
            surface="rest",
            body={},
        )
    first_lease = claim.record.lease_until
    late = first_lease - timedelta(seconds=2)  # the worker was slow to get here
    with time_machine.travel(late, tick=False):
        services.envelope_refund(
            envelope_id=envelope_id, actor=alice.user, idempotency=claim.record
        )
    record = IdempotencyRecord.objects.get(pk=claim.record.pk)
    assert record.running  # this test plays the worker: it has not stored its answer yet
    assert record.lease_until >= late + lease_for(provider_calls=1)
    with time_machine.travel(first_lease + timedelta(seconds=1), tick=False):
        retry = alice.post(refund_path(envelope_id), {}, key="slow")
    assert (retry.status_code, retry.json()["error"]["code"]) == (409, "idempotency_key_in_use")
    assert sandbox.state()["counts"]["refunds"] == 2
