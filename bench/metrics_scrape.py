"""Benchmark: what one `/metrics` scrape costs the database, as the tables grow.

The database's state (refund legs by outcome, verification runs by contract and verdict, open
escalations, the oldest pending run, stored events by status, open discrepancies by class) is
read at scrape time by `ops.collectors.DatabaseCollector`: a fixed number of aggregate
statements. This measures that number and the time, at each size.

Everything runs in a throw-away PostgreSQL database (`vouch_bench_metrics_<pid>`, created on the
server named by DATABASE_URL, default postgres://postgres@127.0.0.1:5432, through its `postgres`
database), migrated, and dropped at the end, also on error or Ctrl-C. Rows are bulk-inserted
(no provider, no services: the collector only counts them), then ANALYZEd; at each size
(`--sizes`, default 10,000 and 100,000 rows in each of: refund legs, verification runs, stored
events; a tenth as many escalations and discrepancies, a hundredth of the runs pending) the
collector runs `--scrapes` (20) times after one warm-up, and the script prints the statements per
scrape and the median and worst time.

Run from the repo root: .venv/bin/python bench/metrics_scrape.py [--sizes 10000,100000]
    [--scrapes 20] [--database-name NAME] [--redis-url URL] (the last two also from
    BENCH_DATABASE_NAME, BENCH_REDIS_URL)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/metrics_scrape.py`, sys.path[0] is bench/, where bench/verification.py would
# shadow the project's `verification` package: put the repo root there instead.
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path[0] = str(ROOT)
elif str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.refund_api import add_database_flag, add_redis_flag  # noqa: E402 - after the path fix

BATCH = 5_000


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--scrapes", type=int, default=20)
    add_database_flag(parser, "vouch_bench_metrics_<pid>")
    add_redis_flag(parser, "", "CELERY_BROKER_URL as set, else the test settings' Redis db 0")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/vouch")
    name = args.database_name or f"vouch_bench_metrics_{os.getpid()}"
    parts = urlsplit(base)
    os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    if args.redis_url:
        os.environ["CELERY_BROKER_URL"] = args.redis_url

    import psycopg
    from psycopg import sql

    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(f"database {name}: migrated")
        done = 0
        for size in sizes:
            _seed(start=done, count=size - done)
            done = size
            _measure(size, scrapes=args.scrapes)
        return 0
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _seed(*, start: int, count: int) -> None:
    from django.db import connection
    from django.utils import timezone

    from accounts.models import User
    from envelopes.models import Envelope, FundingLeg, RefundOperation
    from reconciliation.models import Discrepancy, Run
    from verification.models import Escalation, ProviderEvent

    started = time.perf_counter()
    now = timezone.now()
    user, _ = User.objects.get_or_create(username="bench")
    envelope = Envelope.objects.create(owner=user)
    funding = FundingLeg.objects.create(
        envelope=envelope,
        kind="original",
        sequence=1,
        amount_micro=1_000_000,
        payment_method="pm_card_visa",
        idempotency_key=f"bench-funding-{start}",
    )
    run = Run.objects.create(
        kind="manual",
        lane="objects",
        status="completed",
        finished_at=now,
        window_start=now,
        window_end=now,
        started_at=now,
        heartbeat_at=now,
    )
    operation = RefundOperation.objects.create(
        envelope=envelope, requested_micro=10_000, remainder_micro=0, created_by=user
    )
    end = start + count
    with connection.cursor() as cursor:
        # Two big tables in one statement each: 1 in 10 legs refused or unknown; 1 in 100 runs
        # pending, 5 failed, 4 unverifiable.
        cursor.execute(
            """
            INSERT INTO envelopes_refundleg (public_id, sequence, amount_micro, outcome,
                idempotency_key, provider_refund_id, error_code, attempts, reserved_at, released,
                funding_leg_id, operation_id)
            SELECT 'leg_bench_' || n, 1, 10000,
                CASE n %% 10 WHEN 8 THEN 'refused' WHEN 9 THEN 'unknown' ELSE 'accepted' END,
                'bench-leg-' || n, '', '', 1, now(), false, %s, %s
            FROM generate_series(%s, %s - 1) AS n
            """,
            [funding.pk, operation.pk, start, end],
        )
        cursor.execute(
            """
            INSERT INTO verification_verificationrun (public_id, contract_id, contract_version,
                operation_id, operation_created_at, input, action_result, correlation, verdict,
                verdict_class, verdict_reason, attempts_made, deadline_at, lease_token,
                event_pending, created_at)
            SELECT 'vrun_bench_' || n,
                CASE n %% 2 WHEN 0 THEN 'stripe.refund.created' ELSE 'stripe.charge.succeeded' END,
                1, 'bench-op-' || n, now(), '{}', '{}', '{}',
                CASE WHEN n %% 100 = 0 THEN 'PENDING' WHEN n %% 100 < 6 THEN 'FAILED'
                     WHEN n %% 100 < 10 THEN 'UNVERIFIABLE' ELSE 'VERIFIED' END,
                '', '', 1, now() + interval '1 hour', '', false, now() - interval '1 minute'
            FROM generate_series(%s, %s - 1) AS n
            """,
            [start, end],
        )
    for first in range(start, end, BATCH):
        numbers = range(first, min(first + BATCH, end))
        # Through the model (whatever fields it has grown): 1 in 50 events unprocessed.
        ProviderEvent.objects.bulk_create(
            ProviderEvent(
                event_id=f"evt_bench_{n}",
                type="charge.refunded",
                provider_created=1_700_000_000 + n,
                payload={},
                raw="{}",
                processed_at=None if n % 50 == 0 else now,
            )
            for n in numbers
        )
        tenth = [n for n in numbers if n % 10 == 0]
        Escalation.objects.bulk_create(
            Escalation(
                subject_type="refund_leg",
                subject_id=f"leg_bench_{n}",
                verdict="UNVERIFIABLE",
                reason="bench",
                status="open" if n % 100 == 0 else "resolved",
            )
            for n in tenth
        )
        Discrepancy.objects.bulk_create(
            Discrepancy(
                code="refund_missing",
                severity="money",
                subject_type="refund_leg",
                subject_id=f"leg_bench_{n}",
                status="open" if n % 100 == 0 else "resolved",
                summary="bench",
                first_seen_at=now,
                last_seen_at=now,
                due_at=now,
                first_run=run,
                last_run=run,
            )
            for n in tenth
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"seeded {count:,} more rows a table in {time.perf_counter() - started:.1f} s")


def _measure(size: int, *, scrapes: int) -> None:
    from django.db import connection

    from ops.collectors import DatabaseCollector

    collector = DatabaseCollector()

    def scrape() -> dict[str, float]:
        return {
            family.name: family.samples[0].value
            for family in collector.collect()
            if family.name.startswith("vouch_metrics_database")
        }

    scrape()  # warm-up: the connection, the plans
    times, statements = [], set()
    for _ in range(scrapes):
        answer = scrape()
        if answer["vouch_metrics_database_up"] != 1:
            raise SystemExit("the collector could not read the database")
        times.append(answer["vouch_metrics_database_seconds"])
        statements.add(int(answer["vouch_metrics_database_statements"]))
    # Which statement costs what (one more scrape, each statement timed).
    timed: list[tuple[float, str]] = []

    def timing(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            timed.append((time.perf_counter() - began, sql.split(" FROM ")[1].split()[0]))

    with connection.execute_wrapper(timing):
        scrape()
    connection.close()
    print(
        f"{size:>9,} rows a table: {sorted(statements)} statements a scrape, "
        f"median {statistics.median(times) * 1000:.1f} ms, worst {max(times) * 1000:.1f} ms "
        f"over {scrapes} scrapes; "
        + ", ".join(f"{table} {seconds * 1000:.1f} ms" for seconds, table in timed)
    )


if __name__ == "__main__":
    sys.exit(main())
