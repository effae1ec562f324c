"""Structured logs: one JSON line per request (request id, user, route, status, duration, provider
time), and a job run enqueued by a request logs that request's id, in a real worker."""

import json
import logging
import time
import uuid
from typing import Any

import pytest
from django.test import Client

from stripe_sandbox.webhooks import sign
from tests.drivers.api import Api
from tests.drivers.logs import LogTap
from tests.helpers import wait_until
from verification.models import ProviderEvent

from .conftest import WorkerLog


def _finished(tap: LogTap) -> list[dict[str, Any]]:
    return [r for r in tap.records() if r["event"] in ("request_finished", "request_failed")]


@pytest.mark.django_db
def test_a_request_writes_one_json_line_with_its_context(alice: Api, log_tap: LogTap) -> None:
    log_tap.clear()
    response = alice.post(
        "/api/v1/escrow/envelopes", {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"}
    )
    assert response.status_code == 201, response.content
    records = log_tap.records()  # every line is one JSON object
    (line,) = _finished(log_tap)
    assert not [r for r in records if r["event"] == "request_started"]
    assert uuid.UUID(str(line["request_id"]))
    assert line["user_id"] == alice.user.pk
    assert line["route"] == "api/v1/escrow/envelopes"
    assert line["request"] == "POST /api/v1/escrow/envelopes"
    assert line["status"] == 201
    assert line["level"] == "info"
    assert isinstance(line["duration_ms"], float)
    assert isinstance(line["provider_ms"], float)
    # The PaymentIntent was created at the sandbox, over HTTP: time spent waiting for it.
    assert 0 < line["provider_ms"] < line["duration_ms"]
    # Any other line written during the request carries its id.
    assert {r.get("request_id") for r in records} == {line["request_id"]}


@pytest.mark.django_db
def test_an_anonymous_refused_request_is_one_line_with_a_warning_level(log_tap: LogTap) -> None:
    log_tap.clear()
    response = Client().get("/api/v1/me")
    assert response.status_code == 401
    (line,) = _finished(log_tap)
    assert line["user_id"] is None
    assert line["status"] == response.status_code
    assert line["level"] == "warning"
    assert line["provider_ms"] == 0.0


@pytest.mark.django_db
def test_the_request_lines_ip_is_the_connections_address_not_a_header_a_client_sets(
    log_tap: LogTap,
) -> None:
    log_tap.clear()
    client = Client(REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR="203.0.113.99")
    response = client.get("/api/v1/me")
    assert response.status_code == 401
    (line,) = _finished(log_tap)
    assert line["ip"] == "198.51.100.7"


@pytest.mark.django_db
def test_the_existing_standard_library_logs_are_json_lines_too(log_tap: LogTap) -> None:
    log_tap.clear()
    logging.getLogger("vouch.test").warning("leg %s held: %s", "leg_1", "unknown")
    (line,) = log_tap.records()
    assert line["event"] == "leg leg_1 held: unknown"
    assert (line["level"], line["logger"]) == ("warning", "vouch.test")
    assert line["timestamp"].endswith("Z")


def _charge_refunded(charge_id: str) -> bytes:
    return json.dumps(
        {
            "id": f"evt_{uuid.uuid4().hex[:16]}",
            "object": "event",
            "type": "charge.refunded",
            "created": int(time.time()),
            "data": {"object": {"id": charge_id, "object": "charge"}},
        }
    ).encode()


@pytest.mark.django_db(transaction=True)
def test_a_job_run_enqueued_by_a_request_logs_that_requests_id(
    alice: Api, logging_worker: WorkerLog, log_tap: LogTap, settings: Any
) -> None:
    """A signed `charge.refunded` webhook (the request) enqueues the drain of stored events,
    `verification.process_events`; the real worker runs it (it reads the charge again at the
    sandbox) and writes one line for the run, with the request's id, the task's name, its
    duration and its provider time."""
    envelope_id = alice.create(2_000_000)["envelope_id"]
    (leg,) = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]["funding_legs"]
    body = _charge_refunded(leg["charge"])
    log_tap.clear()
    response = Client().post(
        "/webhooks/stripe",
        body,
        content_type="application/json",
        HTTP_STRIPE_SIGNATURE=sign(body, settings.STRIPE_WEBHOOK_SECRETS[0], int(time.time())),
    )
    assert response.status_code == 200, response.content
    (request_line,) = _finished(log_tap)
    assert request_line["route"] == "webhooks/stripe"
    request_id = request_line["request_id"]

    def run_lines() -> list[dict[str, Any]]:
        return [r for r in logging_worker.records() if r.get("request_id") == request_id]

    wait_until(
        lambda: any(r["event"].startswith("task_") for r in run_lines()),
        timeout=30,
        what="the worker's line for the job run",
    )
    assert ProviderEvent.objects.get(event_id=json.loads(body)["id"]).processed_at is not None
    # One line per run at INFO: no "task_started", no Celery "received" / "succeeded in" lines.
    (run,) = run_lines()
    assert run["event"] == "task_succeeded"
    assert run["task"] == "verification.process_events"
    assert run["level"] == "info"
    assert uuid.UUID(run["task_id"])
    assert run["duration_ms"] >= 0
    # The charge was read again at the sandbox, over HTTP, within the run.
    assert 0 < run["provider_ms"] <= run["duration_ms"] + 1


def test_make_runs_terminal_keeps_job_lines_quiet_and_production_keeps_them() -> None:
    """`make run` (console) shows a job's warnings, not a line for every 2 s poll; the JSON
    format keeps one line per job run; beat's dispatch lines are noise in both."""
    import logging.config

    from ops.logs import logging_config

    for renderer, job_level in (("console", logging.WARNING), ("json", logging.INFO)):
        logging.config.dictConfig(logging_config(renderer=renderer, level="INFO"))
        jobs = logging.getLogger("django_structlog.celery.receivers")
        assert jobs.getEffectiveLevel() == job_level, renderer
        assert logging.getLogger("celery.beat").getEffectiveLevel() == logging.WARNING
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)  # back to the suite's own
