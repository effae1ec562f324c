"""The beat scheduler: django-celery-beat's database scheduler (schedules edited in the admin),
sending a periodic job's tick only when no run of it is queued or running (core.ticks, SPEC §11).
A tick that finds one sends nothing and is counted on the job's slot."""

from __future__ import annotations

import logging
from typing import Any

from django_celery_beat.schedulers import DatabaseScheduler

from core import ticks

logger = logging.getLogger("vouch.beat")


def _every_s(entry: Any) -> float:
    run_every = getattr(entry.schedule, "run_every", None)
    return run_every.total_seconds() if run_every is not None else 0.0


class SingleRunScheduler(DatabaseScheduler):
    _claim: ticks.Claim | None = None

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        claim = ticks.tick_claim(entry.name, every_s=_every_s(entry))
        if claim is None:
            logger.debug("%s: a run is queued or running; tick skipped", entry.name)
            return
        self._claim = claim
        try:
            super().apply_entry(entry, producer=producer)
        finally:
            self._claim = None

    def apply_async(
        self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        claim = self._claim
        if claim is None:  # not a tick (a caller of apply_async itself): sent as it is
            return super().apply_async(entry, producer=producer, advance=advance, **kwargs)
        options = entry.options
        entry.options = {
            **options,
            "headers": {**(options.get("headers") or {}), **claim.headers()},
        }
        try:
            return super().apply_async(entry, producer=producer, advance=advance, **kwargs)
        except BaseException:
            ticks.tick_done(claim)  # nothing was sent: the next tick may try again
            raise
        finally:
            entry.options = options
