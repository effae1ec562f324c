import time
from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from config.celery_app import app
from core.tasks import sessions_prune


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_session_pruning_task(celery_broker: str) -> None:
    """The Celery app, its broker settings (Redis under test) and task discovery work together:
    a task sent through the broker is executed by a worker and its effect is visible."""
    live = SessionStore()
    live["k"] = "v"
    live.create()
    Session.objects.create(
        session_key="expired-session-key-0000000000001",
        session_data="",
        expire_date=timezone.now() - timedelta(days=1),
    )
    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge(app.conf.task_default_queue)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        sessions_prune.delay()
        deadline = time.monotonic() + 20
        while Session.objects.filter(session_key__startswith="expired").exists():
            assert time.monotonic() < deadline, "the worker did not run the task in 20 s"
            time.sleep(0.1)
    assert Session.objects.filter(session_key=live.session_key).exists()
