import re
from collections.abc import Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from verification import clock
from verification.contracts import get_contract
from verification.models import (
    Escalation,
    ProviderEvent,
    Verdict,
    VerificationRun,
)


def events_unprocessed(*, older_than_s: float, limit: int = 500) -> list[int]:
    """Stored events to process again, oldest first: those never attempted that arrived more than
    `older_than_s` ago (their task was lost), and those whose failed attempt's backoff has run
    out (`next_attempt_at` passed). Given-up events are processed (`processed_at` set): never."""
    now = clock.now()
    cutoff = now - timedelta(seconds=older_than_s)
    return list(
        ProviderEvent.objects.filter(processed_at__isnull=True)
        .filter(
            Q(next_attempt_at__isnull=True, received_at__lt=cutoff) | Q(next_attempt_at__lte=now)
        )
        .order_by("received_at")
        .values_list("pk", flat=True)[:limit]
    )


def runs_in_flight(*, now: datetime | None = None) -> int:
    """Runs whose attempt (or a decided run's monitoring attempt) is queued or running: leased,
    and sent within the last VERIFICATION_IN_FLIGHT_WINDOW_S. Every claim leases a run for
    VERIFICATION_LEASE_S from its sending, so `leased_until` tells when it was sent. An attempt
    lost with a killed worker keeps its run leased (never claimed twice) for the whole lease, but
    gives its room back once the window has passed: the other due runs are not held up for
    minutes by attempts that will never end."""
    now = now or clock.now()
    lease_s = float(settings.VERIFICATION_LEASE_S)
    window_s = float(settings.VERIFICATION_IN_FLIGHT_WINDOW_S)
    sent_after = now + timedelta(seconds=max(lease_s - window_s, 0.0))
    return VerificationRun.objects.filter(leased_until__gt=sent_after).count()


def runs_due_waiting(*, now: datetime | None = None) -> bool:
    """Whether a pending run is due and not leased: a verdict waits for room. Monitoring a decided
    run yields to it (an event's monitoring is then left to the poll, which sends it into the
    room the due runs leave)."""
    now = now or clock.now()
    return (
        VerificationRun.objects.filter(verdict=Verdict.PENDING, next_attempt_at__lte=now)
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lte=now))
        .exists()
    )


def runs_pending_count() -> int:
    """How many verification runs have no verdict yet."""
    return VerificationRun.objects.filter(verdict=Verdict.PENDING).count()


def escalated_subjects() -> dict[str, list[str]]:
    """The subjects a person is looking at now (an open escalation names them), by type."""
    subjects: dict[str, list[str]] = {}
    rows = (
        Escalation.objects.open().exclude(subject_id="").values_list("subject_type", "subject_id")
    )
    for subject_type, subject_id in rows:
        subjects.setdefault(subject_type, []).append(subject_id)
    return subjects


# --- words for people: one mapping per code (the API, the exports and the runbooks keep the
# codes; the admin shows them only in a "details" line, issue 41) ----------------------------------

VERDICT_LABELS: dict[str, str] = {
    Verdict.PENDING: "Not decided yet",
    Verdict.VERIFIED: "Verified",
    Verdict.CONTRADICTED: "Contradicted by the provider",
    Verdict.FAILED: "Failed",
    Verdict.UNVERIFIABLE: "Could not be verified",
}
TRIGGER_LABELS: dict[str, str] = {
    "poll": "scheduled check",
    "event": "provider event",
    "monitor": "look after the verdict",
}
# What an escalation or a discrepancy is about (`subject_type`).
SUBJECT_TYPE_LABELS: dict[str, str] = {
    "refund_leg": "refund leg",
    "funding_leg": "funding leg",
    "refund": "refund at Stripe",
    "charge": "charge at Stripe",
    "dispute": "dispute",
    "envelope": "envelope",
    "verification_run": "verification run",
}
CONDITION_RESULT_LABELS: dict[str, str] = {
    "true": "holds",
    "false": "does not hold",
    "unknown": "unknown",
}
# Escalation classes other apps name by a code (a discrepancy class, a deadline reminder): they
# register their words here, as they register their ids with core.links (this app knows no domain).
_CLASS_LABELS: dict[str, str] = {}


def verdict_class_labels_register(labels: Mapping[str, str]) -> None:
    _CLASS_LABELS.update(labels)


def code_words(code: str | None) -> str:
    """A code made readable when no mapping has words for it: `refund_readback` is "Refund
    readback"; text already in words stays as it is."""
    code = (code or "").strip()
    if not code:
        return ""
    if code.isupper() or "_" in code:
        return code.replace("_", " ").lower().capitalize()
    return code


def _words(labels: Mapping[str, str], code: str | None) -> str:
    return labels.get(code or "") or code_words(code)


def verdict_label(verdict: str | None) -> str:
    return _words(VERDICT_LABELS, verdict)


def verdict_class_label(verdict_class: str | None) -> str:
    """A bad verdict's class, or an escalation's, in words ("" when it has none)."""
    return _words(_CLASS_LABELS, verdict_class)


def trigger_label(trigger: str | None) -> str:
    return _words(TRIGGER_LABELS, trigger)


def subject_type_label(subject_type: str | None) -> str:
    return SUBJECT_TYPE_LABELS.get(subject_type or "") or code_words(subject_type).lower()


def condition_result_label(result: str | None) -> str:
    return _words(CONDITION_RESULT_LABELS, result)


def contract_label(contract_id: str) -> str:
    """A contract by its title (what it proves), or its id made readable when not loaded."""
    try:
        return get_contract(contract_id).title
    except LookupError:
        return code_words(contract_id)


def code_is_words(code: str | None) -> bool:
    """Whether a code already reads as words (then no details line repeats it)."""
    return bool(code) and "_" not in (code or "") and not (code or "").isupper()


_VERDICT_CODES = re.compile(r"\b(" + "|".join(v.value for v in Verdict) + r")\b")


def verdict_words_in(text: str) -> str:
    """A reason the engine wrote ("would be CONTRADICTED"), its verdict codes said in words."""
    return _VERDICT_CODES.sub(lambda m: verdict_label(m.group(1)).lower(), text or "")
