"""Benchmark: the console's search box (ops/search/, issue 27 item 2) with `--rows` (100,000)
rows in every table it asks. Target: every id kind under 100 ms.

Runs in a database of its own (`--database-name`, default `vouch_bench_search`, on the server
named by DATABASE_URL, default postgres://postgres@127.0.0.1:5432): dropped if it exists, created,
migrated, filled, and dropped at the end (also on error or Ctrl-C) unless `--keep`. The
developer's database is never touched.

Fill (untimed, bulk inserts, then ANALYZE): per row i, a buyer (an e-mail of mixed case), an
envelope, its funding leg (charge `ch_…`, PaymentIntent `pi_…`), a debit, a refund operation and
its leg (provider refund `re_…`), the charge's verification run with its correlation keys, its
charge receipt, a dispute on the charge (`dsp_`, `dp_`) with a packet and an evidence reference, a
provider event (a charge's, a refund's or a dispute's, in turn), a reconciliation run, a
discrepancy about a foreign refund of the charge and its escalation about the funding leg, an
adjustment naming another foreign refund, and a refund request: `--rows` of each.

Timed: for each id kind, `--samples` (200) ids of existing rows picked at random (and, for
`missing` and `unknown`, ids of nothing), each searched once, warm (one search of another id of
the kind before): `ops.search.search(…)` alone, and the whole page (`GET /admin/search/?q=…` by a
superuser through Django's test client: the permission checks, the redirect of a single hit or
the rendered list). Prints p50 / p95 / max in milliseconds per kind; exit 1 if a max is 100 ms or
more.

Run from the repo root: .venv/bin/python bench/search.py [--rows 100000] [--samples 200]
    [--database-name vouch_bench_search] [--redis-url URL] [--keep]
(--database-name, once --database, also from BENCH_DATABASE_NAME; --redis-url from
BENCH_REDIS_URL. The database is dropped first if it exists: two runs side by side need two names.)
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
# Run as `python bench/search.py`, sys.path[0] is bench/, whose reconciliation.py would shadow the
# project's `reconciliation` package: put the repo root there instead.
if sys.path and Path(sys.path[0]).resolve() == REPO / "bench":
    sys.path[0] = str(REPO)
elif str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.refund_api import add_redis_flag  # noqa: E402 - after the path fix above

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/vouch"
DEFAULT_DATABASE_NAME = "vouch_bench_search"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/7"
TARGET_MS = 100.0
BATCH = 5_000


def progress(text: str) -> None:
    print(f"[search bench] {text}", file=sys.stderr, flush=True)


def database_urls(base_url: str, name: str) -> tuple[str, dict[str, Any]]:
    """The bench database's URL and the psycopg arguments of the server's `postgres` database."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        raise SystemExit(f"DATABASE_URL must be a postgres:// URL, not {parts.scheme}://")
    url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    maintenance = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "postgres",
        "password": parts.password,
        "dbname": "postgres",
        "autocommit": True,
    }
    return url, maintenance


@contextmanager
def own_database(maintenance: dict[str, Any], name: str, *, keep: bool) -> Iterator[None]:
    import psycopg
    from psycopg import sql

    def drop() -> None:
        with psycopg.connect(**maintenance) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    drop()
    with psycopg.connect(**maintenance) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    progress(f"created database {name}")
    try:
        yield
    finally:
        if not keep:
            from django.db import connections

            connections.close_all()
            drop()
            progress(f"dropped database {name}")


# --- the fill -----------------------------------------------------------------------------------


def vouch_id(prefix: str, i: int) -> str:
    return f"{prefix}_{i:024x}"


def stripe_id(prefix: str, i: int) -> str:
    return f"{prefix}_3Bench{i:018d}"


def email_of(i: int) -> str:
    return f"Buyer{i}@Example.com"


def receipt_id(i: int) -> str:
    return f"rcpt_{i:064x}"


def _bulk(model: Any, rows: int, make: Callable[[int], Any]) -> list[Any]:
    """Rows 0 … rows-1 of `model`, made by `make(i)`; their primary keys, in order."""
    started = time.perf_counter()
    keys: list[Any] = []
    for start in range(0, rows, BATCH):
        made = model.objects.bulk_create([make(i) for i in range(start, min(rows, start + BATCH))])
        keys.extend(row.pk for row in made)
    progress(f"{model._meta.label}: {rows:,} rows in {time.perf_counter() - started:.1f} s")
    return keys


def fill(rows: int) -> None:
    from django.db import connection
    from django.utils import timezone

    from accounts.models import User
    from agents.models import RefundRequest
    from disputes.models import Dispute, Evidence, Packet
    from envelopes.models import (
        Adjustment,
        Debit,
        Envelope,
        FundingLeg,
        RefundLeg,
        RefundOperation,
    )
    from receipts.models import Receipt
    from reconciliation.models import Discrepancy
    from reconciliation.models import Run as ReconciliationRun
    from verification.models import Escalation, ProviderEvent, RunKey, VerificationRun

    now = timezone.now()
    amount = 10_000_000
    users = _bulk(
        User,
        rows,
        lambda i: User(username=f"buyer{i}", email=email_of(i), password="!"),  # noqa: S106
    )
    envelopes = _bulk(
        Envelope,
        rows,
        lambda i: Envelope(
            public_id=vouch_id("env", i),
            owner_id=users[i],
            total_funded_micro=amount,
            total_debited_micro=1_000_000,
            total_refunded_micro=2_000_000,
            unspent_micro=amount - 3_000_000,
        ),
    )
    funding = _bulk(
        FundingLeg,
        rows,
        lambda i: FundingLeg(
            public_id=vouch_id("fnd", i),
            envelope_id=envelopes[i],
            kind="original",
            sequence=1,
            amount_micro=amount,
            refunded_micro=2_000_000,
            status="succeeded",
            payment_method="pm_card_visa",
            idempotency_key=f"fund-{i}",
            payment_intent_id=stripe_id("pi", i),
            charge_id=stripe_id("ch", i),
            funded_at=now,
        ),
    )
    _bulk(
        Debit,
        rows,
        lambda i: Debit(
            public_id=vouch_id("dbt", i),
            envelope_id=envelopes[i],
            amount_micro=1_000_000,
            reference=f"job-{i}",
            created_by_id=users[i],
        ),
    )
    operations = _bulk(
        RefundOperation,
        rows,
        lambda i: RefundOperation(
            public_id=vouch_id("erf", i),
            envelope_id=envelopes[i],
            requested_micro=2_000_000,
            remainder_micro=0,
            created_by_id=users[i],
        ),
    )
    runs = _bulk(
        VerificationRun,
        rows,
        lambda i: VerificationRun(
            public_id=vouch_id("vrun", i),
            contract_id="stripe.charge.succeeded",
            contract_version=1,
            operation_id=f"fund-{i}",
            operation_created_at=now,
            verdict="VERIFIED",
            decided_at=now,
            deadline_at=now + timedelta(hours=1),
        ),
    )
    keys = ("charge_id", "payment_intent", "idempotency_key")
    _bulk(
        RunKey,
        rows * len(keys),
        lambda n: RunKey(
            run_id=runs[n // len(keys)],
            name=keys[n % len(keys)],
            value={
                "charge_id": stripe_id("ch", n // len(keys)),
                "payment_intent": stripe_id("pi", n // len(keys)),
                "idempotency_key": f"fund-{n // len(keys)}",
            }[keys[n % len(keys)]],
        ),
    )
    _bulk(
        RefundLeg,
        rows,
        lambda i: RefundLeg(
            public_id=vouch_id("rfl", i),
            operation_id=operations[i],
            funding_leg_id=funding[i],
            sequence=1,
            amount_micro=2_000_000,
            outcome="accepted",
            idempotency_key=f"refund-{i}",
            provider_refund_id=stripe_id("re", i),
            attempts=1,
            reserved_at=now,
            decided_at=now,
        ),
    )
    _bulk(
        Receipt,
        rows,
        lambda i: Receipt(
            id=receipt_id(i),
            kind="charge",
            provider_object_id=stripe_id("ch", i),
            charge_id=stripe_id("ch", i),
            amount_micro=amount,
            currency="usd",
            occurred_at=now,
            verification_run_id=runs[i],
            verdict="VERIFIED",
            body={},
            canonical="{}",
            signature="bench",
            key_id="bench",
            key_environment="test",
        ),
    )
    disputes = _bulk(
        Dispute,
        rows,
        lambda i: Dispute(
            public_id=vouch_id("dsp", i),
            provider_dispute_id=stripe_id("dp", i),
            charge_id=stripe_id("ch", i),
            amount_micro=amount,
            reason="fraudulent",
            response_deadline=now + timedelta(days=7),
            provider_status="needs_response",
            source="provider",
        ),
    )
    _bulk(
        Packet,
        rows,
        lambda i: Packet(
            public_id=vouch_id("pkt", i),
            dispute_id=disputes[i],
            version=1,
            drafter="bench",
            posture="contest",
            summary="",
            digest="0" * 64,
            status="ready_for_review",
        ),
    )
    _bulk(
        Evidence,
        rows,
        lambda i: Evidence(
            public_id=vouch_id("evd", i),
            dispute_id=disputes[i],
            ref=f"doc:{i}",
            sha256="0" * 64,
            kind="delivery",
            summary="Signed for",
        ),
    )

    def event(i: int) -> Any:
        charge, intent = stripe_id("ch", i), stripe_id("pi", i)
        shape = i % 3
        if shape == 0:
            kind, obj = "charge.succeeded", {"id": charge, "payment_intent": intent}
        elif shape == 1:
            kind = "refund.created"
            obj = {"id": stripe_id("re", i), "charge": charge, "payment_intent": intent}
        else:
            kind = "charge.dispute.created"
            obj = {"id": stripe_id("dp", i), "charge": charge, "payment_intent": intent}
        payload = {"id": stripe_id("evt", i), "type": kind, "data": {"object": obj}}
        return ProviderEvent(
            event_id=stripe_id("evt", i),
            type=kind,
            provider_created=int(now.timestamp()) - i,
            payload=payload,
            raw="{}",
            processed_at=now,
        )

    _bulk(ProviderEvent, rows, event)
    recons = _bulk(
        ReconciliationRun,
        rows,
        lambda i: ReconciliationRun(
            public_id=vouch_id("rec", i),
            kind="sweep",
            lane="objects",
            status="completed",
            window_start=now - timedelta(days=7),
            window_end=now,
            started_at=now,
            heartbeat_at=now,
            finished_at=now,
        ),
    )
    escalations = _bulk(
        Escalation,
        rows,
        lambda i: Escalation(
            subject_type="funding_leg",
            subject_id=vouch_id("fnd", i),
            money=True,
            verdict="DISCREPANCY",
            verdict_class="refund_foreign",
            reason=f"Reconciliation run {vouch_id('rec', i)}: a refund made outside Vouch",
        ),
    )
    _bulk(
        Discrepancy,
        rows,
        lambda i: Discrepancy(
            public_id=vouch_id("dsc", i),
            code="refund_foreign",
            severity="money",
            subject_type="refund",
            subject_id=stripe_id("re", rows + i),  # a foreign refund of the charge
            charge_id=stripe_id("ch", i),
            envelope_public_id=vouch_id("env", i),
            amount_micro=1_000_000,
            summary="A refund made outside Vouch",
            first_seen_at=now,
            last_seen_at=now,
            due_at=now + timedelta(hours=24),
            first_run_id=recons[i],
            last_run_id=recons[i],
            escalation_id=escalations[i],
        ),
    )
    _bulk(
        Adjustment,
        rows,
        lambda i: Adjustment(
            public_id=vouch_id("adj", i),
            envelope_id=envelopes[i],
            kind="foreign_refund",
            status="rejected",
            amount_micro=1_000_000,
            provider_object_id=stripe_id("re", 2 * rows + i),
            reason="bench",
            proposed_by_id=users[i],
        ),
    )
    _bulk(
        RefundRequest,
        rows,
        lambda i: RefundRequest(
            public_id=vouch_id("rrq", i),
            owner_id=users[i],
            envelope_id=envelopes[i],
            amount_micro=1_000_000,
            preview={},
            status="refused",
            expires_at=now + timedelta(minutes=30),
        ),
    )
    # VACUUM as well as ANALYZE: after 100,000 inserts a table is due autovacuum's pass (PostgreSQL
    # 13+ counts inserts), which would otherwise run during the timing and show as its outliers
    # (a 200-370 ms max on a quiet machine). A table in service has had that pass long ago.
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")
    progress(f"VACUUM (ANALYZE) in {time.perf_counter() - started:.1f} s")


# --- the timing ---------------------------------------------------------------------------------


def kinds(rows: int) -> dict[str, Callable[[int], str]]:
    """Each id kind timed, and the id of row i of it."""
    return {
        "env_": lambda i: vouch_id("env", i),
        "fnd_": lambda i: vouch_id("fnd", i),
        "dbt_": lambda i: vouch_id("dbt", i),
        "erf_": lambda i: vouch_id("erf", i),
        "rfl_": lambda i: vouch_id("rfl", i),
        "adj_": lambda i: vouch_id("adj", i),
        "dsp_": lambda i: vouch_id("dsp", i),
        "pkt_": lambda i: vouch_id("pkt", i),
        "evd_": lambda i: vouch_id("evd", i),
        "vrun_": lambda i: vouch_id("vrun", i),
        "rec_": lambda i: vouch_id("rec", i),
        "dsc_": lambda i: vouch_id("dsc", i),
        "rrq_": lambda i: vouch_id("rrq", i),
        "rcpt_": receipt_id,
        "ch_": lambda i: stripe_id("ch", i),
        "pi_": lambda i: stripe_id("pi", i),
        "re_": lambda i: stripe_id("re", i),
        "re_ (foreign)": lambda i: stripe_id("re", rows + i),
        "dp_": lambda i: stripe_id("dp", i),
        "evt_": lambda i: stripe_id("evt", i),
        "e-mail": lambda i: email_of(i).lower(),
        "missing (env_)": lambda i: vouch_id("env", rows + 1_000_000 + i),
        "missing (ch_)": lambda i: stripe_id("ch", rows + 1_000_000 + i),
        "unknown": lambda i: f"xyz_{i}",
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(rows: int, samples: int, seed: int) -> list[tuple[str, int, list[float], list[float]]]:
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from accounts.models import User
    from ops.search import search

    setup_test_environment()
    # As each gunicorn worker does once the application is loaded (gunicorn.conf.py): what is
    # alive now (the fill's leftovers) is out of the collector's sight.
    gc.collect()
    gc.freeze()
    client = Client()
    client.force_login(User.objects.create_superuser("bench", "bench@example.com", "bench-pw-1"))
    page = reverse("admin-search")
    rng = random.Random(seed)  # noqa: S311 - picks sample rows, not secrets
    results = []
    for name, make in kinds(rows).items():
        picks = [rng.randrange(rows) for _ in range(samples + 1)]
        search(make(picks[0]), can_view=lambda _: True)  # warm: this kind's code and plans
        client.get(page, {"q": make(picks[0])})
        selector, whole = [], []
        hits = 0
        for i in picks[1:]:
            term = make(i)
            started = time.perf_counter()
            result = search(term, can_view=lambda _: True)
            selector.append((time.perf_counter() - started) * 1000)
            hits += len(result.hits)
            started = time.perf_counter()
            response = client.get(page, {"q": term})
            whole.append((time.perf_counter() - started) * 1000)
            if response.status_code not in (200, 302):
                raise SystemExit(f"{term}: the page answered {response.status_code}")
        results.append((name, hits // samples, selector, whole))
    return results


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument(
        "--database-name",
        "--database",
        dest="database",
        metavar="NAME",
        default=os.environ.get("BENCH_DATABASE_NAME") or DEFAULT_DATABASE_NAME,
        help="the bench's database on DATABASE_URL's server, dropped first if it exists (env "
        f"BENCH_DATABASE_NAME; default {DEFAULT_DATABASE_NAME})",
    )
    add_redis_flag(parser, "", f"CELERY_BROKER_URL as set, else {DEFAULT_BROKER_URL}")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--keep", action="store_true", help="leave the database for a look")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    url, maintenance = database_urls(
        os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL), args.database
    )
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    if args.redis_url:
        os.environ["CELERY_BROKER_URL"] = args.redis_url
    os.environ.setdefault("CELERY_BROKER_URL", DEFAULT_BROKER_URL)
    with own_database(maintenance, args.database, keep=args.keep):
        import django

        django.setup()
        from django.core.management import call_command

        started = time.perf_counter()
        call_command("migrate", verbosity=0)
        progress(f"migrated in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        fill(args.rows)
        progress(f"filled in {time.perf_counter() - started:.1f} s")
        results = measure(args.rows, args.samples, args.seed)

    print(f"\nops search, {args.rows:,} rows per table, {args.samples} ids per kind (ms)")
    print(f"{'kind':<16} {'hits':>4}   {'search p50':>10} {'p95':>6} {'max':>6}   "
          f"{'page p50':>8} {'p95':>6} {'max':>6}")  # fmt: skip
    slowest = 0.0
    for name, hits, selector, whole in results:
        slowest = max(slowest, max(selector), max(whole))
        print(
            f"{name:<16} {hits:>4}   {statistics.median(selector):>10.2f} "
            f"{percentile(selector, 0.95):>6.2f} {max(selector):>6.2f}   "
            f"{statistics.median(whole):>8.2f} {percentile(whole, 0.95):>6.2f} {max(whole):>6.2f}"
        )
    verdict = "met" if slowest < TARGET_MS else "MISSED"
    print(f"\nslowest: {slowest:.2f} ms; target < {TARGET_MS:.0f} ms for every search: {verdict}")
    return 0 if slowest < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
