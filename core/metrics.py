"""What the idempotency mechanism counts (core.idempotency): keys replayed and keys refused, per
surface. Counted in process (prometheus-client; multiprocess mode when `PROMETHEUS_MULTIPROC_DIR`
is set, so every web worker adds up) and exposed by `/metrics` (ops)."""

from typing import TypeVar

from prometheus_client import Counter

from core.exceptions import VouchError

E = TypeVar("E", bound=VouchError)

IDEMPOTENCY_REPLAYS = Counter(
    "vouch_idempotency_replays",
    "Requests answered from a stored response (same key, same operation, same body).",
    ["surface"],
)
IDEMPOTENCY_CONFLICTS = Counter(
    "vouch_idempotency_conflicts",
    "Requests refused because of their key, by code: idempotency_key_in_use (409), "
    "idempotency_key_conflict and idempotency_key_other_surface (422).",
    ["surface", "code"],
)


def idempotency_replayed(*, surface: str) -> None:
    IDEMPOTENCY_REPLAYS.labels(surface).inc()


def idempotency_refused(error: E, *, surface: str) -> E:
    """Count a key refused with `error` (and hand it back to be raised)."""
    IDEMPOTENCY_CONFLICTS.labels(surface, error.code).inc()
    return error
