"""The event catch-up (SPEC §15.3): lost webhooks repaired within one run, each page kept with the
SHA-256 of its bytes, a cursor that only moves forward, runs resumed and never overlapping."""

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
import stripe
from django.conf import settings
from django.utils import timezone

from envelopes.models import Envelope, JournalEntry, RefundLeg
from envelopes.selectors import ledger_breaches
from providers import ProviderUnavailable
from reconciliation import catch_up
from reconciliation.catch_up import EVENT_TYPES, catch_up_run
from reconciliation.models import Cursor, Observation, Run
from reconciliation.runs import RunInProgress, run_start
from stripe_sandbox.client import SandboxControl
from stripe_sandbox.webhooks import sign
from tests.drivers.api import Api
from tests.helpers import wait_until
from verification.models import ProviderEvent
from verification.services import provider_event_process, provider_event_store

pytestmark = pytest.mark.django_db

# One envelope funded, refunded in full, the refund then failed at the provider: the events of
# the listed types, oldest first (payment_intent.created and charge.succeeded are not listed).
LISTED = [
    "payment_intent.succeeded",
    "refund.created",
    "charge.refunded",
    "refund.updated",
    "charge.refund.updated",
    "refund.failed",
]


def fund_and_refund(alice: Api, amount_micro: int = 5_000_000) -> RefundLeg:
    envelope_id = alice.create(amount_micro)["envelope_id"]
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert response.status_code in (200, 201), response.content
    return RefundLeg.objects.get(operation__envelope__public_id=envelope_id)


def failed_refund(alice: Api, sandbox: SandboxControl, amount_micro: int = 5_000_000) -> RefundLeg:
    leg = fund_and_refund(alice, amount_micro)
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "lost_or_stolen_card")
    return leg


def releases(leg: RefundLeg) -> int:
    return JournalEntry.objects.filter(kind="release", refund_leg=leg).count()


def provider_events(sdk: stripe.StripeClient) -> list[dict[str, Any]]:
    """The provider's events of the listed types, oldest first."""
    listed = sdk.v1.events.list(params={"types": list(EVENT_TYPES), "limit": 100})
    return [event.to_dict() for event in reversed(listed.data)]


@pytest.mark.django_db(transaction=True)
def test_lost_webhooks_of_a_failed_refund_are_repaired_by_one_run_also_when_one_comes_late(
    alice: Api, sandbox: SandboxControl, live_server: Any
) -> None:
    """SPEC §15 acceptance: with every webhook dropped, a refund that then fails at the provider
    is released by one catch-up, exactly once — and the webhook arriving late afterwards, even
    processed again, releases nothing more."""
    sandbox.add_webhook(f"{live_server.url}/webhooks/stripe", settings.STRIPE_WEBHOOK_SECRET)
    envelope_id = alice.create(5_000_000)["envelope_id"]
    # The funding's events reach the webhook view as usual...
    wait_until(lambda: ProviderEvent.objects.count() == 3, what="the funding's three webhooks")
    funding_event = ProviderEvent.objects.get(type="payment_intent.succeeded")
    # ...then every webhook is lost.
    assert sandbox.webhook_behaviour(drop_probability=1.0)["drop_probability"] == 1.0
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    leg = RefundLeg.objects.get()
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "lost_or_stolen_card")
    hooks = sandbox.webhooks()
    assert hooks["dropped"] == 5
    assert hooks["endpoints"][0]["delivered"] == 3
    leg.refresh_from_db()
    assert (leg.released, releases(leg)) == (False, 0)  # nothing told Vouch

    run = catch_up_run()

    assert run.status == "completed"
    leg.refresh_from_db()
    assert leg.released is True
    assert releases(leg) == 1
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_refunded_micro, envelope.reserved_micro) == (0, 0)
    assert envelope.unspent_micro == 5_000_000
    caught = ProviderEvent.objects.filter(source="catch_up")
    assert sorted(caught.values_list("event_id", flat=True)) == sorted(hooks["dropped_events"])
    assert not caught.filter(processed_at=None).exists()
    # The funding's event the webhook brought is left as it was: not stored again, not counted
    # as a second delivery.
    funding_event.refresh_from_db()
    assert (funding_event.source, funding_event.duplicates) == ("webhook", 0)
    assert run.compared == {"event": len(LISTED)}

    # The lost refund.failed webhook arrives after all, signed by the provider.
    sandbox.webhook_behaviour(drop_probability=0.0)
    late = ProviderEvent.objects.get(type="refund.failed")
    payload = json.dumps(late.payload, indent=2).encode()
    timestamp = int(timezone.now().timestamp())
    response = requests.post(
        f"{live_server.url}/webhooks/stripe",
        data=payload,
        headers={
            "Stripe-Signature": sign(payload, settings.STRIPE_WEBHOOK_SECRET, timestamp),
            "Content-Type": "application/json",
        },
        timeout=10,
    )
    assert response.status_code == 200
    assert response.json() == {"received": True, "duplicate": True}
    # Processed again all the same (a retry, a second worker): the release is not repeated.
    provider_event_process(event_pk=late.pk, enqueue=lambda *args: None)
    catch_up_run()
    assert releases(leg) == 1
    assert JournalEntry.objects.filter(kind="release").count() == 1
    assert ledger_breaches() == []


def test_a_second_run_stores_nothing_new_and_the_cursor_moves_forward(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    leg = failed_refund(alice, sandbox)
    now = timezone.now()
    first = catch_up_run(now=now)
    newest = max(event["created"] for event in provider_events(sdk))
    assert first.window_start == now - timedelta(hours=24)  # no cursor yet: the last 24 hours
    assert Cursor.objects.get(name="events").position == newest
    assert ProviderEvent.objects.count() == len(LISTED)

    second = catch_up_run()

    # The overlap reads every event again; none is stored again or counted as a delivery.
    assert second.pk != first.pk
    assert second.window_start == datetime.fromtimestamp(
        newest - settings.RECONCILIATION_EVENT_OVERLAP_S, UTC
    )
    assert second.compared == {"event": len(LISTED)}
    assert ProviderEvent.objects.count() == len(LISTED)
    assert set(ProviderEvent.objects.values_list("duplicates", flat=True)) == {0}
    assert releases(leg) == 1

    # New events: only they are stored, and the cursor moves to the newest of them.
    sandbox.advance_clock(5)
    other = failed_refund(alice, sandbox, 3_000_000)
    third = catch_up_run()
    events = provider_events(sdk)
    assert len(events) == 2 * len(LISTED)
    assert third.compared == {"event": 2 * len(LISTED)}
    assert ProviderEvent.objects.count() == 2 * len(LISTED)
    assert Cursor.objects.get(name="events").position == max(e["created"] for e in events) > newest
    assert (releases(leg), releases(other)) == (1, 1)
    assert ledger_breaches() == []


def test_the_first_run_reads_the_last_24_hours_only(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    old = fund_and_refund(alice)
    sandbox.advance_clock(25 * 3600)
    recent = failed_refund(alice, sandbox, 3_000_000)
    run = catch_up_run(now=timezone.now() + timedelta(hours=25))
    assert run.compared == {"event": len(LISTED)}
    stored = set(ProviderEvent.objects.values_list("event_id", flat=True))
    old_refund_events = {
        e["id"]
        for e in provider_events(sdk)
        if e["data"]["object"].get("id") == old.provider_refund_id
    }
    assert old_refund_events
    assert stored.isdisjoint(old_refund_events)
    assert releases(recent) == 1


def test_the_cursor_never_moves_backwards(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    failed_refund(alice, sandbox)
    newest = max(event["created"] for event in provider_events(sdk))
    # A cursor ahead of every event, by less than the overlap: the run still reads them all.
    Cursor.objects.create(name="events", position=newest + 300)
    run = catch_up_run()
    assert run.compared == {"event": len(LISTED)}
    assert Cursor.objects.get(name="events").position == newest + 300


def test_each_page_is_an_observation_with_the_sha256_of_its_bytes_and_events_go_oldest_first(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(catch_up, "PAGE_SIZE", 4)
    monkeypatch.setattr(catch_up, "CHUNK", 4)
    failed_refund(alice, sandbox)
    run = catch_up_run()

    observations = list(Observation.objects.filter(run=run).order_by("id"))
    assert (run.pages, run.provider_calls, len(observations)) == (2, 2, 2)
    for observation in observations:
        assert observation.kind == "events"
        # The same request again: the provider's bytes hash to what the run stored.
        again = sdk.raw_request("get", "/v1/events", **observation.request)
        assert observation.sha256 == hashlib.sha256(again.body.encode("utf-8")).hexdigest()
        assert observation.body_bytes() == again.body.encode("utf-8")
        assert observation.listed() == json.loads(again.body)["data"]
    assert [len(o.listed()) for o in observations] == [4, 2]
    assert "starting_after" not in observations[0].request
    assert observations[1].request["starting_after"] == observations[0].listed()[-1]["id"]
    assert sorted(observations[0].request["types"]) == sorted(EVENT_TYPES)
    # Processed as webhooks, oldest first (the provider lists newest first).
    chronological = [e["id"] for e in provider_events(sdk)]
    processed = ProviderEvent.objects.order_by("processed_at").values_list("event_id", "type")
    assert [event_id for event_id, _ in processed] == chronological
    assert [event_type for _, event_type in processed] == LISTED


def test_a_dead_run_is_resumed_from_its_checkpoint(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process that read and stored the first page, then died: the next run takes its run over
    and goes on after that page, reading it no second time."""
    monkeypatch.setattr(catch_up, "PAGE_SIZE", 2)
    leg = failed_refund(alice, sandbox)
    events = provider_events(sdk)
    first_page = events[::-1][:2]  # newest first, as listed
    long_ago = timezone.now() - timedelta(hours=1)
    dead = Run.objects.create(
        kind="catch_up",
        lane="events",
        window_start=long_ago - timedelta(hours=24),
        window_end=long_ago,
        started_at=long_ago,
        heartbeat_at=long_ago,
        pages=1,
        provider_calls=1,
        compared={"event": 2},
        checkpoint={
            "phase": "list",
            "starting_after": first_page[-1]["id"],
            "newest": first_page[0]["created"],
            "stored": 2,
        },
    )
    for event in first_page:  # what the dead process had stored, not yet processed
        row, _ = provider_event_store(event=event, raw=json.dumps(event))
        ProviderEvent.objects.filter(pk=row.pk).update(source="catch_up")

    run = catch_up_run()

    assert run.pk == dead.pk
    assert (run.status, run.resumed) == ("completed", 1)
    assert run.window_start == dead.window_start  # its own window
    assert run.compared == {"event": len(LISTED)}
    assert (run.pages, run.provider_calls) == (3, 3)
    requests_read = [o.request for o in Observation.objects.filter(run=run).order_by("id")]
    assert [r["starting_after"] for r in requests_read] == [
        first_page[-1]["id"],
        events[::-1][3]["id"],
    ]
    assert ProviderEvent.objects.count() == len(LISTED)
    assert set(ProviderEvent.objects.values_list("duplicates", flat=True)) == {0}
    assert not ProviderEvent.objects.filter(processed_at=None).exists()
    assert releases(leg) == 1
    assert Cursor.objects.get(name="events").position == events[-1]["created"]
    assert ledger_breaches() == []


def test_a_run_resumed_while_processing_does_not_process_again(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    failed_refund(alice, sandbox)
    events = provider_events(sdk)
    rows = []
    for event in reversed(events):  # stored as listed, newest first
        row, _ = provider_event_store(event=event, raw=json.dumps(event))
        ProviderEvent.objects.filter(pk=row.pk).update(source="catch_up")
        rows.append(row)
    long_ago = timezone.now() - timedelta(hours=1)
    taken = rows[-1]  # the dead process had taken the oldest (and died before it was marked)
    Run.objects.create(
        kind="catch_up",
        lane="events",
        window_start=long_ago - timedelta(hours=24),
        window_end=long_ago,
        started_at=long_ago,
        heartbeat_at=long_ago,
        pages=1,
        provider_calls=1,
        compared={"event": len(events)},
        checkpoint={"phase": "process", "after": [taken.provider_created, taken.pk]},
    )

    run = catch_up_run()

    assert (run.status, run.resumed, run.pages) == ("completed", 1, 1)  # listed nothing again
    unprocessed = ProviderEvent.objects.filter(processed_at=None)
    assert list(unprocessed.values_list("pk", flat=True)) == [taken.pk]


def test_a_run_that_could_not_read_a_page_fails_and_the_next_one_resumes_it(
    alice: Api, sandbox: SandboxControl
) -> None:
    leg = failed_refund(alice, sandbox)
    sandbox.add_fault("/v1/events", "server_error", method="GET")
    with pytest.raises(ProviderUnavailable):
        catch_up_run()
    failed = Run.objects.get()
    assert failed.status == "failed"
    assert "events" in failed.error
    assert (ProviderEvent.objects.count(), releases(leg)) == (0, 0)
    assert not Cursor.objects.exists()

    sandbox.clear_faults()
    run = catch_up_run()
    assert (run.pk, run.status, run.resumed) == (failed.pk, "completed", 1)
    assert run.provider_calls > run.pages == 1  # the failed attempts count too
    assert releases(leg) == 1


def test_a_concurrent_run_raises_run_in_progress(alice: Api, sandbox: SandboxControl) -> None:
    leg = failed_refund(alice, sandbox)
    now = timezone.now()
    other = run_start(kind="catch_up", window_start=now - timedelta(hours=1), window_end=now)
    with pytest.raises(RunInProgress) as raised:
        catch_up_run()
    assert raised.value.run.pk == other.pk
    assert Run.objects.get().status == "running"
    assert not Observation.objects.exists()
    assert (ProviderEvent.objects.count(), releases(leg)) == (0, 0)


def test_a_sweep_in_progress_does_not_hold_the_catch_up_back(
    alice: Api, sandbox: SandboxControl
) -> None:
    leg = failed_refund(alice, sandbox)
    now = timezone.now()
    run_start(kind="sweep", window_start=now - timedelta(days=7), window_end=now)
    assert catch_up_run().status == "completed"
    assert releases(leg) == 1
