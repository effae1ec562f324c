"""Reconciliation rows as tests need them."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from reconciliation.models import Run


def a_run() -> Run:
    """A completed manual run over the last seven days, for findings to point to."""
    now = timezone.now()
    return Run.objects.create(
        kind="manual",
        lane="objects",
        window_start=now - timedelta(days=7),
        window_end=now,
        started_at=now,
        heartbeat_at=now,
        status="completed",
    )
