"""What every state machine's tests check the same way (core.transitions, STYLE rule 6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from django.db import models
from django.forms.models import model_to_dict

from core.models import AuditEvent
from core.transitions import StateMachine, TransitionRefused, transition


def assert_refused(
    obj: models.Model, *, machine: StateMachine, to: str, also: Mapping[str, Any] | None = None
) -> None:
    """Moving `obj` to `to` is refused (`transition_not_allowed`, naming the machine and both
    states) and changes nothing: not its row, not the object in memory, not the audit log."""
    current = str(getattr(obj, machine.field))
    row = model_to_dict(type(obj)._default_manager.get(pk=obj.pk))
    audits = AuditEvent.objects.count()

    with pytest.raises(TransitionRefused) as refused:
        transition(obj, machine=machine, to=to, action="test.refused", also=also)

    assert refused.value.code == "transition_not_allowed"
    assert refused.value.details == {"machine": machine.name, "from": current, "to": str(to)}
    assert model_to_dict(type(obj)._default_manager.get(pk=obj.pk)) == row
    assert str(getattr(obj, machine.field)) == current
    for name in also or {}:
        assert getattr(obj, name) == row[name]
    assert AuditEvent.objects.count() == audits


def assert_moved(
    obj: models.Model,
    *,
    machine: StateMachine,
    to: str,
    action: str,
    also: Mapping[str, Any] | None = None,
    details: Mapping[str, Any] | None = None,
) -> AuditEvent:
    """Moving `obj` to `to` saves the state and the fields in `also`, and writes exactly one
    audit row about it (its action, the machine's name, the object's id, from, to and `details`).
    Returns that row."""
    current = str(getattr(obj, machine.field))
    audits = AuditEvent.objects.count()

    transition(obj, machine=machine, to=to, action=action, also=also, details=details)

    row = type(obj)._default_manager.get(pk=obj.pk)
    assert str(getattr(row, machine.field)) == str(to)
    for name, value in (also or {}).items():
        assert getattr(row, name) == value
    assert AuditEvent.objects.count() == audits + 1
    event = AuditEvent.objects.latest("id")
    target = str(getattr(obj, "public_id", None) or obj.pk)
    assert (event.action, event.target_type, event.target_id) == (action, machine.name, target)
    assert event.details == {"from": current, "to": str(to), **(details or {})}
    return event
