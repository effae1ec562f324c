"""A discrepancy's status moves only as `reconciliation.models.DISCREPANCY_STATUS` allows
(STYLE rule 6): open -> acknowledged -> resolved, open -> resolved; resolved is final."""

from __future__ import annotations

import pytest

from core.models import AuditEvent
from reconciliation.models import DISCREPANCY_STATUS, Discrepancy, DiscrepancyStatus, Run
from reconciliation.services import Finding, discrepancy_clear, discrepancy_record
from tests.drivers.reconciliation import a_run
from tests.drivers.transitions import assert_refused

pytestmark = pytest.mark.django_db


def a_discrepancy(run: Run) -> Discrepancy:
    discrepancy, created = discrepancy_record(
        run=run,
        finding=Finding(
            code="leg_stuck", subject_type="refund_leg", subject_id="rfl_s", summary="stuck"
        ),
    )
    assert created
    return discrepancy


def test_the_table() -> None:
    assert DISCREPANCY_STATUS.can(DiscrepancyStatus.OPEN, DiscrepancyStatus.ACKNOWLEDGED)
    assert DISCREPANCY_STATUS.can(DiscrepancyStatus.OPEN, DiscrepancyStatus.RESOLVED)
    assert DISCREPANCY_STATUS.can(DiscrepancyStatus.ACKNOWLEDGED, DiscrepancyStatus.RESOLVED)
    for back in (DiscrepancyStatus.OPEN, DiscrepancyStatus.ACKNOWLEDGED):
        assert not DISCREPANCY_STATUS.can(DiscrepancyStatus.RESOLVED, back)
    assert not DISCREPANCY_STATUS.can(DiscrepancyStatus.ACKNOWLEDGED, DiscrepancyStatus.OPEN)
    assert not DISCREPANCY_STATUS.can(DiscrepancyStatus.RESOLVED, DiscrepancyStatus.RESOLVED)


def test_a_move_outside_the_table_is_refused_and_changes_nothing() -> None:
    run = a_run()
    discrepancy = discrepancy_clear(
        discrepancy=a_discrepancy(run), run=run, observation=None, why="gone"
    )
    assert discrepancy.status == DiscrepancyStatus.RESOLVED
    assert_refused(discrepancy, machine=DISCREPANCY_STATUS, to=DiscrepancyStatus.OPEN)
    discrepancy.refresh_from_db()
    assert (discrepancy.status, discrepancy.resolution) == ("resolved", "cleared")


def test_a_clear_goes_through_the_table_and_keeps_its_audit_action() -> None:
    run = a_run()
    discrepancy = discrepancy_clear(
        discrepancy=a_discrepancy(run), run=run, observation=None, why="gone"
    )
    event = AuditEvent.objects.get(action="discrepancy.clear")
    assert (event.target_type, event.target_id) == ("discrepancy", discrepancy.public_id)
    assert event.details["from"] == "open"
    assert event.details["to"] == "resolved"
    assert event.details["class"] == "leg_stuck"
    # Cleared twice (two runs at once): the second finds it resolved and changes nothing.
    again = discrepancy_clear(discrepancy=discrepancy, run=run, observation=None, why="again")
    assert again.note == "gone"
    assert AuditEvent.objects.filter(action="discrepancy.clear").count() == 1
