"""Attempts on a run: due runs claimed under a lease, every channel observed outside any
transaction, the decision recorded in one transaction with the attempt (a verdict is routed
there to the apps' handlers, `verification.verdicts`), and monitoring after a verdict."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Case, CharField, F, Q, Value, When

from verification import clock, verdicts
from verification.contracts import Contract, Verdict, get_contract
from verification.evaluation import Decision, decide
from verification.models import (
    Attempt,
    Observation,
    Trigger,
    VerificationRun,
)
from verification.selectors import runs_in_flight
from verification.services.escalations import escalation_open
from verification.services.runs import run_context
from verification.verifiers import verifier_for


def _skew() -> float:
    return float(getattr(settings, "VERIFICATION_CLOCK_SKEW_S", 2.0))


def _lease() -> timedelta:
    return timedelta(seconds=float(getattr(settings, "VERIFICATION_LEASE_S", 120.0)))


def _digest(data: Any) -> str:
    canonical = json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def runs_claim_due(*, limit: int = 100, now: datetime | None = None) -> list[tuple[int, str]]:
    """Lease up to `limit` due runs in one short transaction (SELECT … FOR UPDATE SKIP LOCKED) and
    commit: several workers never claim one run twice, and the cost depends on the due runs only."""
    now = now or clock.now()
    token = secrets.token_hex(16)
    with transaction.atomic():
        rows = list(
            VerificationRun.objects.select_for_update(skip_locked=True)
            .filter(verdict=Verdict.PENDING, next_attempt_at__lte=now)
            .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now))
            .order_by("next_attempt_at")
            .values_list("id", "lease_token")[:limit]
        )
        if rows:
            # A run whose lease lapsed keeps its token: the attempt enqueued under it may only be
            # late (a queue slower than the lease), not lost, and must still count when it comes.
            # Two attempts under one token are safe: the first to record clears the token, so
            # the other finds it gone and does nothing.
            VerificationRun.objects.filter(id__in=[run_id for run_id, _ in rows]).update(
                leased_until=now + _lease(),
                lease_token=Case(
                    When(lease_token="", then=Value(token)),
                    default=F("lease_token"),
                    output_field=CharField(),
                ),
            )
    return [(run_id, held or token) for run_id, held in rows]


def runs_claim_within(*, in_flight_max: int, limit: int) -> list[tuple[int, str]]:
    """Lease the due runs the workers have room for: at most `limit`, and no more than bring the
    runs in flight (`selectors.runs_in_flight`) to `in_flight_max`. So the queue holds at most
    about `in_flight_max` attempts however many runs fall due at once; each attempt that ends
    makes room for the next (verification.tasks), and the oldest due run goes first."""
    room = min(limit, in_flight_max - runs_in_flight())
    return runs_claim_due(limit=room) if room > 0 else []


def run_wake_later(*, run_id: int, monitor: bool = False) -> None:
    """An event for a run while the workers have no room: the run is made due now (if it is
    leased, its holder attempts again when done), or, decided, its monitoring is; the bounded
    poll sends it, oldest due first."""
    now = clock.now()
    runs = VerificationRun.objects.filter(id=run_id)
    if monitor:
        runs.filter(Q(monitor_at__isnull=True) | Q(monitor_at__gt=now)).update(monitor_at=now)
        return
    pending = runs.filter(verdict=Verdict.PENDING)
    pending.filter(leased_until__gte=now).update(event_pending=True)
    pending.filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now)).filter(
        next_attempt_at__gt=now
    ).update(next_attempt_at=now)


def run_claim_for_event(*, run_id: int) -> str | None:
    """Lease one pending run for an event-triggered attempt; if it is leased already, mark that an
    event is waiting (the holder attempts again when done). Returns the lease token or None."""
    now = clock.now()
    token = secrets.token_hex(16)
    claimed = (
        VerificationRun.objects.filter(id=run_id, verdict=Verdict.PENDING)
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now))
        .update(leased_until=now + _lease(), lease_token=token, event_pending=False)
    )
    if claimed:
        return token
    VerificationRun.objects.filter(id=run_id, verdict=Verdict.PENDING).update(event_pending=True)
    return None


def observe(contract: Contract, run: VerificationRun) -> tuple[dict[str, Any], list[Observation]]:
    """Read every channel afresh (provider calls: never inside a transaction)."""
    observed: dict[str, Any] = {}
    records = []
    context = run_context(run)
    for channel in contract.channels:
        result = verifier_for(channel).observe(
            contract=contract, channel=channel, context=context, skew_s=_skew()
        )
        observed[channel.name] = result.data
        records.append(
            Observation(
                channel=channel.name,
                level=channel.level,
                verifier=channel.verifier,
                observed_at=clock.now(),
                data=result.data,
                digest=_digest(result.data),
            )
        )
    return observed, records


def run_attempt(
    *, run_id: int, token: str, trigger: str, enqueue: Callable[[int, str, str], None] | None = None
) -> Attempt | None:
    """Make one attempt on a leased run: observe, decide, record. Returns None if the lease was
    lost (another worker owns the run now) or the run is already decided."""
    run = VerificationRun.objects.filter(id=run_id).first()
    if run is None or (run.lease_token != token and trigger != Trigger.MONITOR):
        return None
    if run.decided and trigger != Trigger.MONITOR:
        return None
    contract = get_contract(run.contract_id)
    started = clock.now()
    observed, observations = observe(contract, run)
    now = clock.now()
    counted = trigger == Trigger.POLL
    number = run.attempts_made + 1 if counted else None
    decision = decide(contract, run_context(run, observed), now=now, skew_s=_skew(), attempt=number)
    with transaction.atomic():
        locked = VerificationRun.objects.select_for_update(of=("self",)).get(id=run_id)
        if trigger != Trigger.MONITOR and (locked.lease_token != token or locked.decided):
            return None
        attempt = Attempt.objects.create(
            run=locked,
            number=number,
            trigger=trigger,
            started_at=started,
            finished_at=now,
            verdict=decision.verdict,
            verdict_class=decision.class_ or "",
            reason=decision.reason,
            held=decision.held or "",
            conditions=[c.as_json() for c in decision.conditions],
        )
        for observation in observations:
            observation.attempt = attempt
        Observation.objects.bulk_create(observations)
        if trigger == Trigger.MONITOR:
            _monitor_outcome(locked, decision)
            if locked.decided:  # its monitoring lease ends (a pending run's lease is its own)
                VerificationRun.objects.filter(id=run_id).update(leased_until=None)
            return attempt
        if counted:
            locked.attempts_made = number or 0
        fields = ["attempts_made", "leased_until", "lease_token", "event_pending"]
        rerun = locked.event_pending
        locked.leased_until, locked.lease_token, locked.event_pending = None, "", False
        if decision.verdict != Verdict.PENDING:
            locked.verdict = decision.verdict
            locked.verdict_class = decision.class_ or ""
            locked.verdict_reason = decision.reason
            locked.decided_at = now
            locked.decided_by = attempt
            locked.next_attempt_at = None
            fields += [
                "verdict",
                "verdict_class",
                "verdict_reason",
                "decided_at",
                "decided_by",
                "next_attempt_at",
            ]
            # The apps' handlers for this contract (verification/verdicts.py), in this transaction.
            verdicts.route(locked)
            if decision.verdict in (Verdict.CONTRADICTED, Verdict.UNVERIFIABLE):
                escalation_open(
                    run=locked,
                    verdict=decision.verdict,
                    verdict_class=decision.class_,
                    reason=decision.reason,
                )
        elif counted:
            locked.next_attempt_at = _next_attempt_at(contract, locked, decision, now, number or 0)
            fields.append("next_attempt_at")
        locked.save(update_fields=fields)
        if rerun and not locked.decided and enqueue is not None:
            transaction.on_commit(lambda: _retrigger(run_id, enqueue))
    return attempt


def _next_attempt_at(
    contract: Contract, run: VerificationRun, decision: Decision, now: datetime, number: int
) -> datetime:
    """When a pending run is read again: the backoff's next step; but an outcome held by the
    stale-read window is due the moment the window ends, so it is read then, not later."""
    due = max(
        now + timedelta(seconds=contract.timing.delay_before(number + 1)), run.operation_created_at
    )
    if decision.held is not None:
        window_ends = run.operation_created_at + timedelta(
            milliseconds=contract.timing.stale_read_window_ms
        )
        due = min(due, max(window_ends, now))
    return due


def _retrigger(run_id: int, enqueue: Callable[[int, str, str], None]) -> None:
    token = run_claim_for_event(run_id=run_id)
    if token is not None:
        enqueue(run_id, token, Trigger.EVENT)


def _monitor_outcome(run: VerificationRun, decision: Decision) -> None:
    """After VERIFIED a later contradiction (a duplicate refund) does not change the verdict: it
    opens an escalation, once per class. Inside the stale-read window a contradiction is held, as
    it is before a verdict (reads may not show everything yet): the run is looked at again when
    the window ends (`monitor_at`, claimed by the poll), and only then may escalate."""
    hits = [c for c in decision.conditions if c.kind == "contradicted" and c.result is True]
    contract = get_contract(run.contract_id)
    if hits and decision.held is not None:
        window_ends = run.operation_created_at + timedelta(
            milliseconds=contract.timing.stale_read_window_ms, seconds=_skew()
        )
        if run.monitor_at is None or run.monitor_at < window_ends:
            run.monitor_at = window_ends
            run.save(update_fields=["monitor_at"])
        return
    for hit in hits:
        spec = next(c for c in contract.contradicted if c.name == hit.name)
        if not run.escalations.filter(verdict_class=spec.class_).exists():
            escalation_open(
                run=run,
                verdict=Verdict.CONTRADICTED,
                verdict_class=spec.class_,
                reason=f"After {run.verdict}: {spec.reason}",
            )


def runs_claim_monitor_due(*, limit: int = 100, now: datetime | None = None) -> list[int]:
    """Decided runs whose held monitoring is due again (`monitor_at` passed): taken once (the mark
    is cleared in the claiming transaction, SKIP LOCKED), for a monitoring attempt each, leased
    while it is in flight (one at a time per run)."""
    now = now or clock.now()
    with transaction.atomic():
        ids = list(
            VerificationRun.objects.select_for_update(skip_locked=True)
            .filter(monitor_at__lte=now)
            .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now))
            .order_by("monitor_at")
            .values_list("id", flat=True)[:limit]
        )
        if ids:
            VerificationRun.objects.filter(id__in=ids).update(
                monitor_at=None, leased_until=now + _lease()
            )
    return ids


def runs_claim_monitor_within(*, in_flight_max: int, limit: int) -> list[int]:
    """`runs_claim_monitor_due` for the room the workers have (as `runs_claim_within`)."""
    room = min(limit, in_flight_max - runs_in_flight())
    return runs_claim_monitor_due(limit=room) if room > 0 else []


def run_claim_monitor(*, run_id: int) -> bool:
    """Lease a decided run for one monitoring attempt (an event came for it): False if one is in
    flight already, or the run is not decided."""
    now = clock.now()
    return bool(
        VerificationRun.objects.filter(id=run_id)
        .exclude(verdict=Verdict.PENDING)
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now))
        .update(leased_until=now + _lease())
    )
