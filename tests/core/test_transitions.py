"""core.transitions: allowed state changes as data, one function that makes them (STYLE rule 6)."""

from __future__ import annotations

import pytest
from django.db import models

from core.transitions import StateMachine, transition
from tests.drivers.transitions import assert_moved, assert_refused
from verification.models import Escalation, EscalationStatus, Verdict

pytestmark = pytest.mark.django_db


class Light(models.TextChoices):
    RED = "red"
    GREEN = "green"
    AMBER = "amber"


def test_a_machine_must_name_every_state_of_its_enum() -> None:
    with pytest.raises(ValueError, match=r"no transitions declared for the states \['amber'\]"):
        StateMachine.of(
            "light", field="status", choices=Light, allowed={"red": ["green"], "green": []}
        )


def test_a_machine_may_not_move_to_a_state_its_enum_lacks() -> None:
    with pytest.raises(ValueError, match=r"unknown states \['blue'\]"):
        StateMachine.of(
            "light",
            field="status",
            choices=Light,
            allowed={"red": ["blue"], "green": [], "amber": []},
        )


def test_can_reads_the_table_and_nothing_else() -> None:
    machine = StateMachine.of(
        "light",
        field="status",
        choices=Light,
        allowed={"red": ["green"], "green": ["amber"], "amber": ["red"]},
    )
    assert machine.can("red", "green")
    assert not machine.can("red", "amber")
    assert not machine.can("red", "red")  # staying put is a move too, allowed only where listed
    assert not machine.can("unknown", "red")


ESCALATION = StateMachine.of(
    "escalation",
    field="status",
    choices=EscalationStatus,
    allowed={EscalationStatus.OPEN: [EscalationStatus.RESOLVED], EscalationStatus.RESOLVED: []},
)


def _escalation() -> Escalation:
    return Escalation.objects.create(verdict=Verdict.FAILED, reason="a test", subject_id="x1")


def test_a_move_in_the_table_saves_only_its_fields_and_writes_one_audit_row() -> None:
    escalation = _escalation()
    Escalation.objects.filter(pk=escalation.pk).update(reason="changed elsewhere meanwhile")

    event = assert_moved(
        escalation,
        machine=ESCALATION,
        to=EscalationStatus.RESOLVED,
        action="escalation.resolve",
        also={"resolution_note": "seen"},
        details={"why": "test"},
    )

    row = Escalation.objects.get(pk=escalation.pk)
    assert row.reason == "changed elsewhere meanwhile"  # update_fields: nothing else written
    assert event.target_id == str(escalation.pk)  # no public id: the primary key
    assert event.actor_label == "system"


def test_a_move_outside_the_table_is_refused_and_changes_nothing() -> None:
    escalation = _escalation()
    transition(escalation, machine=ESCALATION, to=EscalationStatus.RESOLVED)
    assert_refused(escalation, machine=ESCALATION, to=EscalationStatus.OPEN, also={"reason": "x"})
    assert Escalation.objects.get(pk=escalation.pk).status == "resolved"
