"""Benchmark: the verification engine's evaluation rate, polling tick and provider calls.

Everything runs in throw-away PostgreSQL databases (`vouch_bench_<pid>` and, for the tick with
history, `vouch_bench_<pid>_history`), created on the server named by DATABASE_URL (default
postgres://postgres@127.0.0.1:5432) through its `postgres` database, migrated, and dropped at the
end, also on error, Ctrl-C or SIGTERM. The developer's database is never touched.

1. Contract evaluations per second: pure `verification.evaluation.decide` on the
   `stripe.refund.created` contract with a realistic VERIFIED context (a refund readback and one
   refund.created event), called in a loop for a fixed window (default 3 s).
2. Polling tick time: wall-clock time of one `runs_claim_due(limit=1000)` call (its whole
   transaction: SELECT … FOR UPDATE SKIP LOCKED, UPDATE of the leases, COMMIT) with exactly 1,000
   due PENDING runs, (a) alone in their table and (b) after 200,000 decided runs (VERIFIED,
   next_attempt_at NULL). Each scenario has its own database and connection; rows are inserted
   with `INSERT … SELECT generate_series`, then VACUUM ANALYZE. After two warm-up ticks each
   (the first one also captures the claim's SQL), timed ticks of (a) and (b) alternate, so that
   background load on the machine weighs on both alike; each figure is the median of its ticks.
   Between ticks the claimed runs are re-armed (lease cleared). Target: (b) / (a) <= 1.25, i.e.
   the tick's cost does not grow with history. With --explain, or when the target is missed, the
   claim's SELECT and UPDATE are shown under EXPLAIN (ANALYZE, BUFFERS, WAL) in scenario (b).
3. Provider calls per verified refund on the happy path: a Stripe sandbox runs in this process;
   N refunds (default 20) are made through `providers.provider_from_settings().refund_create` on
   charges paid beforehand through the stripe SDK (not counted), their runs are started with
   `verification_start`, made due, claimed with `runs_claim_due` and attempted with `run_attempt`
   until all are VERIFIED. The sandbox's per-route request counters (`/_sandbox/state`) give the
   refund-route calls (`POST /v1/refunds` + `GET /v1/refunds/{id}`) made in between. Target: at
   most 2 per verified refund, the create included.

Run from the repo root: .venv/bin/python bench/verification.py [--seconds 3] [--decided 200000]
    [--database-name NAME] [--redis-url URL] [--sandbox-port P] (the last three also from
    BENCH_DATABASE_NAME, BENCH_REDIS_URL, BENCH_SANDBOX_PORT)
Exit status 1 if a check fails (a run not VERIFIED, a tick claiming the wrong number of runs) or a
target is missed; the summary is printed either way.
"""

from __future__ import annotations

import argparse
import copy
import gc
import logging
import os
import signal
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from signal import SIGINT, SIGTERM
from types import FrameType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

REPO = Path(__file__).resolve().parent.parent
# Run as `python bench/verification.py`, sys.path[0] is bench/, where this file would shadow the
# project's `verification` package: put the repo root there instead.
if sys.path and Path(sys.path[0]).resolve() == REPO / "bench":
    sys.path[0] = str(REPO)
elif str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.refund_api import (  # noqa: E402 - after the path fix above
    add_database_flag,
    add_port_flag,
    add_redis_flag,
)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/vouch"
CONTRACT_ID = "stripe.refund.created"
RUN_TABLE = "verification_verificationrun"  # checked against the model's db_table at start
TICK_LIMIT = 1000
TICK_RATIO_TARGET = 1.25
CALLS_TARGET = 2.0
REFUND_ROUTES = ("POST /v1/refunds", "GET /v1/refunds/{id}")
WARMUP_TICKS = 2
MAX_ROUNDS = 5  # attempt rounds for the happy path before giving up


def progress(message: str) -> None:
    print(f"  .. {message}", flush=True)


# --- the throw-away databases -----------------------------------------------------------------


def bench_database_urls(base_url: str, name: str) -> tuple[str, dict[str, Any]]:
    """The bench database's URL (for Django) and the psycopg arguments of the server's `postgres`
    maintenance database, both on the server, user and password of `base_url`."""
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


class Databases:
    """Throw-away databases on one server: each one made here is dropped by `drop_all`."""

    def __init__(self, maintenance: dict[str, Any]) -> None:
        self.maintenance = maintenance
        self.names: list[str] = []

    def create(self, name: str, *, template: str | None = None) -> None:
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            query += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        self.names.append(name)  # first: an interruption during CREATE must still drop it
        with psycopg.connect(**self.maintenance) as conn:
            conn.execute(query)
        progress(f"created database {name}")

    def drop_all(self) -> None:
        """Drop them all; Ctrl-C and SIGTERM wait until it is done."""
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (SIGINT, SIGTERM)}
        try:
            with psycopg.connect(**self.maintenance) as conn:
                for name in reversed(self.names):
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(name)
                        )
                    )
                    progress(f"dropped database {name}")
            self.names.clear()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def django_setup() -> None:
    """Set Django up on the bench database (DATABASE_URL is set already) and migrate it."""
    import django
    from django.core.management import call_command

    django.setup()
    logging.getLogger("stripe").setLevel(logging.WARNING)  # the SDK logs each request at INFO
    from verification.models import VerificationRun

    if VerificationRun._meta.db_table != RUN_TABLE:
        raise SystemExit(f"the run table is {VerificationRun._meta.db_table}, not {RUN_TABLE}")
    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    progress(f"migrated in {time.perf_counter() - started:.1f} s")


# --- 1. contract evaluations ------------------------------------------------------------------


def evaluations_per_second(seconds: float) -> float:
    """Pure `decide` calls per second on a realistic VERIFIED context."""
    from verification.contracts import Verdict, get_contract
    from verification.evaluation import decide
    from verification.expressions import Context

    contract = get_contract(CONTRACT_ID)
    started_at = datetime(2026, 11, 29, 10, 0, 0, 500_000, tzinfo=UTC)
    created = int(started_at.timestamp())  # the provider writes whole seconds
    context = Context(
        observed={
            "refund_readback": {
                "id": "re_1",
                "object": "refund",
                "status": "succeeded",
                "charge": "ch_1",
                "amount": 876,
                "currency": "usd",
                "created": created,
                "metadata": {"vouch_envelope": "env_1", "vouch_refund": "erf_1"},
            },
            "refund_created_events": {
                "events": [
                    {"id": "evt_1", "type": "refund.created", "object": "re_1", "created": created}
                ],
                "count": 1,
                "latest": created,
                "earliest": created,
                "types": ["refund.created"],
                "duplicates_dropped": 0,
            },
        },
        action_result={"id": "re_1", "status": "succeeded", "metadata": {"vouch_leg": "leg_1"}},
        input={"charge": "ch_1", "amount": 876},
        operation_id="erf_1:leg_1",
        operation_created_at=started_at,
    )
    now = started_at + timedelta(seconds=30)  # after the stale-read window

    def once() -> Any:
        return decide(contract, context, now=now, skew_s=2.0, attempt=1)

    first = once()
    if first.verdict != Verdict.VERIFIED:
        raise SystemExit(f"the evaluation context is not VERIFIED: {first.verdict} {first.reason}")
    calls = 0
    started = time.perf_counter()
    deadline = started + seconds
    while (now_s := time.perf_counter()) < deadline:
        for _ in range(100):
            once()
        calls += 100
    rate = calls / (now_s - started)
    progress(f"{calls} evaluations in {now_s - started:.2f} s")
    return rate


# --- 2. polling tick --------------------------------------------------------------------------

# Decided history: VERIFIED runs with realistic payloads, decided a while ago, next_attempt_at NULL.
INSERT_DECIDED = """
INSERT INTO verification_verificationrun (
    public_id, contract_id, contract_version, operation_id, operation_created_at, input,
    action_result, correlation, verdict, verdict_class, verdict_reason, decided_at,
    attempts_made, next_attempt_at, deadline_at, leased_until, lease_token, event_pending,
    created_at
)
SELECT
    'vrun_' || left(md5('decided' || g), 24), 'stripe.refund.created', 1,
    'erf_bench_' || g || ':leg_1', t.at, jsonb_build_object('charge', 'ch_' || g, 'amount', 500),
    jsonb_build_object('id', 're_' || g, 'object', 'refund', 'status', 'succeeded',
                       'charge', 'ch_' || g, 'amount', 500,
                       'metadata', jsonb_build_object('vouch_leg', 'leg_1')),
    jsonb_build_object('refund_id', 're_' || g, 'idempotency_key', 'erf_bench_' || g || ':leg_1',
                       'charge', 'ch_' || g, 'amount', 500),
    'VERIFIED', '', 'All verified conditions hold.', t.at + interval '2 seconds',
    1, NULL, t.at + interval '7 days', NULL, '', false, t.at
FROM generate_series(1, %(count)s) AS g,
     LATERAL (SELECT %(now)s::timestamptz - interval '30 days' + g * interval '1 second') AS t(at)
"""

# Due runs: PENDING, next attempt in the past, not leased.
INSERT_DUE = """
INSERT INTO verification_verificationrun (
    public_id, contract_id, contract_version, operation_id, operation_created_at, input,
    action_result, correlation, verdict, verdict_class, verdict_reason, decided_at,
    attempts_made, next_attempt_at, deadline_at, leased_until, lease_token, event_pending,
    created_at
)
SELECT
    'vrun_' || left(md5('due' || g), 24), 'stripe.refund.created', 1,
    'erf_due_' || g || ':leg_1', t.at, jsonb_build_object('charge', 'ch_d' || g, 'amount', 500),
    jsonb_build_object('id', 're_d' || g, 'object', 'refund', 'status', 'pending',
                       'charge', 'ch_d' || g, 'amount', 500,
                       'metadata', jsonb_build_object('vouch_leg', 'leg_1')),
    jsonb_build_object('refund_id', 're_d' || g, 'idempotency_key', 'erf_due_' || g || ':leg_1',
                       'charge', 'ch_d' || g, 'amount', 500),
    'PENDING', '', '', NULL,
    0, t.at + interval '1 second', t.at + interval '7 days', NULL, '', false, t.at
FROM generate_series(1, %(count)s) AS g,
     LATERAL (SELECT %(now)s::timestamptz - interval '1 hour' + g * interval '1 millisecond')
         AS t(at)
"""


def runs_reset() -> None:
    """Empty the run table (and what references it)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE verification_verificationrun CASCADE")


def runs_load(*, decided: int, due: int) -> None:
    """Insert `decided` VERIFIED runs then `due` due PENDING runs, then VACUUM ANALYZE."""
    from django.db import connection
    from django.utils import timezone

    now = timezone.now()
    with connection.cursor() as cursor:
        if decided:
            started = time.perf_counter()
            cursor.execute(INSERT_DECIDED, {"count": decided, "now": now})
            progress(f"inserted {decided:,} decided runs in {time.perf_counter() - started:.1f} s")
        cursor.execute(INSERT_DUE, {"count": due, "now": now})
        started = time.perf_counter()
        cursor.execute("VACUUM ANALYZE verification_verificationrun")
        progress(
            f"inserted {due:,} due runs; VACUUM ANALYZE in {time.perf_counter() - started:.1f} s"
        )


def rearm(ids: list[int]) -> None:
    """Make claimed runs due again: clear their lease."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE verification_verificationrun SET leased_until = NULL, lease_token = '' "
            "WHERE id = ANY(%s)",
            [ids],
        )


@contextmanager
def on_connection(wrapper: Any) -> Iterator[None]:
    """Make `wrapper` (a DatabaseWrapper) Django's default connection for a while: the engine's
    services then run on its database."""
    from django.db import connections

    previous = connections["default"]
    connections["default"] = wrapper
    try:
        yield
    finally:
        connections["default"] = previous


@dataclass
class Scenario:
    """One tick scenario: its own database and persistent connection, and its tick times."""

    label: str
    decided: int
    wrapper: Any
    times: list[float] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)  # the claim's SQL, as executed

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def scenario_connection(database: str) -> Any:
    """A new DatabaseWrapper like the default one, on another database."""
    from django.db import connections

    settings_dict = copy.deepcopy(connections["default"].settings_dict)
    settings_dict["NAME"] = database
    return connections["default"].__class__(settings_dict, alias="default")


def tick(scenario: Scenario, *, due: int, timed: bool, capture: bool) -> None:
    """One `runs_claim_due(limit=1000)` on the scenario's database, then re-arm what it claimed.
    It must claim exactly `due` runs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from verification.services import runs_claim_due

    with on_connection(scenario.wrapper):
        now = timezone.now()
        if capture:  # untimed: the capture costs time
            with CaptureQueriesContext(connection) as queries:
                claimed = runs_claim_due(limit=TICK_LIMIT, now=now)
            scenario.queries = [
                q["sql"]
                for q in queries.captured_queries
                if q["sql"].startswith(("SELECT", "UPDATE"))
            ]
        else:
            gc.collect()
            gc.disable()
            try:
                started = time.perf_counter()
                claimed = runs_claim_due(limit=TICK_LIMIT, now=now)
                elapsed = time.perf_counter() - started
            finally:
                gc.enable()
            if timed:
                scenario.times.append(elapsed)
        if len(claimed) != due:
            raise SystemExit(f"{scenario.label}: a tick claimed {len(claimed)} runs, not {due}")
        rearm([run_id for run_id, _ in claimed])


def tick_scenarios(scenarios: list[Scenario], *, due: int, ticks: int) -> None:
    """Warm-up ticks, then `ticks` timed ticks per scenario, interleaved (the order alternating
    each round) so that background load on the machine weighs on every scenario alike."""
    for number in range(WARMUP_TICKS + ticks):
        order = scenarios if number % 2 == 0 else scenarios[::-1]
        for scenario in order:
            tick(scenario, due=due, timed=number >= WARMUP_TICKS, capture=number == 0)
    for scenario in scenarios:
        shown = ", ".join(f"{t * 1000:.1f}" for t in scenario.times)
        progress(f"{scenario.label}: ticks {shown} ms; median {scenario.median * 1000:.1f} ms")


def explain(scenario: Scenario) -> str:
    """EXPLAIN (ANALYZE, BUFFERS, WAL) of the claim's statements on the scenario's database, in a
    rolled-back transaction."""
    from django.db import connection, transaction

    lines = []
    with on_connection(scenario.wrapper), transaction.atomic(), connection.cursor() as cursor:
        for query in scenario.queries:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, WAL) " + query)
            plan = [row[0] for row in cursor.fetchall()]
            lines += [f"      {line}" for line in plan if "= ANY ('{" not in line]
        transaction.set_rollback(True)
    return "\n".join(lines)


# --- 3. provider calls on the happy path ------------------------------------------------------


def provider_calls_per_refund(refunds: int, port: int = 0) -> float:
    """Refund-route calls at the sandbox per VERIFIED refund: refund_create, then the engine's
    attempts until every run is VERIFIED."""
    import stripe
    from django.conf import settings
    from django.utils import timezone

    from providers import provider_from_settings
    from stripe_sandbox import SandboxServer
    from stripe_sandbox.client import SandboxControl
    from verification.contracts import Verdict
    from verification.models import VerificationRun
    from verification.services import run_attempt, runs_claim_due, verification_start

    runs_reset()  # the tick benchmark's runs must not be claimed here
    # Limits lifted: this counts calls per verified refund; charges paid and refunds made in a
    # row past Stripe's 25 a second would be refused and their retries counted too.
    server = SandboxServer(port=port, seed=1234, rate_limits=False).start()
    try:
        settings.STRIPE_API_BASE = server.url
        control = SandboxControl(server.url)
        sdk = stripe.StripeClient(
            settings.STRIPE_API_KEY, base_addresses={"api": server.url}, max_network_retries=0
        )
        charges = []
        for _ in range(refunds):
            intent = sdk.v1.payment_intents.create(
                params={
                    "amount": 10_000,
                    "currency": "usd",
                    "payment_method": "pm_card_visa",
                    "confirm": True,
                    "allowed_payment_method_types": ["card"],
                }
            )
            if intent.status != "succeeded":
                raise SystemExit(f"a charge did not succeed: {intent.status}")
            charges.append(str(intent.latest_charge))
        progress(f"sandbox at {server.url}: {refunds} paid charges made (not counted)")

        before = dict(control.state()["requests"])
        provider = provider_from_settings()
        run_ids = []
        for number, charge in enumerate(charges, start=1):
            key = f"erf_bench:leg_{number}"
            started = timezone.now()
            refund = provider.refund_create(
                charge=charge,
                amount_cents=500,
                idempotency_key=key,
                metadata={"vouch_envelope": "env_b", "vouch_refund": "erf_b", "vouch_leg": key},
            ).require()
            run = verification_start(
                contract_id=CONTRACT_ID,
                operation_id=key,
                operation_created_at=started,
                input={"charge": charge, "amount": 500},
                action_result=refund,
            )
            run_ids.append(run.pk)
        progress(f"{refunds} refunds made and their runs started")

        pending = VerificationRun.objects.filter(pk__in=run_ids, verdict=Verdict.PENDING)
        for round_number in range(1, MAX_ROUNDS + 1):
            if not pending.exists():
                break
            now = timezone.now()
            pending.update(next_attempt_at=now)  # due now rather than after the initial delay
            claimed = runs_claim_due(limit=len(run_ids), now=now)
            for run_id, token in claimed:
                run_attempt(run_id=run_id, token=token, trigger="poll")
            progress(f"round {round_number}: {len(claimed)} runs attempted")
        after = dict(control.state()["requests"])
    finally:
        server.stop()

    runs = VerificationRun.objects.filter(pk__in=run_ids)
    counts = Counter(runs.values_list("verdict", flat=True))
    if counts != Counter({Verdict.VERIFIED: refunds}):
        other = runs.exclude(verdict=Verdict.VERIFIED).values_list("verdict", "verdict_reason")
        raise SystemExit(f"not every run ended VERIFIED: {dict(counts)}; e.g. {other[:3]}")
    delta = {
        route: after.get(route, 0) - before.get(route, 0)
        for route in sorted(set(after) | set(before))
        if after.get(route, 0) != before.get(route, 0)
    }
    progress(f"all {refunds} runs VERIFIED; sandbox requests made meanwhile: {delta}")
    calls = sum(delta.get(route, 0) for route in REFUND_ROUTES)
    return calls / refunds


# --- the whole bench --------------------------------------------------------------------------


def measure_ticks(
    databases: Databases, main_database: str, *, decided: int, ticks: int
) -> tuple[Scenario, Scenario]:
    """The two tick scenarios, each on its own database (the main one, and a copy of it made
    here) so that their ticks can be interleaved."""
    from django.db import connections

    history = f"{main_database}_history"
    connections.close_all()  # a database with open connections cannot be a template
    databases.create(history, template=main_database)
    alone = Scenario("among 0 decided", 0, scenario_connection(main_database))
    among = Scenario(f"among {decided:,} decided", decided, scenario_connection(history))
    try:
        for scenario in (alone, among):
            with on_connection(scenario.wrapper):
                runs_load(decided=scenario.decided, due=TICK_LIMIT)
        tick_scenarios([alone, among], due=TICK_LIMIT, ticks=ticks)
    except BaseException:
        alone.wrapper.close()
        among.wrapper.close()
        raise
    return alone, among


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="evaluation window (s)")
    parser.add_argument("--decided", type=int, default=200_000, help="decided runs for tick (b)")
    parser.add_argument("--ticks", type=int, default=11, help="timed ticks per scenario")
    parser.add_argument("--refunds", type=int, default=20, help="refunds on the happy path")
    parser.add_argument("--explain", action="store_true", help="always print the claim's plans")
    add_database_flag(parser, "vouch_bench_<pid>; the tick with history's is <name>_history")
    add_redis_flag(parser, "", "CELERY_BROKER_URL as set, else the test settings' Redis db 0")
    add_port_flag(parser, "--sandbox-port", "the in-process sandbox's port")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def terminated(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)  # unwinds through the finally that drops the databases

    signal.signal(SIGTERM, terminated)

    name = args.database_name or f"vouch_bench_{os.getpid()}"
    bench_url, maintenance = bench_database_urls(
        os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), name
    )
    os.environ["DATABASE_URL"] = bench_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    if args.redis_url:
        os.environ["CELERY_BROKER_URL"] = args.redis_url
    started = time.perf_counter()
    databases = Databases(maintenance)
    scenarios: list[Scenario] = []
    try:
        databases.create(name)
        django_setup()

        print("1. contract evaluations", flush=True)
        rate = evaluations_per_second(args.seconds)

        print(f"2. polling tick, {TICK_LIMIT:,} due runs", flush=True)
        alone, among = measure_ticks(databases, name, decided=args.decided, ticks=args.ticks)
        scenarios = [alone, among]
        ratio = among.median / alone.median
        plan = explain(among) if args.explain or ratio > TICK_RATIO_TARGET else ""

        print(f"3. provider calls, {args.refunds} refunds on the happy path", flush=True)
        calls = provider_calls_per_refund(args.refunds, args.sandbox_port)
    finally:
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        for scenario in scenarios:
            scenario.wrapper.close()
        databases.drop_all()

    if plan:
        print(f"\nthe claim's statements among {args.decided:,} decided runs:\n{plan}")
    summary: list[tuple[str, str]] = [
        ("contract evaluations/s:", f"{rate:.0f}"),
        (f"poll tick, {TICK_LIMIT:,} due among 0 decided:", f"{alone.median * 1000:.1f} ms"),
        (
            f"poll tick, {TICK_LIMIT:,} due among {args.decided:,} decided:",
            f"{among.median * 1000:.1f} ms",
        ),
        ("ratio:", f"{ratio:.2f} (target <= {TICK_RATIO_TARGET})"),
        ("provider calls per verified refund:", f"{calls:.2f} (target <= {CALLS_TARGET:g})"),
    ]
    width = max(len(label) for label, _ in summary) + 2
    print()
    for label, value in summary:
        print(f"{label:<{width}}{value}")
    print(f"(total {time.perf_counter() - started:.0f} s)")
    missed = [
        what
        for what, bad in (
            ("poll tick ratio", ratio > TICK_RATIO_TARGET),
            ("provider calls", calls > CALLS_TARGET),
        )
        if bad
    ]
    if missed:
        print(f"MISSED: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
