"""Soak: random money operations against the whole system under faults and `kill -9`, then proof
that the money is conserved once everything settled.

Everything runs in throw-away stores: a PostgreSQL database (`vouch_soak_<pid>` on the server of
DATABASE_URL, default postgres://postgres@127.0.0.1:5432, migrated, dropped at the end) and a
Celery queue of its own (`soak-<pid>` on Redis database 10, settings `config.settings.bench`), so
concurrent runs never take each other's tasks. Processes, each in its own session:

- `python -m stripe_sandbox --seed S` (faults drawn from its seeded randomness);
- `gunicorn config.wsgi:application` (2 sync workers), the sandbox's webhook endpoint;
- a Celery worker (prefork, 2 processes) and Celery beat (the database scheduler, the project's
  schedules from `setup_periodic_tasks`; `verification.poll` every second and
  `envelopes.resume_stranded` every 10 s instead of 2 s and 30 s, as an operator may tune them).

1. Plan (from `--seed` alone): N operations, operation i for client i mod C, each a fund, top-up,
   debit (staff, bearer token), refund (partial, sub-cent amounts included, or whole) or a
   chargeback move by the buyer's bank (SPEC §18: a chargeback opened on one of the buyer's charges,
   in full or in part, an inquiry, or one of its open disputes won or lost, through the sandbox's
   control API; Vouch learns of it by the event path alone, webhooks and the catch-up), some with
   a declining card, some sent first with a client timeout far too short (then retried with the
   same Idempotency-Key), some abandoned after such a timeout (the request goes on in the server
   beside the client's next operations), some sent once more after their answer (the replay must
   be identical); debits land on any buyer's envelope, concurrently with its owner's operations;
   and K kills, each at an operation index: `kill -9` of gunicorn's whole process group or one of
   its workers, of the Celery worker's whole group or one pool process. Killed groups are started
   again after a seeded pause.
2. Faults: at `--fault-rate` R each, on the provider's write routes (`POST /v1/payment_intents*`,
   `POST /v1/refunds`): `server_error`, `timeout` (longer than the adapter's read timeout),
   `apply_then_drop`, `delay` (also longer than the read timeout: the adapter's retry meets the
   key in use), and `rate_limit`; on its reads: `server_error` and `delay`. Refusals are real:
   a fund or top-up uses a declining test card with probability R (the sandbox stores the decline
   under the key, as Stripe does; its `refuse` fault strikes before the key is looked at, so a
   retry of an applied request could be refused, which Stripe never does: not used). With
   probability R an accepted refund is then failed by the provider (`refund.failed`: Vouch must
   give the leg back, once), and each webhook is delivered twice, or never (the event catch-up,
   every 60 s here, must find it).
3. Clients (threads) run their operations in order; each request is retried with the same key
   after a timeout, a dropped connection (a kill), 409 `idempotency_key_in_use` or 429, for up to
   OP_DEADLINE_S.
4. Settle: kills done and every process up, the faults are lifted; then wait (at most
   `--settle-timeout`) until no refund leg is reserved or unknown, no funding leg pending, no
   verification run undecided and every refund the provider failed released.
5. Checks, each printed: the ledger (`envelopes.selectors.ledger_breaches`); per charge, the
   sandbox's amount and refunded amount against the ledger's (and no succeeded charge the ledger
   does not hold); no two provider refunds with one `metadata[vouch_leg]` and none without it;
   every accepted leg's refund at the provider; no leg left open; every accepted leg's run
   decided, and VERIFIED (or FAILED, released); every refund failed later released; no answer
   500; every replay identical; no open escalation but the exposure of a chargeback; conservation
   (funded = debited + refunded + reserved + unspent + held + charged back, per envelope); every
   dispute's money as Stripe's balance transactions show it (withdrawn, reinstated; held + charged
   back + exposure = withdrawn - reinstated). Then the longest time a leg took to settle (its
   answer recorded; its run's verdict).

Run from the repo root:
    .venv/bin/python bench/soak.py [--operations 1000] [--kills 4] [--clients 4]
        [--fault-rate 0.05] [--seed 1] [--settle-timeout 600] [--keep-db]
Exit status 1 if a check fails; the same --seed replays the same plan (the interleaving of the
threads, and so which requests the faults strike, varies with timing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from signal import SIGKILL, SIGTERM
from types import FrameType
from typing import Any

import requests

REPO = Path(__file__).resolve().parent.parent
# Run as `python bench/soak.py`, sys.path[0] is bench/, where bench/verification.py would shadow
# the project's `verification` package: put the repo root there instead.
if sys.path and Path(sys.path[0]).resolve() == REPO / "bench":
    sys.path[0] = str(REPO)
elif str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.refund_api import (  # noqa: E402 - after the path fix above
    Database,
    bench_database_urls,
    children_of,
    free_port,
    signals_held,
)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/vouch"
SETTINGS = "config.settings.bench"
# The broker: --redis-url, else SOAK_REDIS_URL, else this (its own Redis database).
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/10"
BROKER_URL = os.environ.get("SOAK_REDIS_URL", DEFAULT_BROKER_URL)
STRIPE_KEY = "sk_test_soak"
WEBHOOK_SECRET = "whsec_soak"  # noqa: S105 - a sandbox signing secret, not a credential
ENVELOPES = "/api/v1/escrow/envelopes"
ME = "/api/v1/me"
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 30.0
OP_DEADLINE_S = 180.0  # one operation's retries (a kill's lease must lapse first)
START_TIMEOUT_S = 60.0
PROGRESS_EVERY_S = 10.0
QUEUE_SAMPLE_S = 0.25
MAX_ENVELOPE_MICRO = 5_000_000_000
DECLINING_CARDS = (
    "pm_card_chargeDeclined",
    "pm_card_chargeDeclinedInsufficientFunds",
    "pm_card_chargeDeclinedLostCard",
)
KILL_TARGETS = ("web", "worker", "web-worker", "worker-child")
DISPUTE_MOVES = ("chargeback", "inquiry", "won", "lost")
DISPUTE_OPEN = ("needs_response", "warning_needs_response")
# The adapter's read timeout under the test settings is 0.5 s: these outlast it.
PROVIDER_TIMEOUT_MS = 700
PROVIDER_SLOW_MS = 800
READ_DELAY_MS = 300


def say(message: str) -> None:
    print(f"  .. {message}", flush=True)


# --- the plan -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    index: int
    client: int
    kind: str  # fund, top_up, debit, refund, dispute
    amount_micro: int | None  # None: refund the whole unspent balance
    payment_method: str
    slot: int  # which of the client's envelopes (modulo how many it has then)
    first_timeout_s: float | None  # a client timeout far too short on the first try
    replay: bool  # send it once more after the answer: it must be replayed as it was
    fail_later: bool  # an accepted refund's first leg is then failed by the provider
    abandon: bool  # the client gives up after its short first timeout and goes on
    # A dispute: "chargeback" or "inquiry" opened (`share` % of the charge, 100: in full), or
    # "won" / "lost" for one of the buyer's open disputes (a chargeback opened when it has none).
    dispute: str = ""
    share: int = 100


@dataclass(frozen=True)
class Kill:
    at_op: int
    target: str
    delay_s: float  # after operation `at_op` starts
    down_s: float  # a killed group stays down this long


def plan(
    seed: int, operations: int, clients: int, kills: int, fault_rate: float
) -> tuple[list[Op], list[Kill]]:
    """The operations and the kills, from the seed alone."""
    rng = random.Random(f"{seed}:operations")  # noqa: S311 - a test plan, not a secret
    ops = []
    for index in range(operations):
        draw = rng.random()
        kind = (
            "fund"
            if draw < 0.12
            else "top_up"
            if draw < 0.24
            else "debit"
            if draw < 0.36
            else "dispute"
            if draw < 0.46
            else "refund"
        )
        payment_method = "pm_card_visa"
        amount: int | None
        if kind == "fund":
            amount = rng.randint(20, 400) * 1_000_000 + rng.randint(0, 99) * 10_000
        elif kind == "top_up":
            amount = rng.randint(1, 100) * 1_000_000 + rng.randint(0, 99) * 10_000
        elif kind == "debit":
            amount = rng.randint(1, 2_000) * 10_000 + rng.choice([0, 0, rng.randint(1, 9_999)])
        elif kind == "dispute":
            amount = None
            dispute = rng.choices(DISPUTE_MOVES, weights=(40, 15, 25, 20))[0]
            share = 100 if rng.random() < 0.7 else rng.randint(1, 99)
        elif rng.random() < 0.15:
            amount = None  # the whole unspent balance
        else:
            amount = rng.randint(1, 6_000) * 10_000 + rng.choice([0, 0, rng.randint(1, 9_999)])
        if kind != "dispute":
            dispute, share = "", 100
        if kind in ("fund", "top_up") and rng.random() < fault_rate:
            payment_method = rng.choice(DECLINING_CARDS)
        ops.append(
            Op(
                index=index,
                client=index % clients,
                kind=kind,
                amount_micro=amount,
                payment_method=payment_method,
                slot=rng.randrange(1_000_000),
                first_timeout_s=rng.uniform(0.02, 0.3) if rng.random() < 0.08 else None,
                replay=rng.random() < 0.05,
                fail_later=rng.random() < fault_rate,
                abandon=rng.random() < 0.03,
                dispute=dispute,
                share=share,
            )
        )
    krng = random.Random(f"{seed}:kills")  # noqa: S311
    # The first kills of each kind come first: even two kills hit the web and the worker.
    targets = [*krng.sample(KILL_TARGETS[:2], 2), *krng.sample(KILL_TARGETS[2:], 2)]
    targets += [krng.choice(KILL_TARGETS) for _ in range(max(0, kills - len(targets)))]
    spread = range(min(operations, max(1, operations // 20)), max(operations - 1, 1))
    at = sorted(krng.sample(spread, min(kills, len(spread)))) if kills else []
    kill_plan = [
        Kill(at_op=i, target=targets[n], delay_s=krng.uniform(0, 1.5), down_s=krng.uniform(0.2, 3))
        for n, i in enumerate(at)
    ]
    return ops, kill_plan


def faults(rate: float) -> list[dict[str, Any]]:
    """The sandbox faults, each striking with probability `rate`."""
    if rate <= 0:
        return []
    writes = [("POST", "/v1/payment_intents*"), ("POST", "/v1/refunds")]
    reads = [("GET", "/v1/refunds/*"), ("GET", "/v1/charges/*"), ("GET", "/v1/payment_intents/*")]
    found: list[dict[str, Any]] = []
    for method, path in writes:
        found += [
            {"method": method, "path": path, "kind": "server_error"},
            {"method": method, "path": path, "kind": "timeout", "delay_ms": PROVIDER_TIMEOUT_MS},
            {"method": method, "path": path, "kind": "apply_then_drop"},
            {"method": method, "path": path, "kind": "delay", "delay_ms": PROVIDER_SLOW_MS},
            {"method": method, "path": path, "kind": "rate_limit", "retry_after_s": 1},
        ]
    for method, path in reads:
        found += [
            {"method": method, "path": path, "kind": "server_error"},
            {"method": method, "path": path, "kind": "delay", "delay_ms": READ_DELAY_MS},
        ]
    for fault in found:
        fault["probability"] = rate
    return found


# --- the processes ------------------------------------------------------------------------------


class Service:
    """A process in its own session (so a group kill takes its children too), restartable; its
    output appended to one log file across restarts."""

    def __init__(
        self, name: str, cmd: list[str], env: dict[str, str], log: Path, url: str = ""
    ) -> None:
        self.name, self.cmd, self.env, self.log, self.url = name, cmd, env, log, url
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        with self.log.open("ab") as out:
            out.write(f"\n=== start {self.starts + 1} at {time.strftime('%X')}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(  # noqa: S603 - our own fixed argv
                self.cmd,
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError(f"{self.name} was never started")
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill_group(self) -> None:
        """`kill -9` of the process and all its children at once, as a machine's crash."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, SIGKILL)
        self.proc.wait()

    def kill_child(self, rng: random.Random) -> int | None:
        """`kill -9` of one child (a gunicorn worker, a Celery pool process): its parent
        replaces it."""
        children = sorted(children_of(self.pid))
        if not children:
            return None
        victim = rng.choice(children)
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, SIGKILL)
        return victim

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def wait_for(what: str, ready: Any, service: Service | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if service is not None and not service.alive():
            raise RuntimeError(f"{what} exited:\n{service.tail()}")
        with contextlib.suppress(requests.RequestException):
            if ready():
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not answer within {START_TIMEOUT_S:.0f} s")


@dataclass
class System:
    """The processes: one sandbox, one beat, web nodes (gunicorn masters) and Celery workers;
    one of each unless --topology asks for two nodes and a worker per queue."""

    sandbox: Service
    webs: list[Service]
    workers: list[Service]
    beat: Service
    sandbox_url: str
    worker_processes: int  # pool processes over every worker

    @property
    def bases(self) -> list[str]:
        return [web.url for web in self.webs]

    def web_ready(self, web: Service | None = None) -> None:
        for node in [web] if web is not None else self.webs:
            wait_for(
                node.name,
                lambda node=node: requests.get(node.url + ME, timeout=2).status_code in (401, 403),
                node,
            )

    def all(self) -> list[Service]:
        return [self.beat, *self.workers, *self.webs, self.sandbox]


class Killer(threading.Thread):
    """Carries out the kills in order as the clients reach them; restarts what it killed."""

    def __init__(self, system: System, seed: int) -> None:
        super().__init__(daemon=True, name="killer")
        self.system = system
        self.rng = random.Random(f"{seed}:victims")  # noqa: S311
        self.todo: queue.Queue[Kill | None] = queue.Queue()
        self.done: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        while (kill := self.todo.get()) is not None:
            try:
                self.carry_out(kill)
            except BaseException as exc:  # reported by the main thread
                self.error = exc
                return

    def carry_out(self, kill: Kill) -> None:
        time.sleep(kill.delay_s)
        system = self.system
        if kill.target in ("web", "worker"):
            service = self.rng.choice(system.webs if kill.target == "web" else system.workers)
            service.kill_group()
            time.sleep(kill.down_s)
            service.start()
            if service in system.webs:
                system.web_ready(service)
            what = f"kill -9 {service.name} (group), down {kill.down_s:.1f} s"
        else:
            group = system.webs if kill.target == "web-worker" else system.workers
            service = self.rng.choice(group)
            victim = service.kill_child(self.rng)
            what = f"kill -9 {service.name} child {victim}"
        self.done.append(f"op {kill.at_op}: {what}")

    def finish(self) -> None:
        self.todo.put(None)
        self.join()
        if self.error is not None:
            raise RuntimeError(f"a kill failed: {self.error}") from self.error


# --- the clients --------------------------------------------------------------------------------


@dataclass
class Answer:
    op: Op
    status: int  # 0: no answer before the deadline
    kind: str = ""  # what was sent: the op's kind, or a fund when the buyer had no envelope
    code: str = ""
    body: str = ""
    tries: int = 0
    timeouts: int = 0  # client timeouts (the short first one included)
    dropped: int = 0  # connection refused or reset, or a body cut short: a kill
    in_use: int = 0  # 409 idempotency_key_in_use while the first request still ran
    throttled: int = 0
    seconds: float = 0.0
    key: str = ""
    replayed: bool = False  # the answer carried `Idempotent-Replayed: true`
    # "", "identical" (a stored answer replayed byte for byte), "re-evaluated" (a refusal that
    # was not stored, evaluated again: judged by what the key holds, `refusal_traces`), or what
    # broke the API's promise.
    replay: str = ""
    again: Answer | None = None


@dataclass
class Buyer:
    """One client thread's buyer: its session, the staff token for debits, its envelopes."""

    number: int
    base: str
    session_id: str
    staff_token: str
    seed: int
    sandbox_url: str
    failed_later: set[str]  # provider refunds this soak made fail (shared by the buyers)
    everyone: list[str]  # every buyer's envelopes, for the staff's debits (shared)
    http: requests.Session = field(default_factory=requests.Session)
    staff: requests.Session = field(default_factory=requests.Session)
    envelopes: list[list[Any]] = field(default_factory=list)  # [public id, committed micro]
    disputes: dict[str, str] = field(default_factory=dict)  # this buyer's disputes: id -> status
    disputed_charges: set[str] = field(default_factory=set)

    def login(self) -> None:
        response = requests.get(
            self.base + ME, cookies={"sessionid": self.session_id}, timeout=READ_TIMEOUT_S
        )
        token = response.cookies.get("csrftoken")
        if response.status_code != 200 or not token:
            raise RuntimeError(f"GET {ME} answered {response.status_code}: {response.text[:300]}")
        self.http.headers.update(
            {"Cookie": f"sessionid={self.session_id}; csrftoken={token}", "X-CSRFToken": token}
        )
        self.staff.headers["Authorization"] = f"Bearer {self.staff_token}"

    def request_of(self, op: Op) -> tuple[str, requests.Session, str, dict[str, Any]]:
        """What `op` sends, given the envelopes this buyer holds now (a top-up that would pass
        the envelope's cap, or any operation before the first envelope, becomes a fund)."""
        kind = op.kind
        envelope = self.envelopes[op.slot % len(self.envelopes)] if self.envelopes else None
        if envelope is None or (
            kind == "top_up" and envelope[1] + (op.amount_micro or 0) > MAX_ENVELOPE_MICRO
        ):
            kind = "fund"
        if kind == "fund" or envelope is None:
            amount = op.amount_micro if op.kind in ("fund", "top_up") else 50_000_000
            body = {"amount_micro": amount, "payment_method": op.payment_method}
            return "fund", self.http, ENVELOPES, body
        path = f"{ENVELOPES}/{envelope[0]}"
        if kind == "top_up":
            body = {"amount_micro": op.amount_micro, "payment_method": op.payment_method}
            return kind, self.http, f"{path}/top-ups", body
        if kind == "debit":  # on any buyer's envelope: concurrent with its owner's operations
            path = f"{ENVELOPES}/{self.everyone[op.slot % len(self.everyone)]}"
            body = {"amount_micro": op.amount_micro, "reference": f"soak-{op.index}"}
            return kind, self.staff, f"{path}/debits", body
        body = {} if op.amount_micro is None else {"amount_micro": op.amount_micro}
        return kind, self.http, f"{path}/refund", body

    def run(self, op: Op) -> Answer:
        if op.kind == "dispute" and self.envelopes:
            return self.dispute(op)
        kind, session, path, body = self.request_of(op)
        key = f"soak-{self.seed}-{op.index}"
        if op.abandon:  # it goes on in the server, beside this client's next operations
            answer = self.send(op, session, path, body, key, 0.02 + op.slot % 200 / 1000, True)
        else:
            answer = self.send(op, session, path, body, key, op.first_timeout_s)
        answer.kind = kind
        if 200 <= answer.status < 300:
            data = _json(answer.body).get("data") or {}
            if path == ENVELOPES and data.get("envelope_id"):
                self.envelopes.append([data["envelope_id"], body["amount_micro"]])
                self.everyone.append(data["envelope_id"])
            elif path.endswith("/top-ups"):
                for envelope in self.envelopes:
                    if path.startswith(f"{ENVELOPES}/{envelope[0]}/"):
                        envelope[1] += body["amount_micro"]
        if op.fail_later and kind == "refund" and answer.status == 200:
            self.fail_first_leg(answer)
        if op.replay and answer.status > 0:
            answer.again = again = self.send(op, session, path, body, key, None)
            answer.replay = replay_verdict(answer, again)
        return answer

    def dispute(self, op: Op) -> Answer:
        """The buyer's bank moves (SPEC §18), at the sandbox: a chargeback or an inquiry opened on
        one of this buyer's charges, or one of its open disputes won or lost. Vouch hears of it
        only as Stripe tells it: the events (webhooks, duplicated or dropped, and the catch-up)."""
        started = time.monotonic()
        move = op.dispute
        open_ = [d for d, status in self.disputes.items() if status in DISPUTE_OPEN]
        if move in ("won", "lost") and not open_:
            move = "chargeback"
        answer = Answer(op, 0, kind=f"dispute {move}", tries=1)
        control = f"{self.sandbox_url}/_sandbox/disputes"
        if move in ("won", "lost"):
            dispute_id = open_[op.slot % len(open_)]
            response = requests.post(
                f"{control}/{dispute_id}/status", json={"status": move}, timeout=READ_TIMEOUT_S
            )
        else:
            charges = self.charges(self.envelopes[op.slot % len(self.envelopes)][0])
            if not charges:  # its funding has not succeeded (yet): nothing to dispute
                answer.status, answer.code = 409, "no_charge"
                answer.seconds = time.monotonic() - started
                return answer
            # A charge has at most one dispute: one not disputed yet, if the envelope has one (a
            # second dispute on a charge is refused, as Stripe refuses it).
            fresh = [c for c in charges if c[0] not in self.disputed_charges] or charges
            charge = fresh[op.slot % len(fresh)]
            body: dict[str, Any] = {"charge": charge[0], "reason": "fraudulent"}
            if op.share < 100:
                body["amount"] = max(1, charge[1] * op.share // 100)
            if move == "inquiry":
                body["status"] = "warning_needs_response"
            response = requests.post(control, json=body, timeout=READ_TIMEOUT_S)
        answer.status = response.status_code
        if response.ok:
            dispute = response.json()
            self.disputes[str(dispute["id"])] = str(dispute["status"])
            self.disputed_charges.add(str(dispute["charge"]))
        else:  # a charge has at most one dispute: a second one is refused
            answer.code = "refused"
        answer.body = response.text[:300]
        answer.seconds = time.monotonic() - started
        return answer

    def charges(self, envelope_id: str) -> list[tuple[str, int]]:
        """The envelope's succeeded charges and their amounts in cents, as the buyer's API shows
        them (retried through a kill of the web)."""
        for _ in range(30):
            try:
                response = self.http.get(
                    f"{self.base}{ENVELOPES}/{envelope_id}", timeout=(CONNECT_TIMEOUT_S, 10)
                )
            except requests.RequestException:
                time.sleep(1)
                continue
            if response.status_code in (502, 503, 504):
                time.sleep(1)
                continue
            legs = (_json(response.text).get("data") or {}).get("funding_legs") or []
            return [
                (str(leg["charge"]), int(leg["amount_micro"]) // 10_000)
                for leg in legs
                if leg.get("status") == "succeeded" and leg.get("charge")
            ]
        return []

    def fail_first_leg(self, answer: Answer) -> None:
        """The provider fails an accepted refund after the fact (a closed card account):
        `refund.failed` follows; Vouch must give the leg's money back, once."""
        legs = (_json(answer.body).get("data") or {}).get("legs") or []
        accepted = [leg for leg in legs if leg.get("outcome") == "accepted"]
        if not accepted:
            return
        refund_id = str(accepted[0]["provider_refund_id"])
        response = requests.post(
            f"{self.sandbox_url}/_sandbox/refunds/{refund_id}/status",
            json={"status": "failed", "failure_reason": "expired_or_canceled_card"},
            timeout=READ_TIMEOUT_S,
        )
        if response.ok:
            self.failed_later.add(refund_id)

    def send(
        self,
        op: Op,
        session: requests.Session,
        path: str,
        body: dict[str, Any],
        key: str,
        first_timeout: float | None,
        abandon: bool = False,
    ) -> Answer:
        """One request with its key, retried as a careful client does until a final answer;
        `abandon`: not retried after a timeout (status -1)."""
        answer = Answer(op, 0, key=key)
        started = time.monotonic()
        timeout = first_timeout or READ_TIMEOUT_S
        pause = 0.2
        while time.monotonic() - started < OP_DEADLINE_S:
            answer.tries += 1
            try:
                response = session.post(
                    self.base + path,
                    json=body,
                    headers={"Idempotency-Key": key},
                    timeout=(CONNECT_TIMEOUT_S, timeout),
                )
            except requests.Timeout:
                answer.timeouts += 1
                if abandon:
                    answer.status = -1
                    break
                timeout = READ_TIMEOUT_S
                continue  # at once: the first request may still hold the key (409, below)
            except requests.RequestException:
                # Refused or reset (a kill), or a body cut short by a worker killed while it sent
                # it (ChunkedEncodingError, IncompleteRead): the outcome is unknown, so the same
                # request goes again under the same key.
                answer.dropped += 1
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
                continue
            code = str((_json(response.text).get("error") or {}).get("code") or "")
            if response.status_code == 409 and code == "idempotency_key_in_use":
                answer.in_use += 1
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
                continue
            if response.status_code == 429:
                answer.throttled += 1
                time.sleep(float(response.headers.get("Retry-After") or 1))
                continue
            answer.status, answer.code, answer.body = response.status_code, code, response.text
            answer.replayed = response.headers.get("Idempotent-Replayed") == "true"
            break
        answer.seconds = time.monotonic() - started
        return answer


def replay_verdict(first: Answer, again: Answer) -> str:
    """What the API promises of a request sent again under its key (SPEC §4): a stored answer
    comes back byte for byte, marked `Idempotent-Replayed`; a refusal that changed nothing was not
    stored, so it is evaluated again (a concurrent debit may change the details, or even let it
    through): that is judged afterwards by what the key holds (`refusal_traces`)."""
    if again.status <= 0:
        return f"{first.status} then no answer"
    if (again.status, again.body) == (first.status, first.body):
        return "identical"
    if first.status == 202:  # in progress: the key's answer becomes the operation's outcome
        return f"202 in progress, then {again.status}"
    if again.replayed:
        return f"replayed {again.status} differs from {first.status}: {again.body[:200]}"
    if 400 <= first.status < 500 and not first.replayed:
        return "re-evaluated"
    return f"{first.status} not replayed: {again.status} {again.body[:200]}"


REPLAY_KEPT = ("identical", "re-evaluated", "202 in progress")


def _json(text: str) -> dict[str, Any]:
    try:
        value = requests.models.complexjson.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def drive(
    ops: list[Op], kills: list[Kill], buyers: list[Buyer], killer: Killer
) -> tuple[list[Answer], list[BaseException]]:
    """Every buyer runs its operations in order, each in its own thread; a kill is handed to the
    killer when its operation starts. Progress: a tqdm bar on a terminal, lines otherwise. A
    client that dies is reported with the answers (the rest still settle and are checked)."""
    from tqdm import tqdm

    kill_at = {kill.at_op: kill for kill in kills}
    answers: list[Answer] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    bar = tqdm(total=len(ops), desc="operations", unit="op", disable=None, smoothing=0.05)

    def loop(buyer: Buyer) -> None:
        try:
            for op in ops[buyer.number :: len(buyers)]:
                if op.index in kill_at:
                    killer.todo.put(kill_at[op.index])
                answer = buyer.run(op)
                with lock:
                    answers.append(answer)
                    bar.update(1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(b,), daemon=True) for b in buyers]
    started = last = time.monotonic()
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        time.sleep(0.5)
        if bar.disable and time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            with lock:
                done = len(answers)
            say(
                f"operations: {done}/{len(ops)} in {last - started:.0f} s, kills {len(killer.done)}"
            )
    bar.close()
    return answers, errors


# --- settling and checks ------------------------------------------------------------------------


def outstanding(failed_later: set[str], sandbox_url: str = "") -> dict[str, int]:
    from envelopes.models import FundingLeg, FundingStatus, LegOutcome, RefundLeg
    from verification.models import VerificationRun

    return {
        "disputes unfollowed": len(disputes_unfollowed(sandbox_url)) if sandbox_url else 0,
        "failed refunds unreleased": RefundLeg.objects.filter(
            provider_refund_id__in=failed_later, released=False
        ).count(),
        "open refund legs": RefundLeg.objects.filter(
            outcome__in=(LegOutcome.RESERVED, LegOutcome.UNKNOWN)
        ).count(),
        "pending funding legs": FundingLeg.objects.filter(status=FundingStatus.PENDING).count(),
        "undecided runs": VerificationRun.objects.filter(verdict="PENDING").count(),
    }


def settle(
    timeout_s: float, failed_later: set[str], queue_name: str, sandbox_url: str = ""
) -> tuple[bool, float, dict[str, int]]:
    """Wait until nothing is outstanding, at most `timeout_s`, showing what is left."""
    from django.db import connection
    from tqdm import tqdm

    started = last = time.monotonic()
    left = outstanding(failed_later, sandbox_url)
    bar = tqdm(total=sum(left.values()), desc="settling", unit="item", disable=None)
    while True:
        remaining = sum(left.values())
        bar.total = max(bar.total, bar.n + remaining)
        bar.update(max(0, bar.total - remaining - bar.n))
        bar.set_postfix({k.split()[-2]: v for k, v in left.items()}, refresh=True)
        elapsed = time.monotonic() - started
        if bar.disable and (elapsed - (last - started) >= PROGRESS_EVERY_S or not remaining):
            last = time.monotonic()
            say(
                f"settling, {elapsed:.0f} s: "
                + ", ".join(f"{v} {k}" for k, v in left.items())
                + f"; {queue_depth(queue_name)} tasks queued"
            )
        if not remaining or elapsed >= timeout_s:
            bar.close()
            return not remaining, elapsed, left
        time.sleep(1)
        connection.close()  # a fresh snapshot and no idle transaction on the server
        left = outstanding(failed_later, sandbox_url)


@dataclass
class Check:
    name: str
    ok: bool
    figure: str


def provider_refunds(sandbox_url: str) -> list[dict[str, Any]]:
    """Every refund the sandbox holds, through its Stripe API, 100 a page."""
    refunds: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 100}
    while True:
        response = requests.get(
            f"{sandbox_url}/v1/refunds",
            params=params,
            headers={"Authorization": f"Bearer {STRIPE_KEY}"},
            timeout=READ_TIMEOUT_S,
        )
        response.raise_for_status()
        page = response.json()
        refunds += page["data"]
        if not page.get("has_more") or not page["data"]:
            return refunds
        params["starting_after"] = page["data"][-1]["id"]


def provider_disputes(sandbox_url: str) -> list[dict[str, Any]]:
    """Every dispute the sandbox holds, through its Stripe API, 100 a page (each with its
    `balance_transactions`, always expanded)."""
    disputes: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 100}
    while True:
        response = requests.get(
            f"{sandbox_url}/v1/disputes",
            params=params,
            headers={"Authorization": f"Bearer {STRIPE_KEY}"},
            timeout=READ_TIMEOUT_S,
        )
        response.raise_for_status()
        page = response.json()
        disputes += page["data"]
        if not page.get("has_more") or not page["data"]:
            return disputes
        params["starting_after"] = page["data"][-1]["id"]


def moved(dispute: dict[str, Any]) -> tuple[int, int]:
    """What a dispute's balance transactions withdrew and gave back, in micro-dollars (Stripe's
    reporting categories `dispute` and `dispute_reversal`; the fee apart)."""
    withdrawn = reinstated = 0
    for txn in dispute.get("balance_transactions") or ():
        if txn.get("reporting_category") == "dispute":
            withdrawn -= int(txn["amount"])
        elif txn.get("reporting_category") == "dispute_reversal":
            reinstated += int(txn["amount"])
    return withdrawn * 10_000, reinstated * 10_000


def disputes_unfollowed(sandbox_url: str) -> list[str]:
    """The disputes whose money (or last status) the ledger does not show as Stripe does yet:
    a withdrawal with no funds row, a different amount withdrawn or reinstated, another status;
    an inquiry (nothing withdrawn) has no row."""
    from django.db import connection

    from envelopes.models import DisputeFunds

    connection.close()  # a fresh snapshot
    rows = {f.provider_dispute_id: f for f in DisputeFunds.objects.all()}
    found = []
    for dispute in provider_disputes(sandbox_url):
        withdrawn, reinstated = moved(dispute)
        funds = rows.get(dispute["id"])
        if not withdrawn:
            if funds is not None and funds.withdrawn_micro:
                found.append(f"{dispute['id']}: nothing withdrawn at Stripe, a hold here")
            continue
        if funds is None:
            found.append(f"{dispute['id']}: withdrawn at Stripe, not followed here")
            continue
        if (funds.withdrawn_micro, funds.reinstated_micro, funds.provider_status) != (
            withdrawn,
            reinstated,
            dispute["status"],
        ):
            found.append(
                f"{dispute['id']}: Stripe {dispute['status']} withdrew {withdrawn} reinstated "
                f"{reinstated}; here {funds.provider_status} {funds.withdrawn_micro} "
                f"{funds.reinstated_micro}"
            )
    return found


def dispute_checks(sandbox_url: str) -> list[Check]:
    """Conservation with held and charged-back money (SPEC §18), and each dispute's money as
    Stripe's balance transactions show it."""
    from django.db.models import F, Sum

    from envelopes.models import DisputeFunds, DisputeFundsStatus, Envelope

    found: list[Check] = []
    names = ("funded", "debited", "refunded", "reserved", "unspent", "held", "charged_back")
    columns = dict(
        zip(
            names,
            (
                "total_funded_micro",
                "total_debited_micro",
                "total_refunded_micro",
                "reserved_micro",
                "unspent_micro",
                "held_micro",
                "charged_back_micro",
            ),
            strict=True,
        )
    )
    unbalanced = Envelope.objects.exclude(
        total_funded_micro=F("total_debited_micro")
        + F("total_refunded_micro")
        + F("reserved_micro")
        + F("unspent_micro")
        + F("held_micro")
        + F("charged_back_micro")
    )
    totals = Envelope.objects.aggregate(**{n: Sum(c) for n, c in columns.items()})
    found.append(
        Check(
            "conservation: funded = debited + refunded + reserved + unspent + held + charged back",
            not unbalanced.exists(),
            f"{unbalanced.count()} envelopes differ; "
            + ", ".join(f"{n.replace('_', ' ')} ${(totals[n] or 0) / 1e6:,.2f}" for n in names),
        )
    )

    disputes = provider_disputes(sandbox_url)
    rows = {f.provider_dispute_id: f for f in DisputeFunds.objects.all()}
    unfollowed = disputes_unfollowed(sandbox_url)
    wrong = []
    sums = Counter[str]()
    for dispute in disputes:
        withdrawn, reinstated = moved(dispute)
        sums["withdrawn"] += withdrawn
        sums["reinstated"] += reinstated
        funds = rows.get(dispute["id"])
        if funds is None:
            continue
        status = dispute["status"]
        # What Stripe kept is held, charged back or the platform's exposure: nothing more, nothing
        # less, and never more than the charge had unspent (exposure is the rest).
        if funds.held_micro + funds.charged_back_micro + funds.exposure_micro != (
            withdrawn - reinstated
        ):
            wrong.append(
                f"{dispute['id']}: held {funds.held_micro} + charged back "
                f"{funds.charged_back_micro} + exposure {funds.exposure_micro} != withdrawn "
                f"{withdrawn} - reinstated {reinstated}"
            )
        if status == "won" and (funds.held_micro or funds.charged_back_micro):
            wrong.append(f"{dispute['id']}: won, yet {funds.held_micro} held")
        if status == "lost" and (
            funds.held_micro or funds.status != DisputeFundsStatus.CHARGED_BACK
        ):
            wrong.append(f"{dispute['id']}: lost, yet {funds.held_micro} held ({funds.status})")
        if status in DISPUTE_OPEN and funds.charged_back_micro:
            wrong.append(f"{dispute['id']}: open, yet {funds.charged_back_micro} charged back")
        for name in ("held_micro", "charged_back_micro", "exposure_micro", "fees_micro"):
            sums[name] += getattr(funds, name)
    statuses = Counter(d["status"] for d in disputes)
    kinds = Counter(d["payment_method_details"]["card"]["case_type"] for d in disputes)
    found.append(
        Check(
            "disputes: the ledger follows Stripe's balance transactions",
            not unfollowed and not wrong,
            f"{len(disputes)} disputes ({dict(kinds)}; {dict(statuses)}), {len(rows)} with money; "
            f"Stripe withdrew ${sums['withdrawn'] / 1e6:,.2f}, reinstated "
            f"${sums['reinstated'] / 1e6:,.2f}; held ${sums['held_micro'] / 1e6:,.2f}, charged "
            f"back ${sums['charged_back_micro'] / 1e6:,.2f}, exposure "
            f"${sums['exposure_micro'] / 1e6:,.2f}, fees ${sums['fees_micro'] / 1e6:,.2f}"
            + "".join(f"; {d}" for d in [*unfollowed, *wrong][:5]),
        )
    )
    return found


def checks(sandbox_url: str, answers: list[Answer], failed_later: set[str]) -> list[Check]:
    from envelopes.models import (
        MICRO_PER_CENT,
        DisputeFunds,
        Envelope,
        FundingLeg,
        FundingStatus,
        LegOutcome,
        RefundLeg,
    )
    from envelopes.selectors import ledger_breaches
    from verification.models import Escalation, VerificationRun

    found: list[Check] = []
    breaches = ledger_breaches()
    found.append(
        Check(
            "ledger (check_ledger)",
            not breaches,
            f"{len(breaches)} breaches over {Envelope.objects.count()} envelopes"
            + "".join(
                f"; {b.envelope} {b.balance}: stored {b.stored}, journal "
                f"{b.from_journal}, legs {b.from_legs}"
                for b in breaches[:5]
            ),
        )
    )

    state = requests.get(f"{sandbox_url}/_sandbox/state", timeout=READ_TIMEOUT_S).json()
    charges: dict[str, dict[str, Any]] = state["charges"]
    legs = {leg.charge_id: leg for leg in FundingLeg.objects.exclude(charge_id="")}
    differ = []
    for charge_id, charge in charges.items():
        leg = legs.get(charge_id)
        if charge["status"] != "succeeded":
            if leg is not None and leg.status == FundingStatus.SUCCEEDED:
                differ.append(f"{charge_id} {charge['status']} at the provider, funded here")
            continue
        if leg is None or leg.status != FundingStatus.SUCCEEDED:
            differ.append(f"{charge_id} succeeded at the provider, not funded here")
            continue
        if charge["amount"] * MICRO_PER_CENT != leg.amount_micro:
            differ.append(f"{charge_id} amount {charge['amount']} c, leg {leg.amount_micro} micro")
        if charge["amount_refunded"] * MICRO_PER_CENT != leg.refunded_micro:
            differ.append(
                f"{charge_id} refunded {charge['amount_refunded']} c at the provider, "
                f"{leg.refunded_micro} micro here"
            )
    missing = [c for c in legs if c not in charges]
    differ += [f"{c} funded here, unknown to the provider" for c in missing]
    refunded_c = sum(c["amount_refunded"] for c in charges.values())
    found.append(
        Check(
            "per charge: provider refunded = ledger",
            not differ,
            f"{len(differ)} differ of {len(charges)} charges (${refunded_c / 100:,.2f} refunded)"
            + "".join(f"; {d}" for d in differ[:5]),
        )
    )

    refunds = provider_refunds(sandbox_url)
    by_leg = Counter(str((r.get("metadata") or {}).get("vouch_leg") or "") for r in refunds)
    shared = {leg: n for leg, n in by_leg.items() if leg and n > 1}
    foreign = by_leg.get("", 0)
    found.append(
        Check(
            "provider refunds sharing a vouch_leg",
            not shared and not foreign,
            f"{len(shared)} legs with more than one refund, {foreign} refunds without vouch_leg "
            f"(of {len(refunds)} refunds)"
            + "".join(f"; {leg} x{n}" for leg, n in list(shared.items())[:5]),
        )
    )
    live = RefundLeg.objects.filter(outcome=LegOutcome.ACCEPTED, released=False)
    held = {r["id"] for r in refunds if r.get("status") not in ("failed", "canceled")}
    absent = [
        leg.public_id
        for leg in live.only("public_id", "provider_refund_id")
        if leg.provider_refund_id not in held
    ]
    found.append(
        Check(
            "accepted legs held by the provider",
            not absent,
            f"{live.count() - len(absent)} of {live.count()}"
            + (f"; missing {absent[:5]}" if absent else ""),
        )
    )

    open_refund = RefundLeg.objects.filter(outcome__in=(LegOutcome.RESERVED, LegOutcome.UNKNOWN))
    pending_funding = FundingLeg.objects.filter(status=FundingStatus.PENDING)
    found.append(
        Check(
            "legs left open",
            not open_refund.exists() and not pending_funding.exists(),
            f"{open_refund.count()} refund legs reserved/unknown, {pending_funding.count()} "
            f"funding legs pending",
        )
    )

    accepted = RefundLeg.objects.filter(outcome=LegOutcome.ACCEPTED)
    verdicts = Counter(accepted.values_list("verification_run__verdict", flat=True).order_by())
    charge_verdicts = Counter(
        VerificationRun.objects.filter(contract_id="stripe.charge.succeeded")
        .values_list("verdict", flat=True)
        .order_by()
    )
    undecided = verdicts.get("PENDING", 0) + verdicts.get(None, 0)
    # A leg the provider failed later may have been decided FAILED (and released) instead.
    live_verdicts = Counter(live.values_list("verification_run__verdict", flat=True).order_by())
    bad = sum(n for v, n in live_verdicts.items() if v not in ("VERIFIED", "PENDING", None))
    bad_charges = sum(n for v, n in charge_verdicts.items() if v != "VERIFIED")
    found.append(
        Check(
            "accepted legs' runs decided",
            not undecided,
            f"{accepted.count() - undecided} of {accepted.count()} decided",
        )
    )
    found.append(
        Check(
            "verdicts all VERIFIED",
            not bad and not bad_charges,
            f"refund legs {dict(verdicts)} ({bad} not VERIFIED among the unreleased); funding "
            f"charges {dict(charge_verdicts)}",
        )
    )
    failed_legs = RefundLeg.objects.filter(provider_refund_id__in=failed_later)
    unreleased = failed_legs.filter(released=False).count()
    found.append(
        Check(
            "refunds failed later by the provider: released",
            not unreleased,
            f"{failed_legs.count() - unreleased} of {len(failed_later)} released",
        )
    )

    errors = [a for a in answers if a.status == 500]
    statuses = Counter(
        f"{a.status} {a.code}".strip() for a in answers if a.status >= 500 or a.status == 0
    )
    found.append(
        Check(
            "answers 500 / no answer within the deadline",
            not errors and not statuses.get("0"),
            f"{len(errors)} / {statuses.get('0', 0)}; 5xx by code {dict(statuses)}",
        )
    )
    replays = [a for a in answers if a.replay]
    broken = [a for a in replays if not a.replay.startswith(REPLAY_KEPT)]
    evaluated = [a for a in replays if a.replay == "re-evaluated"]
    traces = refusal_traces(evaluated)
    found.append(
        Check(
            "replays as promised (stored: byte for byte; refusals: nothing kept)",
            not broken and not traces,
            f"{sum(a.replay == 'identical' for a in replays)} replayed identical, "
            f"{len(evaluated)} refusals evaluated again ({len(traces)} left a trace), "
            f"{len(broken)} broken of {len(replays)}"
            + "".join(f"; op {a.op.index}: {a.replay}" for a in broken[:3])
            + "".join(f"; {t}" for t in traces[:3]),
        )
    )

    # A chargeback that took more than its charge had unspent is a person's case (SPEC §18):
    # the one escalation expected to stay open.
    exposures = set(
        DisputeFunds.objects.filter(exposure_micro__gt=0, escalation__isnull=False).values_list(
            "escalation_id", flat=True
        )
    )
    open_escalations = Escalation.objects.filter(status="open")
    escalations = Counter(
        open_escalations.exclude(pk__in=exposures).values_list("verdict_class", flat=True)
    )
    found.append(
        Check(
            "open escalations (but a chargeback's exposure)",
            not escalations,
            f"{dict(escalations) or 0}; {open_escalations.filter(pk__in=exposures).count()} "
            "exposure escalations open",
        )
    )
    found += dispute_checks(sandbox_url)
    return found


def refusal_traces(evaluated: list[Answer]) -> list[str]:
    """A refusal is not stored (SPEC §4): what its key holds afterwards is only what the request
    sent again made of it: nothing if that was refused too, else its own answer."""
    from core.models import IdempotencyRecord

    found = []
    for answer in evaluated:
        again = answer.again
        kept = list(IdempotencyRecord.objects.filter(key=answer.key))
        if again is None or not 200 <= again.status < 300:
            if kept:
                found.append(f"op {answer.op.index}: refused twice, yet its key holds an answer")
        elif len(kept) != 1 or kept[0].response_body != again.body:
            found.append(f"op {answer.op.index}: its key does not hold the second answer")
    return found


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `share` of them at or
    below it."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * share // 1))  # ceil(n * share), at least 1
    return ordered[int(rank) - 1]


def distribution(values: list[float]) -> str:
    if not values:
        return "-"
    return (
        f"p50 {percentile(values, 0.5):.1f} s, p95 {percentile(values, 0.95):.1f} s, "
        f"max {max(values):.1f} s (n {len(values)})"
    )


@dataclass
class Latencies:
    answer_s: list[float]  # a refund leg: reserved, then its answer recorded
    verdict_s: list[float]  # an accepted leg's run: begun with the leg's answer, then its verdict
    funding_s: list[float]  # a funding leg: created, then funded
    contract_min_s: float  # the refund contract's own minimum: initial delay + stale-read window


def latencies() -> Latencies:
    from envelopes.models import FundingLeg, LegOutcome, RefundLeg
    from verification.contracts import get_contract

    answer_s = [
        (d - r).total_seconds()
        for d, r in RefundLeg.objects.exclude(decided_at=None).values_list(
            "decided_at", "reserved_at"
        )
    ]
    verdict_s = [
        (d - c).total_seconds()
        for d, c in RefundLeg.objects.filter(outcome=LegOutcome.ACCEPTED)
        .exclude(verification_run__decided_at=None)
        .values_list("verification_run__decided_at", "verification_run__created_at")
    ]
    funding_s = [
        (d - c).total_seconds()
        for d, c in FundingLeg.objects.exclude(funded_at=None).values_list(
            "funded_at", "created_at"
        )
    ]
    timing = get_contract("stripe.refund.created").timing
    minimum = (timing.initial_delay_ms + timing.stale_read_window_ms) / 1000
    return Latencies(answer_s, verdict_s, funding_s, minimum)


class QueueWatch(threading.Thread):
    """Samples the depth of this run's Celery queues (the default and the money queue) every
    QUEUE_SAMPLE_S until stopped: the deepest, and when."""

    def __init__(self, queues: list[str]) -> None:
        super().__init__(daemon=True, name="queue-watch")
        self.queues = queues
        self.deepest = 0
        self.deepest_at = 0.0
        self.deepest_tasks: Counter[str] = Counter()  # what the deepest queue held
        self.samples = 0
        self.began = time.monotonic()
        self.stopped = threading.Event()

    def run(self) -> None:
        import redis

        client = redis.Redis.from_url(BROKER_URL)
        while not self.stopped.wait(QUEUE_SAMPLE_S):
            try:
                depth = sum(int(client.llen(name)) for name in self.queues)
            except redis.RedisError:
                continue
            self.samples += 1
            if depth > self.deepest:
                self.deepest, self.deepest_at = depth, time.monotonic() - self.began
                with contextlib.suppress(redis.RedisError, ValueError, KeyError):
                    self.deepest_tasks = Counter(
                        json.loads(raw)["headers"]["task"]
                        for name in self.queues
                        for raw in client.lrange(name, 0, -1)
                    )

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)


# --- setup --------------------------------------------------------------------------------------


def django_setup(clients: int) -> tuple[list[str], str]:
    """Migrate, install the schedules (poll every second, resume every 10 s), create the buyers
    (logged in: their session ids) and a staff user allowed to debit (a bearer token)."""
    import django

    django.setup()
    from django.contrib.auth.models import Permission
    from django.core.management import call_command
    from django.test import Client
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    from accounts.models import User
    from accounts.services import api_token_issue, email_address_verify

    started = time.monotonic()
    call_command("migrate", verbosity=0)
    call_command("setup_periodic_tasks", stdout=open(os.devnull, "w"))  # noqa: SIM115
    tuned = (
        ("verification.poll", 1),
        ("envelopes.resume_stranded", 10),
        ("reconciliation.catch_up", 60),
    )
    for task, seconds in tuned:
        every, _ = IntervalSchedule.objects.get_or_create(
            every=seconds, period=IntervalSchedule.SECONDS
        )
        PeriodicTask.objects.filter(task=task).update(interval=every)
    say(f"migrated and scheduled in {time.monotonic() - started:.1f} s")
    sessions = []
    for number in range(clients):
        user = User.objects.create_user(username=f"soak_buyer_{number}", password=None)
        # Moving money needs a verified e-mail address.
        email_address_verify(user=user, email=f"soak_buyer_{number}@example.test")
        client = Client()
        client.force_login(user)
        sessions.append(client.cookies["sessionid"].value)
    staff = User.objects.create_user(username="soak_staff", password=None, is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="add_debit"))
    _, token = api_token_issue(user=staff, name="soak")
    return sessions, token


def system_start(
    database_url: str, queue_name: str, seed: int, logs: Path, options: argparse.Namespace
) -> tuple[System, dict[str, str]]:
    """The processes, not started yet. One web node and one worker on every queue; with
    `options.topology` two web nodes (gunicorn masters on two ports, ASGI with uvicorn workers
    as in production, each with its own Prometheus folder) and one worker per queue (the money
    queue, and everything else)."""
    sandbox_port = options.sandbox_port or free_port()
    sandbox_url = f"http://127.0.0.1:{sandbox_port}"
    env = dict(os.environ)
    env.pop("VOUCH_CRASH_AT", None)  # a test-only crash point must never fire here
    env.update(
        DJANGO_SETTINGS_MODULE=SETTINGS,
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=BROKER_URL,
        CELERY_TASK_DEFAULT_QUEUE=queue_name,
        STRIPE_API_BASE=sandbox_url,
        STRIPE_API_KEY=STRIPE_KEY,
        STRIPE_WEBHOOK_SECRET=WEBHOOK_SECRET,
        # A claimed run whose attempt died with its worker is claimed again after this (300 s
        # by default): an attempt takes a few seconds under the test settings' timeouts.
        VERIFICATION_LEASE_S="30",
        PYTHONUNBUFFERED="1",
    )
    py = sys.executable
    celery = [py, "-m", "celery", "-A", "config.celery_app"]
    nodes = 2 if options.topology else 1
    ports = list(options.web_port or [])
    ports += [free_port() for _ in range(nodes - len(ports))]
    webs = []
    for number, port in enumerate(ports[:nodes], start=1):
        node_env = dict(env)
        if options.topology:
            metrics = logs / f"prometheus-node{number}"
            metrics.mkdir(exist_ok=True)
            node_env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics)
            # Production's pool (10 a process): an ASGI request's database work runs in a
            # thread of its own, and without a pool every one holds a connection of its own.
            node_env["DATABASE_POOL"] = "true"
            app = ["config.asgi:application", "-k", "uvicorn_worker.UvicornWorker"]
        else:
            app = ["config.wsgi:application"]
        webs.append(
            Service(
                f"gunicorn node {number}" if options.topology else "gunicorn",
                [
                    *[py, "-m", "gunicorn", *app],
                    *["--bind", f"127.0.0.1:{port}", "--workers", "2", "--timeout", "60"],
                    *["--graceful-timeout", "5", "--log-level", "warning"],
                ],
                node_env,
                logs / f"gunicorn-{number}.log",
                url=f"http://127.0.0.1:{port}",
            )
        )
    money_queue = f"{queue_name}.money"
    queues = [[money_queue], [queue_name]] if options.topology else [[money_queue, queue_name]]
    workers = [
        Service(
            f"celery worker {','.join(consumed)}",
            [
                *celery,
                "worker",
                f"--concurrency={options.worker_processes}",
                "--loglevel=WARNING",
                "--without-mingle",
                "--without-gossip",
                "-Q",
                ",".join(consumed),
                "-n",
                f"{consumed[0]}@%h",
            ],
            env,
            logs / f"worker-{consumed[0]}.log",
        )
        for consumed in queues
    ]
    system = System(
        sandbox=Service(
            "sandbox",
            [
                *[py, "-m", "stripe_sandbox", "--host", "127.0.0.1"],
                *["--port", str(sandbox_port), "--seed", str(seed)],
            ],
            env,
            logs / "sandbox.log",
        ),
        webs=webs,
        workers=workers,
        beat=Service(
            "celery beat",
            [
                *celery,
                "beat",
                "--loglevel=WARNING",
                f"--pidfile={logs / 'beat.pid'}",
                f"--schedule={logs / 'beat-schedule'}",
            ],
            env,
            logs / "beat.log",
        ),
        sandbox_url=sandbox_url,
        worker_processes=options.worker_processes * len(queues),
    )
    return system, env


def queue_depth(queue_name: str) -> int:
    """Messages waiting in this run's Celery queue."""
    import redis

    return int(redis.Redis.from_url(BROKER_URL).llen(queue_name))


def broker_forget(queue_name: str) -> None:
    """Delete this run's queue (and kombu's bindings of it) from the broker."""
    import redis

    client = redis.Redis.from_url(BROKER_URL)
    for key in client.scan_iter(f"*{queue_name}*"):
        client.delete(key)


# --- the soak -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    global BROKER_URL  # --redis-url: every helper of this module reads it
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--operations", type=int, default=1000)
    parser.add_argument("--kills", type=int, default=4)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--fault-rate", type=float, default=0.05, help="each fault's probability")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--settle-timeout", type=float, default=600.0, help="seconds")
    parser.add_argument(
        "--keep-db", action="store_true", help="keep the database and logs, also on success"
    )
    parser.add_argument(
        "--database-name",
        default=os.environ.get("SOAK_DATABASE_NAME", ""),
        help="the throw-away database, created and dropped on DATABASE_URL's server "
        "(env SOAK_DATABASE_NAME; default vouch_soak_<pid>)",
    )
    parser.add_argument(
        "--redis-url",
        default=BROKER_URL,
        help=f"the Celery broker (env SOAK_REDIS_URL; default {DEFAULT_BROKER_URL}); the run's "
        "queues are named soak-<pid> in it",
    )
    parser.add_argument(
        "--sandbox-port",
        type=int,
        default=int(os.environ.get("SOAK_SANDBOX_PORT") or 0),
        help="the sandbox's port (env SOAK_SANDBOX_PORT; default: a free one)",
    )
    parser.add_argument(
        "--web-port",
        type=int,
        action="append",
        help="a web node's port, once per node (default: free ones)",
    )
    parser.add_argument(
        "--worker-processes", type=int, default=2, help="pool processes of each Celery worker"
    )
    parser.add_argument(
        "--topology",
        action="store_true",
        help="scale-out: two web nodes (ASGI, each its own Prometheus folder; clients spread over "
        "both), a worker for the money queue and one for everything else, one beat",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.operations <= 1_000_000 or not 1 <= args.clients <= 64:
        parser.error("--operations must be in [1, 1000000] and --clients in [1, 64]")
    if not 0 <= args.fault_rate <= 0.2 or args.kills < 0:
        parser.error("--fault-rate must be in [0, 0.2] and --kills >= 0")
    if not 1 <= args.worker_processes <= 32:
        parser.error("--worker-processes must be in [1, 32]")
    BROKER_URL = args.redis_url

    def terminated(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # unwinds through the finally blocks

    signal.signal(SIGTERM, terminated)
    ops, kills = plan(args.seed, args.operations, args.clients, args.kills, args.fault_rate)
    kinds = Counter(op.kind for op in ops)
    print(
        f"soak: seed {args.seed}, {len(ops)} operations ({dict(kinds)}) from {args.clients} "
        f"clients, {len(kills)} kills ({dict(Counter(k.target for k in kills))}), fault rate "
        f"{args.fault_rate} each ({len(faults(args.fault_rate))} faults)",
        flush=True,
    )
    name = args.database_name or f"vouch_soak_{os.getpid()}"
    queue_name = f"soak-{os.getpid()}"
    bench_url, maintenance = bench_database_urls(
        os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), name
    )
    os.environ.update(
        DATABASE_URL=bench_url,
        DJANGO_SETTINGS_MODULE=SETTINGS,
        CELERY_BROKER_URL=BROKER_URL,
        CELERY_TASK_DEFAULT_QUEUE=queue_name,
        STRIPE_API_KEY=STRIPE_KEY,
    )
    os.environ.pop("VOUCH_CRASH_AT", None)
    database = Database(maintenance, name)
    logs = Path(tempfile.mkdtemp(prefix="vouch-soak-"))
    system: System | None = None
    results: list[Check] = []
    began = time.monotonic()
    try:
        database.create()
        sessions, staff_token = django_setup(args.clients)
        system, _ = system_start(bench_url, queue_name, args.seed, logs, args)
        system.sandbox.start()
        wait_for(
            "stripe_sandbox",
            lambda: requests.get(f"{system.sandbox_url}/_sandbox/state", timeout=2).ok,
            system.sandbox,
        )
        for service in [*system.webs, *system.workers, system.beat]:
            service.start()
        system.web_ready()
        control = f"{system.sandbox_url}/_sandbox"
        requests.post(
            f"{control}/webhooks",
            json={
                "url": f"{system.bases[0]}/webhooks/stripe",
                "secret": WEBHOOK_SECRET,
                "max_attempts": 8,
                "backoff_ms": 500,
            },
            timeout=10,
        ).raise_for_status()
        requests.post(
            f"{control}/webhook-behaviour",
            json={"duplicate_probability": args.fault_rate, "drop_probability": args.fault_rate},
            timeout=10,
        ).raise_for_status()
        say(
            f"web on {', '.join(system.bases)}, sandbox on {system.sandbox_url}, queues "
            f"{queue_name} and {queue_name}.money, "
            + "; ".join(f"{w.name} x{args.worker_processes}" for w in system.workers)
        )

        failed_later: set[str] = set()
        everyone: list[str] = []
        buyers = [
            Buyer(
                n,
                system.bases[n % len(system.bases)],
                sid,
                staff_token,
                args.seed,
                system.sandbox_url,
                failed_later,
                everyone,
            )
            for n, sid in enumerate(sessions)
        ]
        for buyer in buyers:
            buyer.login()
        for fault in faults(args.fault_rate):
            requests.post(f"{control}/faults", json=fault, timeout=10).raise_for_status()

        killer = Killer(system, args.seed)
        killer.start()
        watch = QueueWatch([queue_name, f"{queue_name}.money"])
        watch.start()
        started = time.monotonic()
        answers, client_errors = drive(ops, kills, buyers, killer)
        killer.finish()
        ops_s = time.monotonic() - started
        for service in system.all():
            if not service.alive():
                raise RuntimeError(
                    f"{service.name} is down after the operations:\n{service.tail()}"
                )
        hits = sum(
            f["hits"] for f in requests.get(f"{control}/faults", timeout=10).json()["faults"]
        )
        requests.delete(f"{control}/faults", timeout=10).raise_for_status()
        by_status = Counter(
            f"{a.kind} " + ("abandoned" if a.status < 0 else f"{a.status} {a.code}".strip())
            for a in answers
        )
        print(f"operations done in {ops_s:.0f} s ({len(answers) / ops_s:.1f}/s)", flush=True)
        for line in killer.done:
            say(line)

        depth = queue_depth(queue_name)
        settled, settle_s, left = settle(
            args.settle_timeout, failed_later, queue_name, system.sandbox_url
        )
        say(
            f"settled in {settle_s:.0f} s"
            if settled
            else f"NOT settled after {settle_s:.0f} s: {left}"
        )
        watch.stop()
        results = checks(system.sandbox_url, answers, failed_later)
        results.insert(
            0,
            Check(
                "settled", settled, f"in {settle_s:.0f} s" + ("" if settled else f"; left {left}")
            ),
        )
        results.insert(
            0,
            Check(
                "every client ran its operations to the end",
                not client_errors,
                f"{len(answers)} of {len(ops)} answered"
                + "".join(f"; {type(e).__name__}: {e}" for e in client_errors[:3]),
            ),
        )
        took = latencies()
        bound = 2 * took.contract_min_s
        p95 = percentile(took.verdict_s, 0.95) if took.verdict_s else 0.0
        depth_bound = 10 * system.worker_processes
        figures = [
            ("refund leg answer (reserved to answered)", distribution(took.answer_s)),
            (
                "refund verdict (run begun with the answer, to verdict)",
                f"{distribution(took.verdict_s)}; target p95 <= {bound:.0f} s (twice the "
                f"contract's {took.contract_min_s:.0f} s): {'met' if p95 <= bound else 'MISSED'}",
            ),
            ("funding leg (created to funded)", distribution(took.funding_s)),
            (
                "deepest queue (both queues)",
                f"{watch.deepest} tasks at {watch.deepest_at:.0f} s ({watch.samples} samples: "
                + ", ".join(f"{t} x{n}" for t, n in watch.deepest_tasks.most_common(4))
                + "); "
                f"target <= {depth_bound} (10 x {system.worker_processes} worker processes): "
                + ("met" if watch.deepest <= depth_bound else "MISSED"),
            ),
        ]
        client_lines = [
            (
                "answers by operation and status",
                ", ".join(f"{k} x{n}" for k, n in sorted(by_status.items())),
            ),
            (
                "client timeouts / dropped connections / 409 in use / 429",
                f"{sum(a.timeouts for a in answers)} / {sum(a.dropped for a in answers)} / "
                f"{sum(a.in_use for a in answers)} / {sum(a.throttled for a in answers)}",
            ),
            ("faults struck", f"{hits}"),
            ("tasks queued when the operations ended", f"{depth}"),
            (
                "kills",
                f"{len(killer.done)}; starts: "
                + ", ".join(f"{s.name} {s.starts}" for s in system.all()),
            ),
            (
                "slowest operation (with its retries)",
                f"{max((a.seconds for a in answers), default=0):.1f} s",
            ),
            ("operations", f"{len(answers)} in {ops_s:.0f} s ({len(answers) / ops_s:.1f}/s)"),
            *figures,
        ]
    finally:
        with signals_held():
            if system is not None:
                for service in system.all():
                    service.stop()
            if "django" in sys.modules:
                from django.db import connections

                connections.close_all()
            with contextlib.suppress(Exception):
                broker_forget(queue_name)
            failed = not results or not all(c.ok for c in results)
            if args.keep_db or failed:
                say(f"logs kept in {logs}")
            else:
                shutil.rmtree(logs, ignore_errors=True)
            if args.keep_db:
                say(f"database {name} kept")
            else:
                database.drop()

    width = max(len(label) for label, _ in client_lines) + 2
    width = max(width, *(len(c.name) + 8 for c in results))
    print()
    for label, value in client_lines:
        print(f"{label + ':':<{width}}{value}")
    for check in results:
        print(f"{('ok   ' if check.ok else 'FAIL ') + check.name + ':':<{width}}{check.figure}")
    print(f"(seed {args.seed}; total {time.monotonic() - began:.0f} s)")
    failed_checks = [c.name for c in results if not c.ok]
    if failed_checks:
        print(f"FAILED: {', '.join(failed_checks)}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
