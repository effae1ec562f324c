"""A small client for the sandbox's control API, for tests, benchmarks and demos."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class SandboxControl:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        request = urllib.request.Request(  # noqa: S310 - the sandbox's own URL
            f"{self.url}/_sandbox/{path.lstrip('/')}",
            data=json.dumps(body or {}).encode() if method != "GET" else None,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:  # noqa: S310 - ditto
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise RuntimeError(
                f"sandbox control {method} {path} failed: {exc.code} {detail}"
            ) from exc

    def reset(self, seed: int | None = None) -> None:
        self.call("POST", "reset", {} if seed is None else {"seed": seed})

    def state(self) -> dict[str, Any]:
        return self.call("GET", "state")

    def add_webhook(self, url: str, secret: str, **options: Any) -> dict[str, Any]:
        return self.call("POST", "webhooks", {"url": url, "secret": secret, **options})

    def webhooks(self) -> dict[str, Any]:
        return self.call("GET", "webhooks")

    def open_dispute(
        self, charge: str, reason: str = "general", amount: int | None = None, **options: Any
    ) -> dict[str, Any]:
        """Open a dispute; `network_reason_code="10.4"` (or None) overrides the code the card's
        brand gives the reason."""
        body: dict[str, Any] = {"charge": charge, "reason": reason, **options}
        if amount is not None:
            body["amount"] = amount
        return self.call("POST", "disputes", body)

    def set_dispute_status(
        self, dispute: str, status: str, appeal_eligible: bool | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"status": status}
        if appeal_eligible is not None:
            body["appeal_eligible"] = appeal_eligible
        return self.call("POST", f"disputes/{dispute}/status", body)

    def appeal_dispute(self, dispute: str) -> dict[str, Any]:
        """The network opening an appeal of an appeal-eligible lost dispute."""
        return self.call("POST", f"disputes/{dispute}/appeal", {})

    def smart_submit_dispute(self, dispute: str) -> dict[str, Any]:
        """Stripe's Smart Disputes submitting on its own (refused for a `manual` dispute)."""
        return self.call("POST", f"disputes/{dispute}/smart-submit", {})

    def set_refund_status(
        self, refund: str, status: str, failure_reason: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"status": status}
        if failure_reason is not None:
            body["failure_reason"] = failure_reason
        return self.call("POST", f"refunds/{refund}/status", body)

    def add_fault(self, path: str, kind: str, method: str = "*", **options: Any) -> dict[str, Any]:
        return self.call(
            "POST", "faults", {"path": path, "kind": kind, "method": method, **options}
        )

    def faults(self) -> list[dict[str, Any]]:
        return self.call("GET", "faults")["faults"]

    def clear_faults(self) -> None:
        self.call("DELETE", "faults")

    def readback_lag(self, ms: int) -> None:
        self.call("POST", "readback-lag", {"ms": ms})

    def reference_delay(self, ms: int) -> None:
        """How long after a card refund succeeds its ARN appears (0: at once)."""
        self.call("POST", "reference-delay", {"ms": ms})

    def webhook_behaviour(self, **behaviour: Any) -> dict[str, Any]:
        return self.call("POST", "webhook-behaviour", behaviour)

    def forget(self, object_id: str) -> dict[str, Any]:
        """The object (charge, refund, dispute, PaymentIntent, event, file) vanishes from the
        provider; nothing else changes."""
        return self.call("POST", f"forget/{object_id}")

    def tamper(self, object_id: str, **fields: Any) -> dict[str, Any]:
        """Overwrite top-level fields of the stored object (no event, no other object touched);
        answers the object as the API now shows it."""
        return self.call("POST", f"tamper/{object_id}", fields)

    def seed(self, charges: list[dict[str, Any]], timeout: float = 120.0) -> list[dict[str, Any]]:
        """Make many charges (with their PaymentIntents, refunds and disputes) at once, without
        events: `[{"amount", "currency"?, "metadata"?, "created"?, "refunds"?: [{"amount",
        "metadata"?, "status"?, ...}], "disputes"?: [...]}]` -> per charge, in order, `{"id",
        "payment_intent", "refunds": [ids], "disputes": [ids]}`."""
        answer = self.call("POST", "seed", {"charges": charges}, timeout=timeout)
        created: list[dict[str, Any]] = answer["charges"]
        return created

    def rate_limits(self) -> dict[str, Any]:
        """`{"enabled", "limits", "refused": {"total", "by_endpoint", "by_reason"}, "served":
        {endpoint: {unix second: n}}}` (README: *Rate limits*)."""
        return self.call("GET", "rate-limits")

    def rate_limits_set(self, **figures: Any) -> dict[str, Any]:
        """`enabled=False` lifts Stripe's limits, `enabled=True` restores Stripe's figures; a
        figure (`endpoint_rps=5`, ...) overrides that one. Answers `rate_limits()`."""
        return self.call("POST", "rate-limits", figures)

    def advance_clock(self, seconds: float) -> dict[str, Any]:
        return self.call("POST", "clock", {"advance_s": seconds})
