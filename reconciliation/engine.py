"""The comparison of the ledger with the provider (SPEC §15.1, §15.2): the sweep, the full run
and `manage.py reconcile`.

A run lists the provider's refunds, charges and disputes created in its window, a page at a time
(streamed: memory stays flat however many there are), stores each page with its SHA-256, and
compares every object on a Vouch charge with the rows that record it. Then it looks from Vouch's
side (accepted legs and funded charges the listing did not show are read one by one: missing, or
only outside the window), at what is stuck, and at the ledger itself. Last, every open
discrepancy this run did not see again is looked at once more, alone: if it is gone, it is
cleared, citing the provider data that shows it gone.

What Vouch itself has in flight — a leg reserved or awaiting its answer, a refund with Vouch's
metadata whose leg is not recorded yet, a dispute whose webhook may not have arrived — is counted
as *expected* for `RECONCILIATION_GRACE_S` after it started, not as a discrepancy. A refund
without Vouch's metadata is never in flight: it is `refund_foreign` at once.

The only change of money a run makes by itself: a refund Vouch counts as refunded — a leg's, or a
foreign refund recorded by adjustment — that the provider shows `failed` or `canceled` and that was
never released is released through the one release service, exactly as the webhook would have
done. Nothing else changes money without a person; a dry run changes nothing at all.

A charge carrying Vouch's funding metadata that no funding leg records is `funding_unrecorded`
(money the buyer paid that Vouch counts nowhere). Only this run's findings explain an object: a
discrepancy an earlier run left open explains nothing, since this run may clear it."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from disputes.models import Dispute, FilingStatus, Packet
from envelopes.models import (
    MICRO_PER_CENT,
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    FundingLeg,
    FundingStatus,
    LegOutcome,
    RefundLeg,
)
from envelopes.money import to_cents
from envelopes.selectors import ledger_breaches
from envelopes.services import foreign_refund_release, refund_leg_release
from providers import ProviderUnavailable
from providers.outcomes import Outcome
from providers.stripe_provider import Page, StripeProvider, provider_from_settings
from reconciliation.models import (
    Discrepancy,
    DiscrepancyClass,
    Lane,
    Observation,
    Run,
    RunKind,
    Seen,
)
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
from reconciliation.services import OPEN_STATES, Finding, discrepancy_clear, discrepancy_record
from verification import clock
from verification.models import VerificationRun

logger = logging.getLogger("vouch.reconciliation")

LIVE = ("pending", "requires_action", "succeeded")
GONE = ("failed", "canceled")
WINDOWS = {
    RunKind.SWEEP: timedelta(days=7),
    RunKind.FULL: timedelta(days=90),
    RunKind.MANUAL: timedelta(days=7),
}
LISTED = ("refunds", "charges", "disputes")
PHASES = (*LISTED, "vouch_side", "stuck", "ledger", "clear")
# Classes whose subject is found by the stuck and ledger phases, which look at everything (not
# only the window): not seen by a run means gone.
WHOLE_LEDGER = {
    DiscrepancyClass.LEG_STUCK,
    DiscrepancyClass.FUNDING_STUCK,
    DiscrepancyClass.RUN_OVERDUE,
    DiscrepancyClass.LEDGER_BREACH,
}
_REFUND_MONEY = {
    DiscrepancyClass.REFUND_MISSING,
    DiscrepancyClass.REFUND_MISMATCH,
    DiscrepancyClass.REFUND_STATUS_DRIFT,
    DiscrepancyClass.REFUND_FOREIGN,
    DiscrepancyClass.REFUND_DUPLICATE,
}


class ReconciliationIncomplete(Exception):
    """The run could not complete (the provider could not be read); it resumes from its
    checkpoint next time."""

    def __init__(self, run: Run, reason: str) -> None:
        super().__init__(f"run {run.public_id} could not complete: {reason}")
        self.run = run


@dataclass
class _Context:
    run: Run
    provider: StripeProvider
    budget: Any
    now: datetime
    grace: timedelta
    progress: Callable[[Run], None] | None
    # Charges with a refund-level money finding in this run: their totals are explained by it.
    # Only this run's findings explain (SPEC §15.3): a discrepancy an earlier run left open
    # explains nothing, for this run may clear it.
    explained: set[str] = field(default_factory=set)
    # A dry run releases nothing: what it would release, by charge (micro-dollars).
    would_release: dict[str, int] = field(default_factory=dict)
    # A dry run records nothing: the keys (class, subject type, subject id) it found.
    dry_findings: set[tuple[str, str, str]] = field(default_factory=set)
    # Refunds carrying Vouch's metadata whose leg is not recorded yet, by charge (micro-dollars):
    # in flight, like an open leg, so their charge may show them refunded already.
    in_flight: dict[str, int] = field(default_factory=dict)

    def recent(self, moment: datetime | int | float | None) -> bool:
        """Inside the grace period (what Vouch has in flight is expected, not a discrepancy)."""
        if moment is None:
            return False
        if not isinstance(moment, datetime):
            return self.now.timestamp() - float(moment) < self.grace.total_seconds()
        return self.now - moment < self.grace


# --- the run --------------------------------------------------------------------------------


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


def _carried_in(ctx: _Context) -> None:
    """What the run had found before it was interrupted, from its checkpoint: the charges its
    findings explain, what a dry run would release and the findings a dry run keeps."""
    carried = (ctx.run.checkpoint or {}).get("carried") or {}
    ctx.explained.update(carried.get("explained") or [])
    ctx.would_release.update(carried.get("would_release") or {})
    ctx.in_flight.update(carried.get("in_flight") or {})
    ctx.dry_findings.update(tuple(key) for key in carried.get("dry_findings") or [])


def _carried(ctx: _Context) -> dict[str, Any]:
    """What the checkpoint carries for a resumed run (nothing, when nothing was found)."""
    carried: dict[str, Any] = {}
    if ctx.explained:
        carried["explained"] = sorted(ctx.explained)
    if ctx.would_release:
        carried["would_release"] = ctx.would_release
    if ctx.in_flight:
        carried["in_flight"] = ctx.in_flight
    if ctx.dry_findings:
        carried["dry_findings"] = sorted(list(key) for key in ctx.dry_findings)
    return {"carried": carried} if carried else {}


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


def _tick(ctx: _Context) -> None:
    if ctx.progress is not None:
        ctx.progress(ctx.run)


def _count(ctx: _Context, kind: str, n: int = 1) -> None:
    ctx.run.compared[kind] = ctx.run.compared.get(kind, 0) + n


def _found(ctx: _Context, finding: Finding) -> None:
    if finding.code in _REFUND_MONEY and finding.charge_id:
        ctx.explained.add(finding.charge_id)
    if ctx.run.dry_run:
        ctx.dry_findings.add(finding.key)
        return
    if finding.observation is not None and finding.observation.pk is None:
        # The page it was seen in, stored before the discrepancy that cites it.
        with _committed_lazily():
            finding.observation.save(force_insert=True)
    discrepancy_record(run=ctx.run, finding=finding)


@dataclass(frozen=True)
class _Stored:
    """An answer as it is stored: the SHA-256 of its bytes, the bytes zlib-compressed (level 1:
    a page of 100 charges, 565 KB, in a few milliseconds), and their length."""

    sha256: str
    compressed: bytes
    length: int


def _stored(raw: bytes) -> _Stored:
    return _Stored(hashlib.sha256(raw).hexdigest(), zlib.compress(raw, 1), len(raw))


def _observe(
    ctx: _Context,
    kind: str,
    request: dict[str, Any],
    data: Any = None,
    body: bytes | None = None,
    stored: _Stored | None = None,
) -> Observation:
    """Store what the provider answered as the bytes received (`body`, or `stored` already hashed
    and compressed); what has no body (Vouch's own side, an error) as canonical JSON of `data`.
    The stored bytes hash to the recorded SHA-256."""
    if stored is None:
        stored = _stored(body if body is not None else json.dumps(data, sort_keys=True).encode())
    observation = _observation(ctx, kind, request, stored)
    with _committed_lazily():
        observation.save(force_insert=True)
    return observation


def _observation(ctx: _Context, kind: str, request: dict[str, Any], stored: _Stored) -> Observation:
    """An observation not saved yet (a list page is saved with its checkpoint, or before a
    discrepancy that cites it, whichever comes first)."""
    return Observation(
        run=ctx.run,
        kind=kind,
        request=request,
        body=stored.compressed,
        body_length=stored.length,
        sha256=stored.sha256,
        observed_at=clock.now(),
    )


@contextmanager
def _committed_lazily() -> Iterator[None]:
    """A transaction whose commit does not wait for PostgreSQL to flush it to disk
    (`synchronous_commit` off for it alone): a run's observations, its Seen rows and its
    checkpoints, a few hundred a run, each commit otherwise waiting for a flush. A crash of
    PostgreSQL can lose the last fraction of a second of them, never out of order: the run then
    resumes from an earlier checkpoint and reads those pages again. Discrepancies and money commit
    as always, and such a commit makes everything committed before it durable too."""
    inside_another = connection.in_atomic_block  # then it is that one's commit: left as it is
    with transaction.atomic():
        if connection.vendor == "postgresql" and not inside_another:
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield


# --- listing --------------------------------------------------------------------------------


def _list(ctx: _Context, kind: str, after: str | None) -> None:
    pages = ctx.provider.list_pages(
        kind,
        created_gte=math.floor(ctx.run.window_start.timestamp()),
        created_lt=math.ceil(ctx.run.window_end.timestamp()),
        starting_after=after,
        limit=100,
        budget=ctx.budget,
    )
    compare = {"refunds": _refunds, "charges": _charges, "disputes": _disputes}[kind]
    for page, stored in _read_ahead(pages):
        ctx.run.pages += 1
        ctx.run.provider_calls += page.attempts
        request = {"path": f"/v1/{kind}", "params": page.params}
        observation = _observation(ctx, kind, request, stored)
        seen = compare(ctx, page.data, observation)
        # The page, what it showed and the checkpoint after it, together (one commit a page).
        with _committed_lazily():
            if observation.pk is None:
                observation.save(force_insert=True)
            if seen:
                _seen(ctx.run, seen)
            run_checkpoint(ctx.run, phase=kind, after=page.last_id, **_carried(ctx))
        _tick(ctx)


def _seen(run: Run, object_ids: list[str]) -> None:
    """Record what a page showed (once per run: a page read again on resume adds nothing). On
    PostgreSQL one array parameter rather than two per row."""
    if connection.vendor != "postgresql":
        Seen.objects.bulk_create(
            [Seen(run=run, object_id=object_id) for object_id in object_ids],
            ignore_conflicts=True,
        )
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Seen._meta.db_table} (run_id, object_id) "
            "SELECT %s, unnest(%s::text[]) ON CONFLICT DO NOTHING",
            [run.pk, object_ids],
        )


def _read_ahead(pages: Iterator[Page]) -> Iterator[tuple[Page, _Stored]]:
    """The pages, each with its body hashed and compressed, read one ahead by a thread of its
    own: while a page is compared and stored, the next is on its way (the provider's time, the
    parsing, hashing and compressing overlap the comparison's SQL instead of adding to it). At
    most one page ahead, so two pages are held at a time; a page that cannot be read raises
    where it is asked for, as it would unthreaded. The list is lazy: it is advanced only in the
    thread, which draws on the call budget as before (its database connection, which the budget
    uses, is closed when the listing ends)."""

    def fetch() -> tuple[Page, _Stored] | None:
        page = next(pages, None)
        return None if page is None else (page, _stored(page.body))

    def finish() -> None:
        try:
            close = getattr(pages, "close", None)
            if close is not None:
                close()
        finally:
            connections.close_all()  # this thread's connections only

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reconciliation-read-ahead")
    try:
        ahead = pool.submit(fetch)
        while (fetched := ahead.result()) is not None:
            ahead = pool.submit(fetch)
            yield fetched
    finally:
        # After the page in flight, if any (one worker: in order); then the thread ends.
        pool.submit(finish).result()
        pool.shutdown(wait=True)


def _id(value: Any) -> str:
    """An id field (`"ch_…"`; Vouch never asks the provider to expand one), or "" for none."""
    return str(value or "")


def _leg_named(refund: dict[str, Any]) -> str:
    metadata = refund.get("metadata") or {}
    return str(metadata.get("vouch_leg") or "") if isinstance(metadata, dict) else ""


def _micro(cents: Any) -> int:
    """An amount the provider shows in cents, in micro-dollars (0 if it shows no number)."""
    number = isinstance(cents, int) and not isinstance(cents, bool)
    return cents * MICRO_PER_CENT if number else 0


def _submissions(dispute: dict[str, Any]) -> Any:
    """How many times evidence was submitted for a dispute, as the provider shows it."""
    return (dispute.get("evidence_details") or {}).get("submission_count", 0)


def _differing(vouch: dict[str, Any], provider: dict[str, Any], names: Iterable[str]) -> list[str]:
    return [name for name in names if vouch.get(name) != provider.get(name)]


# --- refunds --------------------------------------------------------------------------------


def _refunds(ctx: _Context, refunds: list[dict[str, Any]], observation: Observation) -> list[str]:
    """Compare a page of provider refunds; returns the ids that a leg records (seen)."""
    ids = [str(r["id"]) for r in refunds]
    # The legs with their charge's id only: a page's envelopes are read only for what it finds
    # (select_related's joins to the operations and envelopes cost more than the rest of a page).
    by_refund = {leg.provider_refund_id: leg for leg in _legs().filter(provider_refund_id__in=ids)}
    # Only the refunds no leg records need their named leg, their charge's funding leg, and
    # whether a person recorded them (most pages: none).
    unrecorded = [r for r in refunds if str(r["id"]) not in by_refund]
    names = {name for r in unrecorded if (name := _leg_named(r))}
    by_name = (
        {
            leg.public_id: leg
            for leg in RefundLeg.objects.select_related("funding_leg", "operation__envelope")
            .order_by()
            .filter(public_id__in=names)
        }
        if names
        else {}
    )
    charges = {_id(r.get("charge")) for r in unrecorded}
    fundings = (
        {
            f.charge_id: f
            for f in FundingLeg.objects.select_related("envelope")
            .order_by()
            .filter(charge_id__in=charges)
        }
        if charges
        else {}
    )
    recorded = (
        {
            adjustment.provider_object_id: adjustment
            for adjustment in Adjustment.objects.select_related(
                "funding_leg__envelope", "refund_leg__funding_leg__envelope"
            )
            .order_by()
            .filter(
                kind=AdjustmentKind.FOREIGN_REFUND,
                status=AdjustmentStatus.APPLIED,
                provider_object_id__in=[str(r["id"]) for r in unrecorded],
            )
        }
        if unrecorded
        else {}
    )
    seen = []
    for refund in refunds:
        refund_id, charge_id = str(refund["id"]), _id(refund.get("charge"))
        leg = by_refund.get(refund_id)
        adjustment = recorded.get(refund_id) if leg is None else None
        funding = fundings.get(charge_id) if leg is None else None
        ours = leg or adjustment or funding or _leg_named(refund) in by_name
        if not ours:
            continue  # not on a Vouch charge: not ours to compare
        _count(ctx, "refund")
        if leg is not None:
            seen.append(refund_id)
            _refund_of_leg(ctx, leg, refund, observation)
        elif adjustment is not None:  # a foreign refund a person recorded by an adjustment
            _refund_recorded(ctx, adjustment, refund, observation)
        else:
            _refund_unrecorded(ctx, refund, by_name.get(_leg_named(refund)), funding, observation)
    return seen


def _legs() -> QuerySet[RefundLeg]:
    """Refund legs with their funding charge's id (`charge_of`), in no order."""
    return RefundLeg.objects.order_by().annotate(charge_of=F("funding_leg__charge_id"))


def _charge_of(leg: RefundLeg) -> str:
    """The id of the charge a leg refunds (annotated by `_legs`, else its funding leg's)."""
    charge = getattr(leg, "charge_of", None)
    return str(charge) if charge is not None else leg.funding_leg.charge_id


def _envelope_of(leg: RefundLeg) -> str:
    """The public id of a leg's envelope (read when a finding names it)."""
    return leg.operation.envelope.public_id


def _refund_sides(leg: RefundLeg, refund: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    live = leg.outcome == LegOutcome.ACCEPTED and not leg.released
    vouch = {
        "refund": leg.provider_refund_id,
        "charge": _charge_of(leg),
        "amount": to_cents(leg.amount_micro),
        "vouch_leg": leg.public_id,
        "status": "live" if live else ("released" if leg.released else leg.outcome),
        "leg_outcome": leg.outcome,
    }
    provider = {
        "refund": str(refund.get("id")),
        "charge": _id(refund.get("charge")),
        "amount": refund.get("amount"),
        "vouch_leg": _leg_named(refund),
        "status": refund.get("status"),
        "leg_outcome": "",
    }
    return vouch, provider


def _refund_of_leg(
    ctx: _Context, leg: RefundLeg, refund: dict[str, Any], observation: Observation
) -> None:
    """A provider refund that a leg records: same charge, amount and leg name; a status that
    agrees with the leg (live for a live leg; a released leg's refund failed or canceled)."""
    vouch, provider = _refund_sides(leg, refund)
    differing = _differing(vouch, provider, ("charge", "amount", "vouch_leg"))
    if differing:
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.REFUND_MISMATCH,
                subject_type="refund_leg",
                subject_id=leg.public_id,
                summary=f"Refund {provider['refund']} differs from leg {leg.public_id} in "
                + ", ".join(differing),
                vouch_side=vouch,
                provider_side=provider,
                differing=differing,
                charge_id=vouch["charge"],
                envelope_public_id=_envelope_of(leg),
                amount_micro=leg.amount_micro,
                observation=observation,
            ),
        )
    # A leg records its refund's id only once accepted (an answer, or a person's adjustment):
    # it is live until released.
    status = refund.get("status")
    if not leg.released and status in GONE:
        _release(ctx, leg, refund)
    elif leg.released and status in LIVE:
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.REFUND_STATUS_DRIFT,
                subject_type="refund_leg",
                subject_id=leg.public_id,
                summary=f"Leg {leg.public_id} was released, but the provider shows its refund "
                f"{provider['refund']} {status}: the money went back to the buyer and is "
                "counted unspent here too.",
                vouch_side=vouch,
                provider_side=provider,
                differing=["status"],
                charge_id=vouch["charge"],
                envelope_public_id=_envelope_of(leg),
                amount_micro=leg.amount_micro,
                observation=observation,
            ),
        )


def _release(ctx: _Context, leg: RefundLeg, refund: dict[str, Any]) -> None:
    """The one automatic correction: the provider shows the refund failed or canceled and the
    leg was never released — released through the one release service, as the webhook would."""
    if ctx.run.dry_run:
        charge = _charge_of(leg)
        ctx.would_release[charge] = ctx.would_release.get(charge, 0) + leg.amount_micro
        ctx.run.corrected += 1
        return
    if refund_leg_release(
        leg=leg,
        reason=f"reconciliation {ctx.run.public_id}: the provider shows the refund "
        f"{refund.get('status')}",
        provider_refund=refund,
    ):
        ctx.run.corrected += 1


def _refund_recorded(
    ctx: _Context, adjustment: Adjustment, refund: dict[str, Any], observation: Observation
) -> None:
    """A refund made outside Vouch that an applied adjustment recorded (unspent -> refunded on a
    funding leg): the provider's refund is on that leg's charge, for the amount recorded. One the
    provider shows failed or canceled that was not given back yet is released through the one
    release service (the one automatic correction; a dry run counts what it would release)."""
    funding = adjustment.funding_leg or (
        adjustment.refund_leg.funding_leg if adjustment.refund_leg is not None else None
    )
    if funding is None:
        return  # an adjustment recorded on no leg: nothing here counts it
    refund_id, status = str(refund["id"]), refund.get("status")
    vouch = {
        "refund": adjustment.provider_object_id,
        "charge": funding.charge_id,
        "amount": to_cents(adjustment.amount_micro),
        "status": "released" if adjustment.released_at else "recorded",
    }
    provider = {
        "refund": refund_id,
        "charge": _id(refund.get("charge")),
        "amount": refund.get("amount"),
        "status": status,
    }
    differing = _differing(vouch, provider, ("charge", "amount"))
    if differing:
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.REFUND_MISMATCH,
                subject_type="refund",
                subject_id=refund_id,
                summary=f"Refund {refund_id}, recorded by adjustment {adjustment.public_id}, "
                "differs from what it recorded in " + ", ".join(differing),
                vouch_side=vouch,
                provider_side=provider,
                differing=differing,
                charge_id=funding.charge_id,
                envelope_public_id=funding.envelope.public_id,
                amount_micro=adjustment.amount_micro,
                observation=observation,
                escalate_as=("funding_leg", funding.public_id),
            ),
        )
    if status not in GONE or adjustment.released_at is not None:
        return
    if provider["charge"] != funding.charge_id:
        return  # not the refund recorded on that charge: the release service refuses it too
    if ctx.run.dry_run:
        charge = funding.charge_id
        ctx.would_release[charge] = ctx.would_release.get(charge, 0) + adjustment.amount_micro
        ctx.run.corrected += 1
        return
    if foreign_refund_release(provider_refund=refund, source=f"reconciliation {ctx.run.public_id}"):
        ctx.run.corrected += 1


def _refund_unrecorded(
    ctx: _Context,
    refund: dict[str, Any],
    named: RefundLeg | None,
    funding: FundingLeg | None,
    observation: Observation,
) -> None:
    """A provider refund on a Vouch charge that no leg records by id."""
    refund_id, status = str(refund["id"]), refund.get("status")
    name = _leg_named(refund)
    charge_id = _id(refund.get("charge"))
    provider = {
        "refund": refund_id,
        "charge": charge_id,
        "amount": refund.get("amount"),
        "vouch_leg": name,
        "status": status,
    }
    if named is not None:
        vouch, _ = _refund_sides(named, refund)
        envelope = named.operation.envelope.public_id
        if named.provider_refund_id:  # the leg records another refund: this one is a second
            if status in LIVE:
                _found(
                    ctx,
                    Finding(
                        code=DiscrepancyClass.REFUND_DUPLICATE,
                        subject_type="refund_leg",
                        subject_id=named.public_id,
                        summary=f"Two provider refunds carry leg {named.public_id}: "
                        f"{named.provider_refund_id} (recorded) and {refund_id}.",
                        vouch_side=vouch,
                        provider_side=provider,
                        differing=["refund"],
                        charge_id=charge_id,
                        envelope_public_id=envelope,
                        amount_micro=_micro(refund.get("amount")),
                        observation=observation,
                    ),
                )
        elif named.released and status in LIVE:  # refused or void (given back), yet live
            _found(
                ctx,
                Finding(
                    code=DiscrepancyClass.REFUND_STATUS_DRIFT,
                    subject_type="refund_leg",
                    subject_id=named.public_id,
                    summary=f"Leg {named.public_id} is {named.outcome} and released here, but the "
                    f"provider holds refund {refund_id} for it, {status}.",
                    vouch_side=vouch,
                    provider_side=provider,
                    differing=["refund", "status"],
                    charge_id=charge_id,
                    envelope_public_id=envelope,
                    amount_micro=named.amount_micro,
                    observation=observation,
                ),
            )
        elif named.outcome in (LegOutcome.RESERVED, LegOutcome.UNKNOWN) and ctx.recent(
            named.reserved_at
        ):
            ctx.run.expected += 1  # its answer is being recorded
        # else: an open leg past its grace is named by the stuck phase (leg_stuck)
        return
    if name and ctx.recent(refund.get("created")):
        ctx.run.expected += 1  # Vouch's metadata, its leg not recorded yet
        # In flight: its charge may show it refunded already.
        amount = _micro(refund.get("amount"))
        ctx.in_flight[charge_id] = ctx.in_flight.get(charge_id, 0) + amount
        return
    if status not in LIVE or funding is None:
        return  # a failed foreign refund gave nothing back
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.REFUND_FOREIGN,
            subject_type="refund",
            subject_id=refund_id,
            summary=f"Refund {refund_id} of {refund.get('amount')} cents on charge "
            f"{provider['charge']} was made outside Vouch"
            + (f" (it names leg {name}, which Vouch does not have)." if name else "."),
            vouch_side={"refund": "", "charge": funding.charge_id, "amount": None, "vouch_leg": ""},
            provider_side=provider,
            differing=["refund", "amount"],
            charge_id=funding.charge_id,
            envelope_public_id=funding.envelope.public_id,
            amount_micro=_micro(refund.get("amount")),
            observation=observation,
            escalate_as=("funding_leg", funding.public_id),
        ),
    )


# --- charges --------------------------------------------------------------------------------


def _refund_totals(funding_ids: list[int]) -> dict[int, dict[str, int]]:
    """Per funding leg: what its live legs hold, what its open legs might, and the foreign
    refunds recorded on it (micro-dollars)."""
    totals: dict[int, dict[str, int]] = {f: {"held": 0, "open": 0} for f in funding_ids}
    # In no order: RefundLeg's default ordering would join every refund operation to group them.
    rows = (
        RefundLeg.objects.filter(funding_leg_id__in=funding_ids)
        .order_by()
        .values("funding_leg_id")
        .annotate(
            held=Sum("amount_micro", filter=Q(outcome=LegOutcome.ACCEPTED, released=False)),
            open=Sum(
                "amount_micro", filter=Q(outcome__in=(LegOutcome.RESERVED, LegOutcome.UNKNOWN))
            ),
        )
    )
    for row in rows:
        totals[row["funding_leg_id"]]["held"] += row["held"] or 0
        totals[row["funding_leg_id"]]["open"] += row["open"] or 0
    foreign = (
        Adjustment.objects.filter(
            Q(funding_leg_id__in=funding_ids) | Q(refund_leg__funding_leg_id__in=funding_ids),
            kind=AdjustmentKind.FOREIGN_REFUND,
            status=AdjustmentStatus.APPLIED,
            released_at__isnull=True,  # given back since: the provider showed it failed
        )
        .annotate(charged=Coalesce("funding_leg_id", "refund_leg__funding_leg_id"))
        .values("charged")
        .annotate(s=Sum("amount_micro"))
        .order_by()
    )
    for charged, amount in foreign.values_list("charged", "s"):
        # recorded on the funding leg, or on a leg of it (a duplicate)
        totals[charged]["held"] += amount or 0
    return totals


def _charges(ctx: _Context, charges: list[dict[str, Any]], observation: Observation) -> list[str]:
    ids = [str(c["id"]) for c in charges]
    fundings = {
        f.charge_id: f
        for f in FundingLeg.objects.select_related("envelope").order_by().filter(charge_id__in=ids)
    }
    totals = _refund_totals([f.pk for f in fundings.values()])
    explained = set(ctx.explained)
    # Charges no leg records that carry Vouch's funding metadata (most pages: none), with the leg
    # they name.
    unrecorded = {
        str(c["id"]): c
        for c in charges
        if str(c["id"]) not in fundings and _funding_named(c) and _taken(c)
    }
    named = (
        {
            f.public_id: f
            for f in FundingLeg.objects.select_related("envelope")
            .order_by()
            .filter(public_id__in={_funding_named(c) for c in unrecorded.values()})
        }
        if unrecorded
        else {}
    )
    seen = []
    for charge in charges:
        funding = fundings.get(str(charge["id"]))
        if funding is None:
            if str(charge["id"]) in unrecorded:
                _count(ctx, "charge")
                _charge_unrecorded(ctx, charge, named.get(_funding_named(charge)), observation)
            continue  # else not a Vouch charge
        _count(ctx, "charge")
        seen.append(funding.charge_id)
        if funding.status != FundingStatus.SUCCEEDED:
            continue  # a pending leg's charge: the stuck phase names it if it stays so
        _charge_of_funding(ctx, funding, charge, totals[funding.pk], explained, observation)
    return seen


def _funding_named(charge: dict[str, Any]) -> str:
    metadata = charge.get("metadata") or {}
    return str(metadata.get("vouch_funding") or "") if isinstance(metadata, dict) else ""


def _taken(charge: dict[str, Any]) -> bool:
    """The charge took the buyer's money, or may still (a failed one took nothing)."""
    return charge.get("status") in ("succeeded", "pending")


def _charge_unrecorded(
    ctx: _Context, charge: dict[str, Any], leg: FundingLeg | None, observation: Observation
) -> None:
    """A charge carrying Vouch's funding metadata that no funding leg records by its id: the
    buyer paid money Vouch counts nowhere (its leg pending past the grace, abandoned, recording
    another charge, or not there at all). Inside the grace, a pending leg is Vouch's own work in
    flight: its answer is being recorded."""
    if leg is not None and leg.status == FundingStatus.PENDING and ctx.recent(leg.created_at):
        ctx.run.expected += 1
        return
    charge_id, amount = str(charge["id"]), charge.get("amount")
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.FUNDING_UNRECORDED,
            subject_type="charge",
            subject_id=charge_id,
            summary=f"Charge {charge_id} of {amount} cents carries funding leg "
            f"{_funding_named(charge)}, which "
            + (f"is {leg.status} and records no such charge." if leg else "Vouch does not have."),
            vouch_side={
                "charge": leg.charge_id if leg else "",
                "funding": leg.public_id if leg else "",
                "status": leg.status if leg else "",
                "amount": to_cents(leg.amount_micro) if leg else None,
            },
            provider_side={
                "charge": charge_id,
                "funding": _funding_named(charge),
                "status": charge.get("status"),
                "amount": amount,
                "payment_intent": _id(charge.get("payment_intent")),
            },
            differing=["charge", "status"] if leg else ["charge", "funding", "status"],
            charge_id=charge_id,
            envelope_public_id=leg.envelope.public_id if leg else "",
            amount_micro=_micro(amount),
            observation=observation,
            escalate_as=("funding_leg", leg.public_id) if leg else None,
        ),
    )


def _charge_of_funding(
    ctx: _Context,
    funding: FundingLeg,
    charge: dict[str, Any],
    totals: dict[str, int],
    explained: set[str],
    observation: Observation,
) -> None:
    # What the legs hold (less, in a dry run, what it would release).
    held = totals["held"] - ctx.would_release.get(funding.charge_id, 0)
    vouch = {
        "charge": funding.charge_id,
        "status": "succeeded",
        "amount": to_cents(funding.amount_micro),
        "currency": funding.envelope.currency,
        "amount_refunded": held // MICRO_PER_CENT,
    }
    provider = {
        "charge": str(charge["id"]),
        "status": charge.get("status"),
        "amount": charge.get("amount"),
        "currency": charge.get("currency"),
        "amount_refunded": charge.get("amount_refunded"),
    }
    envelope = funding.envelope.public_id
    differing = _differing(vouch, provider, ("status", "amount", "currency"))
    if differing:
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.CHARGE_MISMATCH,
                subject_type="funding_leg",
                subject_id=funding.public_id,
                summary=f"Charge {funding.charge_id} differs from funding leg "
                f"{funding.public_id} in " + ", ".join(differing),
                vouch_side=vouch,
                provider_side=provider,
                differing=differing,
                charge_id=funding.charge_id,
                envelope_public_id=envelope,
                amount_micro=funding.amount_micro,
                observation=observation,
            ),
        )
    refunded = provider["amount_refunded"]
    if isinstance(refunded, bool) or not isinstance(refunded, int):
        refunded = -1
    at_provider = refunded * MICRO_PER_CENT
    in_flight = totals["open"] + ctx.in_flight.get(funding.charge_id, 0)
    if held <= at_provider <= held + in_flight or funding.charge_id in explained:
        return
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.CHARGE_REFUNDED_MISMATCH,
            subject_type="funding_leg",
            subject_id=funding.public_id,
            summary=f"Charge {funding.charge_id} shows {refunded} cents refunded; Vouch's legs "
            f"on it hold {held // MICRO_PER_CENT} cents.",
            vouch_side=vouch,
            provider_side=provider,
            differing=["amount_refunded"],
            charge_id=funding.charge_id,
            envelope_public_id=envelope,
            amount_micro=abs(at_provider - held),
            observation=observation,
        ),
    )


# --- disputes -------------------------------------------------------------------------------


def _disputes(ctx: _Context, disputes: list[dict[str, Any]], observation: Observation) -> list[str]:
    ids = [str(d["id"]) for d in disputes]
    rows = {d.provider_dispute_id: d for d in Dispute.objects.filter(provider_dispute_id__in=ids)}
    charges = {_id(d.get("charge")) for d in disputes}
    ours = set(FundingLeg.objects.filter(charge_id__in=charges).values_list("charge_id", flat=True))
    filed = set(
        Packet.objects.filter(
            dispute__provider_dispute_id__in=ids, filing_status=FilingStatus.FILED
        ).values_list("dispute__provider_dispute_id", flat=True)
    )
    seen = []
    for dispute in disputes:
        dispute_id, charge_id = str(dispute["id"]), _id(dispute.get("charge"))
        row = rows.get(dispute_id)
        if row is None and charge_id not in ours:
            continue
        _count(ctx, "dispute")
        seen.append(dispute_id)
        provider = {
            "dispute": dispute_id,
            "charge": charge_id,
            "status": dispute.get("status"),
            "amount": dispute.get("amount"),
            "submissions": _submissions(dispute),
        }
        if row is None:
            if ctx.recent(dispute.get("created")):
                ctx.run.expected += 1  # its webhook may be on its way
                continue
            _found(
                ctx,
                Finding(
                    code=DiscrepancyClass.DISPUTE_UNRECORDED,
                    subject_type="dispute",
                    subject_id=dispute_id,
                    summary=f"The provider has dispute {dispute_id} on charge {charge_id}; "
                    "Vouch has no record of it.",
                    vouch_side={"dispute": "", "charge": charge_id, "status": ""},
                    provider_side=provider,
                    differing=["dispute", "status"],
                    charge_id=charge_id,
                    observation=observation,
                ),
            )
            continue
        vouch = {
            "dispute": row.provider_dispute_id,
            "charge": row.charge_id,
            "status": row.provider_status,
            "amount": to_cents(row.amount_micro),
            "submissions": "filed" if dispute_id in filed else "",
        }
        if row.provider_status != dispute.get("status"):
            _found(
                ctx,
                Finding(
                    code=DiscrepancyClass.DISPUTE_STATUS_DRIFT,
                    subject_type="dispute",
                    subject_id=dispute_id,
                    summary=f"Dispute {dispute_id} is {dispute.get('status')} at the provider, "
                    f"{row.provider_status or '(no status)'} here.",
                    vouch_side=vouch,
                    provider_side=provider,
                    differing=["status"],
                    charge_id=row.charge_id,
                    observation=observation,
                ),
            )
        if dispute_id in filed and not provider["submissions"]:
            _found(
                ctx,
                Finding(
                    code=DiscrepancyClass.FILING_UNCONFIRMED,
                    subject_type="dispute",
                    subject_id=dispute_id,
                    summary=f"Vouch shows a filed packet for dispute {dispute_id}; the provider "
                    "shows no evidence submission.",
                    vouch_side=vouch,
                    provider_side=provider,
                    differing=["submissions"],
                    charge_id=row.charge_id,
                    observation=observation,
                ),
            )
    return seen


# --- Vouch's side: what the listing did not show --------------------------------------------


def _read(ctx: _Context, kind: str, object_id: str) -> tuple[Outcome, Observation]:
    reader = {
        "refund": ctx.provider.refund_read,
        "charge": ctx.provider.charge_read,
        "dispute": ctx.provider.dispute_read,
    }[kind]
    outcome = reader(object_id, budget=ctx.budget)
    ctx.run.provider_calls += outcome.attempts
    if not outcome.accepted and not outcome.refused:
        raise ProviderUnavailable(kind=kind, params={"id": object_id}, outcome=outcome)
    request = {"path": f"/v1/{kind}s/{object_id}", "http_status": outcome.http_status}
    if outcome.accepted and outcome.body is not None:
        return outcome, _observe(ctx, kind, request, body=outcome.body)
    # A refusal is kept as what it said (its code), as canonical JSON.
    data = outcome.value if outcome.accepted else {"error": outcome.error_code, "id": object_id}
    return outcome, _observe(ctx, kind, request, data)


def _vouch_side(ctx: _Context) -> None:
    """Accepted legs and funded charges of the window that the listing did not show: each is
    read alone — gone at the provider (missing), or created just outside the window (compared)."""
    run = ctx.run
    if connection.vendor == "postgresql":
        # The run's Seen rows were all written just now: without fresh statistics the planner
        # believes there are none and nested-loops over them (quadratic in the listing).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE reconciliation_seen")
    seen = Seen.objects.filter(run=run)
    legs = (
        RefundLeg.objects.select_related("funding_leg", "operation__envelope")
        .filter(outcome=LegOutcome.ACCEPTED, released=False)
        .exclude(provider_refund_id="")
        .filter(reserved_at__gte=run.window_start, reserved_at__lt=run.window_end)
        .exclude(Exists(seen.filter(object_id=OuterRef("provider_refund_id"))))
        .order_by("id")
    )
    # The ids by a plain query, not a cursor: PostgreSQL plans a cursor for its first rows and,
    # believing the run's fresh Seen rows few, nested-loops over them (quadratic in the listing).
    for chunk in _chunks(list(legs.values_list("id", flat=True)), 500):
        for leg in legs.filter(id__in=chunk):
            _refund_leg_alone(ctx, leg)
    fundings = (
        FundingLeg.objects.select_related("envelope")
        .filter(status=FundingStatus.SUCCEEDED)
        .exclude(charge_id="")
        .filter(created_at__gte=run.window_start, created_at__lt=run.window_end)
        .exclude(Exists(seen.filter(object_id=OuterRef("charge_id"))))
        .order_by("id")
    )
    for chunk in _chunks(list(fundings.values_list("id", flat=True)), 500):
        for funding in fundings.filter(id__in=chunk):
            _funding_alone(ctx, funding)


def _chunks(ids: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _refund_leg_alone(ctx: _Context, leg: RefundLeg) -> Observation:
    """An accepted leg's refund read alone: compared, or missing at the provider."""
    outcome, observation = _read(ctx, "refund", leg.provider_refund_id)
    if outcome.accepted:
        _refunds(ctx, [outcome.require()], observation)
        return observation
    _count(ctx, "refund")
    vouch, _ = _refund_sides(leg, {})
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.REFUND_MISSING,
            subject_type="refund_leg",
            subject_id=leg.public_id,
            summary=f"Leg {leg.public_id} records refund {leg.provider_refund_id}; the provider "
            "has no such refund.",
            vouch_side=vouch,
            provider_side={
                "refund": "",
                "charge": "",
                "amount": None,
                "vouch_leg": "",
                "status": "",
            },
            differing=["refund", "amount", "status"],
            charge_id=leg.funding_leg.charge_id,
            envelope_public_id=leg.operation.envelope.public_id,
            amount_micro=leg.amount_micro,
            observation=observation,
        ),
    )
    return observation


def _funding_alone(ctx: _Context, funding: FundingLeg) -> Observation:
    """A funded leg's charge read alone: compared, or missing at the provider."""
    outcome, observation = _read(ctx, "charge", funding.charge_id)
    if outcome.accepted:
        _charges(ctx, [outcome.require()], observation)
        return observation
    _count(ctx, "charge")
    _found(
        ctx,
        Finding(
            code=DiscrepancyClass.CHARGE_MISSING,
            subject_type="funding_leg",
            subject_id=funding.public_id,
            summary=f"Funding leg {funding.public_id} records charge {funding.charge_id}; the "
            "provider has no such charge.",
            vouch_side={
                "charge": funding.charge_id,
                "status": "succeeded",
                "amount": to_cents(funding.amount_micro),
            },
            provider_side={"charge": "", "status": "", "amount": None},
            differing=["charge", "status", "amount"],
            charge_id=funding.charge_id,
            envelope_public_id=funding.envelope.public_id,
            amount_micro=funding.amount_micro,
            observation=observation,
        ),
    )
    return observation


# --- what is stuck, and the ledger ----------------------------------------------------------


def _ledger_observation(ctx: _Context, what: str, data: dict[str, Any]) -> Observation:
    return _observe(ctx, "ledger", {"what": what}, data)


def _stuck(ctx: _Context) -> None:
    """Stuck things, over the whole ledger (not only the window)."""
    stuck_before = ctx.now - timedelta(seconds=settings.RECONCILIATION_STUCK_AFTER_S)
    legs = (
        RefundLeg.objects.select_related("funding_leg", "operation__envelope")
        .filter(outcome__in=(LegOutcome.RESERVED, LegOutcome.UNKNOWN), reserved_at__lt=stuck_before)
        .order_by("id")
    )
    for leg in legs.iterator(chunk_size=500):
        side = {
            "leg": leg.public_id,
            "outcome": leg.outcome,
            "amount": to_cents(leg.amount_micro),
            "charge": leg.funding_leg.charge_id,
            "reserved_at": leg.reserved_at.isoformat(),
            "error_code": leg.error_code,
        }
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.LEG_STUCK,
                subject_type="refund_leg",
                subject_id=leg.public_id,
                summary=f"Refund leg {leg.public_id} has been {leg.outcome} since "
                f"{leg.reserved_at:%Y-%m-%d %H:%M} UTC.",
                vouch_side=side,
                charge_id=leg.funding_leg.charge_id,
                envelope_public_id=leg.operation.envelope.public_id,
                amount_micro=leg.amount_micro,
                observation=_ledger_observation(ctx, "refund leg", side),
            ),
        )
    fundings = (
        FundingLeg.objects.select_related("envelope")
        .filter(status=FundingStatus.PENDING, created_at__lt=stuck_before)
        .order_by("id")
    )
    for funding in fundings.iterator(chunk_size=500):
        side = {
            "funding": funding.public_id,
            "status": funding.status,
            "amount": to_cents(funding.amount_micro),
            "payment_intent": funding.payment_intent_id,
            "created_at": funding.created_at.isoformat(),
        }
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.FUNDING_STUCK,
                subject_type="funding_leg",
                subject_id=funding.public_id,
                summary=f"Funding leg {funding.public_id} has been pending since "
                f"{funding.created_at:%Y-%m-%d %H:%M} UTC.",
                vouch_side=side,
                charge_id=funding.charge_id,
                envelope_public_id=funding.envelope.public_id,
                amount_micro=funding.amount_micro,
                observation=_ledger_observation(ctx, "funding leg", side),
            ),
        )
    overdue = VerificationRun.objects.filter(verdict="PENDING", deadline_at__lt=ctx.now)
    for vrun in overdue.order_by("id").iterator(chunk_size=500):
        side = {
            "run": vrun.public_id,
            "contract": vrun.contract_id,
            "verdict": vrun.verdict,
            "deadline_at": vrun.deadline_at.isoformat(),
            "attempts": vrun.attempts_made,
        }
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.RUN_OVERDUE,
                subject_type="verification_run",
                subject_id=vrun.public_id,
                summary=f"Verification run {vrun.public_id} ({vrun.contract_id}) is pending past "
                "its contract's timeout.",
                vouch_side=side,
                observation=_ledger_observation(ctx, "verification run", side),
            ),
        )
    filing_before = ctx.now - timedelta(seconds=settings.RECONCILIATION_FILING_STUCK_AFTER_S)
    filings = Packet.objects.select_related("dispute").filter(
        filing_status__in=(FilingStatus.SUBMITTING, FilingStatus.AWAITING_READBACK),
        filing_started_at__lt=filing_before,
    )
    for packet in filings.order_by("id").iterator(chunk_size=500):
        side = {
            "dispute": packet.dispute.provider_dispute_id,
            "packet": packet.public_id,
            "filing_status": packet.filing_status,
            "filing_started_at": packet.filing_started_at.isoformat()
            if packet.filing_started_at
            else None,
        }
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.FILING_UNCONFIRMED,
                subject_type="dispute",
                subject_id=packet.dispute.provider_dispute_id,
                summary=f"The filing of packet {packet.public_id} has been in flight "
                f"({packet.filing_status}) for more than an hour.",
                vouch_side=side,
                charge_id=packet.dispute.charge_id,
                observation=_ledger_observation(ctx, "filing", side),
            ),
        )


def _ledger(ctx: _Context) -> None:
    """The `check_ledger` recomputation: every envelope whose balances disagree."""
    by_envelope: dict[str, list[Any]] = {}
    for breach in ledger_breaches():
        by_envelope.setdefault(breach.envelope, []).append(breach)
    for envelope_id, breaches in by_envelope.items():
        side = {b.balance: b.stored for b in breaches}
        computed = {b.balance: b.from_journal for b in breaches}
        _found(
            ctx,
            Finding(
                code=DiscrepancyClass.LEDGER_BREACH,
                subject_type="envelope",
                subject_id=envelope_id,
                summary=f"Envelope {envelope_id}'s stored balances disagree with its journal or "
                "legs: " + ", ".join(sorted(side)),
                vouch_side=side,
                provider_side={b.balance: b.from_legs for b in breaches},
                differing=sorted(side),
                envelope_public_id=envelope_id,
                amount_micro=max(abs(b.stored - b.from_legs) for b in breaches),
                observation=_ledger_observation(
                    ctx, "ledger", {"stored": side, "journal": computed}
                ),
            ),
        )


# --- clearing -------------------------------------------------------------------------------


def _clear(ctx: _Context) -> None:
    """Every open discrepancy this run did not see: looked at once more, alone. Gone → cleared,
    citing the read that shows it gone; still there → seen again."""
    unseen = (
        Discrepancy.objects.filter(status__in=OPEN_STATES).exclude(last_run=ctx.run).order_by("id")
    )
    for discrepancy in unseen.iterator(chunk_size=200):
        observation = _look_again(ctx, discrepancy)
        discrepancy.refresh_from_db()
        if discrepancy.last_run_id != ctx.run.pk and discrepancy.is_open:
            discrepancy_clear(
                discrepancy=discrepancy,
                run=ctx.run,
                observation=observation,
                why=f"Not seen by run {ctx.run.public_id}.",
            )


def _look_again(ctx: _Context, discrepancy: Discrepancy) -> Observation | None:
    """Compare the discrepancy's subject alone, now; returns the observation it rests on (None:
    its subject is gone from the ledger, nothing to read)."""
    code, subject_type, subject_id = (
        discrepancy.code,
        discrepancy.subject_type,
        discrepancy.subject_id,
    )
    if code in WHOLE_LEDGER:
        # The stuck and ledger phases looked at the whole ledger: what they did not name is gone.
        return _ledger_observation(ctx, code, {"subject": subject_id, "found": False})
    if subject_type in ("refund", "dispute", "charge"):  # a provider object: read it
        return _compare_alone(ctx, subject_type, subject_id)
    if subject_type == "refund_leg":
        leg = (
            RefundLeg.objects.select_related("funding_leg", "operation__envelope")
            .filter(public_id=subject_id)
            .first()
        )
        if leg is None:
            return None
        if code == DiscrepancyClass.REFUND_MISSING:
            if leg.outcome == LegOutcome.ACCEPTED and not leg.released:
                return _refund_leg_alone(ctx, leg)
            return _ledger_observation(ctx, code, {"leg": leg.public_id, "released": True})
        # The refund it is about, as its provider side names it (a duplicate's: the second one).
        refund_id = discrepancy.provider_side.get("refund")
        return _compare_alone(ctx, "refund", str(refund_id)) if refund_id else None
    if subject_type == "funding_leg":
        funding = FundingLeg.objects.select_related("envelope").filter(public_id=subject_id).first()
        if funding is None:
            return None
        if code == DiscrepancyClass.CHARGE_MISSING:
            return _funding_alone(ctx, funding)
        return _compare_alone(ctx, "charge", funding.charge_id)
    return None


def _compare_alone(ctx: _Context, kind: str, object_id: str) -> Observation:
    """Read one provider object alone and compare it as a listing would have."""
    outcome, observation = _read(ctx, kind, object_id)
    if outcome.accepted:
        compare = {"refund": _refunds, "charge": _charges, "dispute": _disputes}[kind]
        compare(ctx, [outcome.require()], observation)
    return observation
