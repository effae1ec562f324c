"""An adjustment's status moves only as its table allows (core.transitions, STYLE rule 6): a move
outside it is refused with `transition_not_allowed` and changes nothing."""

from __future__ import annotations

import itertools

import pytest

from envelopes.models import (
    ADJUSTMENT_STATUS,
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    Envelope,
)
from tests.drivers.transitions import assert_moved, assert_refused
from tests.envelopes.people import person

pytestmark = pytest.mark.django_db


def _adjustment(status: AdjustmentStatus) -> Adjustment:
    proposer = person("pia", "envelopes.add_adjustment")
    envelope = Envelope.objects.create(owner=proposer)
    return Adjustment.objects.create(
        envelope=envelope,
        kind=AdjustmentKind.CONFIRM,
        amount_micro=0,
        reason="a test",
        proposed_by=proposer,
        status=status,
    )


def test_the_table_names_every_status_and_only_a_proposal_is_decided() -> None:
    assert set(ADJUSTMENT_STATUS.allowed) == set(AdjustmentStatus.values)
    assert ADJUSTMENT_STATUS.allowed == {
        "proposed": frozenset({"applied", "rejected"}),
        "applied": frozenset(),
        "rejected": frozenset(),
    }


# The two decisions a proposal may get; every other pair of statuses is refused (written out here,
# not read from the table under test).
DECISIONS = {
    (AdjustmentStatus.PROPOSED, AdjustmentStatus.APPLIED),
    (AdjustmentStatus.PROPOSED, AdjustmentStatus.REJECTED),
}


@pytest.mark.parametrize(
    ("current", "to"),
    [pair for pair in itertools.product(AdjustmentStatus, repeat=2) if pair not in DECISIONS],
)
def test_a_move_outside_the_table_is_refused_and_changes_nothing(
    current: AdjustmentStatus, to: AdjustmentStatus
) -> None:
    adjustment = _adjustment(current)
    assert_refused(
        adjustment, machine=ADJUSTMENT_STATUS, to=to, also={"decision_note": "never written"}
    )


def test_a_move_in_the_table_saves_it_and_writes_its_audit_row() -> None:
    adjustment = _adjustment(AdjustmentStatus.PROPOSED)
    assert_moved(
        adjustment,
        machine=ADJUSTMENT_STATUS,
        to=AdjustmentStatus.REJECTED,
        action="adjustment.reject",
        also={"decision_note": "withdrawn"},
    )
