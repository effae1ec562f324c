"""Issue 40: a buyer never waits on a full budget inside a web worker. When Stripe's rate limit has
no room within a short wait, the refund (or funding) leg is reserved, answered 202 `pending` with
`queued: true`, and a worker sends it as room frees, oldest first, under the same key. Against the
sandbox enforcing the same (shrunk) limits over HTTP: no 429, every refund at Stripe exactly once,
the ledger clean."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import stripe
from django.conf import LazySettings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.models import ProviderCallBudget
from envelopes.models import FundingLeg, FundingStatus, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from envelopes.selectors.leg_states import QUEUED_TEXT
from envelopes.services import waiting_count, waiting_send
from envelopes.services.refunds import refund_leg_defer, refund_leg_send
from ops.collectors import metrics_exposition
from stripe_sandbox.client import SandboxControl
from tests.conftest import ROOT, _database_url
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db(transaction=True)

RENEWAL = 'UPDATE "core_idempotencyrecord" SET "lease_until"'
# Two calls a second: a test's few requests find the budget full, as a busy hour would.
RPS = 2


@pytest.fixture
def limited(settings: LazySettings, sandbox: SandboxControl) -> Iterator[SandboxControl]:
    """Vouch's budgets on at RPS a second for the whole account and each endpoint, a web request
    waiting at most 0.2 s for room; the sandbox enforcing the same limits."""
    ProviderCallBudget.objects.all().delete()  # slots other tests reserved
    settings.STRIPE_RATE_LIMITS = "auto"
    settings.STRIPE_GLOBAL_RPS = RPS
    settings.STRIPE_ENDPOINT_RPS = RPS
    settings.STRIPE_BUDGET_WAIT_S = 0.2
    sandbox.rate_limits_set(enabled=True, global_rps_sandbox=RPS, endpoint_rps=RPS)
    yield sandbox
    sandbox.rate_limits_set(enabled=False)
    ProviderCallBudget.objects.all().delete()  # no slot of 2 a second left for the next test


def _refunds_at_stripe(sdk: stripe.StripeClient, charge: str) -> list[Any]:
    time.sleep(1.1)  # the list is one more call against the sandbox's limit
    return list(sdk.v1.refunds.list(params={"charge": charge, "limit": 100}).data)


def _burst(alice: Api, envelope_id: str, count: int) -> list[Any]:
    return [
        alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000})
        for _ in range(count)
    ]


def test_a_burst_of_refunds_waits_as_rows_and_a_worker_sends_each_once(
    limited: SandboxControl, alice: Api, sdk: stripe.StripeClient
) -> None:
    envelope = alice.create(20_000_000)
    envelope_id, charge = envelope["envelope_id"], envelope["funding_legs"][0]["charge"]

    answers = _burst(alice, envelope_id, 6)

    statuses = [answer.status_code for answer in answers]
    assert set(statuses) <= {200, 202}, [a.content for a in answers]
    queued = [a.json()["data"] for a in answers if a.status_code == 202]
    # The budget holds RPS calls a second: most of a burst of six cannot go at once.
    assert len(queued) >= 4, statuses
    for refund in queued:
        assert refund["status"] == "pending"
        assert [leg["queued"] for leg in refund["legs"]] == [True]
        assert [leg["outcome"] for leg in refund["legs"]] == ["reserved"]
        assert refund["pending_micro"] == 1_000_000  # still set aside, never unspent
    sent_at_once = 6 - len(queued)
    # Nothing queued went out: Stripe holds only the refunds answered 200.
    assert len(_refunds_at_stripe(sdk, charge)) == sent_at_once
    assert waiting_count()["refund_legs"] == len(queued)
    exposition = metrics_exposition()[0].decode()
    assert f'vouch_legs_waiting_for_room{{kind="refund"}} {float(len(queued))}' in exposition

    # One thread: strictly in turn.
    assert waiting_send(seconds=30, threads=1) == len(queued)

    legs = list(RefundLeg.objects.order_by("operation__created_at", "sequence"))
    assert [leg.outcome for leg in legs] == [LegOutcome.ACCEPTED] * 6
    assert all(leg.deferred_at is None for leg in legs)
    decided = [leg.decided_at for leg in legs[sent_at_once:]]
    assert decided == sorted(decided)  # first come, first sent
    at_stripe = _refunds_at_stripe(sdk, charge)
    assert sorted(r.metadata["vouch_leg"] for r in at_stripe) == sorted(
        leg.public_id for leg in legs
    )
    assert limited.rate_limits()["refused"]["total"] == 0  # never a 429
    assert ledger_breaches() == []
    final = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]
    assert (final["total_refunded_micro"], final["reserved_micro"]) == (6_000_000, 0)


def test_a_refund_behind_waiting_legs_joins_the_queue_even_with_room(
    limited: SandboxControl, alice: Api, sdk: stripe.StripeClient
) -> None:
    envelope = alice.create(20_000_000)
    envelope_id, charge = envelope["envelope_id"], envelope["funding_legs"][0]["charge"]
    first = [a.status_code for a in _burst(alice, envelope_id, 4)]
    assert 202 in first
    time.sleep(1.5)  # the budget has room again; legs still wait for the worker

    with CaptureQueriesContext(connection) as queries:
        late = alice.post(
            f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 500_000}, key="late"
        )

    assert late.status_code == 202, late.content
    assert late.json()["data"]["legs"][0]["queued"] is True
    # Joining the queue calls nobody: the request's lease is not renewed for a call (a statement
    # and a commit fewer for every refund of a busy minute).
    renewals = [q["sql"] for q in queries if q["sql"].startswith(RENEWAL)]
    assert renewals == []
    assert len(_refunds_at_stripe(sdk, charge)) == first.count(200)
    waiting_send(seconds=30, threads=2)
    assert set(RefundLeg.objects.values_list("outcome", flat=True)) == {LegOutcome.ACCEPTED}
    assert len(_refunds_at_stripe(sdk, charge)) == 5
    assert limited.rate_limits()["refused"]["total"] == 0


def test_a_replayed_request_leaves_its_waiting_leg_to_the_worker(
    limited: SandboxControl, alice: Api, sdk: stripe.StripeClient
) -> None:
    envelope = alice.create(20_000_000)
    envelope_id, charge = envelope["envelope_id"], envelope["funding_legs"][0]["charge"]
    _burst(alice, envelope_id, 3)
    url = f"/api/v1/escrow/envelopes/{envelope_id}/refund"
    first = alice.post(url, {"amount_micro": 700_000}, key="replay-me-1")
    assert first.status_code == 202, first.content

    again = alice.post(url, {"amount_micro": 700_000}, key="replay-me-1")

    assert again.status_code == 202
    assert again.json()["data"]["refund_id"] == first.json()["data"]["refund_id"]
    assert again.json()["data"]["legs"][0]["queued"] is True
    waiting_send(seconds=30, threads=2)
    at_stripe = _refunds_at_stripe(sdk, charge)
    assert len(at_stripe) == 4  # the replay sent nothing of its own
    assert len({r.metadata["vouch_leg"] for r in at_stripe}) == 4


def test_a_top_up_with_no_room_is_pending_and_sent_later(
    limited: SandboxControl, alice: Api, sdk: stripe.StripeClient
) -> None:
    envelope = alice.create(5_000_000)
    envelope_id = envelope["envelope_id"]
    answers = [
        alice.post(
            f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
            {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
        )
        for _ in range(3)
    ]
    assert 202 in [a.status_code for a in answers], [a.content for a in answers]
    waiting = FundingLeg.objects.filter(deferred_at__isnull=False)
    assert waiting.exists()
    assert all(leg.status == FundingStatus.PENDING for leg in waiting)
    time.sleep(1.1)
    made = sdk.v1.payment_intents.list(params={"limit": 100}).data
    assert len(made) == 4 - waiting.count()  # nothing went out for a waiting leg

    waiting_send(seconds=30, threads=2)

    legs = FundingLeg.objects.filter(envelope__public_id=envelope_id)
    assert [leg.status for leg in legs] == [FundingStatus.SUCCEEDED] * 4
    time.sleep(1.1)
    assert len(sdk.v1.payment_intents.list(params={"limit": 100}).data) == 4
    assert limited.rate_limits()["refused"]["total"] == 0
    assert ledger_breaches() == []


def test_the_buyer_reads_that_the_refund_is_queued(
    limited: SandboxControl, alice: Api, client: Any
) -> None:
    envelope = alice.create(20_000_000)
    envelope_id = envelope["envelope_id"]
    answers = _burst(alice, envelope_id, 4)
    assert 202 in [a.status_code for a in answers]

    client.force_login(alice.user)
    page = client.get(f"/escrow/envelopes/{envelope_id}/")

    assert page.status_code == 200
    assert QUEUED_TEXT in page.content.decode()
    waiting_send(seconds=30, threads=2)
    after = client.get(f"/escrow/envelopes/{envelope_id}/").content.decode()
    assert QUEUED_TEXT not in after


@pytest.fixture
def limited_worker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's settings come from its environment: the same budgets as the test's."""
    for name, value in {
        "STRIPE_RATE_LIMITS": "auto",
        "STRIPE_GLOBAL_RPS": str(RPS),
        "STRIPE_ENDPOINT_RPS": str(RPS),
    }.items():
        monkeypatch.setenv(name, value)
    assert os.environ["STRIPE_RATE_LIMITS"] == "auto"


def test_a_real_worker_sends_the_waiting_refunds(
    limited: SandboxControl,
    limited_worker_env: None,
    worker_with_beat: None,
    alice: Api,
    sdk: stripe.StripeClient,
) -> None:
    envelope = alice.create(20_000_000)
    envelope_id, charge = envelope["envelope_id"], envelope["funding_legs"][0]["charge"]
    answers = _burst(alice, envelope_id, 6)
    assert 202 in [a.status_code for a in answers]

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not RefundLeg.objects.exclude(outcome=LegOutcome.ACCEPTED).exists():
            break
        time.sleep(0.5)

    assert set(RefundLeg.objects.values_list("outcome", flat=True)) == {LegOutcome.ACCEPTED}
    assert waiting_count() == {"refund_legs": 0, "funding_legs": 0}
    at_stripe = _refunds_at_stripe(sdk, charge)
    assert len({r.metadata["vouch_leg"] for r in at_stripe}) == len(at_stripe) == 6
    assert limited.rate_limits()["refused"]["total"] == 0
    assert ledger_breaches() == []


def test_an_answer_recorded_ends_the_legs_wait(
    limited: SandboxControl, alice: Api, sdk: stripe.StripeClient
) -> None:
    """A replayed request may mark a leg the worker is sending as waiting again: the answer the
    worker records ends that wait. A leg left `queued` once answered kept every later refund
    behind a queue that was empty (the bench saw 93 such legs and a queue that never drained)."""
    envelope = alice.create(20_000_000)
    envelope_id = envelope["envelope_id"]
    answers = _burst(alice, envelope_id, 4)
    assert 202 in [a.status_code for a in answers]
    leg = RefundLeg.objects.filter(deferred_at__isnull=False).order_by("id").first()
    assert leg is not None
    place = leg.deferred_at
    RefundLeg.objects.filter(pk=leg.pk).update(deferred_at=None)  # the worker claims it...
    refund_leg_defer(leg)  # ...a replay of its request marks it waiting again meanwhile...
    time.sleep(1.1)  # (room for it)
    sent = RefundLeg.objects.select_related("funding_leg", "operation__envelope").get(pk=leg.pk)
    refund_leg_send(leg=sent, queued_since=place)  # ...and the worker's call is answered

    leg.refresh_from_db()
    assert leg.outcome == LegOutcome.ACCEPTED
    assert leg.deferred_at is None
    waiting_send(seconds=30, threads=2)
    assert set(RefundLeg.objects.values_list("outcome", flat=True)) == {LegOutcome.ACCEPTED}
    assert waiting_count() == {"refund_legs": 0, "funding_legs": 0}
    assert not RefundLeg.objects.filter(deferred_at__isnull=False).exists()


SENDER = """
import django
django.setup()
from envelopes.services import waiting_send
print("SENT", waiting_send(seconds=60, threads=6))
"""


def test_the_sender_runs_no_more_threads_than_its_pool_has_connections(
    limited: SandboxControl, alice: Api, sdk: stripe.StripeClient
) -> None:
    """Production gives every process psycopg's pool (DATABASE_POOL_MAX_SIZE, 10 by default), and
    a sending thread holds one connection for its whole run (up to ten minutes): threads past the
    pool waited DATABASE_POOL_TIMEOUT_S, failed with PoolTimeout and left their share of the queue
    to later runs. In a process of its own, as a worker is, with a pool of 3 and a timeout of 1 s,
    six threads asked for and legs queued behind a budget of RPS a second."""
    envelope = alice.create(20_000_000)
    envelope_id, charge = envelope["envelope_id"], envelope["funding_legs"][0]["charge"]
    _burst(alice, envelope_id, 8)
    queued = RefundLeg.objects.filter(deferred_at__isnull=False).count()
    assert queued >= 5
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.bench",
        "DATABASE_URL": _database_url(),
        "DATABASE_POOL": "true",
        "DATABASE_POOL_MAX_SIZE": "3",
        "DATABASE_POOL_TIMEOUT_S": "1",
        "STRIPE_API_BASE": limited.url,
        "STRIPE_RATE_LIMITS": "auto",
        "STRIPE_GLOBAL_RPS": str(RPS),
        "STRIPE_ENDPOINT_RPS": str(RPS),
    }

    done = subprocess.run(
        [sys.executable, "-c", SENDER],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"SENT {queued}" in done.stdout, output
    assert "PoolTimeout" not in output, output
    assert "failed" not in output, output
    assert set(RefundLeg.objects.values_list("outcome", flat=True)) == {LegOutcome.ACCEPTED}
    assert len(_refunds_at_stripe(sdk, charge)) == 8
    assert limited.rate_limits()["refused"]["total"] == 0
