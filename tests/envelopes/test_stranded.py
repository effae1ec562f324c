"""The stranded-leg job works oldest first and one failing leg cannot starve the rest (issue 10,
smaller defects; SPEC §11)."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from envelopes import services
from envelopes.models import LegOutcome, RefundLeg
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db


def _unknown_legs(alice: Api, sandbox: SandboxControl, count: int) -> list[RefundLeg]:
    """`count` refunds left unknown (nothing reached the provider), made a minute apart."""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    start = timezone.now()
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")
    for n in range(count):
        with time_machine.travel(start + timedelta(minutes=n), tick=False):
            alice.post(
                f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000}
            )
    sandbox.clear_faults()
    legs = list(RefundLeg.objects.order_by("reserved_at"))
    assert [leg.outcome for leg in legs] == [LegOutcome.UNKNOWN] * count
    return legs


def test_the_oldest_leg_is_resumed_first(alice: Api, sandbox: SandboxControl) -> None:
    _unknown_legs(alice, sandbox, 3)
    with time_machine.travel(timezone.now() + timedelta(minutes=10), tick=True):
        services.stranded_resume(older_than_s=60, limit=1)
    outcomes = [leg.outcome for leg in RefundLeg.objects.order_by("reserved_at")]
    assert outcomes == [LegOutcome.ACCEPTED, LegOutcome.UNKNOWN, LegOutcome.UNKNOWN]


def test_one_failing_leg_does_not_stop_the_others(
    alice: Api, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The oldest leg's resumption raises (a bug, a database error): the job logs it and goes on,
    so it cannot starve the legs behind it tick after tick."""
    legs = _unknown_legs(alice, sandbox, 3)
    real = services.refund_leg_send

    def send(*, leg: RefundLeg, idempotency: object = None) -> RefundLeg:
        if leg.pk == legs[0].pk:
            raise RuntimeError("this leg cannot be resumed")
        return real(leg=leg)

    monkeypatch.setattr(services.resume, "refund_leg_send", send)  # where the job finds it
    with time_machine.travel(timezone.now() + timedelta(minutes=10), tick=True):
        services.stranded_resume(older_than_s=60)
    outcomes = [leg.outcome for leg in RefundLeg.objects.order_by("reserved_at")]
    assert outcomes == [LegOutcome.UNKNOWN, LegOutcome.ACCEPTED, LegOutcome.ACCEPTED]
    assert sandbox.state()["counts"]["refunds"] == 2
