from typing import Any

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    """One staff or system action, append-only: the model refuses to update or delete a row, and
    so does the database (a trigger, see core.db.append_only)."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # PROTECT: a person with history is deactivated, never deleted.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="audit_events",
        help_text="Who acted; empty for the system itself (a scheduled job, a webhook).",
    )
    actor_label = models.CharField(max_length=150, help_text="The actor's username, or 'system'.")
    action = models.CharField(max_length=100, db_index=True, help_text="e.g. packet.approve")
    target_type = models.CharField(max_length=100, help_text="e.g. envelope, packet")
    target_id = models.CharField(max_length=100, db_index=True)
    details = models.JSONField(default=dict, blank=True, help_text="What changed.")

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=["target_type", "target_id", "created_at"])]

    def __str__(self) -> str:
        target = f"{self.target_type}:{self.target_id}"
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_label} {self.action} {target}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ValueError("Audit events are append-only: an existing event cannot be changed.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise ValueError("Audit events are append-only: an event cannot be deleted.")


class IdempotencyRecord(models.Model):
    """What an Idempotency-Key did (SPEC §4): scoped to the caller and to one operation (the action
    and the ids it acts on, named the same on every surface). While `running`, it is leased."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    operation = models.CharField(max_length=255, help_text="e.g. envelope.refund:env_…")
    surface = models.CharField(max_length=20, help_text="rest, mcp, …")
    request_digest = models.CharField(max_length=64, help_text="SHA-256 of the canonical body.")
    running = models.BooleanField(default=True)
    lease_until = models.DateTimeField()
    resource = models.CharField(
        max_length=100,
        blank=True,
        db_index=True,
        help_text="What the first request created, to resume it.",
    )
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.TextField(blank=True, help_text="The rendered body, byte for byte.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "key", "operation"], name="one_record_per_key_and_operation"
            )
        ]

    def __str__(self) -> str:
        return f"{self.operation} {self.key}"


class ProviderCallBudget(models.Model):
    """The shared state of one provider call budget (core.budget): when its next call may start.
    One row per budget, written only by core.budget's single-statement updates."""

    name = models.CharField(primary_key=True, max_length=50, help_text="e.g. reconciliation")
    # Unix seconds on the database's clock. A float is right here: a moment, never money.
    next_slot_at = models.FloatField(
        help_text="The earliest moment (Unix seconds) at which the next call may start."
    )

    def __str__(self) -> str:
        return f"{self.name}: next call at {self.next_slot_at:.3f}"


class SlotState(models.TextChoices):
    FREE = "free", "free"
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"


class PeriodicSlot(models.Model):
    """The one run a periodic job may have queued or running at a time (SPEC §11, core.ticks):
    beat takes the slot before it sends a tick and a tick that finds it taken sends nothing, so a
    busy worker pool never builds a backlog of ticks. The slot is held until the run ends, or
    until `held_until` passes (a message lost with the broker, a worker killed mid-run)."""

    name = models.CharField(primary_key=True, max_length=200, help_text="The beat entry's name.")
    state = models.CharField(max_length=10, choices=SlotState.choices, default=SlotState.FREE)
    token = models.CharField(max_length=32, blank=True, help_text="The run's, sent in its headers.")
    held_until = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    skipped = models.PositiveBigIntegerField(
        default=0, help_text="Ticks that found the slot taken and sent nothing."
    )

    def __str__(self) -> str:
        return f"{self.name}: {self.state}"
