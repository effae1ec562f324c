"""A charge and a refund on it verified at the same moment by two workers (SPEC §8). The refund's
receipt waits for the charge's; the charge's receipt writes the refunds that waited. Without one
order between the two transactions each could miss the other: the refund found no charge receipt
(not yet committed), the charge found no VERIFIED refund (not yet committed), and the refund's
receipt was never written (CI saw it: a worker test waited 60 s for it)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.utils import timezone

from receipts.models import Receipt
from verification import verdicts
from verification.models import VerificationRun
from verification.services import run_attempt, runs_claim_due

from .conftest import Shop


@pytest.mark.django_db(transaction=True)
def test_a_refund_verified_while_its_charge_is_verified_still_gets_its_receipt(
    shop: Shop,
) -> None:
    charge_id = shop.fund(10_000_000, settle=False)
    shop.refund(4_000_000, settle=False)
    charge_run = VerificationRun.objects.get(contract_id="stripe.charge.succeeded")
    refund_run = VerificationRun.objects.get(contract_id="stripe.refund.created")
    VerificationRun.objects.update(next_attempt_at=timezone.now())
    tokens = dict(runs_claim_due(limit=10))
    assert set(tokens) == {charge_run.pk, refund_run.pk}

    refund_decided = threading.Event()
    charge_finished = threading.Event()
    errors: list[BaseException] = []

    def hold_the_refund_open(*, run: VerificationRun) -> None:
        # Registered after the receipts handler, so it runs once the refund's receipt was
        # attempted, inside the verdict's transaction: the charge is decided meanwhile.
        if run.pk == refund_run.pk:
            refund_decided.set()
            charge_finished.wait(timeout=3)  # the charge cannot finish while it waits for us

    def worker(run_id: int, before: threading.Event | None, after: threading.Event | None) -> None:
        try:
            if before is not None:
                assert before.wait(timeout=30)
            attempt = run_attempt(run_id=run_id, token=tokens[run_id], trigger="poll")
            assert attempt is not None
            assert attempt.verdict == "VERIFIED", attempt.reason
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)
            refund_decided.set()
        finally:
            if after is not None:
                after.set()
            connection.close()

    verdicts.on_every_verdict(hold_the_refund_open)
    try:
        threads = [
            threading.Thread(target=worker, args=(refund_run.pk, None, None)),
            threading.Thread(target=worker, args=(charge_run.pk, refund_decided, charge_finished)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        verdicts.forget(hold_the_refund_open)
    assert not errors, errors

    assert set(VerificationRun.objects.values_list("verdict", flat=True)) == {"VERIFIED"}
    refund = Receipt.objects.filter(kind="refund", verification_run=refund_run).first()
    assert refund is not None, list(Receipt.objects.values("kind", "provider_object_id"))
    assert refund.parent == Receipt.objects.get(kind="charge", provider_object_id=charge_id)
