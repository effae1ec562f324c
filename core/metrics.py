"""What the idempotency mechanism counts (core.idempotency): keys replayed and keys refused, per
surface. Counted in process (prometheus-client; multiprocess mode when `PROMETHEUS_MULTIPROC_DIR`
is set, so every web worker adds up) and exposed by `/metrics` (ops)."""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from prometheus_client import Counter

from core.exceptions import VouchError

E = TypeVar("E", bound=VouchError)
logger = logging.getLogger("vouch.idempotency")

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
    with _never_raising():
        IDEMPOTENCY_REPLAYS.labels(surface).inc()


def idempotency_refused(error: E, *, surface: str) -> E:
    """Count a key refused with `error` (and hand it back to be raised)."""
    with _never_raising():
        IDEMPOTENCY_CONFLICTS.labels(surface, error.code).inc()
    return error


@contextmanager
def _never_raising() -> Iterator[None]:
    """A metric that cannot be written (its folder gone, the disk full) is logged, never turned
    into the request's error."""
    try:
        yield
    except Exception:
        logger.exception("idempotency metrics not written")
