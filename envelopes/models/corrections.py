"""Corrections of the ledger (SPEC §15.4): adjustments proposed by one person and approved by
another, and what the provider showed for them (`ProviderRead`, `ProviderAnswer`); and the money a
dispute took of a charge (SPEC §18, `DisputeFunds`). Part of `envelopes.models`, which re-exports
every name."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.transitions import StateMachine
from envelopes.models import Envelope, FundingLeg, RefundLeg, public_id


def _adjustment_id() -> str:
    return public_id("adj")


class AdjustmentKind(models.TextChoices):
    """What a person may correct (SPEC §15.4), each one journal entry of kind `adjust`."""

    LEG_RELEASE = "leg_release", "Release a refund leg the provider never made (reserved → unspent)"
    LEG_ACCEPT = "leg_accept", "Accept a refund leg as refunded, naming the provider refund"
    LEG_REVERSE = "leg_reverse", "Reverse an accepted refund the provider does not hold"
    FOREIGN_REFUND = "foreign_refund", "Record a refund made outside Vouch (unspent → refunded)"
    FUNDING_ACCEPT = "funding_accept", "Accept a pending funding leg, naming the PaymentIntent"
    FUNDING_ABANDON = "funding_abandon", "Abandon a funding leg the provider never charged"
    CONFIRM = "confirm", "Confirm the ledger as it stands (no money moves)"


class AdjustmentStatus(models.TextChoices):
    PROPOSED = "proposed"
    APPLIED = "applied"  # approved by a second person and written to the journal
    REJECTED = "rejected"


class Adjustment(models.Model):
    """A correcting journal entry proposed by one person and approved by another (four eyes):
    the only way a person changes balances. What the provider showed when it was proposed is kept
    with it (`provider_object`) and read again when it is approved."""

    public_id = models.CharField(max_length=40, unique=True, default=_adjustment_id, editable=False)
    envelope = models.ForeignKey(Envelope, on_delete=models.PROTECT, related_name="adjustments")
    kind = models.CharField(max_length=20, choices=AdjustmentKind.choices)
    status = models.CharField(
        max_length=10, choices=AdjustmentStatus.choices, default=AdjustmentStatus.PROPOSED
    )
    amount_micro = models.BigIntegerField(help_text="The amount it moves (0: no money moves).")
    refund_leg = models.ForeignKey(
        RefundLeg, null=True, blank=True, on_delete=models.PROTECT, related_name="adjustments"
    )
    funding_leg = models.ForeignKey(
        FundingLeg, null=True, blank=True, on_delete=models.PROTECT, related_name="adjustments"
    )
    provider_object_id = models.CharField(
        max_length=100, blank=True, help_text="The provider refund or PaymentIntent it names."
    )
    provider_object = models.JSONField(
        default=dict, blank=True, help_text="That object as the provider showed it."
    )
    proposal_read = models.ForeignKey(
        "ProviderRead",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The provider as read when it was proposed.",
    )
    approval_read = models.ForeignKey(
        "ProviderRead",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The provider as read when it was approved (cited on its journal entry).",
    )
    released_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A recorded foreign refund the provider later showed failed or canceled: when "
        "its money went back to unspent (one release entry).",
    )
    escalation = models.ForeignKey(
        "verification.Escalation",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="adjustments",
    )
    reason = models.TextField(help_text="Why, as the proposer wrote it.")
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    proposed_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)

    class Meta:
        ordering = ("status", "-proposed_at", "-id")
        constraints = [
            models.CheckConstraint(
                condition=Q(amount_micro__gte=0), name="adjustment_amount_gte_0"
            ),
            # One waiting proposal per leg, and one live adjustment per provider object: never
            # two corrections of one thing waiting, never one provider refund recorded twice.
            models.UniqueConstraint(
                fields=["refund_leg"],
                condition=Q(status="proposed", refund_leg__isnull=False),
                name="one_proposal_per_refund_leg",
            ),
            models.UniqueConstraint(
                fields=["funding_leg"],
                condition=Q(status="proposed", refund_leg__isnull=True, funding_leg__isnull=False),
                name="one_proposal_per_funding_leg",
            ),
            models.UniqueConstraint(
                fields=["provider_object_id"],
                condition=Q(status__in=["proposed", "applied"]) & ~Q(provider_object_id=""),
                name="one_live_adjustment_per_provider_object",
            ),
        ]
        # The ops search box finds every adjustment naming a provider object, rejected ones too.
        indexes = [
            models.Index(
                fields=["provider_object_id"],
                name="adjustment_provider_object",
                condition=~Q(provider_object_id=""),
            )
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.kind} ({self.status})"

    @property
    def reads(self) -> list[ProviderRead]:
        """The provider as read when it was proposed, then when it was approved (those made)."""
        return [read for read in (self.proposal_read, self.approval_read) if read is not None]


# An adjustment's status (STYLE rule 6): a proposal is applied once a second person approves it
# (envelopes.adjustments.deciding writes its journal entry in the same transaction), or rejected
# (turned down, or withdrawn by its proposer). Both are final: a recorded foreign refund the
# provider later shows failed is released (`released_at`), its status stays `applied`.
_ADJUSTMENT_STATUS_MOVES: dict[str, set[str]] = {
    AdjustmentStatus.PROPOSED: {AdjustmentStatus.APPLIED, AdjustmentStatus.REJECTED},
    AdjustmentStatus.APPLIED: set(),
    AdjustmentStatus.REJECTED: set(),
}
ADJUSTMENT_STATUS = StateMachine.of(
    "adjustment", field="status", choices=AdjustmentStatus, allowed=_ADJUSTMENT_STATUS_MOVES
)


def _dispute_funds_id() -> str:
    return public_id("dfu")


class DisputeFundsStatus(models.TextChoices):
    HELD = "held", "Held: Stripe withdrew the funds while the bank reviews the dispute"
    REINSTATED = "reinstated", "Reinstated: Stripe gave the funds back"
    CHARGED_BACK = "charged_back", "Charged back: the dispute was lost"


class DisputeFunds(models.Model):
    """What a chargeback moved of one charge's money (SPEC §18), one row per provider dispute, as
    Stripe's balance transactions for the dispute show it: what Stripe withdrew (`withdrawn_micro`,
    its fees apart in `fees_micro`) and reinstated, and what Vouch did with it — the part of the
    withdrawal the charge still had unspent moved into `held_micro` (one `hold` entry), the rest
    the platform's exposure (`exposure_micro`, escalated to a person, never taken from another
    charge's money); a won dispute gives the held money back (`reinstate`), a lost one makes it
    `charged_back_micro` (`chargeback`). Each entry cites the provider read behind it."""

    public_id = models.CharField(
        max_length=40, unique=True, default=_dispute_funds_id, editable=False
    )
    envelope = models.ForeignKey(Envelope, on_delete=models.PROTECT, related_name="dispute_funds")
    funding_leg = models.ForeignKey(
        FundingLeg, on_delete=models.PROTECT, related_name="dispute_funds"
    )
    provider_dispute_id = models.CharField(max_length=100, unique=True)
    charge_id = models.CharField(max_length=100, db_index=True)
    disputed_micro = models.BigIntegerField(help_text="The dispute's amount, as Stripe shows it.")
    withdrawn_micro = models.BigIntegerField(
        default=0, help_text="What Stripe withdrew for the dispute (its fees apart)."
    )
    reinstated_micro = models.BigIntegerField(
        default=0, help_text="What Stripe gave back (a won dispute)."
    )
    fees_micro = models.BigIntegerField(
        default=0, help_text="Stripe's fees in the dispute's balance transactions."
    )
    held_micro = models.BigIntegerField(
        default=0, help_text="Of the withdrawal, what the charge still had unspent, now held."
    )
    exposure_micro = models.BigIntegerField(
        default=0,
        help_text="Of the withdrawal, what the charge no longer had (debited or refunded): the "
        "platform's loss unless the dispute is won.",
    )
    charged_back_micro = models.BigIntegerField(
        default=0, help_text="Held money the lost dispute took for good."
    )
    status = models.CharField(max_length=20, choices=DisputeFundsStatus.choices)
    provider_status = models.CharField(
        max_length=40, blank=True, help_text="The dispute's status at Stripe, as last read."
    )
    escalation = models.ForeignKey(
        "verification.Escalation",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The person's case for the exposure, if any.",
    )
    last_read = models.ForeignKey(
        "ProviderRead",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The dispute as Stripe showed it, last.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-created_at", "-id")
        verbose_name_plural = "dispute funds"
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    disputed_micro__gte=0,
                    withdrawn_micro__gte=0,
                    reinstated_micro__gte=0,
                    fees_micro__gte=0,
                    held_micro__gte=0,
                    exposure_micro__gte=0,
                    charged_back_micro__gte=0,
                ),
                name="dispute_funds_gte_0",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.provider_dispute_id} ({self.status})"


def _read_id() -> str:
    return public_id("prd")


class ProviderRead(models.Model):
    """What the provider showed when Vouch read it for a correction (SPEC §15.4): one or more
    answers (`answers`), each kept as the bytes received with their SHA-256, and what Vouch
    concluded from them (`shows`). `sha256` binds the answers: the SHA-256 of their SHA-256s, one
    per line, in order. An adjustment keeps the read made when it was proposed and the one made
    when it was approved; its journal entry cites the approval's."""

    public_id = models.CharField(max_length=40, unique=True, default=_read_id, editable=False)
    envelope = models.ForeignKey(
        Envelope, null=True, blank=True, on_delete=models.PROTECT, related_name="provider_reads"
    )
    purpose = models.CharField(
        max_length=40, help_text="adjustment.propose, adjustment.approve, or refund.release."
    )
    kind = models.CharField(max_length=20, blank=True, help_text="The correction's kind.")
    subject = models.CharField(
        max_length=100, blank=True, help_text="The leg or provider object it is about."
    )
    shows = models.JSONField(
        default=dict, blank=True, help_text="What the answers show, as Vouch read them."
    )
    sha256 = models.CharField(
        max_length=64, help_text="SHA-256 of the answers' SHA-256s, one per line, in order."
    )
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ("-observed_at", "-id")

    def __str__(self) -> str:
        return f"{self.public_id} {self.purpose} {self.subject}"

    def shows_json(self) -> str:
        """What the read shows, as indented JSON (for a person to read)."""
        return json.dumps(self.shows, indent=2, sort_keys=True)


class ProviderAnswer(models.Model):
    """One answer of the provider within a read: what was asked, and the answer's bytes exactly
    as received (an error the provider gave is kept as the canonical JSON of the error object the
    adapter parsed), with their SHA-256, which anyone can check again."""

    read = models.ForeignKey(ProviderRead, on_delete=models.PROTECT, related_name="answers")
    sequence = models.PositiveIntegerField()
    request = models.JSONField(help_text="What was asked (method, path, parameters).")
    outcome = models.CharField(max_length=10, help_text="accepted, refused or given.")
    http_status = models.PositiveIntegerField(null=True, blank=True)
    body = models.BinaryField(help_text="The answer's bytes.")
    sha256 = models.CharField(max_length=64, help_text="SHA-256 of the answer's bytes.")
    observed_at = models.DateTimeField()

    class Meta:
        ordering = ("read", "sequence")
        constraints = [
            models.UniqueConstraint(fields=["read", "sequence"], name="provider_answer_sequence")
        ]

    def __str__(self) -> str:
        return f"{self.request.get('path', '')} ({self.outcome})"

    def answer(self) -> Any:
        """The answer, parsed from its bytes."""
        return json.loads(bytes(self.body))

    def sha256_matches(self) -> bool:
        return hashlib.sha256(bytes(self.body)).hexdigest() == self.sha256
