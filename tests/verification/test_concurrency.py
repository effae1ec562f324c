"""Several workers claiming due runs at the same moment never process one run twice
(PostgreSQL, real concurrency: each thread has its own database connection)."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from verification.models import Attempt, VerificationRun
from verification.services import run_attempt, runs_claim_due

from .conftest import Refunds

WORKERS = 4


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_and_attempts_never_overlap(refunds: Refunds) -> None:
    charge = refunds.charge(1_000_000)
    runs = [refunds.make(charge, amount=100 + i) for i in range(24)]
    VerificationRun.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    barrier = threading.Barrier(WORKERS)
    claimed: list[list[int]] = [[] for _ in range(WORKERS)]
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            barrier.wait()
            while batch := runs_claim_due(limit=3):
                for run_id, token in batch:
                    claimed[index].append(run_id)
                    run_attempt(run_id=run_id, token=token, trigger="poll")
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    everything = [run_id for batch in claimed for run_id in batch]
    assert sorted(everything) == sorted(run.pk for run in runs)  # each run claimed exactly once
    assert sum(1 for batch in claimed if batch) >= 2  # the work really was shared
    assert Attempt.objects.count() == len(runs)  # and attempted exactly once
    assert set(VerificationRun.objects.values_list("verdict", flat=True)) == {"VERIFIED"}
