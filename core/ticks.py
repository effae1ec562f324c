"""At most one run of a periodic job queued or running at a time (SPEC §11).

Beat (config/beat.py) takes a job's slot before it sends a tick, with a token that travels in the
message's headers; a tick that finds the slot taken sends nothing. The worker (config/celery_app.py)
marks the slot running when the message starts, and frees it when the run ends, however it ends.
Every step is one UPDATE on the slot's row, so several beats or workers never both win.

A slot is held for a bounded time only: a message lost with a broker that keeps nothing, or a
worker killed mid-run, frees it when `held_until` passes. A message that comes after its slot was
taken again (it waited longer than the hold) does not run: the newer tick does that work.

docs/decisions/0011-work-is-rows-the-queue-holds-little.md"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.models import PeriodicSlot, SlotState

# The message headers a tick carries: its slot, its token, how long a run may hold the slot.
SLOT_HEADER = "vouch_slot"
TOKEN_HEADER = "vouch_slot_token"  # noqa: S105 - a header name
LEASE_HEADER = "vouch_slot_lease_s"
HEADERS = (SLOT_HEADER, TOKEN_HEADER, LEASE_HEADER)


@dataclass(frozen=True)
class Claim:
    name: str
    token: str
    lease_s: float

    def headers(self) -> dict[str, str]:
        return {SLOT_HEADER: self.name, TOKEN_HEADER: self.token, LEASE_HEADER: str(self.lease_s)}


def run_lease_s(every_s: float) -> float:
    """How long a started run may hold its slot: its interval, within [PERIODIC_RUN_LEASE_MIN_S,
    PERIODIC_RUN_LEASE_MAX_S]. A run still going after that may meet a second one (every job is
    safe to run twice at once); a run killed with its worker holds the slot no longer."""
    low, high = settings.PERIODIC_RUN_LEASE_MIN_S, settings.PERIODIC_RUN_LEASE_MAX_S
    return float(min(max(every_s, low), high))


def tick_claim(name: str, *, every_s: float) -> Claim | None:
    """Take `name`'s slot for one tick, or None when a run is queued or running (the skip is
    counted on the slot)."""
    now = timezone.now()
    if not PeriodicSlot.objects.filter(name=name).exists():
        try:
            with transaction.atomic():
                PeriodicSlot.objects.create(name=name)
        except IntegrityError:
            pass  # another beat created it
    token = secrets.token_hex(16)
    taken = (
        PeriodicSlot.objects.filter(name=name)
        .filter(Q(state=SlotState.FREE) | Q(held_until__lt=now))
        .update(
            state=SlotState.QUEUED,
            token=token,
            sent_at=now,
            started_at=None,
            held_until=now + timedelta(seconds=settings.PERIODIC_QUEUED_HOLD_S),
        )
    )
    if not taken:
        PeriodicSlot.objects.filter(name=name).update(skipped=F("skipped") + 1)
        return None
    return Claim(name=name, token=token, lease_s=run_lease_s(every_s))


def tick_started(claim: Claim) -> bool:
    """The tick's message begins to run: True if its slot is still its own (then held as running
    for the lease), False if it came after the slot was taken again (it must not run)."""
    now = timezone.now()
    return bool(
        PeriodicSlot.objects.filter(name=claim.name, token=claim.token).update(
            state=SlotState.RUNNING,
            started_at=now,
            held_until=now + timedelta(seconds=claim.lease_s),
        )
    )


def tick_done(claim: Claim) -> None:
    """The run ended (or its message could not be sent): the next tick may send one."""
    PeriodicSlot.objects.filter(name=claim.name, token=claim.token).update(
        state=SlotState.FREE, token="", held_until=None
    )


def tick_hold(name: str, *, seconds: float) -> None:
    """A long run of `name` holds its slot `seconds` more (from now), so that no second run
    starts beside it while it still has work (the legs waiting for room, say)."""
    PeriodicSlot.objects.filter(name=name, state=SlotState.RUNNING).update(
        held_until=timezone.now() + timedelta(seconds=seconds)
    )


def claim_from_headers(headers: dict[str, object] | None) -> Claim | None:
    """The claim a message carries, or None for a message no tick sent (a test, `.delay()`)."""
    if not headers:
        return None
    name, token, lease = (headers.get(h) for h in (SLOT_HEADER, TOKEN_HEADER, LEASE_HEADER))
    if not isinstance(name, str) or not isinstance(token, str) or not name or not token:
        return None
    try:
        lease_s = float(lease)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        lease_s = settings.PERIODIC_RUN_LEASE_MIN_S
    return Claim(name=name, token=token, lease_s=lease_s)
