"""Allowed state changes written as data, and the one function that makes them (STYLE rule 6).

Each stateful model declares a `StateMachine`: the field that holds its state and, for every
state, the states it may move to. `transition` is the only code that changes that field: it
checks the move against the table, saves with `update_fields` (the state, plus any fields the
caller sets in the same step) and writes the audit row in the same transaction. A move the table
does not list raises `TransitionRefused` and changes nothing.

A state listed with no way out is terminal. A move to the same state is allowed only where the
table says so (some resolutions are recorded twice on purpose, e.g. a re-filing)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import models

from core import exceptions
from core.services import audit_record


class TransitionRefused(exceptions.VouchError):
    code = "transition_not_allowed"
    status_code = 409
    default_message = "This change of state is not allowed."


@dataclass(frozen=True)
class StateMachine:
    """`allowed[a]` holds every state a row in state `a` may move to."""

    name: str  # what the audit rows call the thing, e.g. "packet" or "dispute.filing"
    field: str
    allowed: Mapping[str, frozenset[str]]
    states: frozenset[str] = dataclasses.field(default=frozenset())

    def __post_init__(self) -> None:
        named = set(self.allowed)
        for targets in self.allowed.values():
            named |= set(targets)
        if self.states and not named <= set(self.states):
            unknown = sorted(named - set(self.states))
            raise ValueError(f"{self.name}: transitions name unknown states {unknown}")

    @classmethod
    def of(
        cls,
        name: str,
        *,
        field: str,
        choices: type[models.TextChoices] | Iterable[str],
        allowed: Mapping[str, Iterable[str]],
    ) -> StateMachine:
        """A machine over a TextChoices enum (or any set of state values): every state must be
        a key of `allowed` (a terminal state maps to nothing), so a state added to the enum and
        forgotten here fails at import."""
        values = (
            frozenset(str(c) for c in choices.values)
            if isinstance(choices, type)
            else frozenset(str(c) for c in choices)
        )
        missing = sorted(values - {str(k) for k in allowed})
        if missing:
            raise ValueError(f"{name}: no transitions declared for the states {missing}")
        return cls(
            name=name,
            field=field,
            allowed={str(k): frozenset(str(t) for t in v) for k, v in allowed.items()},
            states=values,
        )

    def can(self, current: str, to: str) -> bool:
        return str(to) in self.allowed.get(str(current), frozenset())

    def check(self, current: str, to: str) -> None:
        if not self.can(current, to):
            raise TransitionRefused(
                f"A {self.name} cannot move from {current!s} to {to!s}.",
                details={"machine": self.name, "from": str(current), "to": str(to)},
            )


def transition(
    obj: models.Model,
    *,
    machine: StateMachine,
    to: str,
    actor: Any = None,
    action: str | None = None,
    also: Mapping[str, Any] | None = None,
    details: Mapping[str, Any] | None = None,
    target_id: str | None = None,
) -> None:
    """Move `obj` to state `to`: check the table, set the state and the fields in `also`, save
    only those fields, and append the audit row (`action`, default "<machine>.<to>"). Call it
    inside the transaction (and under the row lock) of the change it records."""
    current = str(getattr(obj, machine.field))
    machine.check(current, to)
    setattr(obj, machine.field, to)
    extra = dict(also or {})
    for name, value in extra.items():
        setattr(obj, name, value)
    obj.save(update_fields=[machine.field, *extra])
    audit_record(
        actor=actor,
        action=action or f"{machine.name}.{to}",
        target_type=machine.name,
        target_id=target_id or str(getattr(obj, "public_id", None) or obj.pk),
        details={"from": current, "to": str(to), **(details or {})},
    )
