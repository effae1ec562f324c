"""Webhook deliveries: signed as Stripe signs them, sent from a background thread, retried with
backoff a bounded number of times, and (for tests) delayed, duplicated or reordered on request."""

from __future__ import annotations

import hashlib
import heapq
import hmac
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stripe_sandbox.state import State

DELIVERY_TIMEOUT_S = 5.0


def sign(payload: bytes, secret: str, timestamp: int) -> str:
    """Stripe's `Stripe-Signature` header: t=<unix>,v1=<HMAC-SHA256(secret, "t.payload")>."""
    signed = f"{timestamp}.".encode() + payload
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


@dataclass
class Endpoint:
    id: str
    url: str
    secret: str
    max_attempts: int = 5
    backoff_ms: int = 500
    permanent: bool = False  # given on the command line: survives a reset
    delivered: int = 0
    failed_attempts: int = 0
    gave_up: int = 0
    log: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=200))

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "url": self.url,
            "max_attempts": self.max_attempts,
            "backoff_ms": self.backoff_ms,
            "delivered": self.delivered,
            "failed_attempts": self.failed_attempts,
            "gave_up": self.gave_up,
            "deliveries": list(self.log),
        }


@dataclass(order=True)
class _Delivery:
    due: float
    seq: int
    endpoint_id: str = field(compare=False)
    event_id: str = field(compare=False)
    payload: bytes = field(compare=False)
    attempt: int = field(compare=False, default=1)
    generation: int = field(compare=False, default=0)


class Dispatcher:
    def __init__(self, state: State) -> None:
        self.state = state
        self.endpoints: dict[str, Endpoint] = {}
        self._queue: list[_Delivery] = []
        self._seq = itertools.count()
        self._ids = itertools.count(1)
        self._cv = threading.Condition()
        self._generation = 0
        self._stopped = False
        self._in_flight = 0
        # The deliveries under way, by identity: owed until they are answered (state files).
        self._flying: dict[int, _Delivery] = {}
        # Events the webhook behaviour's drop_probability kept from every endpoint (the last
        # thousand of them, and how many in all).
        self.dropped: deque[str] = deque(maxlen=1000)
        self.dropped_count = 0
        self._thread = threading.Thread(target=self._run, name="sandbox-webhooks", daemon=True)
        self._thread.start()

    # --- configuration ---------------------------------------------------------------------

    def add_endpoint(
        self,
        url: str,
        secret: str,
        *,
        max_attempts: int = 5,
        backoff_ms: int = 500,
        permanent: bool = False,
    ) -> Endpoint:
        with self._cv:
            endpoint = Endpoint(
                id=f"we_{next(self._ids)}",
                url=url,
                secret=secret,
                max_attempts=max_attempts,
                backoff_ms=backoff_ms,
                permanent=permanent,
            )
            self.endpoints[endpoint.id] = endpoint
            return endpoint

    def remove_endpoints(self, *, keep_permanent: bool) -> None:
        with self._cv:
            self.endpoints = {
                k: e for k, e in self.endpoints.items() if keep_permanent and e.permanent
            }

    def reset(self) -> None:
        """Forget queued deliveries and non-permanent endpoints; zero the counters."""
        with self._cv:
            self._generation += 1
            self._queue.clear()
            self.remove_endpoints(keep_permanent=True)
            for endpoint in self.endpoints.values():
                endpoint.delivered = endpoint.failed_attempts = endpoint.gave_up = 0
                endpoint.log.clear()
            self.dropped.clear()
            self.dropped_count = 0

    def endpoint_count(self) -> int:
        return len(self.endpoints)

    def describe(self) -> dict[str, Any]:
        with self._cv:
            return {
                "endpoints": [e.describe() for e in self.endpoints.values()],
                "queued": len(self._queue),
                "in_flight": self._in_flight,
                "dropped": self.dropped_count,
                "dropped_events": list(self.dropped),
            }

    def idle(self) -> bool:
        with self._cv:
            return not self._queue and self._in_flight == 0

    # --- a restart (persistence.py) ------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """What a restart keeps: the endpoints added through the control API (those of the command
        line come again with it), every delivery still owed (queued or under way, by the
        endpoint's URL and secret) and the dropped events."""
        with self._cv:
            owed = {id(d): d for d in [*self._queue, *self._flying.values()]}.values()
            deliveries = [
                (endpoint.url, endpoint.secret, d.event_id, d.payload, d.attempt)
                for d in sorted(owed)
                if d.generation == self._generation
                and (endpoint := self.endpoints.get(d.endpoint_id)) is not None
            ]
            return {
                "endpoints": [e for e in self.endpoints.values() if not e.permanent],
                "deliveries": deliveries,
                "dropped": list(self.dropped),
                "dropped_count": self.dropped_count,
            }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Take back a snapshot's endpoints (with new ids) and owe its deliveries again, due now:
        Stripe goes on retrying while the sandbox was stopped."""
        with self._cv:
            for endpoint in snapshot["endpoints"]:
                endpoint.id = f"we_{next(self._ids)}"
                self.endpoints[endpoint.id] = endpoint
            by_target = {(e.url, e.secret): e.id for e in self.endpoints.values()}
            now = time.monotonic()
            for url, secret, event_id, payload, attempt in snapshot["deliveries"]:
                endpoint_id = by_target.get((url, secret))
                if endpoint_id is not None:
                    heapq.heappush(
                        self._queue,
                        _Delivery(
                            now,
                            next(self._seq),
                            endpoint_id,
                            event_id,
                            payload,
                            attempt,
                            self._generation,
                        ),
                    )
            self.dropped.extend(snapshot["dropped"])
            self.dropped_count = snapshot["dropped_count"]
            self._cv.notify()

    # --- delivery ----------------------------------------------------------------------------

    def enqueue(self, event: dict[str, Any]) -> None:
        """Called under the state lock when an event is emitted."""
        behaviour = self.state.world.webhook_behaviour
        # Drawn only when asked for, so that seeded runs without drops see the same randomness.
        if behaviour.drop_probability and self.state.random.random() < behaviour.drop_probability:
            with self._cv:
                self.dropped.append(event["id"])
                self.dropped_count += 1
            return
        # Stripe sends the event as pretty-printed JSON; the signature covers these exact bytes.
        payload = json.dumps(event, indent=2).encode()
        due = time.monotonic() + behaviour.delay_ms / 1000
        copies = 2 if self.state.random.random() < behaviour.duplicate_probability else 1
        with self._cv:
            for endpoint in self.endpoints.values():
                for _ in range(copies):
                    heapq.heappush(
                        self._queue,
                        _Delivery(
                            due,
                            next(self._seq),
                            endpoint.id,
                            event["id"],
                            payload,
                            1,
                            self._generation,
                        ),
                    )
            self._cv.notify()

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()

    def _next_batch(self) -> list[_Delivery] | None:
        with self._cv:
            while True:
                if self._stopped:
                    return None
                now = time.monotonic()
                reorder = self.state.world.webhook_behaviour.reorder
                # Reordering needs a batch: take what falls due within the next 50 ms too.
                horizon = now + (0.05 if reorder else 0)
                if self._queue and self._queue[0].due <= now:
                    batch = []
                    while self._queue and self._queue[0].due <= horizon:
                        batch.append(heapq.heappop(self._queue))
                    if reorder:
                        batch.reverse()  # newest first: the opposite of the order they happened
                    self._in_flight += len(batch)
                    self._flying.update((id(d), d) for d in batch)
                    return batch
                timeout = self._queue[0].due - now if self._queue else None
                self._cv.wait(timeout)

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            for delivery in batch:
                try:
                    self._deliver(delivery)
                finally:
                    with self._cv:
                        self._in_flight -= 1
                        self._flying.pop(id(delivery), None)

    def _deliver(self, delivery: _Delivery) -> None:
        with self._cv:
            endpoint = self.endpoints.get(delivery.endpoint_id)
            if endpoint is None or delivery.generation != self._generation:
                return
        # Signed with the time of this attempt, the wall clock's, as Stripe signs each attempt
        # anew (https://docs.stripe.com/webhooks, "Prevent replay attacks"): the sandbox clock
        # a test moves dates the provider's objects and events (`created`), not the delivery, and
        # a receiver checks the signature's age against its own wall clock.
        timestamp = int(time.time())
        request = urllib.request.Request(  # noqa: S310 - the endpoint URL ops configured
            endpoint.url,
            data=delivery.payload,
            method="POST",
            headers={
                "Content-Type": "application/json; charset=utf-8",
                "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
                "Stripe-Signature": sign(delivery.payload, endpoint.secret, timestamp),
            },
        )
        status: int | str
        try:
            with urllib.request.urlopen(request, timeout=DELIVERY_TIMEOUT_S) as response:  # noqa: S310 - ditto
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except (urllib.error.URLError, OSError) as exc:
            status = f"error: {exc}"
        ok = isinstance(status, int) and 200 <= status < 300
        with self._cv:
            if delivery.generation != self._generation:
                return
            endpoint.log.append(
                {
                    "event": delivery.event_id,
                    "attempt": delivery.attempt,
                    "status": status,
                    "at": timestamp,
                }
            )
            if ok:
                endpoint.delivered += 1
            else:
                endpoint.failed_attempts += 1
                if delivery.attempt < endpoint.max_attempts:
                    backoff = endpoint.backoff_ms / 1000 * 2 ** (delivery.attempt - 1)
                    delivery.attempt += 1
                    delivery.due = time.monotonic() + backoff
                    delivery.seq = next(self._seq)
                    heapq.heappush(self._queue, delivery)
                    self._cv.notify()
                else:
                    endpoint.gave_up += 1
        if ok:
            self.state.delivered(delivery.event_id)
