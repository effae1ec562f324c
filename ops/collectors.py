"""`/metrics`: what the database holds, computed when scraped, beside the counters processes keep.

State that lives in the database (refund legs, verdicts, escalations, pending runs, webhook
events, discrepancies) is read at scrape time by `DatabaseCollector`: a handful of aggregate
queries, so every gunicorn and Celery worker agrees by construction and nothing is lost when a
process dies. Events that happen in a process (provider calls and their latency, idempotency
replays and refusals) are counters declared next to the code that counts them
(`providers/metrics.py`, `core/metrics.py`); with `PROMETHEUS_MULTIPROC_DIR` set every process
writes its own file there and the scrape sums them (prometheus-client's multiprocess mode)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Case, Count, Min, Q, Sum, Value, When
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from envelopes.models import FundingLeg, LegOutcome, RefundLeg
from reconciliation.models import Discrepancy
from verification.models import (
    Escalation,
    ProviderEvent,
    Verdict,
    VerificationRun,
)

logger = logging.getLogger("vouch.ops")


def metrics_exposition() -> tuple[bytes, str]:
    """The Prometheus text exposition: this deployment's counters (every process's, in
    multiprocess mode; else this process's) and the database's state."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(DatabaseCollector())
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _ThisProcess(Collector):
    """The default registry's metrics (this process's counters, its runtime), when there is no
    multiprocess directory to read every process from."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


class DatabaseCollector(Collector):
    """The state the database holds, read when scraped: six aggregate statements in one
    transaction, each bounded by METRICS_DATABASE_TIMEOUT_S on PostgreSQL. If the database cannot
    be read, only `vouch_metrics_database_up 0` is said of it (the scrape itself still succeeds:
    the process counters are worth having exactly then)."""

    def collect(self) -> Iterator[Metric]:
        statements = 0

        def count(
            execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
        ) -> Any:
            nonlocal statements
            statements += 1
            return execute(sql, params, many, context)

        started = time.perf_counter()
        connection = connections[DEFAULT_DB_ALIAS]
        try:
            with transaction.atomic(using=DEFAULT_DB_ALIAS):
                if connection.vendor == "postgresql":
                    # A slow database must not pile up scrapes (Prometheus retries on its own).
                    with connection.cursor() as cursor:
                        timeout_ms = int(settings.METRICS_DATABASE_TIMEOUT_S * 1000)
                        cursor.execute(f"SET LOCAL statement_timeout = {timeout_ms}")
                with connection.execute_wrapper(count):
                    families = list(_database_families())
            up = 1
        except Exception as exc:
            logger.warning("metrics: the database could not be read: %s", exc)
            connection.close_if_unusable_or_obsolete()
            families, up = [], 0
        yield from families
        yield GaugeMetricFamily(
            "vouch_metrics_database_up", "Whether the database could be read for this scrape.", up
        )
        yield GaugeMetricFamily(
            "vouch_metrics_database_statements",
            "SQL statements this scrape made to read the database's state.",
            statements,
        )
        yield GaugeMetricFamily(
            "vouch_metrics_database_seconds",
            "Time this scrape spent reading the database's state.",
            time.perf_counter() - started,
        )


def _database_families() -> Iterator[Metric]:
    yield from _refund_legs()
    yield _waiting_for_room()
    yield from _verdicts()
    yield from _escalations()
    yield _oldest_pending_run()
    yield _webhook_events()
    yield _discrepancies()


def _refund_legs() -> Iterator[Metric]:
    rows: dict[str, dict[str, Any]] = {
        row["outcome"]: dict(row)
        for row in RefundLeg.objects.order_by()
        .values("outcome")
        .annotate(legs=Count("id"), micro=Sum("amount_micro"))
    }
    legs = GaugeMetricFamily(
        "vouch_refund_legs",
        "Refund legs (one provider refund each) by outcome: reserved, accepted, refused, unknown "
        "(held for resolution), void.",
        labels=["outcome"],
    )
    micro = GaugeMetricFamily(
        "vouch_refund_legs_micro",
        "Money in refund legs by outcome, in micro-dollars.",
        labels=["outcome"],
    )
    for outcome in LegOutcome.values:
        row = rows.get(outcome, {})
        legs.add_metric([outcome], row.get("legs") or 0)
        micro.add_metric([outcome], row.get("micro") or 0)
    yield legs
    yield micro


def _waiting_for_room() -> Metric:
    family = GaugeMetricFamily(
        "vouch_legs_waiting_for_room",
        "Refund and funding legs waiting for room in Stripe's rate limit (issue 40): answered 202 "
        "and sent by envelopes.send_waiting, oldest first. Growing for minutes: demand above the "
        "limit (or no worker consuming the money queue).",
        labels=["kind"],
    )
    kinds = (("refund", RefundLeg), ("funding", FundingLeg))
    counts = ", ".join(
        f"(SELECT COUNT(*) FROM {connection.ops.quote_name(model._meta.db_table)} "  # noqa: S608
        "WHERE deferred_at IS NOT NULL)"
        for _, model in kinds
    )
    with connection.cursor() as cursor:  # one statement for both
        cursor.execute(f"SELECT {counts}")
        row = cursor.fetchone()
    for (kind, _), count in zip(kinds, row, strict=True):
        family.add_metric([kind], int(count))
    return family


def _verdicts() -> Iterator[Metric]:
    counts: dict[str, dict[str, int]] = {}
    for row in (
        VerificationRun.objects.order_by().values("contract_id", "verdict").annotate(n=Count("id"))
    ):
        counts.setdefault(row["contract_id"], {})[row["verdict"]] = row["n"]
    family = GaugeMetricFamily(
        "vouch_verification_runs",
        "Verification runs by contract and verdict (PENDING: not decided yet).",
        labels=["contract", "verdict"],
    )
    for contract, verdicts in sorted(counts.items()):
        for verdict in Verdict.values:
            family.add_metric([contract, verdict], verdicts.get(verdict, 0))
    yield family


def _escalations() -> Iterator[Metric]:
    rows = {
        row["money"]: row["n"]
        for row in Escalation.objects.open().order_by().values("money").annotate(n=Count("id"))
    }
    family = GaugeMetricFamily(
        "vouch_escalations_open",
        "Open escalations waiting for a person; money: only an approved adjustment resolves it.",
        labels=["money"],
    )
    for money in (False, True):
        family.add_metric([str(money).lower()], rows.get(money, 0))
    yield family


def _oldest_pending_run() -> Metric:
    oldest = VerificationRun.objects.filter(verdict=Verdict.PENDING).aggregate(
        at=Min("created_at")
    )["at"]
    age = (timezone.now() - oldest).total_seconds() if oldest is not None else 0.0
    return GaugeMetricFamily(
        "vouch_verification_oldest_pending_run_age_seconds",
        "Age of the oldest verification run without a verdict (0: none pending).",
        max(age, 0.0),
    )


def _webhook_events() -> Metric:
    status = Case(
        When(Q(processed_at__isnull=True) & Q(processing_error=""), then=Value("pending")),
        When(Q(processed_at__isnull=True), then=Value("retrying")),
        When(~Q(processing_error=""), then=Value("failed")),
        default=Value("processed"),
    )
    rows = (
        ProviderEvent.objects.order_by()
        .annotate(status=status)
        .values("status", "source")
        .annotate(n=Count("id"))
    )
    family = GaugeMetricFamily(
        "vouch_webhook_events",
        "Stored provider events (kept 30 days once processed) by status (pending, retrying: "
        "failed and to be tried again, failed: given up, processed) and source (webhook, "
        "catch_up).",
        labels=["status", "source"],
    )
    for row in sorted(rows, key=lambda r: (r["status"], r["source"])):
        family.add_metric([row["status"], row["source"]], row["n"])
    return family


def _discrepancies() -> Metric:
    rows = (
        Discrepancy.objects.unresolved()
        .order_by()
        .values("code", "severity", "status")
        .annotate(n=Count("id"))
    )
    family = GaugeMetricFamily(
        "vouch_reconciliation_discrepancies_open",
        "Reconciliation discrepancies not resolved, by class, severity and status (open, "
        "acknowledged).",
        labels=["class", "severity", "status"],
    )
    for row in sorted(rows, key=lambda r: (r["code"], r["status"])):
        family.add_metric([row["code"], row["severity"], row["status"]], row["n"])
    return family
