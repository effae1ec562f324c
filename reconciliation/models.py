"""Reconciliation (SPEC §15): runs that hold the ledger against the provider, the provider pages
they read (stored with their SHA-256, as verification stores its observations), the discrepancies
they find and what people do about them, and the adjustments queue (corrections of the ledger
proposed by one person and approved by another; the adjustment itself is money, so it lives in
`envelopes`, whose one service writes the `adjust` journal entry)."""

from __future__ import annotations

import hashlib
import json
import zlib
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.transitions import StateMachine
from envelopes.models import Adjustment as EnvelopeAdjustment
from envelopes.models import public_id

# The classes, their severities and what each compares: one registry entry per class
# (reconciliation/classes.py, importable before the apps are ready).
from reconciliation.classes import SEVERITY as SEVERITY
from reconciliation.classes import DiscrepancyClass as DiscrepancyClass
from reconciliation.classes import Severity as Severity


class Adjustment(EnvelopeAdjustment):
    """The adjustments queue, and the permission `reconciliation.approve_adjustment`: whoever
    holds it may approve a correction someone else proposed (four eyes)."""

    class Meta:
        proxy = True
        verbose_name = "adjustment"
        permissions = [
            ("approve_adjustment", "Can approve an adjustment of the ledger someone else proposed")
        ]


def _run_id() -> str:
    return public_id("rec")


def _discrepancy_id() -> str:
    return public_id("dsc")


class RunKind(models.TextChoices):
    CATCH_UP = "catch_up"  # the provider's events since a cursor (lost webhooks)
    SWEEP = "sweep"  # hourly, the last 7 days
    FULL = "full"  # daily, the last 90 days
    MANUAL = "manual"  # `manage.py reconcile`


class Lane(models.TextChoices):
    """Runs of one lane never overlap (a database constraint): the event catch-up is one lane,
    the comparisons of objects (sweep, full, manual) the other."""

    EVENTS = "events"
    OBJECTS = "objects"


class RunStatus(models.TextChoices):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"  # could not complete (the provider could not be read): resumable


class Run(models.Model):
    """One reconciliation run over a `created` window. It keeps a checkpoint (which phase, which
    page) and a heartbeat: a run whose process died is resumed from its checkpoint by the next
    run of its lane, never run twice at once."""

    public_id = models.CharField(max_length=40, unique=True, default=_run_id, editable=False)
    kind = models.CharField(max_length=10, choices=RunKind.choices)
    lane = models.CharField(max_length=10, choices=Lane.choices)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.RUNNING)
    dry_run = models.BooleanField(
        default=False, help_text="Compared and reported, changed nothing."
    )
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField(help_text="Last sign of life of the process running it.")
    finished_at = models.DateTimeField(null=True, blank=True)
    resumed = models.PositiveIntegerField(default=0, help_text="Times it was resumed.")
    checkpoint = models.JSONField(default=dict, blank=True, help_text="Where to resume.")
    compared = models.JSONField(default=dict, blank=True, help_text="Objects compared, by kind.")
    provider_calls = models.PositiveIntegerField(default=0)
    pages = models.PositiveIntegerField(default=0)
    expected = models.PositiveIntegerField(
        default=0, help_text="Objects Vouch itself had in flight (inside the grace period)."
    )
    corrected = models.PositiveIntegerField(
        default=0, help_text="Provider-failed refunds released automatically."
    )
    opened = models.JSONField(default=dict, blank=True, help_text="Discrepancies opened, by class.")
    seen = models.JSONField(default=dict, blank=True, help_text="Open ones seen again, by class.")
    cleared = models.JSONField(default=dict, blank=True, help_text="Cleared, by class.")
    still_open = models.JSONField(default=dict, blank=True, help_text="Open at the end, by class.")
    error = models.TextField(blank=True)
    report = models.JSONField(default=dict, blank=True)
    report_sha256 = models.CharField(max_length=64, blank=True)
    report_signature = models.CharField(max_length=200, blank=True)
    report_key_id = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ("-started_at", "-id")
        constraints = [
            models.UniqueConstraint(
                fields=["lane"], condition=Q(status="running"), name="one_running_run_per_lane"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.public_id}"


class DueRun(models.Model):
    """A scheduled run that fell due while another run held its lane (SPEC §15.3): it is run
    right after, never dropped. One row per kind (falling due again while queued is the same
    run); the run of that kind that starts next takes it (deletes the row)."""

    kind = models.CharField(max_length=10, choices=RunKind.choices, unique=True)
    lane = models.CharField(max_length=10, choices=Lane.choices)
    due_at = models.DateTimeField(help_text="When it first fell due.")
    behind = models.CharField(
        max_length=40, blank=True, help_text="The run that held the lane (public id)."
    )
    times = models.PositiveIntegerField(default=1, help_text="Ticks it fell due while queued.")

    class Meta:
        ordering = ("due_at", "id")

    def __str__(self) -> str:
        return f"{self.kind} due since {self.due_at:%Y-%m-%d %H:%M}"


class Cursor(models.Model):
    """Where a lane's incremental reading stands (the event catch-up: the newest event `created`
    it has stored)."""

    name = models.CharField(max_length=50, unique=True)
    position = models.BigIntegerField(default=0, help_text="Provider `created`, epoch seconds.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} @ {self.position}"


# docs/decisions/0007-compressed-observations.md
class Observation(models.Model):
    """One provider read of a run (a list page, or one object read), stored as the bytes received
    (zlib-compressed) with their SHA-256: the data behind every discrepancy it opens or clears.
    Decompressed, `body` hashes to `sha256`, which anyone can check again. Observations stored
    before bodies were kept have their answer as parsed JSON in `data` (legacy) and no body."""

    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="observations")
    kind = models.CharField(max_length=20, help_text="refunds, charges, disputes, events, or one")
    request = models.JSONField(default=dict, help_text="What was asked (path, parameters).")
    body = models.BinaryField(
        null=True, blank=True, help_text="The answer's bytes as received, zlib-compressed."
    )
    body_length = models.PositiveIntegerField(
        default=0, help_text="The answer's length in bytes, uncompressed."
    )
    data = models.JSONField(
        null=True,
        blank=True,
        help_text="Legacy: the answer as parsed, for observations stored before bodies were kept.",
    )
    sha256 = models.CharField(max_length=64, help_text="SHA-256 of the answer's bytes.")
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"{self.kind} page of {self.run.public_id}"

    def body_bytes(self) -> bytes | None:
        """The answer's bytes as received (None: a legacy observation, kept as parsed JSON)."""
        if self.body is None:
            return None
        return zlib.decompress(bytes(self.body))

    def answer(self) -> Any:
        """The answer, parsed: from the stored bytes, or a legacy observation's JSON."""
        raw = self.body_bytes()
        return self.data if raw is None else json.loads(raw)

    def listed(self) -> list[Any]:
        """A list page's objects (a legacy observation's `data` is that list already)."""
        answer = self.answer()
        if self.body is None:
            return list(answer) if isinstance(answer, list) else []
        return list(answer.get("data") or []) if isinstance(answer, dict) else []

    def sha256_matches(self) -> bool | None:
        """Whether the stored bytes hash to the recorded SHA-256 (None: no bytes stored)."""
        raw = self.body_bytes()
        return None if raw is None else hashlib.sha256(raw).hexdigest() == self.sha256


# Time to resolve, by severity (SPEC §15.4).
TARGET = {
    Severity.MONEY: timedelta(hours=24),
    Severity.EVIDENCE: timedelta(hours=72),
    Severity.HYGIENE: timedelta(days=7),
}
SEVERITY_ORDER = {Severity.MONEY: 0, Severity.EVIDENCE: 1, Severity.HYGIENE: 2}


class DiscrepancyStatus(models.TextChoices):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


# A discrepancy's status (STYLE rule 6): a person takes an open one (acknowledged); an open or
# acknowledged one is resolved — cleared by a run that no longer sees it, accepted by a person with
# a note, or adjusted by an approved adjustment. Resolved is final: nothing re-opens one (a run that
# sees the difference again opens a new discrepancy; one unresolved per class and subject).
_DISCREPANCY_STATUS_MOVES: dict[str, set[str]] = {
    DiscrepancyStatus.OPEN: {DiscrepancyStatus.ACKNOWLEDGED, DiscrepancyStatus.RESOLVED},
    DiscrepancyStatus.ACKNOWLEDGED: {DiscrepancyStatus.RESOLVED},
    DiscrepancyStatus.RESOLVED: set(),
}
DISCREPANCY_STATUS = StateMachine.of(
    "discrepancy", field="status", choices=DiscrepancyStatus, allowed=_DISCREPANCY_STATUS_MOVES
)

# The one definition of an unresolved discrepancy: open, or acknowledged by a person but not
# yet resolved. Whatever counts, lists or re-checks unresolved findings uses it (`.unresolved()`).
UNRESOLVED = (DiscrepancyStatus.OPEN, DiscrepancyStatus.ACKNOWLEDGED)


class DiscrepancyQuerySet(models.QuerySet["Discrepancy"]):
    def unresolved(self) -> DiscrepancyQuerySet:
        return self.filter(status__in=UNRESOLVED)


class DiscrepancyResolution(models.TextChoices):
    CLEARED = "cleared"  # a later run no longer saw it
    ACCEPTED = "accepted"  # a person accepted it, with a note
    ADJUSTED = "adjusted"  # an approved adjustment corrected the ledger


class Discrepancy(models.Model):
    """One difference between Vouch's ledger and the provider, with both sides as they were last
    seen and the fields that differ. One open (or acknowledged) per class and subject."""

    public_id = models.CharField(
        max_length=40, unique=True, default=_discrepancy_id, editable=False
    )
    code = models.CharField("class", max_length=30, choices=DiscrepancyClass.choices)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    subject_type = models.CharField(
        max_length=30, help_text="refund_leg, funding_leg, refund, charge, dispute, …"
    )
    subject_id = models.CharField(max_length=255)
    charge_id = models.CharField(max_length=100, blank=True, db_index=True)
    envelope_public_id = models.CharField(max_length=40, blank=True)
    amount_micro = models.BigIntegerField(
        default=0, help_text="The money it concerns (0: none, or not known)."
    )
    status = models.CharField(
        max_length=15, choices=DiscrepancyStatus.choices, default=DiscrepancyStatus.OPEN
    )
    resolution = models.CharField(max_length=10, choices=DiscrepancyResolution.choices, blank=True)
    summary = models.CharField(max_length=300)
    vouch_side = models.JSONField(default=dict, blank=True)
    provider_side = models.JSONField(default=dict, blank=True)
    differing = models.JSONField(default=list, blank=True, help_text="Field names that differ.")
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    seen_count = models.PositiveIntegerField(default=1)
    due_at = models.DateTimeField(help_text="Target to resolve by, from its severity.")
    first_run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+")
    last_run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="+")
    observation = models.ForeignKey(
        Observation,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The provider data it was last seen in.",
    )
    cleared_by = models.ForeignKey(
        Observation,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The provider data that showed it gone.",
    )
    escalation = models.ForeignKey(
        "verification.Escalation",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    adjustment = models.ForeignKey(
        "envelopes.Adjustment", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    note = models.TextField(blank=True)

    objects = DiscrepancyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "discrepancies"
        ordering = ("-first_seen_at", "-id")
        constraints = [
            models.UniqueConstraint(
                fields=["code", "subject_type", "subject_id"],
                condition=~Q(status="resolved"),
                name="one_open_discrepancy_per_class_and_subject",
            )
        ]
        indexes = [
            models.Index(fields=["status", "severity", "first_seen_at"]),
            # The ops search box (ops/search/) finds discrepancies by any id they name, exactly.
            models.Index(fields=["subject_id"], name="discrepancy_subject"),
            models.Index(
                fields=["envelope_public_id"],
                name="discrepancy_envelope",
                condition=~Q(envelope_public_id=""),
            ),
        ]
        permissions = [
            ("work_discrepancy", "Can acknowledge and accept discrepancies"),
        ]

    def __str__(self) -> str:
        return f"{self.code} {self.subject_type}:{self.subject_id}"

    @property
    def is_open(self) -> bool:
        return self.status != DiscrepancyStatus.RESOLVED


class Seen(models.Model):
    """A provider object a run has listed (its id): what the ledger side is checked against once
    the listing is done, kept in the database so a resumed run does not list again."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    object_id = models.CharField(max_length=255)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "object_id"], name="seen_once_per_run")
        ]

    def __str__(self) -> str:
        return self.object_id
