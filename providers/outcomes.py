"""What a provider call can tell us, and nothing more: the provider definitely accepted (and here
is what it answered), definitely refused (and why), or the outcome is unknown. An unknown outcome
is a state to resolve by reading the provider again, never a guess either way."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class OutcomeKind(StrEnum):
    ACCEPTED = "accepted"
    REFUSED = "refused"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    # The provider's object (a plain dict, as the provider sent it) when accepted.
    value: dict[str, Any] | None = None
    # Why it was refused or is unknown: the provider's error code (e.g. `charge_disputed`,
    # `card_declined`) or ours (`network_error`, `server_error`, `idempotency_error`, ...).
    error_code: str | None = None
    # The provider's message; for a request that got no answer (`network_error`), the method and
    # URL it tried and what became of it: `no answer from GET http://…/v1/charges/ch_…: …`.
    error_message: str | None = None
    http_status: int | None = None
    # The provider's error object, for card errors (decline_code, payment_intent, charge).
    error_detail: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1
    # The provider answered from its idempotency store: a replay of an earlier request.
    replayed: bool = False
    request_id: str | None = None
    idempotency_key: str | None = None
    # The response body exactly as received, when accepted (what a caller hashes and stores).
    body: bytes | None = field(default=None, repr=False)
    # False: the adapter sent nothing (no room in the provider's rate budgets within the call's
    # wait; `error_code` "budget_full", `attempts` 0). Not evidence of anything at the provider:
    # send it again later, under the same key.
    sent: bool = True

    @property
    def accepted(self) -> bool:
        return self.kind is OutcomeKind.ACCEPTED

    @property
    def refused(self) -> bool:
        return self.kind is OutcomeKind.REFUSED

    @property
    def unknown(self) -> bool:
        return self.kind is OutcomeKind.UNKNOWN

    @property
    def not_sent(self) -> bool:
        return not self.sent

    def require(self) -> dict[str, Any]:
        """The accepted value; a programming error to ask otherwise."""
        if self.value is None or not self.accepted:
            raise ValueError(f"outcome is {self.kind} ({self.error_code}), not accepted")
        return self.value


class WebhookSignatureError(Exception):
    """A webhook whose signature does not verify: refuse it, store nothing."""


class ProviderUnavailable(Exception):
    """A page of a list that could not be read, after the retry policy: the provider did not
    answer, or refused (`outcome` says which, with the code and HTTP status). A stream of pages
    raises it rather than end early: what was yielded before it stands, nothing after it was
    read, and `params` is the request to resume from."""

    def __init__(self, *, kind: str, params: dict[str, Any], outcome: Outcome) -> None:
        self.kind = kind
        self.params = params
        self.outcome = outcome
        # The provider's message (for a request that got no answer, the method and URL it
        # tried): what an operator reads in `could not complete: …`.
        detail = " ".join((outcome.error_message or "").split())
        super().__init__(
            f"the {kind} page {params} could not be read: {outcome.kind} "
            f"{outcome.error_code} (HTTP {outcome.http_status}) after {outcome.attempts} attempt(s)"
            + (f": {detail}" if detail else "")
        )

    @property
    def error_code(self) -> str | None:
        return self.outcome.error_code

    @property
    def http_status(self) -> int | None:
        return self.outcome.http_status
