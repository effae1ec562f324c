"""The webhook verifier finds a charge's events by the charge's index (issue 40's bench): it read
every event of the type since the operation began and compared each payload's charge as JSON, 27
ms a read once a busy minute had stored a few thousand events, which held verdicts back for
minutes. Against PostgreSQL's planner, on as many events as that minute left."""

import json
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from verification.models import ProviderEvent

from .conftest import Refunds
from .test_engine import attempt_now

pytestmark = pytest.mark.django_db

OTHER_CHARGES = 150
EVENTS_EACH = 20


def _many_events(created: int) -> None:
    """OTHER_CHARGES charges' refund.created events, EVENTS_EACH each, as a busy minute stores."""
    rows = []
    for c in range(OTHER_CHARGES):
        for n in range(EVENTS_EACH):
            payload = {
                "id": f"evt_busy_{c}_{n}",
                "object": "event",
                "type": "refund.created",
                "created": created,
                "data": {"object": {"id": f"re_busy_{c}_{n}", "charge": f"ch_busy_{c}"}},
            }
            rows.append(
                ProviderEvent(
                    provider="stripe",
                    event_id=payload["id"],
                    type="refund.created",
                    provider_created=created,
                    payload=payload,
                    raw=json.dumps(payload),
                )
            )
    ProviderEvent.objects.bulk_create(rows)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {ProviderEvent._meta.db_table}")


def test_a_charges_events_are_read_by_the_charge_index(refunds: Refunds) -> None:
    run = refunds.make(refunds.charge())
    assert refunds.store_events() == 1
    _many_events(int(time.time()))

    with CaptureQueriesContext(connection) as queries:
        run = attempt_now(run, after_s=2)

    assert run.verdict == "VERIFIED"  # the run's own event is found among the others
    observed = run.attempts.get().observations.get(channel="refund_created_events").data
    assert observed["count"] == 1
    reads = [
        q["sql"]
        for q in queries
        if q["sql"].startswith("SELECT") and 'FROM "verification_providerevent"' in q["sql"]
    ]
    assert len(reads) == 1, reads
    assert '"raw"' not in reads[0]  # the stored body is not what the verifier reads
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + reads[0])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "event_object_charge" in plan, plan
