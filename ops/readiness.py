"""Can this process serve? The database answers, every migration on disk is applied, and the
Celery broker accepts a connection. Never the payment provider: Stripe being slow or down is
not a reason to take Vouch out of a load balancer (its outcomes are `unknown`, resolved later)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from celery import current_app
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

logger = logging.getLogger("vouch.ops")

OK = "ok"


@dataclass(frozen=True)
class Readiness:
    # Each check's answer: "ok", or why not (the error's class only: this is answered to anyone).
    checks: dict[str, str] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return all(answer == OK for answer in self.checks.values())


def readiness_check() -> Readiness:
    """Each check in turn; the database's failure skips the migrations check (it needs it)."""
    checks = {"database": _database()}
    checks["migrations"] = _migrations() if checks["database"] == OK else "skipped"
    checks["broker"] = _broker()
    return Readiness(checks)


def _failed(check: str, exc: BaseException) -> str:
    logger.warning("readyz: %s unavailable: %s", check, exc)
    return f"unavailable ({type(exc).__name__})"


def _database() -> str:
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        # A broken connection must not stay cached for the next request or check.
        connection.close_if_unusable_or_obsolete()
        return _failed("database", exc)
    return OK


def _migrations() -> str:
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except Exception as exc:
        return _failed("migrations", exc)
    if plan:
        logger.warning("readyz: %d migration(s) not applied", len(plan))
        return f"{len(plan)} not applied"
    return OK


def _broker() -> str:
    try:
        # One attempt (no retry), bounded: a probe must answer before its own timeout.
        bounded = {"socket_connect_timeout": settings.READYZ_TIMEOUT_S}
        # The project's app (config.celery_app, loaded with Django): ops stands below config.
        with current_app.connection_for_write(transport_options=bounded) as connection:
            connection.ensure_connection(max_retries=0, timeout=settings.READYZ_TIMEOUT_S)
    except Exception as exc:
        return _failed("broker", exc)
    return OK
