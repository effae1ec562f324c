"""Escrow envelopes: funding legs, debits, refund operations and their legs, and the append-only
journal (SPEC §1 to §3). Every amount is an integer number of micro-dollars."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import F, Q

MICRO_PER_CENT = 10_000


def public_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _envelope_id() -> str:
    return public_id("env")


def _funding_id() -> str:
    return public_id("fnd")


def _debit_id() -> str:
    return public_id("dbt")


def _refund_id() -> str:
    return public_id("erf")


def _leg_id() -> str:
    return public_id("rfl")


BALANCES = (
    "total_funded_micro",
    "total_debited_micro",
    "total_refunded_micro",
    "reserved_micro",
    "unspent_micro",
    "held_micro",
    "charged_back_micro",
)


class Envelope(models.Model):
    """A buyer's escrow budget. Its seven balances obey, in the database itself:
    funded = debited + refunded + reserved + unspent + held + charged back, each non-negative
    (SPEC §2, §18): `held_micro` is money a chargeback took that Stripe may still give back,
    `charged_back_micro` what a lost dispute took for good."""

    public_id = models.CharField(max_length=40, unique=True, default=_envelope_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="envelopes"
    )
    currency = models.CharField(max_length=3, default="usd")
    total_funded_micro = models.BigIntegerField(default=0)
    total_debited_micro = models.BigIntegerField(default=0)
    total_refunded_micro = models.BigIntegerField(default=0)
    reserved_micro = models.BigIntegerField(default=0)
    unspent_micro = models.BigIntegerField(default=0)
    held_micro = models.BigIntegerField(default=0)
    charged_back_micro = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = [
            *[
                models.CheckConstraint(
                    condition=Q(**{f"{name}__gte": 0}), name=f"envelope_{name}_gte_0"
                )
                for name in BALANCES
            ],
            models.CheckConstraint(
                condition=Q(
                    total_funded_micro=F("total_debited_micro")
                    + F("total_refunded_micro")
                    + F("reserved_micro")
                    + F("unspent_micro")
                    + F("held_micro")
                    + F("charged_back_micro")
                ),
                name="envelope_balances_add_up",
            ),
        ]

    def __str__(self) -> str:
        return self.public_id


class FundingStatus(models.TextChoices):
    PENDING = "pending"  # sent, or about to be; the outcome is not known yet
    SUCCEEDED = "succeeded"
    # The provider holds no payment for it (an adjustment approved under four eyes): no money.
    ABANDONED = "abandoned"


class FundingLeg(models.Model):
    """One funding charge: the original or a top-up. Not funded money until it succeeded."""

    class Kind(models.TextChoices):
        ORIGINAL = "original"
        TOP_UP = "top_up"

    public_id = models.CharField(max_length=40, unique=True, default=_funding_id, editable=False)
    envelope = models.ForeignKey(Envelope, on_delete=models.PROTECT, related_name="funding_legs")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    sequence = models.PositiveIntegerField(
        help_text="Creation order in the envelope (1 = original)."
    )
    amount_micro = models.BigIntegerField()
    refunded_micro = models.BigIntegerField(default=0)
    reserved_micro = models.BigIntegerField(default=0)
    # Of this charge's money, what a chargeback holds and what a lost dispute took (SPEC §18).
    held_micro = models.BigIntegerField(default=0)
    charged_back_micro = models.BigIntegerField(default=0)
    status = models.CharField(
        max_length=10, choices=FundingStatus.choices, default=FundingStatus.PENDING
    )
    payment_method = models.CharField(max_length=100)
    idempotency_key = models.CharField(max_length=100, unique=True)
    payment_intent_id = models.CharField(max_length=100, blank=True)
    charge_id = models.CharField(max_length=100, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    funded_at = models.DateTimeField(null=True, blank=True)
    # Vouch's data elements sent as PaymentIntent metadata (vouch_account, vouch_ip, vouch_device;
    # absent ones omitted), fixed when the leg is made so that a resend sends identical parameters
    # under the leg's key: SPEC §17 (Visa CE 3.0), docs/decisions/0012.
    provider_metadata = models.JSONField(default=dict, blank=True)

    # Stripe's rate limit had no room when this was to be sent (issue 40): a worker sends it as
    # room frees, oldest first, under the same key (envelopes.services.waiting). Null otherwise,
    # and again once a worker took it.
    deferred_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("envelope", "sequence")
        constraints = [
            models.UniqueConstraint(
                fields=["envelope", "sequence"], name="funding_sequence_unique"
            ),
            models.CheckConstraint(condition=Q(amount_micro__gt=0), name="funding_amount_gt_0"),
            models.CheckConstraint(
                condition=Q(
                    refunded_micro__gte=0,
                    reserved_micro__gte=0,
                    held_micro__gte=0,
                    charged_back_micro__gte=0,
                ),
                name="funding_used_gte_0",
            ),
            models.CheckConstraint(
                condition=Q(
                    amount_micro__gte=F("refunded_micro")
                    + F("reserved_micro")
                    + F("held_micro")
                    + F("charged_back_micro")
                ),
                name="funding_capacity_not_exceeded",
            ),
        ]
        # The ops search box (ops/search/) finds a leg by its PaymentIntent, exactly.
        indexes = [
            models.Index(
                fields=["payment_intent_id"],
                name="funding_payment_intent",
                condition=~Q(payment_intent_id=""),
            ),
            models.Index(
                fields=["deferred_at", "id"],
                condition=Q(deferred_at__isnull=False),
                name="fundingleg_waiting",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.kind} #{self.sequence})"

    @property
    def capacity_micro(self) -> int:
        """What may still be refunded on this charge: never what is refunded, reserved, held by a
        chargeback or charged back."""
        return (
            self.amount_micro
            - self.refunded_micro
            - self.reserved_micro
            - self.held_micro
            - self.charged_back_micro
        )


class Debit(models.Model):
    public_id = models.CharField(max_length=40, unique=True, default=_debit_id, editable=False)
    envelope = models.ForeignKey(Envelope, on_delete=models.PROTECT, related_name="debits")
    amount_micro = models.BigIntegerField()
    reference = models.CharField(max_length=200, help_text="e.g. the claim or job id")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("envelope", "created_at", "id")
        constraints = [
            models.CheckConstraint(condition=Q(amount_micro__gt=0), name="debit_amount_gt_0")
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.reference}"


class RefundOperation(models.Model):
    """One request to return unspent money: its legs, one Stripe refund each."""

    public_id = models.CharField(max_length=40, unique=True, default=_refund_id, editable=False)
    envelope = models.ForeignKey(Envelope, on_delete=models.PROTECT, related_name="refunds")
    requested_micro = models.BigIntegerField()
    remainder_micro = models.BigIntegerField(help_text="Sub-cent money kept in the envelope.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    # Not a field: the legs as the call that created the operation reserved and recorded them, so
    # its answer is rendered without reading them back (envelopes.selectors.refund_data).
    recorded_legs: list[RefundLeg] | None = None
    # Not a field either: the envelope as the last leg's record left it (read back by that record's
    # own UPDATE), when that record moved money; None otherwise (read it).
    recorded_envelope: Envelope | None = None

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return self.public_id


class LegOutcome(models.TextChoices):
    RESERVED = "reserved"  # money set aside; the provider not (known to be) called yet
    ACCEPTED = "accepted"  # Stripe returned a Refund
    REFUSED = "refused"  # Stripe definitely refused: the money went back to unspent
    UNKNOWN = "unknown"  # no answer we can trust: the money stays reserved
    # The provider never made it (shown after its key expired), and a person's adjustment,
    # approved by a second person, gave the money back to unspent.
    VOID = "void"


class ReferenceStatus(models.TextChoices):
    """Where a refund leg's reference at the card network (the ARN) stands: Stripe's three
    `reference_status` values, and Vouch's own for a reference Stripe never settled within the
    window Vouch asks in (envelopes.services.refund_references)."""

    PENDING = "pending"
    AVAILABLE = "available"
    UNAVAILABLE = "unavailable"
    NOT_AVAILABLE = "not_available"  # Vouch stopped asking: still pending after the window


class RefundLeg(models.Model):
    public_id = models.CharField(max_length=40, unique=True, default=_leg_id, editable=False)
    operation = models.ForeignKey(RefundOperation, on_delete=models.PROTECT, related_name="legs")
    funding_leg = models.ForeignKey(
        FundingLeg, on_delete=models.PROTECT, related_name="refund_legs"
    )
    sequence = models.PositiveIntegerField(help_text="Order of allocation (1 = newest funding).")
    amount_micro = models.BigIntegerField(help_text="A whole number of cents, in micro-dollars.")
    outcome = models.CharField(
        max_length=10, choices=LegOutcome.choices, default=LegOutcome.RESERVED
    )
    idempotency_key = models.CharField(max_length=100, unique=True)
    provider_refund_id = models.CharField(max_length=100, blank=True, db_index=True)
    error_code = models.CharField(max_length=100, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    reserved_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    released = models.BooleanField(default=False, help_text="Its money went back to unspent.")

    # Stripe's rate limit had no room when this was to be sent (issue 40): a worker sends it as
    # room frees, oldest first, under the same key (envelopes.services.waiting). Null otherwise,
    # and again once a worker took it.
    deferred_at = models.DateTimeField(null=True, blank=True)
    verification_run = models.ForeignKey(
        "verification.VerificationRun",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )

    # The refund's acquirer reference number as Stripe last showed it (issue 41 item 9; decision
    # 0020): blank status until a verified readback showed one. Followed until Stripe settles it.
    refund_reference = models.CharField(max_length=100, blank=True)
    refund_reference_status = models.CharField(
        max_length=16, choices=ReferenceStatus.choices, blank=True
    )
    refund_reference_type = models.CharField(max_length=40, blank=True)
    # When the read that showed it was made, and the SHA-256 of what it read (a verification
    # observation's digest, or a stored provider read's).
    refund_reference_seen_at = models.DateTimeField(null=True, blank=True)
    refund_reference_sha256 = models.CharField(max_length=64, blank=True)
    # When the follow-up reads the refund again; null: nothing to follow.
    refund_reference_next_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("operation", "sequence")
        indexes = [
            models.Index(
                fields=["refund_reference_next_at", "id"],
                condition=Q(refund_reference_next_at__isnull=False),
                name="refundleg_reference_due",
            ),
            models.Index(
                fields=["deferred_at", "id"],
                condition=Q(deferred_at__isnull=False),
                name="refundleg_waiting",
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(amount_micro__gt=0), name="leg_amount_gt_0"),
            models.CheckConstraint(
                condition=Q(amount_micro__gte=0) & Q(amount_micro__lte=5_000_000_000),
                name="leg_amount_bounded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.outcome}"


class JournalEntry(models.Model):
    """One movement of money between balances. Append-only (the database refuses updates and
    deletes). A release is unique per refund leg, so two observers of one failure release once."""

    class Kind(models.TextChoices):
        FUND = "fund"  # funded +, unspent +
        DEBIT = "debit"  # unspent -, debited +
        RESERVE = "reserve"  # unspent -, reserved +
        ACCEPT = "accept"  # reserved -, refunded +
        RELEASE = "release"  # reserved or refunded -, unspent +
        ADJUST = "adjust"  # a person's resolution
        HOLD = "hold"  # unspent -, held + (a chargeback withdrew the charge's funds: SPEC §18)
        REINSTATE = "reinstate"  # held or charged back -, unspent + (Stripe gave them back)
        CHARGEBACK = "chargeback"  # held -, charged back + (the dispute was lost)

    envelope = models.ForeignKey(Envelope, on_delete=models.PROTECT, related_name="journal")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    funded_delta = models.BigIntegerField(default=0)
    debited_delta = models.BigIntegerField(default=0)
    refunded_delta = models.BigIntegerField(default=0)
    reserved_delta = models.BigIntegerField(default=0)
    unspent_delta = models.BigIntegerField(default=0)
    held_delta = models.BigIntegerField(default=0)
    charged_back_delta = models.BigIntegerField(default=0)
    funding_leg = models.ForeignKey(
        FundingLeg, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    debit = models.ForeignKey(
        Debit, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    refund_leg = models.ForeignKey(
        RefundLeg, null=True, blank=True, on_delete=models.PROTECT, related_name="journal"
    )
    adjustment = models.ForeignKey(
        "Adjustment", null=True, blank=True, on_delete=models.PROTECT, related_name="journal"
    )
    # What the provider showed, as read for this movement: the approval's read behind an `adjust`
    # entry, the refund behind the release of a recorded foreign refund.
    provider_read = models.ForeignKey(
        "ProviderRead", null=True, blank=True, on_delete=models.PROTECT, related_name="journal"
    )
    dispute_funds = models.ForeignKey(
        "DisputeFunds", null=True, blank=True, on_delete=models.PROTECT, related_name="journal"
    )
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("envelope", "id")
        verbose_name_plural = "journal entries"
        constraints = [
            models.UniqueConstraint(
                fields=["refund_leg"], condition=Q(kind="release"), name="one_release_per_leg"
            ),
            models.UniqueConstraint(
                fields=["funding_leg"], condition=Q(kind="fund"), name="one_fund_per_leg"
            ),
            models.UniqueConstraint(
                fields=["adjustment"], condition=Q(kind="adjust"), name="one_entry_per_adjustment"
            ),
            # A recorded foreign refund that failed at the provider is given back once.
            models.UniqueConstraint(
                fields=["adjustment"],
                condition=Q(kind="release"),
                name="one_release_per_adjustment",
            ),
            # A dispute's funds are held once, given back once, charged back once.
            models.UniqueConstraint(
                fields=["dispute_funds", "kind"],
                condition=Q(dispute_funds__isnull=False),
                name="one_entry_per_dispute_funds_kind",
            ),
            models.CheckConstraint(
                condition=Q(
                    funded_delta=F("debited_delta")
                    + F("refunded_delta")
                    + F("reserved_delta")
                    + F("unspent_delta")
                    + F("held_delta")
                    + F("charged_back_delta")
                ),
                name="journal_entry_balances",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.envelope_id}"


# The corrections a person makes and what the provider showed for them, and the money a dispute
# took (SPEC §15.4, §18): their own module (STYLE rule 16), the same app and names.
from envelopes.models.corrections import (  # noqa: E402
    ADJUSTMENT_STATUS,
    Adjustment,
    AdjustmentKind,
    AdjustmentStatus,
    DisputeFunds,
    DisputeFundsStatus,
    ProviderAnswer,
    ProviderRead,
    _adjustment_id,
    _dispute_funds_id,
    _read_id,
)

__all__ = [
    "ADJUSTMENT_STATUS",
    "BALANCES",
    "MICRO_PER_CENT",
    "Adjustment",
    "AdjustmentKind",
    "AdjustmentStatus",
    "Debit",
    "DisputeFunds",
    "DisputeFundsStatus",
    "Envelope",
    "FundingLeg",
    "FundingStatus",
    "JournalEntry",
    "LegOutcome",
    "ProviderAnswer",
    "ProviderRead",
    "ReferenceStatus",
    "RefundLeg",
    "RefundOperation",
    "_adjustment_id",
    "_debit_id",
    "_dispute_funds_id",
    "_envelope_id",
    "_funding_id",
    "_leg_id",
    "_read_id",
    "_refund_id",
    "public_id",
]
