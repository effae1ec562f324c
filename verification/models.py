"""Verification runs, their attempts and observations, escalations, and the provider events
received by webhook (SPEC §6, §7)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.fields.json import KT

# The one Verdict: defined beside the contracts (importable before the apps are ready), the
# name every app uses is this one.
from verification.contracts import Verdict as Verdict


def _public_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def new_run_id() -> str:
    return _public_id("vrun")


class VerificationRun(models.Model):
    """One operation observed under one contract until its effect is proven or disproven."""

    public_id = models.CharField(max_length=40, unique=True, default=new_run_id, editable=False)
    # No index of its own: one_run_per_operation (contract_id, operation_id) leads with it, and a
    # second index cost every run's INSERT two more index entries (issue 15).
    contract_id = models.CharField(max_length=100)
    contract_version = models.PositiveIntegerField()
    operation_id = models.CharField(max_length=255, help_text="e.g. the provider idempotency key")
    operation_created_at = models.DateTimeField()
    input = models.JSONField(default=dict)
    action_result = models.JSONField(default=dict, help_text="The provider's own answer (E1).")
    correlation = models.JSONField(default=dict, help_text="Resolved correlation keys.")
    verdict = models.CharField(max_length=16, choices=Verdict.choices, default=Verdict.PENDING)
    verdict_class = models.CharField(max_length=100, blank=True)
    verdict_reason = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        "Attempt", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    attempts_made = models.PositiveIntegerField(default=0, help_text="Scheduled attempts so far.")
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField()
    leased_until = models.DateTimeField(null=True, blank=True)
    lease_token = models.CharField(max_length=40, blank=True)
    event_pending = models.BooleanField(
        default=False, help_text="An event arrived while the run was leased: attempt again after."
    )
    monitor_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="After a verdict: a contradiction held by the stale-read window is looked at "
        "again at this time.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at",)
        constraints = [
            models.UniqueConstraint(
                fields=["contract_id", "operation_id"], name="one_run_per_operation"
            ),
        ]
        indexes = [
            # The poll's query touches only undecided runs: its cost does not grow with history.
            models.Index(
                fields=["next_attempt_at"],
                name="run_due_pending",
                condition=Q(verdict=Verdict.PENDING),
            ),
            models.Index(
                fields=["monitor_at"], name="run_monitor_due", condition=Q(monitor_at__isnull=False)
            ),
            # The runs in flight (selectors.runs_in_flight): only those leased now are indexed.
            models.Index(
                fields=["leased_until"], name="run_leased", condition=Q(leased_until__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contract_id} {self.operation_id} {self.verdict}"

    @property
    def decided(self) -> bool:
        return self.verdict != Verdict.PENDING


class RunKey(models.Model):
    """A resolved correlation key of a run, indexed so an incoming event finds its runs."""

    # No index of its own: one_value_per_key (run, name) leads with it (issue 15: four entries
    # fewer per refund).
    run = models.ForeignKey(
        VerificationRun, on_delete=models.CASCADE, related_name="keys", db_index=False
    )
    name = models.CharField(max_length=64)
    value = models.CharField(max_length=255)

    class Meta:
        indexes = [models.Index(fields=["name", "value"])]
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="one_value_per_key")]

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


class Trigger(models.TextChoices):
    POLL = "poll"
    EVENT = "event"
    MONITOR = "monitor"


class Attempt(models.Model):
    run = models.ForeignKey(VerificationRun, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Its place among scheduled attempts; empty if event-triggered.",
    )
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    verdict_class = models.CharField(max_length=100, blank=True)
    reason = models.TextField(blank=True)
    held = models.TextField(blank=True, help_text="What the stale-read window held back.")
    conditions = models.JSONField(default=list)

    class Meta:
        ordering = ("started_at", "id")

    def __str__(self) -> str:
        label = f"#{self.number}" if self.number else self.trigger
        return f"attempt {label}: {self.verdict}"


class Observation(models.Model):
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="observations")
    channel = models.CharField(max_length=64)
    level = models.CharField(max_length=2)
    verifier = models.CharField(max_length=32)
    observed_at = models.DateTimeField()
    data = models.JSONField()
    digest = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON of data.")

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"{self.channel} ({self.level}) at {self.observed_at:%H:%M:%S}"


class EscalationStatus(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"


class EscalationQuerySet(models.QuerySet["Escalation"]):
    def open(self) -> EscalationQuerySet:
        """The one definition of an open escalation: not yet resolved by a person or a run."""
        return self.filter(status=EscalationStatus.OPEN)


class Resolution(models.TextChoices):
    NONE = "", "Not resolved"
    NOTE = "note", "With a note (no money involved)"
    ADJUSTED = "adjusted", "By an adjustment under four eyes"
    CLEARED = "cleared", "Cleared: reconciliation saw the difference gone at the provider"


class Escalation(models.Model):
    """Something a person must look at: a verification run's bad verdict, or a subject (a funding
    or refund leg) whose outcome the provider cannot show. One open escalation per subject and
    class. An escalation about money (`money`) is resolved only by an adjustment approved by a
    second person (SPEC §15.4); the others with a note."""

    run = models.ForeignKey(
        VerificationRun,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="escalations",
    )
    subject_type = models.CharField(
        max_length=40, blank=True, help_text="What it is about, e.g. refund_leg, funding_leg."
    )
    subject_id = models.CharField(max_length=100, blank=True, help_text="Its public id.")
    money = models.BooleanField(
        default=False, help_text="It concerns money: only an approved adjustment resolves it."
    )
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    verdict_class = models.CharField(max_length=100, blank=True)
    reason = models.TextField()
    status = models.CharField(
        max_length=10, choices=EscalationStatus.choices, default=EscalationStatus.OPEN
    )
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    resolution = models.CharField(
        max_length=10, choices=Resolution.choices, default=Resolution.NONE, blank=True
    )
    resolution_note = models.TextField(blank=True)

    objects = EscalationQuerySet.as_manager()

    class Meta:
        # Open first (“open” sorts before “resolved”), oldest first.
        ordering = ("status", "created_at", "id")
        permissions = [("resolve_escalation", "Can resolve verification escalations")]
        constraints = [
            models.UniqueConstraint(
                fields=["subject_type", "subject_id", "verdict_class"],
                condition=Q(status=EscalationStatus.OPEN) & ~Q(subject_id=""),
                name="one_open_escalation_per_subject",
            ),
        ]
        # The ops search box (ops/search/) finds every escalation about a subject, resolved
        # ones too (the constraint above holds open ones only).
        indexes = [
            models.Index(
                fields=["subject_id"], name="escalation_subject", condition=~Q(subject_id="")
            )
        ]

    def __str__(self) -> str:
        about = self.run.public_id if self.run is not None else self.subject_label
        return f"{self.verdict} {self.verdict_class or ''} on {about}".replace("  ", " ")

    @property
    def subject_label(self) -> str:
        return f"{self.subject_type} {self.subject_id}".strip()


class Notification(models.Model):
    escalation = models.ForeignKey(
        Escalation, on_delete=models.CASCADE, related_name="notifications"
    )
    channel = models.CharField(max_length=16, default="email")
    recipients = models.JSONField(default=list)
    subject = models.CharField(max_length=200)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.subject


# The fields of an event's object (`data.object`) that name a provider object, each indexed.
EVENT_OBJECT_KEYS = ("id", "charge", "payment_intent")


class ProviderEvent(models.Model):
    """A provider event received by webhook, stored raw and once (unique event id). Processing
    ends with `processed_at` set: done (`processing_error` empty), or given up after
    VERIFICATION_EVENT_MAX_ATTEMPTS failures (`processing_error` says why; an escalation is
    open)."""

    provider = models.CharField(max_length=20, default="stripe")
    event_id = models.CharField(max_length=255, unique=True)
    type = models.CharField(max_length=100)
    provider_created = models.BigIntegerField(help_text="The provider's `created`, epoch seconds.")
    payload = models.JSONField()
    raw = models.TextField(help_text="The body exactly as received.")
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    duplicates = models.PositiveIntegerField(default=0, help_text="Deliveries after the first.")
    processing_error = models.TextField(
        blank=True, help_text="Why the last attempt to process it failed (empty once processed)."
    )
    attempts = models.PositiveIntegerField(
        default=0,
        help_text="Attempts to process it so far (bounded: VERIFICATION_EVENT_MAX_ATTEMPTS).",
    )
    next_attempt_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Not processed yet: no attempt before this time (the backoff after a failure).",
    )
    source = models.CharField(
        max_length=10,
        default="webhook",
        help_text="webhook: delivered to us; catch_up: found by reconciliation's event listing.",
    )

    class Meta:
        ordering = ("-provider_created", "-id")
        indexes = [
            models.Index(fields=["type", "provider_created"]),
            models.Index(
                fields=["received_at"], name="event_unprocessed", condition=Q(processed_at=None)
            ),
            # The ops search box (ops/search/) finds the events about a provider object: the
            # object itself, or the charge and PaymentIntent it belongs to (a refund, a dispute).
            *[
                models.Index(KT(f"payload__data__object__{key}"), name=f"event_object_{key}")
                for key in EVENT_OBJECT_KEYS
            ],
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.event_id}"
