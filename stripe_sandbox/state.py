"""The sandbox's in-memory world. One lock guards it: every request's effect is applied under it,
so the sandbox's invariants (a charge's `amount_refunded` equals the sum of its live refunds) hold
between any two requests, however many threads serve them."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stripe_sandbox import objects
from stripe_sandbox.clock import Clock
from stripe_sandbox.contract_checks import record_event
from stripe_sandbox.objects.payments import REFERENCE_DELAY_MS, refund_reference_settle
from stripe_sandbox.timeline import Timeline

if TYPE_CHECKING:
    from stripe_sandbox.webhooks import Dispatcher

IDEMPOTENCY_TTL_S = 24 * 60 * 60

# Each kind of object Stripe's API shows, and the World table holding it.
KINDS = {
    "payment_intent": "payment_intents",
    "charge": "charges",
    "refund": "refunds",
    "dispute": "disputes",
    "file": "files",
    "event": "events",
    "balance_transaction": "balance_transactions",
}


@dataclass
class RequestContext:
    request_id: str
    idempotency_key: str | None
    base_url: str


@dataclass
class IdempotencyRecord:
    fingerprint: str
    created: float
    running: bool = True
    status: int = 0
    body: bytes = b""
    request_id: str = ""


@dataclass
class Fault:
    id: str
    method: str
    path: str
    kind: str
    times: int | None
    probability: float
    delay_ms: int
    error_code: str | None
    should_retry: bool | None
    retry_after_s: int | None
    hits: int = 0

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "method": self.method,
            "path": self.path,
            "kind": self.kind,
            "times": self.times,
            "probability": self.probability,
            "delay_ms": self.delay_ms,
            "error_code": self.error_code,
            "should_retry": self.should_retry,
            "retry_after_s": self.retry_after_s,
            "hits": self.hits,
        }


@dataclass
class WebhookBehaviour:
    duplicate_probability: float = 0.0
    reorder: bool = False
    delay_ms: int = 0
    # The share of events that are never delivered to any endpoint (still listed by the API):
    # a lost webhook, which reconciliation's catch-up must repair.
    drop_probability: float = 0.0


def snapshot(obj: Any) -> Any:
    """A deep, JSON-shaped copy: what leaves the lock never changes afterwards."""
    return json.loads(json.dumps(obj))


@dataclass
class World:
    """Everything a reset forgets."""

    payment_intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    charges: dict[str, dict[str, Any]] = field(default_factory=dict)
    refunds: dict[str, dict[str, Any]] = field(default_factory=dict)
    disputes: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    file_contents: dict[str, bytes] = field(default_factory=dict)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Stripe's ledger of the account's balance: one per charge, refund, refund failure and
    # dispute withdrawal or reinstatement (GET /v1/balance_transactions).
    balance_transactions: dict[str, dict[str, Any]] = field(default_factory=dict)
    refunds_by_charge: dict[str, list[str]] = field(default_factory=dict)
    disputes_by_charge: dict[str, list[str]] = field(default_factory=dict)
    charges_by_pi: dict[str, list[str]] = field(default_factory=dict)
    # Per charge, what its live refunds (not failed or canceled) hold: kept as a running total so
    # a refund costs the same on a charge's ten-thousandth refund as on its first.
    refunded_live: dict[str, int] = field(default_factory=dict)
    # Per live refund, the charge and amount it counts in `refunded_live` for: what a failure
    # gives back, whatever tampering did to the refund since.
    refund_counted: dict[str, tuple[str, int]] = field(default_factory=dict)
    # Per listable kind, the order Stripe lists it in (see timeline.py).
    timelines: dict[str, Timeline] = field(
        default_factory=lambda: {kind: Timeline() for kind in KINDS}
    )
    # When each object was created, on the sandbox clock, to the microsecond (readback lag).
    born: dict[str, float] = field(default_factory=dict)
    idempotency: dict[tuple[str, str], IdempotencyRecord] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    # Objects a test overwrote through /_sandbox/tamper: deliberate lies, left out of the
    # conformance check (SPEC §12.1) of the objects the sandbox answers.
    tampered: set[str] = field(default_factory=set)
    requests: dict[str, int] = field(default_factory=dict)
    readback_lag_ms: int = 0
    # How long after a card refund succeeds its ARN appears (objects.refund_reference_settle).
    reference_delay_ms: int = REFERENCE_DELAY_MS
    webhook_behaviour: WebhookBehaviour = field(default_factory=WebhookBehaviour)


class State:
    def __init__(self, clock: Clock, seed: int | None = None) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.world = World()
        self.random = random.Random(seed)  # noqa: S311 - test faults, not secrets
        self.dispatcher: Dispatcher | None = None
        # Told of every change (the state file's saver, when there is one).
        self.on_change: Callable[[], None] | None = None
        # The refunds' reference delay a reset comes back to (the command line's).
        self.reference_delay_default_ms = REFERENCE_DELAY_MS

    def changed(self) -> None:
        """Something in the world changed (called under the lock)."""
        if self.on_change is not None:
            self.on_change()

    def reset(self, seed: int | None = None) -> None:
        with self.lock:
            self.world = World(reference_delay_ms=self.reference_delay_default_ms)
            self.random = random.Random(seed)  # noqa: S311 - test faults, not secrets
            self.clock.reset()

    # --- objects -------------------------------------------------------------------------

    def table(self, kind: str) -> dict[str, dict[str, Any]]:
        tables: dict[str, dict[str, Any]] = getattr(self.world, KINDS[kind])
        return tables

    def store(self, obj: dict[str, Any]) -> None:
        """A new object, kept, in its kind's timeline, born now (readback lag)."""
        kind = obj["object"]
        self.table(kind)[obj["id"]] = obj
        self.world.timelines[kind].add(obj["id"], obj["created"])
        self.born(obj["id"])

    def find(self, object_id: str) -> dict[str, Any] | None:
        """The object with this id, of any kind, or None."""
        for kind in KINDS:
            obj = self.table(kind).get(object_id)
            if obj is not None:
                return obj
        return None

    def born(self, object_id: str) -> None:
        self.world.born[object_id] = self.clock.now()

    def visible(self, object_id: str) -> bool:
        """False while readback lag hides a new object from reads."""
        lag = self.world.readback_lag_ms
        if not lag:
            return True
        born = self.world.born.get(object_id)
        return born is None or self.clock.now() >= born + lag / 1000

    def live_refunded(self, charge_id: str) -> int:
        """What a charge's refunds hold: every refund not failed or canceled."""
        return self.world.refunded_live.get(charge_id, 0)

    def refund_added(self, refund: dict[str, Any]) -> None:
        """A new refund, kept and counted on its charge (live unless made failed or canceled)."""
        self.store(refund)
        self.world.refunds_by_charge.setdefault(refund["charge"], []).append(refund["id"])
        if refund["status"] not in ("failed", "canceled"):
            live = self.world.refunded_live
            live[refund["charge"]] = live.get(refund["charge"], 0) + refund["amount"]
            self.world.refund_counted[refund["id"]] = (refund["charge"], refund["amount"])

    def refund_released(self, refund: dict[str, Any]) -> None:
        """A refund became failed or canceled: what it counted is the charge's again."""
        counted = self.world.refund_counted.pop(refund["id"], None)
        if counted is not None:
            charge_id, amount = counted
            self.world.refunded_live[charge_id] = self.live_refunded(charge_id) - amount

    def sync_charge_refunds(self, charge: dict[str, Any]) -> None:
        """Bring a charge's refund fields up to date with its refunds (after one changed)."""
        charge["amount_refunded"] = self.live_refunded(charge["id"])
        charge["refunded"] = charge["amount_refunded"] >= charge["amount"]

    def embed_refunds(self, body: dict[str, Any]) -> dict[str, Any]:
        """A rendered charge with its `refunds` included, as Stripe answers `expand[]=refunds`
        (since API 2022-11-15 only then: https://docs.stripe.com/changelog/2022-11-15/
        deprecates-charges-auto-expand): its newest ten refunds as they are now. The amounts
        stay the charge's own (sync_charge_refunds), so that an amount tampered with stays as
        the test set it, and a refund forgotten leaves them as they were."""
        refund_ids = self.world.refunds_by_charge.get(body["id"], [])
        body["refunds"] = {
            "object": "list",
            "data": [self.render(self.world.refunds[rid]) for rid in refund_ids[:-11:-1]],
            "has_more": len(refund_ids) > 10,
            "url": f"/v1/charges/{body['id']}/refunds",
        }
        return body

    def render(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as the API shows it now: a balance transaction past its `available_on`
        (sandbox clock) is `available` (https://docs.stripe.com/api/balance_transactions/object)."""
        body: dict[str, Any] = snapshot(obj)
        if (
            body.get("object") == "balance_transaction"
            and body["status"] == "pending"
            and self.clock.now() >= body["available_on"]
        ):
            body["status"] = "available"
        if body.get("object") == "refund":
            self.refund_reference_settle(body)
        return body

    def refund_reference_settle(self, refund: dict[str, Any]) -> None:
        """A refund's ARN as it stands now (objects.payments.refund_reference_settle): on a
        rendered copy, or on the stored refund before its status changes, so that what was shown
        stays."""
        born = self.world.born.get(refund["id"], float(refund["created"]))
        refund_reference_settle(
            refund, born=born, now=self.clock.now(), delay_ms=self.world.reference_delay_ms
        )

    # --- events --------------------------------------------------------------------------

    def emit(
        self,
        event_type: str,
        obj: dict[str, Any],
        ctx: RequestContext | None,
        previous_attributes: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        endpoints = self.dispatcher.endpoint_count() if self.dispatcher else 0
        event = objects.event(
            type=event_type,
            data_object=self.render(obj),
            previous_attributes=previous_attributes,
            created=self.clock.now_int(),
            request_id=ctx.request_id if ctx else None,
            idempotency_key=ctx.idempotency_key if ctx else None,
            pending_webhooks=endpoints,
        )
        self.store(event)
        record_event(self, event)  # against Event and the object's class (SPEC §12.1)
        if self.dispatcher is not None and endpoints:
            self.dispatcher.enqueue(event)
        return event

    def delivered(self, event_id: str) -> None:
        with self.lock:
            event = self.world.events.get(event_id)
            if event is not None and event["pending_webhooks"] > 0:
                event["pending_webhooks"] -= 1
                self.changed()

    # --- invariants, for /_sandbox/state -----------------------------------------------------

    def summary(self) -> dict[str, Any]:
        world = self.world
        charges = {}
        for charge in world.charges.values():
            refund_ids = world.refunds_by_charge.get(charge["id"], [])
            by_status: dict[str, int] = {}
            for rid in refund_ids:
                status = world.refunds[rid]["status"]
                by_status[status] = by_status.get(status, 0) + world.refunds[rid]["amount"]
            charges[charge["id"]] = {
                "amount": charge["amount"],
                # Summed here from the refunds themselves, independently of the running total.
                "amount_refunded": sum(
                    amount
                    for status, amount in by_status.items()
                    if status not in ("failed", "canceled")
                ),
                "refunded_by_status": by_status,
                "refunds": len(refund_ids),
                "disputed": charge["disputed"],
                "status": charge["status"],
                "payment_intent": charge["payment_intent"],
            }
        return {
            "now": self.clock.now(),
            "clock_offset_s": self.clock.offset,
            "counts": {
                "payment_intents": len(world.payment_intents),
                "charges": len(world.charges),
                "refunds": len(world.refunds),
                "disputes": len(world.disputes),
                "files": len(world.files),
                "events": len(world.events),
                "idempotency_keys": len(world.idempotency),
            },
            "charges": charges,
            "requests": dict(sorted(world.requests.items())),
            "faults": [fault.describe() for fault in world.faults],
            "readback_lag_ms": world.readback_lag_ms,
            "reference_delay_ms": world.reference_delay_ms,
            "webhooks": self.dispatcher.describe() if self.dispatcher else {"endpoints": []},
        }
