"""Writes of the verification engine: start a run, claim due runs, make an attempt, escalate,
store and process provider events. The provider is read outside any transaction or lock."""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, CharField, F, Q, Value, When

from accounts.models import User
from core import db
from core.services import audit_record
from verification import clock, events, verdicts
from verification.contracts import Contract, Verdict, get_contract, registry
from verification.evaluation import Decision, decide
from verification.events import InvalidProviderEvent as InvalidProviderEvent  # raised here
from verification.events import event_check
from verification.expressions import Context, missing
from verification.models import (
    Attempt,
    Escalation,
    EscalationStatus,
    Notification,
    Observation,
    ProviderEvent,
    Resolution,
    RunKey,
    Trigger,
    VerificationRun,
)
from verification.subjects import Subject, subject_of
from verification.verifiers import dig, verifier_for

logger = logging.getLogger("vouch.verification")

OPS_GROUP = "ops"
# The escalation verdict of a provider event given up after its bounded retries.
EVENT_FAILED = "EVENT_FAILED"


def _skew() -> float:
    return float(getattr(settings, "VERIFICATION_CLOCK_SKEW_S", 2.0))


def _lease() -> timedelta:
    return timedelta(seconds=float(getattr(settings, "VERIFICATION_LEASE_S", 120.0)))


def _digest(data: Any) -> str:
    canonical = json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def run_context(run: VerificationRun, observed: dict[str, Any] | None = None) -> Context:
    return Context(
        observed=observed or {},
        action_result=run.action_result,
        input=run.input,
        operation_id=run.operation_id,
        operation_created_at=run.operation_created_at,
    )


# --- starting a run --------------------------------------------------------------------------


def verification_start(
    *,
    contract_id: str,
    operation_id: str,
    operation_created_at: datetime,
    input: dict[str, Any],
    action_result: dict[str, Any],
) -> VerificationRun:
    """Start observing one operation under a contract. Idempotent: the same contract and operation
    give the same run. Raises ValueError if a required correlation key does not resolve."""
    run = verification_prepare(
        contract_id=contract_id,
        operation_id=operation_id,
        operation_created_at=operation_created_at,
        input=input,
        action_result=action_result,
    )
    try:
        with transaction.atomic():
            inserted = db.execute(run.statements())[0]
    except IntegrityError:  # started concurrently by another caller
        return VerificationRun.objects.get(contract_id=contract_id, operation_id=operation_id)
    return run.saved(inserted)


@dataclass
class PreparedRun:
    """A run resolved and scheduled, not yet saved: its INSERT and its keys' go into the batch of
    the transaction that starts it (core.db.execute); `saved` after the batch ran."""

    run: VerificationRun
    keys: dict[str, str]

    def statements(self) -> list[db.Statement]:
        """The run's INSERT (RETURNING its id) and its keys' INSERT. A run of the same contract and
        operation that exists already makes the INSERT fail (IntegrityError): the caller's
        transaction rolls back."""
        statements = [db.insert(self.run)]
        if self.keys:
            table = connection.ops.quote_name(RunKey._meta.db_table)
            run_id, run_params = db.Ref(VerificationRun, self.run.public_id).sql()
            rows = ", ".join(f"({run_id}, %s, %s)" for _ in self.keys)
            params = [p for name, value in self.keys.items() for p in (*run_params, name, value)]
            statements.append(
                db.Statement(
                    f"INSERT INTO {table} (run_id, name, value) VALUES {rows}",  # noqa: S608
                    tuple(params),
                )
            )
        return statements

    def saved(self, rows: list[tuple[Any, ...]]) -> VerificationRun:
        """The run, with the id its INSERT returned (`rows`: that statement's result)."""
        db.inserted(self.run, rows)
        return self.run


def verification_prepare(
    *,
    contract_id: str,
    operation_id: str,
    operation_created_at: datetime,
    input: dict[str, Any],
    action_result: dict[str, Any],
) -> PreparedRun:
    """The run `verification_start` saves: its correlation keys resolved (ValueError if a
    required one does not resolve), its first attempt and its deadline scheduled. Reads nothing."""
    contract = get_contract(contract_id)
    draft = VerificationRun(
        contract_id=contract_id,
        operation_id=operation_id,
        operation_created_at=operation_created_at,
        input=input,
        action_result=action_result,
    )
    context = run_context(draft)
    keys: dict[str, Any] = {}
    for correlation in contract.correlation:
        for name, path in correlation.keys.items():
            value = context.resolve(path)
            if missing(value) or value is None:
                if correlation.required:
                    raise ValueError(
                        f"{contract_id}: required correlation key {name} ({path}) does not resolve"
                    )
                continue
            keys[name] = value
    draft.contract_version = contract.version
    draft.correlation = keys
    draft.next_attempt_at = operation_created_at + timedelta(
        seconds=contract.timing.delay_before(1)
    )
    draft.deadline_at = operation_created_at + timedelta(milliseconds=contract.timing.timeout_ms)
    return PreparedRun(draft, {name: str(value)[:255] for name, value in keys.items()})


# --- claiming ---------------------------------------------------------------------------------


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


# --- one attempt ------------------------------------------------------------------------------


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
            delay = contract.timing.delay_before((number or 0) + 1)
            locked.next_attempt_at = max(
                now + timedelta(seconds=delay), locked.operation_created_at
            )
            fields.append("next_attempt_at")
        locked.save(update_fields=fields)
        if rerun and not locked.decided and enqueue is not None:
            transaction.on_commit(lambda: _retrigger(run_id, enqueue))
    return attempt


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
    is cleared in the claiming transaction, SKIP LOCKED), for a monitoring attempt each."""
    now = now or clock.now()
    with transaction.atomic():
        ids = list(
            VerificationRun.objects.select_for_update(skip_locked=True)
            .filter(monitor_at__lte=now)
            .order_by("monitor_at")
            .values_list("id", flat=True)[:limit]
        )
        if ids:
            VerificationRun.objects.filter(id__in=ids).update(monitor_at=None)
    return ids


# --- escalations ------------------------------------------------------------------------------


class EscalationNeedsAdjustment(ValueError):
    """A money escalation is resolved by an adjustment a second person approves, not by a note."""


def escalation_open(
    *,
    run: VerificationRun | None = None,
    verdict: str,
    verdict_class: str | None,
    reason: str,
    subject: Subject | None = None,
) -> Escalation:
    """Open an escalation for a person, with a notification record and an email to the ops group
    (sent after commit), and an audit event. Its subject is given, or told by the app that started
    the run (`verification.subjects`). One open escalation per subject and class: opening it again
    returns the open one, with no second notification."""
    if subject is None and run is not None:
        subject = subject_of(run)
    fields = {
        "subject_type": subject.type if subject else "",
        "subject_id": subject.id if subject else "",
        "money": bool(subject and subject.money),
    }
    if subject is not None:
        existing = Escalation.objects.filter(
            status=EscalationStatus.OPEN,
            subject_type=subject.type,
            subject_id=subject.id,
            verdict_class=verdict_class or "",
        ).first()
        if existing is not None:
            return existing
    try:
        with transaction.atomic():
            escalation = Escalation.objects.create(
                run=run, verdict=verdict, verdict_class=verdict_class or "", reason=reason, **fields
            )
    except IntegrityError:  # opened concurrently by another observer of the same subject
        return Escalation.objects.get(
            status=EscalationStatus.OPEN,
            subject_type=fields["subject_type"],
            subject_id=fields["subject_id"],
            verdict_class=verdict_class or "",
        )
    recipients = sorted(
        User.objects.filter(groups__name=OPS_GROUP, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
        .distinct()
    )
    labelled = f"{verdict}{f' ({verdict_class})' if verdict_class else ''}"
    if run is not None:
        title = f"{run.contract_id} {run.operation_id}"
        opening = (
            f"Run {run.public_id} ({run.contract_id} v{run.contract_version}) on operation "
            f"{run.operation_id} is {labelled}."
        )
    else:
        title = escalation.subject_label
        opening = f"{escalation.subject_label} is {labelled}."
    if escalation.money:
        opening += " It concerns money: resolve it by an adjustment that a second person approves."
    body = f"{opening}\n\n{reason}\n\nOpen the escalation queue in the admin to resolve it."
    notification = Notification.objects.create(
        escalation=escalation,
        recipients=recipients,
        subject=f"[Vouch] {verdict} {verdict_class or ''}: {title}".replace("  ", " ")[:200],
        body=body,
    )
    audit_record(
        actor=None,
        action="escalation.open",
        target_type="verification_run" if run is not None else escalation.subject_type,
        target_id=run.public_id if run is not None else escalation.subject_id,
        details={
            "escalation": escalation.pk,
            "verdict": verdict,
            "class": verdict_class or "",
            "reason": reason,
            "subject": escalation.subject_label,
            "money": escalation.money,
        },
    )
    if recipients:
        transaction.on_commit(lambda: _send(notification.pk))
    return escalation


def _send(notification_id: int) -> None:
    notification = Notification.objects.get(pk=notification_id)
    send_mail(notification.subject, notification.body, None, notification.recipients)
    Notification.objects.filter(pk=notification_id).update(sent_at=clock.now())


@transaction.atomic
def escalation_resolve(
    *, escalation: Escalation, actor: User, note: str, adjustment: str | None = None
) -> Escalation:
    """A person's resolution. With a note only, for an escalation that concerns no money: refused
    if already resolved, if the note is empty, if the person lacks
    `verification.resolve_escalation`, or if it concerns money (EscalationNeedsAdjustment). With
    `adjustment` (the public id of the approved adjustment that corrected the ledger, called by
    the adjustment service in its own transaction): resolved as `adjusted` by its approver."""
    if adjustment is None and not actor.has_perm("verification.resolve_escalation"):
        raise PermissionError("resolving an escalation needs verification.resolve_escalation")
    note = note.strip()
    if not note:
        raise ValueError("a resolution needs a note")
    locked = Escalation.objects.select_for_update().get(pk=escalation.pk)
    if locked.status != EscalationStatus.OPEN:
        raise ValueError("this escalation is already resolved")
    if locked.money and adjustment is None:
        raise EscalationNeedsAdjustment(
            "this escalation concerns money: propose an adjustment, which a second person with "
            "reconciliation.approve_adjustment approves"
        )
    locked.status = EscalationStatus.RESOLVED
    locked.resolved_at = clock.now()
    locked.resolved_by = actor
    locked.resolution = Resolution.ADJUSTED if adjustment else Resolution.NOTE
    locked.resolution_note = note
    locked.save(
        update_fields=["status", "resolved_at", "resolved_by", "resolution", "resolution_note"]
    )
    audit_record(
        actor=actor,
        action="escalation.resolve",
        target_type="escalation",
        target_id=str(locked.pk),
        details={
            "run": locked.run.public_id if locked.run is not None else None,
            "subject": locked.subject_label,
            "verdict": locked.verdict,
            "resolution": locked.resolution,
            "adjustment": adjustment,
            "note": note,
        },
    )
    return locked


def escalation_clear(*, escalation: Escalation, note: str, details: dict[str, Any]) -> bool:
    """No person: reconciliation saw the difference this escalation was opened for gone (SPEC
    §15.4: a money discrepancy that clears resolves its escalation, citing the clearing
    observation, which `note` and `details` name). Called in the caller's transaction. Returns
    whether it resolved it (False: resolved already)."""
    locked = Escalation.objects.select_for_update().get(pk=escalation.pk)
    if locked.status != EscalationStatus.OPEN:
        return False
    locked.status = EscalationStatus.RESOLVED
    locked.resolved_at = clock.now()
    locked.resolution = Resolution.CLEARED
    locked.resolution_note = note
    locked.save(update_fields=["status", "resolved_at", "resolution", "resolution_note"])
    audit_record(
        actor=None,
        action="escalation.clear",
        target_type="escalation",
        target_id=str(locked.pk),
        details={"subject": locked.subject_label, "verdict": locked.verdict, **details},
    )
    return True


# --- provider events --------------------------------------------------------------------------


def provider_event_store(
    *, event: dict[str, Any], raw: str, provider: str = "stripe", source: str = "webhook"
) -> tuple[ProviderEvent, bool]:
    """Store a verified event once (`source`: delivered by `webhook`, or found by reconciliation's
    `catch_up`). A duplicate delivery is counted and changes nothing else. Raises
    InvalidProviderEvent (code `invalid_event`, nothing stored) for a payload that is not a
    storable event (`events.event_check`)."""
    event_check(event)
    event_id = event["id"]
    try:
        with transaction.atomic():
            stored = ProviderEvent.objects.create(
                provider=provider,
                event_id=event_id,
                type=event["type"],
                provider_created=event["created"],
                payload=event,
                raw=raw,
                source=source,
            )
            return stored, True
    except IntegrityError:
        ProviderEvent.objects.filter(event_id=event_id).update(duplicates=F("duplicates") + 1)
        return ProviderEvent.objects.get(event_id=event_id), False


def _event_retry_delay(attempt: int) -> timedelta:
    """The gap after failed attempt `attempt` (1-based): base * 2^(attempt-1), at most the max."""
    base = float(settings.VERIFICATION_EVENT_RETRY_BASE_S)
    cap = float(settings.VERIFICATION_EVENT_RETRY_MAX_S)
    return timedelta(seconds=min(base * 2.0 ** min(attempt - 1, 62), cap))


def _event_claim(event_pk: int) -> ProviderEvent | None:
    """Take one attempt at an unprocessed event that is due: count it and set the next attempt's
    time before processing starts (so a task delivered twice, or the retry job, does not attempt
    it again meanwhile, and a worker that dies mid-attempt still used one up). None when the
    event is processed, given up, not due yet, or being claimed by another worker."""
    now = clock.now()
    with transaction.atomic():
        event = (
            ProviderEvent.objects.select_for_update(skip_locked=True)
            .filter(pk=event_pk, processed_at__isnull=True)
            .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
            .first()
        )
        if event is None:
            return None
        event.attempts += 1
        event.next_attempt_at = now + _event_retry_delay(event.attempts)
        event.save(update_fields=["attempts", "next_attempt_at"])
    return event


def provider_event_process(*, event_pk: int, enqueue: Callable[[int, str, str], None]) -> list[int]:
    """Make one attempt at processing a stored event, if it is due: wake the runs it correlates
    with (pending runs get an attempt at once, or a mark that one is owed; VERIFIED runs get a
    monitoring attempt, as a duplicate after VERIFIED escalates) and run the handlers the apps
    registered for its type. Returns the run ids woken.

    Bounded: a failure (any exception from the handlers) is recorded on the event
    (`processing_error`, `attempts`) and the event is due again after a growing gap
    (`next_attempt_at`); after VERIFICATION_EVENT_MAX_ATTEMPTS failures it is given up —
    `processed_at` set with the error kept, one escalation (with its notification) opened — and
    pruned later like any processed event. Never raises for a handler's failure. Idempotent: a
    processed event, or one not due yet, is left alone."""
    event = _event_claim(event_pk)
    if event is None:
        return []
    try:
        woken = _event_wake_runs(event, enqueue)
        events.dispatch(event.payload)
    except Exception as exc:  # a handler's bug or an unreadable provider: bounded, recorded
        _event_failed(event, exc)
        return []
    ProviderEvent.objects.filter(pk=event.pk).update(
        processed_at=clock.now(), processing_error="", next_attempt_at=None
    )
    return woken


def _event_wake_runs(event: ProviderEvent, enqueue: Callable[[int, str, str], None]) -> list[int]:
    woken: list[int] = []
    for contract in registry().values():
        for channel in contract.channels:
            selection = channel.events
            if selection is None or event.type not in selection.types:
                continue
            pairs = [(name, dig(event.payload, path)) for name, path in selection.correlate.items()]
            query = Q()
            for name, value in pairs:
                if value not in (None, ""):
                    query |= Q(keys__name=name, keys__value=str(value))
            if not query:
                continue
            runs = VerificationRun.objects.filter(query, contract_id=contract.id).distinct()
            for run in runs.filter(verdict=Verdict.PENDING).only("id"):
                token = run_claim_for_event(run_id=run.id)
                if token is not None:
                    enqueue(run.id, token, Trigger.EVENT)
                woken.append(run.id)
            monitor_since = clock.now() - timedelta(milliseconds=contract.timing.timeout_ms)
            for run in runs.filter(verdict=Verdict.VERIFIED, decided_at__gte=monitor_since).only(
                "id"
            ):
                enqueue(run.id, "", Trigger.MONITOR)
                woken.append(run.id)
    return woken


def _event_failed(event: ProviderEvent, exc: Exception) -> None:
    """Record a failed attempt; on the last allowed one give the event up and escalate."""
    error = f"{type(exc).__name__}: {exc}"[:2000]
    limit = int(settings.VERIFICATION_EVENT_MAX_ATTEMPTS)
    if event.attempts < limit:
        ProviderEvent.objects.filter(pk=event.pk, processed_at__isnull=True).update(
            processing_error=error
        )
        logger.warning(
            "provider event %s (%s): attempt %s of %s failed, next at %s: %s",
            event.event_id,
            event.type,
            event.attempts,
            limit,
            event.next_attempt_at.isoformat() if event.next_attempt_at else "-",
            error,
        )
        return
    # The traceback is logged once, here, not at every attempt.
    logger.error(
        "provider event %s (%s): given up after %s attempts: %s",
        event.event_id,
        event.type,
        event.attempts,
        error,
        exc_info=exc,
    )
    with transaction.atomic():
        given_up = ProviderEvent.objects.filter(pk=event.pk, processed_at__isnull=True).update(
            processed_at=clock.now(), processing_error=error, next_attempt_at=None
        )
        if not given_up:  # processed meanwhile by another worker's attempt
            return
        escalation_open(
            verdict=EVENT_FAILED,
            verdict_class="event processing failed",
            reason=(
                f"Provider event {event.event_id} ({event.type}, received "
                f"{event.received_at:%Y-%m-%d %H:%M:%S %Z}) could not be processed in "
                f"{event.attempts} attempts and is no longer retried. Last error: {error}. "
                "Whatever it should have changed was not changed by it: look the object up in "
                "the Stripe Dashboard (reconciliation's next sweep also compares it) and resolve "
                "this with a note saying what was done."
            ),
            subject=Subject(type="provider_event", id=_event_subject_id(event), money=False),
        )


def _event_subject_id(event: ProviderEvent) -> str:
    """The event id as an escalation subject (100 characters at most: a longer id is named by
    its SHA-256, so two long ids never share an escalation)."""
    if len(event.event_id) <= 100:
        return event.event_id
    return "sha256:" + hashlib.sha256(event.event_id.encode()).hexdigest()


def provider_events_prune(*, older_than_days: int) -> int:
    cutoff = clock.now() - timedelta(days=older_than_days)
    deleted, _ = ProviderEvent.objects.filter(processed_at__lt=cutoff).delete()
    return deleted
