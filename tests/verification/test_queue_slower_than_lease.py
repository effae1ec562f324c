"""A queue slower than the lease (SPEC §6). `verification.poll` leases each due run and enqueues
one attempt; the attempt is dropped unless it still holds the run's lease token. When the Celery
queue takes longer than VERIFICATION_LEASE_S to reach an attempt, the lease has lapsed by then and
a later poll has claimed the run again under a new token: every attempt is stale when it runs, no
run is ever decided, and each poll enqueues another batch, so the queue only grows (and
`envelopes.resume_stranded`, behind it in the same queue, waits too). Found by bench/soak.py
(10,000 operations: the queue reached 50,000 messages and no run was decided for 25 minutes).
Fixed: a re-claim keeps the run's token, so the late attempt still counts."""

from collections import deque
from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.utils import timezone

from verification.models import Attempt, VerificationRun
from verification.services import run_attempt, runs_claim_due

from .conftest import Refunds


@pytest.mark.django_db(transaction=True)
def test_a_run_is_decided_when_the_queue_is_slower_than_the_lease(refunds: Refunds) -> None:
    run = refunds.make(refunds.charge(1_000_000), amount=100)
    VerificationRun.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    lease = timedelta(seconds=float(settings.VERIFICATION_LEASE_S))
    queue = deque(runs_claim_due())  # the first poll enqueues the run's attempt
    start = timezone.now()
    for tick in range(1, 6):
        # The next poll comes once the lease has lapsed; the worker reaches the oldest queued
        # attempt only after that poll (the queue's latency is longer than the lease).
        with time_machine.travel(start + tick * (lease + timedelta(seconds=1)), tick=True):
            queue.extend(runs_claim_due())
            if queue:
                run_id, token = queue.popleft()
                run_attempt(run_id=run_id, token=token, trigger="poll")
    run.refresh_from_db()
    assert run.verdict == "VERIFIED", (
        f"verdict {run.verdict} after 5 polls: {Attempt.objects.filter(run=run).count()} "
        f"attempts made, {len(queue)} still queued"
    )
