"""Receipts (SPEC §8): immutable, content-addressed, signed records of payment effects from
Vouch's own history — a funding charge, a refund leg, and a refund's later reversal — each written
once its effect was proven by a verification run.

The id is `rcpt_` + the SHA-256 of the canonical body (RFC 8785), so any change to the body gives
another id. A receipt is never updated or deleted: `save()` refuses an update, `delete()` refuses,
and the database itself refuses UPDATE and DELETE on the table (core.db.append_only)."""

from __future__ import annotations

from typing import Any, NoReturn

from django.db import models
from django.db.models import Q

from receipts.exceptions import ReceiptImmutable


class ReceiptKind(models.TextChoices):
    CHARGE = "charge"
    REFUND = "refund"
    REFUND_REVERSAL = "refund_reversal"
    # A refund's reference at the card network (its ARN), once Stripe shows it: a receipt of its
    # own whose parent is the refund's:
    # docs/decisions/0020-a-refunds-reference-has-its-own-receipt.md
    REFUND_REFERENCE = "refund_reference"


class ReceiptQuerySet(models.QuerySet["Receipt"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise ReceiptImmutable("receipts are immutable: an update is refused")

    def delete(self) -> NoReturn:
        raise ReceiptImmutable("receipts are immutable: a delete is refused")


class Receipt(models.Model):
    id = models.CharField(
        primary_key=True,
        max_length=69,
        editable=False,
        help_text="rcpt_ + the SHA-256 (hex) of the canonical body.",
    )
    kind = models.CharField(max_length=16, choices=ReceiptKind.choices)
    provider = models.CharField(max_length=20, default="stripe")
    provider_object_id = models.CharField(
        max_length=100, help_text="The charge or refund id at the provider."
    )
    charge_id = models.CharField(max_length=100, db_index=True)
    amount_micro = models.BigIntegerField()
    currency = models.CharField(max_length=3)
    occurred_at = models.DateTimeField()
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    verification_run = models.ForeignKey(
        "verification.VerificationRun", on_delete=models.PROTECT, related_name="receipts"
    )
    verdict = models.CharField(max_length=16)
    body = models.JSONField(help_text="The whole body that was hashed.")
    canonical = models.TextField(help_text="The exact canonical JSON (RFC 8785) of the body.")
    signature = models.CharField(
        max_length=100, help_text="Ed25519 over the canonical bytes, base64url."
    )
    key_id = models.CharField(max_length=100)
    key_environment = models.CharField(max_length=20)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ReceiptQuerySet.as_manager()

    class Meta:
        ordering = ("occurred_at", "id")
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "provider_object_id"], name="one_receipt_per_effect"
            ),
            models.CheckConstraint(condition=Q(amount_micro__gte=0), name="receipt_amount_gte_0"),
            models.CheckConstraint(
                condition=Q(kind="charge", parent__isnull=True)
                | (~Q(kind="charge") & Q(parent__isnull=False)),
                name="receipt_parent_iff_not_charge",
            ),
            models.CheckConstraint(
                condition=Q(id__regex=r"^rcpt_[0-9a-f]{64}$"), name="receipt_id_is_a_digest"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.provider_object_id} ({self.id[:17]}…)"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ReceiptImmutable(f"receipt {self.pk} is immutable: an update is refused")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ReceiptImmutable(f"receipt {self.pk} is immutable: a delete is refused")
