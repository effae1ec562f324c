"""The scheduled jobs around stored provider events: retry what was never processed, prune what
is old."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from verification import tasks
from verification.models import ProviderEvent
from verification.selectors import events_unprocessed
from verification.services import provider_event_store, provider_events_prune

pytestmark = pytest.mark.django_db


def _store(event_id: str) -> ProviderEvent:
    event = {
        "id": event_id,
        "type": "refund.created",
        "created": 1,
        "data": {"object": {"id": "re_x"}},
    }
    return provider_event_store(event=event, raw="{}")[0]


def test_unprocessed_events_are_found_for_a_retry_once_old_enough() -> None:
    stuck, done = _store("evt_stuck"), _store("evt_done")
    ProviderEvent.objects.filter(pk=done.pk).update(processed_at=timezone.now())
    assert events_unprocessed(older_than_s=30) == []  # too fresh: its task may still be queued
    with time_machine.travel(timezone.now() + timedelta(seconds=31)):
        assert events_unprocessed(older_than_s=30) == [stuck.pk]


def test_processing_marks_the_event_and_is_idempotent() -> None:
    stored = _store("evt_1")
    tasks.process_event.apply(args=[stored.pk])  # run in this process, as a worker would
    tasks.process_event.apply(args=[stored.pk])
    stored.refresh_from_db()
    assert stored.processed_at is not None
    assert stored.processing_error == ""


def test_prune_deletes_only_old_processed_events() -> None:
    old, recent, unprocessed = _store("evt_old"), _store("evt_recent"), _store("evt_unprocessed")
    ProviderEvent.objects.filter(pk=old.pk).update(processed_at=timezone.now() - timedelta(days=31))
    ProviderEvent.objects.filter(pk=recent.pk).update(
        processed_at=timezone.now() - timedelta(days=1)
    )
    assert provider_events_prune(older_than_days=30) == 1
    assert set(ProviderEvent.objects.values_list("event_id", flat=True)) == {
        "evt_recent",
        "evt_unprocessed",
    }
    assert unprocessed.pk in events_unprocessed(older_than_s=-1)
