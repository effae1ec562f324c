"""Stripe's idempotency layer (https://docs.stripe.com/api/idempotent_requests and
https://docs.stripe.com/error-low-level#idempotency), per API key: the first request with a key
claims it; what its endpoint answers once it began executing, 500s included, is stored and
replayed to every later request with the key and the same parameters; other parameters are an
`idempotency_error`; the key while its first request runs is `idempotency_key_in_use`. Keys live
24 hours (on the sandbox clock). The key's length is checked before (errors.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from stripe_sandbox.errors import StripeError
from stripe_sandbox.state import IDEMPOTENCY_TTL_S, IdempotencyRecord, State


def fingerprint(method: str, path: str, data: Any) -> str:
    """What "the same request" means: method, path and parameters."""
    canonical = json.dumps([method, path, data], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def claim(
    state: State, api_key: str, key: str, request_fingerprint: str
) -> IdempotencyRecord | StripeError | None:
    """None: this request owns the key now. A record: the answer stored under the key, to replay.
    A StripeError: the key is in use, or was first used with other parameters."""
    with state.lock:
        store = state.world.idempotency
        record = store.get((api_key, key))
        now = state.clock.now()
        if record is not None and now - record.created > IDEMPOTENCY_TTL_S and not record.running:
            record = None  # expired: the key is free again
        if record is None:
            store[(api_key, key)] = IdempotencyRecord(fingerprint=request_fingerprint, created=now)
            return None
        if record.running:
            return StripeError(
                409,
                "There is currently another in-progress request using this Stripe-Idempotency "
                "key (that probably means you submitted twice, and the other request is still "
                f"going through): '{key}'. Please try again later.",
                code="idempotency_key_in_use",
                stored=False,
            )
        if record.fingerprint != request_fingerprint:
            return StripeError(
                400,
                "Keys for idempotent requests can only be used with the same parameters they "
                f"were first used with. Try using a key other than '{key}' if you meant to "
                "execute a different request.",
                type="idempotency_error",
                stored=False,
            )
        return record


def settle(
    state: State,
    api_key: str,
    key: str,
    *,
    status: int,
    body: bytes,
    stored: bool,
    request_id: str,
) -> None:
    """The request that claimed the key is answered: keep its answer under the key, or (not
    `stored`: refused before any endpoint began) free the key for a retry."""
    with state.lock:
        store = state.world.idempotency
        record = store.get((api_key, key))
        if record is None:  # a reset happened meanwhile
            return
        if stored:
            record.running = False
            record.status = status
            record.body = body
            record.request_id = request_id
        else:
            del store[(api_key, key)]
