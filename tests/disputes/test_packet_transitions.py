"""A packet's three states (content `status`, `approval_status`, `filing_status`) change only by
the moves their machines list (`disputes.models`): any other is refused and changes nothing."""

from __future__ import annotations

import pytest
from django.db import models

from core.transitions import StateMachine
from disputes.models import (
    PACKET_APPROVAL,
    PACKET_FILING,
    PACKET_STATUS,
    ApprovalStatus,
    Dispute,
    DisputeSource,
    FilingStatus,
    Packet,
    PacketStatus,
    Posture,
)
from tests.drivers.transitions import assert_moved, assert_refused

MACHINES: list[tuple[StateMachine, type[models.TextChoices]]] = [
    (PACKET_STATUS, PacketStatus),
    (PACKET_APPROVAL, ApprovalStatus),
    (PACKET_FILING, FilingStatus),
]


def _refused_moves() -> list[tuple[StateMachine, str, str]]:
    return [
        (machine, current, to)
        for machine, choices in MACHINES
        for current in choices.values
        for to in choices.values
        if not machine.can(current, to)
    ]


def _packet(**state: str) -> Packet:
    dispute = Dispute.objects.create(
        provider_dispute_id="dp_transitions",
        charge_id="ch_transitions",
        amount_micro=10_000_000,
        reason="fraudulent",
        source=DisputeSource.STAFF,
    )
    fields: dict[str, str] = {"status": PacketStatus.READY_FOR_REVIEW, **state}
    if fields.get("filing_status", FilingStatus.NOT_FILED) != FilingStatus.NOT_FILED:
        fields["filing_key"] = "pkt:key"
    return Packet.objects.create(
        dispute=dispute,
        version=1,
        drafter="test",
        posture=Posture.CONTEST,
        summary="The buyer received the goods.",
        digest="0" * 64,
        **fields,
    )


@pytest.mark.parametrize(("machine", "choices"), MACHINES, ids=lambda m: getattr(m, "field", ""))
def test_every_state_has_an_entry(machine: StateMachine, choices: type[models.TextChoices]) -> None:
    assert set(machine.allowed) == set(choices.values)
    assert machine.states == frozenset(choices.values)
    for targets in machine.allowed.values():
        assert targets <= set(choices.values)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("machine", "current", "to"),
    _refused_moves(),
    ids=[f"{m.field}:{a}->{b}" for m, a, b in _refused_moves()],
)
def test_a_move_outside_the_table_is_refused_and_changes_nothing(
    machine: StateMachine, current: str, to: str
) -> None:
    packet = _packet(**{machine.field: current})
    assert_refused(packet, machine=machine, to=to, also={"filing_error": "must not be written"})


@pytest.mark.django_db
def test_an_allowed_move_saves_the_state_and_writes_one_audit_row() -> None:
    assert_moved(
        _packet(),
        machine=PACKET_FILING,
        to=FilingStatus.SUBMITTING,
        action="packet.file",
        also={"filing_key": "pkt:one"},
        details={"filing_key": "pkt:one"},
    )


def test_what_ends_a_packet_ends_it() -> None:
    """Superseded and filed versions, and every filing the readback ended, take no further move."""
    for machine, state in [
        (PACKET_STATUS, PacketStatus.SUPERSEDED),
        (PACKET_STATUS, PacketStatus.FILED),
        (PACKET_FILING, FilingStatus.FILED),
        (PACKET_FILING, FilingStatus.NOT_SUBMITTED),
        (PACKET_FILING, FilingStatus.READBACK_FAILED),
    ]:
        assert machine.allowed[state] == frozenset(), state
