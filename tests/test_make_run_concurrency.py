"""`make run` under load, as its users meet it: `manage.py run_local` on SQLite with kombu's
filesystem broker, a Celery worker and beat, and the Stripe sandbox delivering signed webhooks to
the live server while four buyers' sessions fund, top up, get declined and refund at once.

No request may answer 5xx, a decline is 402 `card_declined`, every webhook delivery is
acknowledged, no process logs `database is locked`, and the ledger is clean afterwards."""

import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import stripe

from tests.helpers import wait_until
from tests.test_smoke_run import ROOT, make_run

CLIENTS = 4
ROUNDS = 5  # per client: 20 creations, 20 top-ups, 20 declines and 20 refunds in all
REQUEST_TIMEOUT_S = 60.0
WORK_TIMEOUT_S = 300.0
SETTLE_TIMEOUT_S = 60.0
BUYER = ("buyer", "vouch-buyer-demo")  # created by run_local (config.settings.local)
ENVELOPES = "/api/v1/escrow/envelopes"
_TIMESTAMP = re.compile(r"^\[?[\d-]+ [\d:,.]+\]?\s*")


@dataclass
class Answer:
    client: int
    what: str
    key: str
    path: str
    body: dict[str, Any]
    status: int
    data: Any


class Buyer:
    """One browser-like session of the demo buyer: allauth login, then JSON POSTs with the CSRF
    token and an Idempotency-Key each."""

    def __init__(self, base: str, number: int) -> None:
        self.base = base
        self.number = number
        self.http = requests.Session()
        self.answers: list[Answer] = []

    def login(self) -> None:
        page = self.http.get(f"{self.base}/accounts/login/", timeout=REQUEST_TIMEOUT_S)
        assert page.status_code == 200, page.text[:500]
        response = self.http.post(
            f"{self.base}/accounts/login/",
            data={
                "login": BUYER[0],
                "password": BUYER[1],
                "csrfmiddlewaretoken": self.http.cookies["csrftoken"],
            },
            allow_redirects=False,
            timeout=REQUEST_TIMEOUT_S,
        )
        assert response.status_code == 302, (response.status_code, response.text[:500])
        me = self.http.get(f"{self.base}/api/v1/me", timeout=REQUEST_TIMEOUT_S)
        assert me.status_code == 200, me.text[:500]

    def post(self, what: str, path: str, body: dict[str, Any], key: str | None = None) -> Answer:
        key = key or f"make-run-{self.number}-{uuid.uuid4()}"
        response = self.http.post(
            f"{self.base}{path}",
            json=body,
            headers={"Idempotency-Key": key, "X-CSRFToken": self.http.cookies["csrftoken"]},
            timeout=REQUEST_TIMEOUT_S,
        )
        try:
            data = response.json()
        except ValueError:
            data = response.text[:500]
        answer = Answer(self.number, what, key, path, body, response.status_code, data)
        self.answers.append(answer)
        return answer

    def work(self, rounds: int) -> None:
        """Each round: fund a new envelope, top it up, meet a decline (on a creation or a top-up,
        in turn), refund what is unspent."""
        for round_ in range(rounds):
            created = self.post(
                "create", ENVELOPES, {"amount_micro": 5_000_000, "payment_method": "pm_card_visa"}
            )
            if created.status not in (200, 201, 202):
                continue
            envelope = created.data["data"]["envelope_id"]
            self.post(
                "top-up",
                f"{ENVELOPES}/{envelope}/top-ups",
                {"amount_micro": 2_000_000, "payment_method": "pm_card_visa"},
            )
            declined = {"amount_micro": 3_000_000, "payment_method": "pm_card_chargeDeclined"}
            if round_ % 2:
                self.post("decline", f"{ENVELOPES}/{envelope}/top-ups", declined)
            else:
                self.post("decline", ENVELOPES, declined)
            self.post("refund", f"{ENVELOPES}/{envelope}/refund", {})

    def replay(self) -> list[tuple[Answer, int, str | None]]:
        """Every request again with its key: the stored answer, marked as a replay."""
        again = []
        for answer in list(self.answers):
            response = self.http.post(
                f"{self.base}{answer.path}",
                json=answer.body,
                headers={
                    "Idempotency-Key": answer.key,
                    "X-CSRFToken": self.http.cookies["csrftoken"],
                },
                timeout=REQUEST_TIMEOUT_S,
            )
            again.append(
                (answer, response.status_code, response.headers.get("Idempotent-Replayed"))
            )
        return again


def _errors_logged(log: str) -> str:
    """The exception lines of the processes' output, counted."""
    lines = [
        _TIMESTAMP.sub("", line).strip()
        for line in log.splitlines()
        if "Error:" in line or "database is locked" in line
    ]
    counts = {line: lines.count(line) for line in lines}
    return "\n".join(f"  {n} x {line}" for line, n in sorted(counts.items())) or "  (none)"


def _summary(answers: list[Answer]) -> str:
    counts: dict[tuple[str, int], int] = {}
    for a in answers:
        counts[(a.what, a.status)] = counts.get((a.what, a.status), 0) + 1
    return ", ".join(f"{what} {status}: {n}" for (what, status), n in sorted(counts.items()))


def test_make_run_serves_concurrent_fundings_declines_and_refunds(tmp_path: Path) -> None:
    var_dir = tmp_path / "var"
    # Without the reloader: an edit elsewhere in the checkout must not drop requests in flight.
    # One buyer sends every request here, faster than a person does: the money throttle (30 a
    # minute by default) is raised, and Stripe's rate limits lifted on both sides (60 payments in
    # two seconds would queue: tests/envelopes/test_waiting_for_room.py and
    # test_make_run_queues_what_stripe_has_no_room_for below), so that what this test measures is
    # SQLite under concurrency.
    lifted = {"VOUCH_THROTTLE_MONEY": "10000/min", "STRIPE_RATE_LIMITS": "off"}
    with make_run(var_dir, noreload=True, extra_env=lifted) as run:
        buyers = [Buyer(run.base, n) for n in range(CLIENTS)]
        for b in buyers:
            b.login()
        failures: list[BaseException] = []

        def work(b: Buyer) -> None:
            try:
                b.work(ROUNDS)
            except BaseException as exc:  # reported below, with the answers so far
                failures.append(exc)

        threads = [threading.Thread(target=work, args=(b,)) for b in buyers]
        started = time.monotonic()
        for t in threads:
            t.start()
        deadline = started + WORK_TIMEOUT_S
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        elapsed = time.monotonic() - started
        assert not any(t.is_alive() for t in threads), "a client is still waiting"
        answers = [a for b in buyers for a in b.answers]
        summary = f"{len(answers)} requests in {elapsed:.1f} s: {_summary(answers)}"
        server_errors = [a for a in answers if a.status >= 500]
        assert not server_errors, (
            f"{len(server_errors)} answered 5xx; {summary}\n"
            + "\n".join(f"  client {a.client} {a.what}: {a.status} {a.data}" for a in server_errors)
            + f"\nerrors logged:\n{_errors_logged(run.log())}"
        )
        assert not failures, f"{failures!r}; {summary}"
        for a in answers:
            if a.what == "decline":
                assert a.status == 402, (a, summary)
                assert a.data["error"]["code"] == "card_declined", a
            else:
                assert a.status in (200, 201, 202), (a, summary)
        assert sum(a.what == "create" for a in answers) == CLIENTS * ROUNDS, summary
        assert sum(a.what == "refund" for a in answers) == CLIENTS * ROUNDS, summary

        # A retry with the same key is answered from what was stored, never 409 or 5xx.
        for b in buyers:
            for answer, status, replayed in b.replay():
                assert (status, replayed) == (answer.status, "true"), (answer, status, replayed)

        # Every event the sandbox emitted reached the live server and was acknowledged.
        def deliveries_done() -> bool:
            hooks = run.sandbox.webhooks()
            return hooks["queued"] == 0 and hooks["in_flight"] == 0

        wait_until(deliveries_done, timeout=SETTLE_TIMEOUT_S, what="webhook deliveries")
        (endpoint,) = run.sandbox.webhooks()["endpoints"]
        assert endpoint["delivered"] > 0, endpoint
        assert endpoint["failed_attempts"] == 0, endpoint
        # Let the worker take the events and beat's polls up before stopping.
        queue = var_dir / "celery" / "queue"
        wait_until(
            lambda: not any(queue.iterdir()), timeout=SETTLE_TIMEOUT_S, what="an empty queue"
        )

    # Nothing any process wrote (web, worker, beat, sandbox) shows a lock it could not take.
    log = run.log()
    assert "database is locked" not in log, _errors_logged(log)
    assert "OperationalError" not in log, _errors_logged(log)
    ledger = subprocess.run(
        [sys.executable, "manage.py", "check_ledger"],
        cwd=ROOT,
        env=run.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ledger.returncode == 0, ledger.stdout + ledger.stderr
    assert f"{CLIENTS * ROUNDS} envelope(s) checked" in ledger.stdout, ledger.stdout


BURST = 10  # refunds per buyer, all at once: 40 in about a second, past Stripe's 25 a second


def test_make_run_queues_what_stripe_has_no_room_for(tmp_path: Path) -> None:
    """Issue 40 under `make run` (SQLite, the filesystem broker, the sandbox at Stripe's documented
    limits): a burst of refunds past 25 a second is answered at once, 200 or 202 with its legs
    queued, never 429 or 5xx; the worker sends the queued legs as room frees; Stripe holds each
    refund once, never answered a 429, and the ledger is clean."""
    var_dir = tmp_path / "var"
    with make_run(var_dir, noreload=True, extra_env={"VOUCH_THROTTLE_MONEY": "10000/min"}) as run:
        buyers = [Buyer(run.base, n) for n in range(CLIENTS)]
        for b in buyers:
            b.login()
        envelopes = []
        for b in buyers:
            created = b.post(
                "create", ENVELOPES, {"amount_micro": 50_000_000, "payment_method": "pm_card_visa"}
            )
            assert created.status == 201, created
            envelopes.append(created.data["data"]["envelope_id"])

        def burst(b: Buyer, envelope: str) -> None:
            for _ in range(BURST):
                b.post("refund", f"{ENVELOPES}/{envelope}/refund", {"amount_micro": 1_000_000})

        threads = [
            threading.Thread(target=burst, args=(b, e))
            for b, e in zip(buyers, envelopes, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=WORK_TIMEOUT_S)
        refunds = [a for b in buyers for a in b.answers if a.what == "refund"]
        summary = _summary(refunds)
        assert len(refunds) == CLIENTS * BURST, summary
        assert {a.status for a in refunds} <= {200, 202}, summary
        queued = [a for a in refunds if a.status == 202]
        assert queued, f"nothing was queued: {summary}"
        assert all(leg["queued"] for a in queued for leg in a.data["data"]["legs"]), summary

        def all_refunded() -> bool:
            for b in buyers:
                for a in b.answers:
                    if a.what != "refund":
                        continue
                    refund = a.data["data"]["refund_id"]
                    now = b.http.get(f"{run.base}/api/v1/escrow/refunds/{refund}", timeout=30)
                    if now.json()["data"]["status"] != "refunded":
                        return False
            return True

        wait_until(all_refunded, timeout=SETTLE_TIMEOUT_S, what="every queued refund sent")
        limits = run.sandbox.rate_limits()
        assert limits["enabled"] is True
        assert limits["refused"]["total"] == 0, limits["refused"]
        sdk = stripe.StripeClient("sk_test_make_run", base_addresses={"api": run.sandbox.url})
        made = sdk.v1.refunds.list(params={"limit": 100}).data
        legs = [refund.metadata["vouch_leg"] for refund in made]
        assert len(legs) == len(set(legs)) == CLIENTS * BURST  # each refund at Stripe once
    log = run.log()
    assert "database is locked" not in log, _errors_logged(log)
    assert "OperationalError" not in log, _errors_logged(log)
    ledger = subprocess.run(
        [sys.executable, "manage.py", "check_ledger"],
        cwd=ROOT,
        env=run.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ledger.returncode == 0, ledger.stdout + ledger.stderr
