"""How a refund is shared across an envelope's funding legs (SPEC §3): last in, first out, whole
cents. One function for the preview and for the refund, so what is shown is what is made."""

from __future__ import annotations

from dataclasses import dataclass

from core.display import dollars
from envelopes.exceptions import (
    AmountExceedsUnspent,
    InvalidAmount,
    NothingToRefund,
)
from envelopes.models import (
    MICRO_PER_CENT,
    Envelope,
    FundingLeg,
    FundingStatus,
)


# docs/decisions/0002-lifo-round-down.md: newest funding first, amounts rounded down.
def allocate_lifo(legs: list[tuple[int, int]], requested: int) -> list[tuple[int, int]]:
    """Last in, first out across funding legs given as (leg id, capacity) oldest first: the newest
    top-up first, the original last. Each leg rounds down to a whole cent; a leg that rounds to
    zero is dropped; what no leg takes stays in the envelope."""
    allocation = []
    remaining = requested
    for leg_id, capacity in reversed(legs):
        take = min(capacity, remaining)
        take -= take % MICRO_PER_CENT
        if take > 0:
            allocation.append((leg_id, take))
            remaining -= take
    return allocation


@dataclass(frozen=True)
class RefundAllocation:
    """The refund SPEC §3 makes of an envelope's figures: what is asked (`requested`), and each
    succeeded funding leg's share, newest first (`legs`); the rest (`remainder`) stays."""

    requested: int
    legs: list[tuple[FundingLeg, int]]

    @property
    def total(self) -> int:
        return sum(amount for _, amount in self.legs)

    @property
    def shape(self) -> tuple[int, list[tuple[str, int]]]:
        """The amount and legs by public id: what a person is shown and confirms."""
        return self.requested, [(leg.public_id, amount) for leg, amount in self.legs]


def _held(envelope: Envelope) -> tuple[str, dict[str, int]] | None:
    """Why a refund cannot take held money (SPEC §18), said on every surface's refusal: the
    message and `held_micro` in the details; None when nothing is held."""
    if envelope.held_micro <= 0:
        return None
    return (
        f"Only {dollars(envelope.unspent_micro)} can be refunded: "
        f"{dollars(envelope.held_micro)} is held while your bank reviews a dispute on a payment "
        "of this envelope, and is never refunded while it is held.",
        {"held_micro": envelope.held_micro},
    )


def refund_allocate(
    envelope: Envelope, amount_micro: int | None, funding: list[FundingLeg] | None = None
) -> RefundAllocation:
    """The refund of `amount_micro` (None: the whole unspent balance) from `envelope` as read:
    locked by a refund that then reserves it, or not by a preview that reserves nothing (one
    function, so what is shown is what is made). `funding`: its succeeded funding legs oldest
    first, if read already (else read here). Refuses `invalid_amount` (an amount asked for that is
    less than a cent: no refund can be that small, whatever the balance), `amount_exceeds_unspent`
    and `nothing_to_refund` (no unspent money, or every leg rounds to zero)."""
    if amount_micro is not None and amount_micro < MICRO_PER_CENT:
        raise InvalidAmount(
            f"A refund is at least one cent ({MICRO_PER_CENT:,} micro-dollars); "
            f"{amount_micro:,} micro-dollars is less. "
            "Omit amount_micro to refund everything unspent."
        )
    requested = envelope.unspent_micro if amount_micro is None else amount_micro
    held = _held(envelope)
    if requested > envelope.unspent_micro:
        raise AmountExceedsUnspent(
            *([held[0]] if held else []),
            details={"unspent_micro": envelope.unspent_micro, "amount_micro": requested}
            | (held[1] if held else {}),
        )
    if funding is None:
        funding = list(
            envelope.funding_legs.filter(status=FundingStatus.SUCCEEDED).order_by("sequence")
        )
    by_id = {leg.pk: leg for leg in funding}
    allocation = allocate_lifo([(leg.pk, leg.capacity_micro) for leg in funding], requested)
    if not allocation:
        raise NothingToRefund(
            *([held[0]] if held else []),
            details={"unspent_micro": envelope.unspent_micro} | (held[1] if held else {}),
        )
    return RefundAllocation(requested, [(by_id[pk], amount) for pk, amount in allocation])
