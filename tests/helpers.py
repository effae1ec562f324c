"""Helpers shared by the tests that talk to the Stripe sandbox."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import stripe

# A PaymentIntent for cards only, confirmed server-side: `payment_method_types` is no longer
# writable at API 2026-09-30.endive, `allowed_payment_method_types` is its replacement, and without
# either Stripe's dynamic payment methods would need a `return_url` to confirm.
CARD_ONLY: dict[str, Any] = {"allowed_payment_method_types": ["card"]}


def paid_charge(client: stripe.StripeClient, amount: int = 10_000, pm: str = "pm_card_visa") -> str:
    """A succeeded charge at the sandbox, made through the SDK."""
    pi = client.v1.payment_intents.create(
        params={
            "amount": amount,
            "currency": "usd",
            "payment_method": pm,
            "confirm": True,
            **CARD_ONLY,
        }
    )
    assert pi.status == "succeeded"
    return str(pi.latest_charge)


def wait_until(predicate: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


class Receiver:
    """A webhook endpoint on a free port that records each delivery (raw body and headers) and
    answers with the statuses it is told to (then 200)."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[bytes, dict[str, str]]] = []
        self.statuses: list[int] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.deliveries.append((body, dict(self.headers)))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(body) for body, _ in self.deliveries]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def settle_runs(*, max_rounds: int = 10) -> dict[int, str]:
    """Drive every PENDING verification run to a verdict now, in this process, through the
    engine's own functions: each round makes every pending run due (its `next_attempt_at` is
    ignored), claims the due runs as the poll does (`runs_claim_due`: leases held by someone else
    are respected) and makes one scheduled attempt on each (`run_attempt`: a fresh readback at
    the sandbox, the verdict recorded and routed as in production). Stops when no run
    is pending or after `max_rounds`. The clock is not moved: inside a run's stale-read window the
    engine holds back FAILED and CONTRADICTED, so such a run stays PENDING (travel past the
    window for those). Returns run id -> verdict for every run that was pending."""
    from django.utils import timezone

    from verification.models import VerificationRun
    from verification.services import run_attempt, runs_claim_due

    seen: set[int] = set()
    for _ in range(max_rounds):
        pending = VerificationRun.objects.filter(verdict="PENDING")
        ids = list(pending.values_list("id", flat=True))
        if not ids:
            break
        seen.update(ids)
        VerificationRun.objects.filter(id__in=ids).update(next_attempt_at=timezone.now())
        claimed = runs_claim_due(limit=len(ids))
        if not claimed:
            break  # every pending run is leased by someone else
        for run_id, token in claimed:
            run_attempt(run_id=run_id, token=token, trigger="poll")
        seen.update(VerificationRun.objects.filter(verdict="PENDING").values_list("id", flat=True))
    return dict(VerificationRun.objects.filter(id__in=seen).values_list("id", "verdict"))


def atomic_blocks_entered(monkeypatch: Any) -> list[int]:
    """A list that grows by one for each `transaction.atomic()` block entered from now on: each
    costs BEGIN and COMMIT round trips of its own, which Django's query log does not show."""
    from django.db import transaction

    entered: list[int] = []
    real = transaction.Atomic.__enter__

    def spy(self: Any) -> None:
        entered.append(1)
        real(self)

    monkeypatch.setattr(transaction.Atomic, "__enter__", spy)
    return entered
