"""Benchmark: a reconciliation run over many objects, its provider calls, its memory and its call
budget (the reconciliation issue's acceptance 7).

Everything runs in a throw-away PostgreSQL database (`vouch_bench_recon_<pid>`, created on the
server named by DATABASE_URL, default postgres://postgres@127.0.0.1:5432, through its `postgres`
database), migrated, and dropped at the end, also on error, Ctrl-C or SIGTERM. The developer's
database is never touched. The Stripe sandbox runs as a subprocess of this script (this file with
`--serve-sandbox`: `stripe_sandbox.SandboxServer` with every `/v1/` request's arrival time
logged, read back through `GET /_bench/requests`), in its own session, stopped at the end.

Setup (untimed): `--charges` (5,000) funding charges with `--refunds-per-charge` (4) refunds each
(20,000 refund legs), seeded in the sandbox with `POST /_sandbox/seed` (charges carrying
`metadata.vouch_funding`, refunds `metadata.vouch_leg`, created over the last three days) and in
Vouch with bulk_create: a buyer and an envelope per charge, its funding leg succeeded with the
charge and PaymentIntent ids, one refund operation per refund with its leg accepted and naming the
provider refund, and the journal (fund, then reserve and accept per leg) so that the balances add
up. `envelopes.selectors.ledger_breaches()` must be empty before anything is timed.

Each measured run is `reconciliation.engine.reconcile(kind="manual", since=…)` over a window that
holds every seeded object, in a fresh subprocess (this file with `--child reconcile`), so that its
peak RSS (VmHWM) is its own:

(a) objects compared per second (sum of `run.compared`) with RECONCILIATION_MAX_RPS=0 (no
    budget), over the 20,000 refunds. Target >= 2,000/s. Per phase (from the progress callback):
    seconds, pages, calls; and the CPU of the run's process, the sandbox and PostgreSQL meanwhile.
    The seed is clean: the run must open 0 discrepancies and read nothing alone (vouch_side).
(b) provider calls of each list phase <= ceil(objects of that kind / 100) + 1.
(c) peak RSS of the same run over 20,000 refunds, then (after seeding 4 x as many more, same
    shape: 25,000 charges x 4 refunds) over 100,000 refunds. Target: growth < 50 MB.
(d) with RECONCILIATION_MAX_RPS=20, `--listers` (2) processes list refund pages through the
    adapter (`StripeProvider.list_pages(..., budget=budget_from_settings("reconciliation"))`, the
    budget the engine draws on) for `--budget-seconds` (6) at once. Each request's start is
    recorded in the listers (the HTTP client, after the budget let it go) and its arrival in the
    sandbox. Target: at most 20 in any one-second window, on both clocks.

`--profile` adds one run over the 20,000 refunds under cProfile (not timed) and prints the
functions that cost the most.

Run from the repo root: .venv/bin/python bench/reconciliation.py [--charges 5000]
    [--refunds-per-charge 4] [--large-refunds 100000] [--budget-seconds 6] [--listers 2]
    [--profile] [--database-name NAME] [--redis-url URL] [--sandbox-port P]
(the last three also from BENCH_DATABASE_NAME, BENCH_REDIS_URL, BENCH_SANDBOX_PORT)
Exit status 1 if a check fails or a target is missed; the summary is printed either way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from signal import SIGINT, SIGKILL, SIGTERM
from types import FrameType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
# Run as `python bench/reconciliation.py`, sys.path[0] is bench/, where this very file would
# shadow the project's `reconciliation` package: put the repo root there instead.
if sys.path and Path(sys.path[0]).resolve() == REPO / "bench":
    sys.path[0] = str(REPO)
elif str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.refund_api import (  # noqa: E402 - after the path fix above
    add_database_flag,
    add_port_flag,
    add_redis_flag,
    port_or_free,
)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/vouch"
SETTINGS = "config.settings.test"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/7"  # isolated; a clean run enqueues nothing anyway
BROKER_URL = DEFAULT_BROKER_URL  # --redis-url (env BENCH_REDIS_URL) in main
STRIPE_KEY = "sk_test_bench"
MICRO_PER_CENT = 10_000
SEED_CHUNK = 2_500  # charges per seed request and per database transaction
SPREAD_S = 3 * 86_400  # charges are created over the last three days...
NEWEST_S = 2 * 3_600  # ...the newest two hours ago (well past every grace period)
WINDOW_S = 4 * 86_400  # the runs' window: the last four days, which hold every seeded object
OBJECTS_PER_S_TARGET = 2_000.0
RSS_GROWTH_TARGET_MB = 50.0
BUDGET_RPS = 20
START_TIMEOUT_S = 30.0
LISTER_TIMEOUT_S = 120.0
PROGRESS_PAGES = 100  # a run's progress line every this many pages
OTHER_LOAD_WARN = 0.15  # cores used by processes not ours: the machine was not quiet


def progress(message: str) -> None:
    print(f"  .. {message}", flush=True)


# --- the throw-away database --------------------------------------------------------------------


def bench_database_urls(base_url: str, name: str) -> tuple[str, dict[str, Any]]:
    """The bench database's URL and the psycopg arguments of the server's `postgres` database."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        raise SystemExit(f"DATABASE_URL must be a postgres:// URL, not {parts.scheme}://")
    bench_url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    maintenance = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "postgres",
        "password": parts.password,
        "dbname": "postgres",
        "autocommit": True,
    }
    return bench_url, maintenance


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ignore Ctrl-C and SIGTERM inside (the clean-up), then restore the handlers."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (SIGINT, SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Database:
    """One throw-away database: `drop` removes it if `create` (even interrupted) began."""

    def __init__(self, maintenance: dict[str, Any], name: str) -> None:
        self.maintenance = maintenance
        self.name = name
        self.created = False

    def create(self) -> None:
        import psycopg
        from psycopg import sql

        self.created = True  # first: an interruption during CREATE must still drop it
        with psycopg.connect(**self.maintenance) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        progress(f"created database {self.name}")

    def drop(self) -> None:
        import psycopg
        from psycopg import sql

        if not self.created:
            return
        with signals_held(), psycopg.connect(**self.maintenance) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name))
            )
        self.created = False
        progress(f"dropped database {self.name}")


# --- processes: the sandbox and the children ----------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """The sandbox subprocess, in its own session, its output in a log file."""

    def __init__(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            # S603: our own fixed argv (sys.executable this-file --serve-sandbox PORT).
            self.proc = subprocess.Popen(  # noqa: S603
                cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_until(self, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the sandbox exited with {self.proc.returncode}:\n{tail}")
            with contextlib.suppress(OSError):
                if ready():
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the sandbox did not answer within {START_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, SIGKILL)
        progress(f"stopped the sandbox (exit status {self.proc.returncode})")


def child_env(database_url: str, sandbox_url: str, max_rps: float) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("VOUCH_CRASH_AT", None)  # a test-only crash point must never fire here
    env.update(
        DJANGO_SETTINGS_MODULE=SETTINGS,
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=BROKER_URL,
        STRIPE_API_BASE=sandbox_url,
        STRIPE_API_KEY=STRIPE_KEY,
        RECONCILIATION_MAX_RPS=str(max_rps),
        PYTHONUNBUFFERED="1",
    )
    return env


def run_children(
    cmds: list[list[str]], env: dict[str, str], log: Path, *, timeout: float, show: bool = False
) -> list[int]:
    """Run the children at once, each in its own session, their output in `log` (or on this
    terminal with `show`). Returns each one's peak RSS (VmHWM, kB) as polled from /proc, also
    when one overran `timeout` and was killed (then ChildTimedOut carries the peaks). Every
    child must exit 0."""
    procs: list[subprocess.Popen[bytes]] = []
    peaks: list[int] = []
    with log.open("ab") as out:
        try:
            for cmd in cmds:
                procs.append(
                    subprocess.Popen(  # noqa: S603 - our own argv (this file --child ...)
                        cmd, cwd=REPO, env=env, stdout=None if show else out,
                        stderr=None if show else subprocess.STDOUT, start_new_session=True,
                    )
                )  # fmt: skip
            peaks = [0] * len(procs)
            deadline = time.monotonic() + timeout
            while any(proc.poll() is None for proc in procs):
                for i, proc in enumerate(procs):
                    peaks[i] = max(peaks[i], proc_vm_kb(proc.pid, "VmHWM"))
                if time.monotonic() > deadline:
                    raise ChildTimedOut(timeout, peaks)
                time.sleep(0.25)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, SIGKILL)
                    proc.wait(timeout=5)
    failed = [p.returncode for p in procs if p.returncode != 0]
    if failed:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"a child exited with {failed}:\n{tail}")
    return peaks


class ChildTimedOut(Exception):
    def __init__(self, timeout: float, peaks: list[int]) -> None:
        super().__init__(f"a child ran longer than {timeout:.0f} s and was stopped")
        self.timeout = timeout
        self.peaks = peaks


# --- CPU and memory from /proc ------------------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def process_cpu_s(pid: int) -> float:
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS if fields else 0.0


def machine_cpu_s() -> float:
    """Busy CPU seconds of the whole machine since boot, all cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / CLOCK_TICKS


def proc_vm_kb(pid: int | str, name: str) -> int:
    """A /proc/<pid>/status figure (VmHWM: peak RSS; VmRSS: current), in kB; 0 if gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0


def vm_kb(name: str) -> int:
    return proc_vm_kb("self", name)


# --- the sandbox, with a log of request arrivals ------------------------------------------------


def serve_sandbox(port: int) -> int:
    """`--serve-sandbox PORT`: the sandbox, every `/v1/` request's arrival (wall clock) logged;
    `GET /_bench/requests?since=T` answers the arrivals since T as [[time, method, path], ...]."""
    from urllib.parse import parse_qs

    from stripe_sandbox.server import Response, SandboxServer

    # Limits lifted: (a)-(c) measure the engine with no budget (RECONCILIATION_MAX_RPS=0), as
    # fast as it goes; (d) counts the arrivals Vouch's own budget lets through, which a 429
    # would not change.
    server = SandboxServer("127.0.0.1", port, rate_limits=False)
    sandbox = server.sandbox
    arrivals: list[tuple[float, str, str]] = []  # list.append is atomic under the GIL
    handle = sandbox.handle

    def logged(method: str, target: str, headers: dict[str, str], body: bytes) -> Any:
        now = time.time()
        url = urlsplit(target)
        if url.path == "/_bench/requests":
            since = float(parse_qs(url.query).get("since", ["0"])[0])
            found = [a for a in list(arrivals) if a[0] >= since]
            return Response(200, json.dumps(found).encode(), {"Content-Type": "application/json"})
        if url.path.startswith("/v1/"):
            arrivals.append((now, method, url.path))
        return handle(method, target, headers, body)

    sandbox.handle = logged  # type: ignore[method-assign]

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(SIGTERM, stop)
    print(f"Stripe sandbox (bench, arrivals logged) listening on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        server.sandbox.close()
    return 0


def sandbox_arrivals(url: str, since: float) -> list[tuple[float, str, str]]:
    import requests

    response = requests.get(f"{url}/_bench/requests", params={"since": since}, timeout=60)
    response.raise_for_status()
    return [(float(t), str(m), str(p)) for t, m, p in response.json()]


def bench_provider(sandbox_url: str) -> Any:
    """The adapter on the sandbox with production's timeouts and retry policy (the test settings'
    0.5 s read timeout is for fault tests, not for pages of a hundred objects)."""
    from providers.stripe_provider import RetryPolicy, StripeProvider

    return StripeProvider(
        api_key=STRIPE_KEY,
        api_base=sandbox_url,
        connect_timeout_s=5.0,
        read_timeout_s=30.0,
        retry=RetryPolicy(),
    )


# --- seeding (untimed) --------------------------------------------------------------------------


@contextlib.contextmanager
def explicit_timestamps(*models: Any) -> Iterator[None]:
    """bulk_create keeps the `created_at` we give instead of `auto_now_add`'s now."""
    fields = [m._meta.get_field("created_at") for m in models]
    saved = [f.auto_now_add for f in fields]
    for f in fields:
        f.auto_now_add = False
    try:
        yield
    finally:
        for f, value in zip(fields, saved, strict=True):
            f.auto_now_add = value


def seed(
    sandbox_url: str, *, first: int, charges: int, per_charge: int, now: int, label: str
) -> None:
    """Charges number `first` to `first + charges - 1`, each with `per_charge` refunds, in the
    sandbox and in Vouch, consistent with each other and with Vouch's journal."""
    from django.db import transaction

    from accounts.models import User
    from envelopes.models import (
        Envelope,
        FundingLeg,
        FundingStatus,
        JournalEntry,
        LegOutcome,
        RefundLeg,
        RefundOperation,
    )
    from stripe_sandbox.client import SandboxControl

    control = SandboxControl(sandbox_url, timeout=300)
    started = time.perf_counter()
    total = first + charges
    for low in range(first, total, SEED_CHUNK):
        numbers = range(low, min(low + SEED_CHUNK, total))
        users, envelopes, fundings, ops, legs, plans = [], [], [], [], [], []
        for n in numbers:
            # Spread over the last three days; interleaved across seeds (n * a prime).
            created = now - NEWEST_S - (n * 7919) % SPREAD_S
            at = datetime.fromtimestamp(created, UTC)
            amount = 5_000 + (n % 50) * 100  # cents: $50.00 to $99.00
            refunds = [100 + ((n * per_charge + j) % 13) * 25 for j in range(per_charge)]
            refunded = sum(refunds)
            user = User(username=f"bench_recon_{n}", password="!")  # noqa: S106 - unusable
            envelope = Envelope(
                owner=user,
                currency="usd",
                total_funded_micro=amount * MICRO_PER_CENT,
                total_refunded_micro=refunded * MICRO_PER_CENT,
                unspent_micro=(amount - refunded) * MICRO_PER_CENT,
                created_at=at,
            )
            funding = FundingLeg(
                envelope=envelope,
                kind=FundingLeg.Kind.ORIGINAL,
                sequence=1,
                amount_micro=amount * MICRO_PER_CENT,
                refunded_micro=refunded * MICRO_PER_CENT,
                status=FundingStatus.SUCCEEDED,
                payment_method="pm_card_visa",
                created_at=at,
                funded_at=at,
            )
            funding.idempotency_key = f"bench:{funding.public_id}"
            refund_plans = []
            for j, cents in enumerate(refunds):
                reserved_at = datetime.fromtimestamp(created + (j + 1) * 300, UTC)
                op = RefundOperation(
                    envelope=envelope,
                    requested_micro=cents * MICRO_PER_CENT,
                    remainder_micro=0,
                    created_by=user,
                    created_at=reserved_at,
                )
                leg = RefundLeg(
                    operation=op,
                    funding_leg=funding,
                    sequence=1,
                    amount_micro=cents * MICRO_PER_CENT,
                    outcome=LegOutcome.ACCEPTED,
                    attempts=1,
                    reserved_at=reserved_at,
                    decided_at=reserved_at,
                )
                leg.idempotency_key = f"{op.public_id}:{leg.public_id}"
                ops.append(op)
                legs.append(leg)
                refund_plans.append(
                    {
                        "amount": cents,
                        "created": created + (j + 1) * 300,
                        "metadata": {
                            "vouch_envelope": envelope.public_id,
                            "vouch_refund": op.public_id,
                            "vouch_leg": leg.public_id,
                        },
                    }
                )
            users.append(user)
            envelopes.append(envelope)
            fundings.append(funding)
            plans.append(
                {
                    "amount": amount,
                    "currency": "usd",
                    "created": created,
                    "metadata": {
                        "vouch_envelope": envelope.public_id,
                        "vouch_funding": funding.public_id,
                    },
                    "refunds": refund_plans,
                }
            )
        made = control.seed(plans)
        leg_iter = iter(legs)
        for funding, charge in zip(fundings, made, strict=True):
            funding.charge_id = charge["id"]
            funding.payment_intent_id = charge["payment_intent"]
            for refund_id in charge["refunds"]:
                next(leg_iter).provider_refund_id = refund_id
        journal = []
        for funding in fundings:
            journal.append(
                JournalEntry(
                    envelope=funding.envelope,
                    kind=JournalEntry.Kind.FUND,
                    funded_delta=funding.amount_micro,
                    unspent_delta=funding.amount_micro,
                    funding_leg=funding,
                    created_at=funding.created_at,
                )
            )
        for leg in legs:
            envelope, amount = leg.operation.envelope, leg.amount_micro
            journal.append(
                JournalEntry(
                    envelope=envelope,
                    kind=JournalEntry.Kind.RESERVE,
                    reserved_delta=amount,
                    unspent_delta=-amount,
                    refund_leg=leg,
                    created_at=leg.reserved_at,
                )
            )
            journal.append(
                JournalEntry(
                    envelope=envelope,
                    kind=JournalEntry.Kind.ACCEPT,
                    reserved_delta=-amount,
                    refunded_delta=amount,
                    refund_leg=leg,
                    created_at=leg.reserved_at,
                )
            )
        with (
            explicit_timestamps(Envelope, FundingLeg, RefundOperation, JournalEntry),
            transaction.atomic(),
        ):
            User.objects.bulk_create(users, batch_size=1000)
            Envelope.objects.bulk_create(envelopes, batch_size=1000)
            FundingLeg.objects.bulk_create(fundings, batch_size=1000)
            RefundOperation.objects.bulk_create(ops, batch_size=1000)
            RefundLeg.objects.bulk_create(legs, batch_size=1000)
            JournalEntry.objects.bulk_create(journal, batch_size=2000)
        done = numbers.stop - first
        progress(
            f"{label}: {done:,} of {charges:,} charges ({done * per_charge:,} refunds) seeded "
            f"in {time.perf_counter() - started:.0f} s"
        )
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


# --- the children -------------------------------------------------------------------------------


def child_reconcile(args: argparse.Namespace) -> int:
    """`--child reconcile`: one manual run over [--since, now); its figures as JSON in --out."""
    import django

    django.setup()
    from reconciliation.engine import reconcile

    provider = bench_provider(args.sandbox)
    hwm_before, rss_before = vm_kb("VmHWM"), vm_kb("VmRSS")
    marks: list[dict[str, Any]] = []
    started = time.perf_counter()

    def on_progress(run: Any) -> None:
        checkpoint = run.checkpoint or {}
        mark = {
            "t": time.perf_counter() - started,
            "phase": checkpoint.get("phase"),
            "done": bool(checkpoint.get("done")),
            "pages": run.pages,
            "calls": run.provider_calls,
            "compared": dict(run.compared),
        }
        marks.append(mark)
        if mark["done"] or (run.pages % PROGRESS_PAGES == 0 and not mark["done"]):
            what = "done" if mark["done"] else f"page {run.pages}"
            progress(
                f"  run: {mark['phase']} {what}, {sum(run.compared.values()):,} compared, "
                f"{mark['t']:.0f} s, VmHWM {mb(vm_kb('VmHWM')):.0f} MB"
            )

    # Where the wall time goes: waiting on (and parsing) the provider's answers, on PostgreSQL.
    waited = {"provider": 0.0, "database": 0.0, "queries": 0}
    call = provider._call

    def timed_call(*a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return call(*a, **kw)
        finally:
            waited["provider"] += time.perf_counter() - t

    provider._call = timed_call

    def timed_query(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            waited["database"] += time.perf_counter() - t
            waited["queries"] += 1

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = int(cursor.fetchone()[0])
    since = datetime.fromisoformat(args.since)
    profiler = None
    if args.profile_out:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    machine = machine_cpu_s()
    backend_cpu = process_cpu_s(backend)
    cpu = time.process_time()
    with connection.execute_wrapper(timed_query):
        run = reconcile(kind="manual", since=since, progress=on_progress, provider=provider)
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - started
    backend_cpu = process_cpu_s(backend) - backend_cpu
    machine = machine_cpu_s() - machine
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile_out)
    hwm_kb, rss_after_kb = vm_kb("VmHWM"), vm_kb("VmRSS")
    # Untimed, after the peak was read: every page the run stored hashes to its recorded SHA-256,
    # and what they take (a page at a time).
    received = stored = matching = pages = 0
    listed = run.observations.filter(kind__in=("refunds", "charges", "disputes"))
    for observation in listed.only("body", "body_length", "sha256").iterator(chunk_size=20):
        pages += 1
        received += observation.body_length
        stored += len(bytes(observation.body or b""))
        matching += observation.sha256_matches() is True
    result = {
        "wall": wall,
        "cpu": cpu,
        "backend_cpu": backend_cpu,
        "machine_busy": machine,
        "waited": waited,
        "compared": run.compared,
        "provider_calls": run.provider_calls,
        "pages": run.pages,
        "expected": run.expected,
        "corrected": run.corrected,
        "opened": run.opened,
        "still_open": run.still_open,
        "status": run.status,
        "marks": marks,
        "hwm_before_kb": hwm_before,
        "rss_before_kb": rss_before,
        "hwm_kb": hwm_kb,
        "rss_after_kb": rss_after_kb,
        "stored_pages": {
            "pages": pages,
            "matching": matching,
            "received": received,
            "stored": stored,
        },
    }
    Path(args.out).write_text(json.dumps(result))
    return 0


def child_lister(args: argparse.Namespace) -> int:
    """`--child lister`: refund pages through the adapter with the reconciliation budget, from
    --start-at for --seconds; each request's start (wall clock) as JSON in --out."""
    import django

    django.setup()
    from core.budget import budget_from_settings
    from providers import stripe_provider

    budget = budget_from_settings("reconciliation")
    starts: list[float] = []
    inner = stripe_provider._RequestsClient._request_internal

    def timed(self: Any, *a: Any, **kw: Any) -> Any:
        starts.append(time.time())  # the budget has let this call go: it starts now
        return inner(self, *a, **kw)

    stripe_provider._RequestsClient._request_internal = timed  # type: ignore[method-assign]
    provider = bench_provider(args.sandbox)
    since = math.floor(datetime.fromisoformat(args.since).timestamp())
    pause = args.start_at - time.time()
    if pause > 0:
        time.sleep(pause)
    deadline = args.start_at + args.seconds
    pages = attempts = 0
    while time.time() < deadline:
        for page in provider.list_pages(
            "refunds", created_gte=since, created_lt=math.ceil(time.time()), budget=budget
        ):
            pages += 1
            attempts += page.attempts
            if time.time() >= deadline:
                break
    Path(args.out).write_text(
        json.dumps(
            {"starts": starts, "pages": pages, "attempts": attempts, "rps": budget.per_second}
        )
    )
    return 0


# --- figures ------------------------------------------------------------------------------------


def phase_table(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per phase: seconds, pages, calls and objects compared, from the progress marks (a phase
    ends at its `done` mark; the first begins when the run was called; `finish` is the rest)."""
    rows = []
    previous: dict[str, Any] = {"t": 0.0, "pages": 0, "calls": 0, "compared": {}}
    for mark in result["marks"]:
        if not mark["done"]:
            continue
        before = sum(previous["compared"].values())
        rows.append(
            {
                "phase": mark["phase"],
                "seconds": mark["t"] - previous["t"],
                "pages": mark["pages"] - previous["pages"],
                "calls": mark["calls"] - previous["calls"],
                "compared": sum(mark["compared"].values()) - before,
            }
        )
        previous = mark
    rows.append(
        {
            "phase": "finish",
            "seconds": result["wall"] - previous["t"],
            "pages": 0,
            "calls": 0,
            "compared": 0,
        }
    )
    return rows


def max_in_window(times: list[float], width: float = 1.0) -> tuple[int, float]:
    """The most starts in any window [t, t + width), and where the first such window begins."""
    times = sorted(times)
    best, at, j = 0, math.nan, 0
    for i, start in enumerate(times):
        j = max(j, i)
        while j < len(times) and times[j] < start + width:
            j += 1
        if j - i > best:
            best, at = j - i, start
    return best, at


def mb(kb: int) -> float:
    return kb / 1024


# --- the whole bench ----------------------------------------------------------------------------


Check = tuple[str, str, bool]  # what, the figure, whether it holds


def measure_budget(
    this: list[str], tmp: Path, env: dict[str, str], sandbox_url: str, since: str, args: Any
) -> dict[str, Any]:
    """(d): the listers at once on the shared budget; every call's start and arrival."""
    start_at = time.time() + 3.0  # each has set Django up by then
    outs = [tmp / f"lister{i}.json" for i in range(args.listers)]
    cmds = [
        [*this, "--child", "lister", "--sandbox", sandbox_url, "--since", since,
         "--out", str(out), "--start-at", repr(start_at), "--seconds", str(args.budget_seconds)]
        for out in outs
    ]  # fmt: skip
    run_children(cmds, env, tmp / "children.log", timeout=LISTER_TIMEOUT_S)
    listers = [json.loads(out.read_text()) for out in outs]
    client = sorted(t for lister in listers for t in lister["starts"])
    server = sorted(
        t
        for t, method, path in sandbox_arrivals(sandbox_url, start_at - 1)
        if method == "GET" and path == "/v1/refunds"
    )
    return {
        "rps": [lister["rps"] for lister in listers],
        "per_lister": [len(lister["starts"]) for lister in listers],
        "pages": [lister["pages"] for lister in listers],
        "client": client,
        "server": server,
        "client_max": max_in_window(client),
        "server_max": max_in_window(server),
    }


def run_lines(label: str, result: dict[str, Any]) -> list[str]:
    """Where a run's wall time went, and what else kept the machine busy."""
    if result.get("timed_out"):
        return [
            f"{label} run: stopped after {result['timeout']:.0f} s without finishing "
            f"(peak RSS so far {mb(result['hwm_kb']):.1f} MB)"
        ]
    wall, waited = result["wall"], result["waited"]
    objects = sum(result["compared"].values())
    rest = wall - waited["database"]
    kept = result["stored_pages"]
    return [
        f"{label} run: {objects:,} objects in {wall:.1f} s ({objects / wall:,.0f}/s), "
        f"{result['provider_calls']} provider calls, {result['pages']} pages",
        f"  CPU, s (cores): the run's process {result['cpu']:.1f} ({result['cpu'] / wall:.2f}), "
        f"its PostgreSQL backend {result['backend_cpu']:.1f} ({result['backend_cpu'] / wall:.2f}), "
        f"the sandbox {result['sandbox_cpu']:.1f} ({result['sandbox_cpu'] / wall:.2f}), "
        f"other processes {result['other_cpu']:.1f} ({result['other_cpu'] / wall:.2f})",
        f"  wall time: in {waited['queries']:,} SQL statements {waited['database']:.1f} s; "
        f"elsewhere (comparing, waiting for the next page) {rest:.1f} s; provider calls took "
        f"{waited['provider']:.1f} s (HTTP and the SDK's parsing, in the read-ahead thread: "
        "they overlap the rest)",
        f"  pages stored: {kept['pages']} list pages, {kept['received'] / 1e6:.1f} MB received, "
        f"{kept['stored'] / 1e6:.1f} MB stored (zlib); {kept['matching']} of {kept['pages']} "
        "hash to their recorded SHA-256",
    ]


def phase_lines(result: dict[str, Any]) -> list[str]:
    lines = [
        f"  {'phase':<12}{'seconds':>9}{'pages':>7}{'calls':>7}{'compared':>10}{'objects/s':>11}"
    ]
    for row in phase_table(result):
        per_s = row["compared"] / row["seconds"] if row["compared"] and row["seconds"] else 0
        lines.append(
            f"  {row['phase']:<12}{row['seconds']:>9.2f}{row['pages']:>7}{row['calls']:>7}"
            f"{row['compared']:>10,}{per_s:>11,.0f}"
        )
    return lines


def run_checks(label: str, result: dict[str, Any], refunds: int, per: int) -> list[Check]:
    """A clean seed reconciles clean: nothing opened, every object compared from the listing
    alone, and the run counted the calls the sandbox answered."""
    if result.get("timed_out"):
        return [(f"{label}: completed", f"stopped after {result['timeout']:.0f} s", False)]
    objects = sum(result["compared"].values())
    rows = {row["phase"]: row for row in phase_table(result)}
    clean = (
        not result["opened"]
        and not any(result["still_open"].values())
        and result["status"] == "completed"
    )
    want = refunds + refunds // per
    kept = result["stored_pages"]
    alone = [rows.get(phase, {}).get("calls") for phase in ("vouch_side", "clear")]
    calls = sum(result["arrivals"].values())
    return [
        (
            f"{label}: discrepancies opened / still open",
            f"{result['opened'] or 0} / {result['still_open'] or 0} "
            f"(expected {result['expected']}, corrected {result['corrected']})",
            clean,
        ),
        (
            f"{label}: every seeded object compared, none read alone",
            f"{objects:,} of {want:,}; calls in vouch_side {alone[0]}, in clear {alone[1]}",
            objects == want and alone == [0, 0],
        ),
        (
            f"{label}: the run's calls = requests the sandbox saw",
            f"{result['provider_calls']} = {calls} {result['arrivals']}",
            result["provider_calls"] == calls,
        ),
        (
            f"{label}: every list page stored hashes to its SHA-256",
            f"{kept['matching']} of {kept['pages']} pages",
            kept["pages"] == result["pages"] and kept["matching"] == kept["pages"],
        ),
    ]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--charges", type=int, default=5_000, help="funding charges (a)-(c)")
    parser.add_argument("--refunds-per-charge", type=int, default=4, help="refunds on each")
    parser.add_argument(
        "--large-refunds",
        type=int,
        default=100_000,
        help="refunds of the large run in (c), same shape (0: skip it; (c) is then missed)",
    )
    parser.add_argument(
        "--run-timeout",
        type=float,
        default=1800.0,
        help="a measured run still going after this many seconds is stopped (a missed target)",
    )
    parser.add_argument(
        "--budget-seconds", type=float, default=6.0, help="(d): how long the listers list"
    )
    parser.add_argument("--listers", type=int, default=2, help="(d): processes sharing the budget")
    parser.add_argument(
        "--profile", action="store_true", help="one more small run under cProfile (untimed)"
    )
    # The script's own subprocesses.
    parser.add_argument("--serve-sandbox", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=("reconcile", "lister"), help=argparse.SUPPRESS)
    parser.add_argument("--sandbox", help=argparse.SUPPRESS)
    parser.add_argument("--since", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    add_database_flag(parser, "vouch_bench_recon_<pid>")
    add_redis_flag(parser, DEFAULT_BROKER_URL)
    add_port_flag(parser, "--sandbox-port", "the sandbox's port")
    return parser


def main(argv: list[str] | None = None) -> int:
    global BROKER_URL  # --redis-url: child_env reads it (the children get it in their env)
    parser = build_parser()
    args = parser.parse_args(argv)
    BROKER_URL = args.redis_url
    if args.serve_sandbox is not None:
        return serve_sandbox(args.serve_sandbox)
    if args.child == "reconcile":
        return child_reconcile(args)
    if args.child == "lister":
        return child_lister(args)

    per = args.refunds_per_charge
    if not 1 <= args.charges <= 100_000 or not 1 <= per <= 20:
        parser.error("--charges must be in [1, 100000] and --refunds-per-charge in [1, 20]")
    large_charges = math.ceil(args.large_refunds / per)
    if args.large_refunds and large_charges <= args.charges:
        parser.error("--large-refunds must hold more refunds than the small run (or be 0)")
    if args.budget_seconds < 5 or not 2 <= args.listers <= 8:
        parser.error("--budget-seconds must be >= 5 and --listers in [2, 8]")

    def terminated(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # unwinds through the finally blocks

    signal.signal(SIGTERM, terminated)

    name = args.database_name or f"vouch_bench_recon_{os.getpid()}"
    bench_url, maintenance = bench_database_urls(
        os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), name
    )
    os.environ["DATABASE_URL"] = bench_url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    os.environ.pop("VOUCH_CRASH_AT", None)
    began = time.perf_counter()
    database = Database(maintenance, name)
    sandbox: Server | None = None
    this = [sys.executable, str(Path(__file__).resolve())]
    small_refunds, large_refunds = args.charges * per, large_charges * per
    large: dict[str, Any] = {}
    profiled = ""
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="bench-recon-") as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "children.log"
        try:
            database.create()
            import django

            django.setup()
            from django.core.management import call_command

            t = time.perf_counter()
            call_command("migrate", verbosity=0)
            progress(f"migrated in {time.perf_counter() - t:.1f} s")
            from envelopes.selectors import ledger_breaches

            port = port_or_free(args.sandbox_port)
            sandbox_url = f"http://127.0.0.1:{port}"
            sandbox = Server(
                [*this, "--serve-sandbox", str(port)],
                child_env(bench_url, sandbox_url, 0),
                tmp / "sandbox.log",
            )
            import requests

            sandbox.wait_until(lambda: requests.get(f"{sandbox_url}/_sandbox/state", timeout=2).ok)
            sandbox_pid = sandbox.proc.pid
            progress(f"sandbox on {sandbox_url} (pid {sandbox_pid})")
            now = int(time.time())
            since = datetime.fromtimestamp(now - WINDOW_S, UTC).isoformat()
            unbudgeted = child_env(bench_url, sandbox_url, 0)

            def seeded(first: int, charges: int, label: str) -> None:
                seed(sandbox_url, first=first, charges=charges, per_charge=per, now=now,
                     label=label)  # fmt: skip
                breaches = ledger_breaches()
                checks.append(
                    (
                        f"ledger after the {label} seed, before timing",
                        f"{len(breaches)} breaches" + (f": {breaches[:3]}" if breaches else ""),
                        not breaches,
                    )
                )
                if breaches:
                    raise RuntimeError(f"the seed breaks the ledger: {breaches[:5]}")

            def measured_run(label: str, profile_out: Path | None = None) -> dict[str, Any]:
                out = tmp / f"{label}.json"
                cmd = [*this, "--child", "reconcile", "--sandbox", sandbox_url,
                       "--since", since, "--out", str(out)]  # fmt: skip
                if profile_out is not None:
                    cmd += ["--profile-out", str(profile_out)]
                sandbox_cpu = process_cpu_s(sandbox_pid)
                arrivals_since = time.time()
                try:
                    run_children([cmd], unbudgeted, log, timeout=args.run_timeout, show=True)
                except ChildTimedOut as exc:
                    progress(str(exc))
                    return {"timed_out": True, "timeout": exc.timeout, "hwm_kb": exc.peaks[0]}
                result: dict[str, Any] = json.loads(out.read_text())
                result["sandbox_cpu"] = process_cpu_s(sandbox_pid) - sandbox_cpu
                result["other_cpu"] = max(
                    0.0,
                    result["machine_busy"]
                    - result["cpu"]
                    - result["backend_cpu"]
                    - result["sandbox_cpu"],
                )
                by_path: dict[str, int] = {}
                for _, method, path in sandbox_arrivals(sandbox_url, arrivals_since):
                    key = f"{method} {path if path.count('/') <= 2 else path.rsplit('/', 1)[0]}"
                    by_path[key] = by_path.get(key, 0) + 1
                result["arrivals"] = by_path
                return result

            seeded(0, args.charges, "small")
            progress(f"(a)-(c): reconcile over {small_refunds:,} refunds, budget off")
            small = measured_run("small")
            if args.profile:
                progress("profiling one more run over the same objects (cProfile, untimed)")
                stats_file = tmp / "profile.stats"
                profile_result = measured_run("profiled", stats_file)
                if not profile_result.get("timed_out"):
                    import io
                    import pstats

                    buffer = io.StringIO()
                    stats = pstats.Stats(str(stats_file), stream=buffer)
                    stats.sort_stats("tottime").print_stats(25)
                    stats.sort_stats("cumulative").print_stats(40)
                    profiled = (
                        f"profiled run: {profile_result['wall']:.1f} s wall under cProfile\n"
                        + buffer.getvalue()
                    )
            progress(
                f"(d): {args.listers} listers, RECONCILIATION_MAX_RPS={BUDGET_RPS}, "
                f"{args.budget_seconds:g} s"
            )
            budgeted = child_env(bench_url, sandbox_url, BUDGET_RPS)
            budget = measure_budget(this, tmp, budgeted, sandbox_url, since, args)
            if args.large_refunds:
                seeded(args.charges, large_charges - args.charges, "large")
                progress(f"(c): reconcile over {large_refunds:,} refunds, budget off")
                large = measured_run("large")
            sandbox.stop()
            sandbox = None
        finally:
            with signals_held():
                if sandbox is not None:
                    sandbox.stop()
                if "django" in sys.modules:
                    from django.db import connections

                    connections.close_all()
                database.drop()

    # --- the summary ----------------------------------------------------------------------------
    lines: list[tuple[str, str, str, bool]] = []  # figure, measured, target, held
    if small.get("timed_out"):
        lines.append(
            (
                f"(a) objects compared per second ({small_refunds:,} refunds)",
                f"the run did not finish within {small['timeout']:.0f} s",
                f">= {OBJECTS_PER_S_TARGET:,.0f}/s",
                False,
            )
        )
    else:
        compared = sum(small["compared"].values())
        rate = compared / small["wall"]
        lines.append(
            (
                f"(a) objects compared per second ({small_refunds:,} refunds)",
                f"{rate:,.0f}/s ({compared:,} in {small['wall']:.2f} s: "
                + ", ".join(f"{k} {v:,}" for k, v in sorted(small["compared"].items()))
                + ")",
                f">= {OBJECTS_PER_S_TARGET:,.0f}/s",
                rate >= OBJECTS_PER_S_TARGET,
            )
        )
        by_phase = {row["phase"]: row for row in phase_table(small)}
        held_by_provider = {"refunds": small_refunds, "charges": args.charges, "disputes": 0}
        for kind, held in held_by_provider.items():
            row = by_phase.get(kind, {"calls": -1, "pages": -1})
            limit = math.ceil(held / 100) + 1
            lines.append(
                (
                    f"(b) provider calls listing {kind}",
                    f"{row['calls']} ({row['pages']} pages) for {held:,} {kind}",
                    f"<= {limit}",
                    0 <= row["calls"] <= limit,
                )
            )
    label = f"(c) peak RSS growth, {small_refunds:,} -> {large_refunds:,} refunds"
    if not args.large_refunds:
        lines.append((label, "not measured (--large-refunds 0)", "< 50 MB", False))
    elif large.get("timed_out") or small.get("timed_out"):
        growth = mb(large["hwm_kb"] - small["hwm_kb"])
        over = growth >= RSS_GROWTH_TARGET_MB
        lines.append(
            (
                label,
                f"{'at least ' if over else 'not measured: '}{growth:+.1f} MB by the time a run "
                "was stopped unfinished",
                f"< {RSS_GROWTH_TARGET_MB:g} MB",
                False,
            )
        )
    else:
        growth = mb(large["hwm_kb"] - small["hwm_kb"])
        lines.append(
            (
                label,
                f"{growth:+.1f} MB (peak RSS, VmHWM: {mb(small['hwm_kb']):.1f} -> "
                f"{mb(large['hwm_kb']):.1f} MB; after Django's setup "
                f"{mb(small['hwm_before_kb']):.1f} / {mb(large['hwm_before_kb']):.1f} MB)",
                f"< {RSS_GROWTH_TARGET_MB:g} MB",
                growth < RSS_GROWTH_TARGET_MB,
            )
        )
    span = budget["client"][-1] - budget["client"][0] if len(budget["client"]) > 1 else 0.0
    for clock_name, key in (("the listers' clocks", "client"), ("sandbox arrivals", "server")):
        most, _ = budget[f"{key}_max"]
        lines.append(
            (
                f"(d) most calls in one second, {clock_name}",
                f"{most} ({len(budget[key])} calls in {span:.1f} s, mean "
                f"{(len(budget[key]) - 1) / span if span else math.nan:.2f}/s; per lister "
                f"{budget['per_lister']})",
                f"<= {BUDGET_RPS}",
                most <= BUDGET_RPS,
            )
        )
    checks.append(
        (
            "(d) listers ran >= 5 s on the shared budget",
            f"{span:.1f} s, RECONCILIATION_MAX_RPS as each saw it {budget['rps']}",
            span >= args.budget_seconds - 1.0 and all(r == BUDGET_RPS for r in budget["rps"]),
        )
    )
    checks += run_checks("small run", small, small_refunds, per)
    if args.large_refunds:
        checks += run_checks("large run", large, large_refunds, per)

    print()
    print(
        f"Reconciliation bench: {args.charges:,} charges x {per} refunds (then {large_charges:,} x "
        f"{per}), {os.cpu_count()} CPUs"
    )
    noisy = []
    for label, result in (("small", small), ("large", large)):
        if not result:
            continue
        print()
        for line in run_lines(label, result):
            print(line)
        if not result.get("timed_out"):
            for line in phase_lines(result):
                print(line)
            if result["other_cpu"] / result["wall"] > OTHER_LOAD_WARN:
                noisy.append(f"{label} run: {result['other_cpu'] / result['wall']:.2f} cores")
    print()
    width = max(len(f) for f, *_ in lines) + 2
    missed = []
    for figure, measured, target, held in lines:
        print(f"{figure:<{width}}{measured}")
        print(f"{'':<{width}}target {target}: {'ok' if held else 'MISSED'}")
        if not held:
            missed.append(figure)
    print()
    width = max(len(c) for c, *_ in checks) + 2
    for check, value, ok in checks:
        print(f"{check:<{width}}{value}{'' if ok else '   FAILED'}")
        if not ok:
            missed.append(check)
    if noisy:
        print(
            f"NOTE: other processes kept the machine busy ({', '.join(noisy)}): the figures are "
            "lower than on a quiet machine"
        )
    if profiled:
        print()
        print(profiled)
    print(f"(total {time.perf_counter() - began:.0f} s)")
    if missed:
        print(f"MISSED: {'; '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
