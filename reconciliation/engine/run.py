"""A run's life: started (or resumed from its checkpoint), its phases in order, finished or
failed (resumable), and the runs that fell due while it held its lane run right after it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings

from providers import ProviderUnavailable
from providers.stripe_provider import StripeProvider, provider_from_settings
from reconciliation.engine.clearing import _clear
from reconciliation.engine.ledger import _ledger, _stuck, _vouch_side
from reconciliation.engine.listing import LISTED, _list
from reconciliation.engine.shared import _carried, _carried_in, _Context, _tick
from reconciliation.models import Lane, Run, RunKind
from reconciliation.runs import (
    LANE_OF,
    RunInProgress,
    run_checkpoint,
    run_due_next,
    run_fail,
    run_finish,
    run_queue,
    run_start,
)
from verification import clock

logger = logging.getLogger("vouch.reconciliation")


WINDOWS = {
    RunKind.SWEEP: timedelta(days=7),
    RunKind.FULL: timedelta(days=90),
    RunKind.MANUAL: timedelta(days=7),
}
PHASES = (*LISTED, "vouch_side", "stuck", "ledger", "clear")


class ReconciliationIncomplete(Exception):
    """The run could not complete (the provider could not be read); it resumes from its
    checkpoint next time."""

    def __init__(self, run: Run, reason: str) -> None:
        super().__init__(f"run {run.public_id} could not complete: {reason}")
        self.run = run


def reconcile(
    *,
    kind: str = RunKind.SWEEP,
    since: datetime | None = None,
    until: datetime | None = None,
    dry_run: bool = False,
    progress: Callable[[Run], None] | None = None,
    started: Callable[[Run], None] | None = None,
    provider: StripeProvider | None = None,
    hand_on: bool = True,
) -> Run:
    """Run one comparison over [since, until) — by default the kind's window ending now — or
    resume the interrupted run of its kind asked for with the same flags (`runs.run_start`: its
    mode and window are its own, fixed when it was created; a window given here is taken up only
    by a run of exactly that window). `started` is told the run before its work begins (the
    window it actually uses). Returns the completed run; raises RunInProgress if a run of the lane
    is alive, and ReconciliationIncomplete if the provider could not be read (the run is
    resumable). Then, with `hand_on`, a run that fell due meanwhile is handed to a worker."""
    from core.budget import budget_from_settings

    now = clock.now()
    window_asked = since is not None or until is not None
    until = until or now
    since = since or until - WINDOWS[RunKind(kind)]
    run = run_start(
        kind=kind, window_start=since, window_end=until, dry_run=dry_run, window_asked=window_asked
    )
    if started is not None:
        started(run)
    ctx = _Context(
        run=run,
        provider=provider or provider_from_settings(),
        budget=budget_from_settings("reconciliation"),
        now=now,
        grace=timedelta(seconds=settings.RECONCILIATION_GRACE_S),
        progress=progress,
    )
    _carried_in(ctx)
    try:
        try:
            _phases(ctx)
        except ProviderUnavailable as exc:
            run_fail(run, error=str(exc))
            raise ReconciliationIncomplete(run, str(exc)) from exc
        if run.dry_run:
            run.opened = {}
            for code, _type, _subject in ctx.dry_findings:
                run.opened[code] = run.opened.get(code, 0) + 1
        return run_finish(run)
    finally:
        if hand_on:
            _hand_on(LANE_OF[RunKind(kind)])


def _hand_on(lane: str) -> None:
    """A run that fell due while this one held the lane (`run_queue`) runs right after it: handed
    to a worker (`reconciliation.due`). If the broker cannot be reached, the next scheduled run
    of the lane runs it after its own."""
    if run_due_next(lane) is None:
        return
    from reconciliation.tasks import due  # the tasks module imports this one

    try:
        due.delay()
    except Exception:  # the broker is down: the next tick runs what is due
        logger.warning("reconciliation: could not hand the due run on to a worker", exc_info=True)


def reconcile_due(kind: str) -> list[Run]:
    """A scheduled run fell due: run it, then whatever fell due while it ran. If another run holds
    the lane, it is queued and runs right after that one (never dropped): the holder runs it when
    it ends, or — if the holder ended meanwhile — this call does. Returns the runs completed."""
    try:
        done = [reconcile(kind=kind, hand_on=False)]
    except RunInProgress as exc:
        run_queue(kind, behind=exc.run)
        logger.info("reconciliation.%s: %s; queued to run right after it", kind, exc)
        return reconcile_queued()
    except ReconciliationIncomplete:
        reconcile_queued()
        raise
    return done + reconcile_queued()


def reconcile_queued(lane: str = Lane.OBJECTS) -> list[Run]:
    """Run the runs due in `lane`, oldest first, until none is left or another run holds the
    lane (it runs them when it ends)."""
    done = []
    while (kind := run_due_next(lane)) is not None:
        try:
            done.append(reconcile(kind=kind, hand_on=False))
        except RunInProgress:
            break
    return done


def _phases(ctx: _Context) -> None:
    checkpoint = ctx.run.checkpoint or {}
    start = 0
    if checkpoint.get("phase") in PHASES:
        # A phase the checkpoint marks done is not done again (its counts are in the run
        # already): the run goes on with the next one.
        start = PHASES.index(checkpoint["phase"]) + (1 if checkpoint.get("done") else 0)
    for phase in PHASES[start:]:
        after = checkpoint.get("after") if phase == checkpoint.get("phase") else None
        if phase in LISTED:
            _list(ctx, phase, after)
        elif phase == "vouch_side":
            _vouch_side(ctx)
        elif phase == "stuck":
            _stuck(ctx)
        elif phase == "ledger":
            _ledger(ctx)
        elif phase == "clear" and not ctx.run.dry_run:
            _clear(ctx)
        run_checkpoint(ctx.run, phase=phase, done=True, **_carried(ctx))
        _tick(ctx)
