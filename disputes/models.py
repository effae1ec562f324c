"""Disputes, the evidence admitted to them, and the response packets prepared for them (SPEC §9).
A packet row is one version: preparing again makes a new version and supersedes the last; an edit
by a person changes the current version in place, which changes its digest (so an approval given
to the old content no longer matches: `packet_drifted`)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.transitions import StateMachine


def _dispute_public_id() -> str:
    return f"dsp_{secrets.token_hex(12)}"


def _packet_public_id() -> str:
    return f"pkt_{secrets.token_hex(12)}"


def _evidence_public_id() -> str:
    return f"evd_{secrets.token_hex(12)}"


class DisputeSource(models.TextChoices):
    PROVIDER = "provider", "Provider event"
    STAFF = "staff", "Entered by staff"


class Dispute(models.Model):
    """A provider dispute, normalized: provider, dispute id, charge id, amount, currency, reason
    and optional response deadline."""

    public_id = models.CharField(max_length=40, unique=True, default=_dispute_public_id)
    provider = models.CharField(max_length=20, default="stripe")
    provider_dispute_id = models.CharField(max_length=100)
    charge_id = models.CharField(max_length=100, db_index=True)
    amount_micro = models.BigIntegerField()
    currency = models.CharField(max_length=3, default="usd")
    reason = models.CharField(max_length=60)
    response_deadline = models.DateTimeField(null=True, blank=True)
    provider_status = models.CharField(max_length=40, blank=True)
    # The card network's reason code (Visa 10.4: fraud, card not present), the card's brand, and
    # the enhanced evidence programs the provider says the dispute is eligible for
    # (`visa_compelling_evidence_3`, `visa_compliance`): SPEC §17.
    network_reason_code = models.CharField(max_length=20, blank=True)
    card_brand = models.CharField(max_length=20, blank=True)
    enhanced_eligibility_types = models.JSONField(default=list, blank=True)
    # What Stripe last said of the dispute (each read or event): the card network's case type
    # (`chargeback`, `inquiry`, `compliance`, …: `payment_method_details.card.case_type`),
    # whether the disputed charge may still be refunded (`is_charge_refundable`; null for a
    # dispute never read from the provider), and whether the network allows a response at all
    # (`evidence_details.due_by` 0 says it allows none; then there is no deadline either).
    case_type = models.CharField(max_length=20, blank=True)
    is_charge_refundable = models.BooleanField(null=True, blank=True)
    response_allowed = models.BooleanField(default=True)
    # The fees Stripe's balance transactions of the dispute show (the sum of their `fee`), as last
    # read; null when the dispute shows none (an inquiry, a dispute never read): the outcome
    # figures take these where they exist, the fee table otherwise (SPEC §18).
    provider_fees_micro = models.BigIntegerField(null=True, blank=True)
    # When Vouch first saw the provider's decision (`won` or `lost`; an appeal's decision moves
    # it): the month the outcome figures count it in.
    decided_at = models.DateTimeField(null=True, blank=True)
    # What the provider last said of how evidence is to be submitted: Vouch sets `manual` when a
    # dispute arrives, so Stripe's Smart Disputes never submits a packet nobody approved.
    intended_submission_method = models.CharField(max_length=30, blank=True)
    # The provider has not (yet) answered `manual`, and may still take it: a staff entry until its
    # request asks, or an update whose answer was lost. The resume job sends it again with the
    # dispute's one key until the provider answers `manual` (or refuses: nothing to retry).
    submission_method_pending = models.BooleanField(default=False)
    source = models.CharField(max_length=10, choices=DisputeSource.choices)
    entered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = [models.F("response_deadline").asc(nulls_last=True), "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "provider_dispute_id"], name="dispute_unique_provider_id"
            ),
            models.CheckConstraint(condition=Q(amount_micro__gt=0), name="dispute_amount_positive"),
        ]
        # The unique constraint leads with `provider`: the ops search box (ops/search/) finds a
        # dispute by the provider's id alone.
        indexes = [models.Index(fields=["provider_dispute_id"], name="dispute_provider_id")]

    def __str__(self) -> str:
        return self.provider_dispute_id


class EvidenceKind(models.TextChoices):
    DELIVERY = "delivery"
    CONSENT = "consent"
    COMMUNICATION = "communication"
    POLICY = "policy"
    OTHER = "other"


class Evidence(models.Model):
    """External evidence, admitted only as a bounded reference: {ref, sha256, kind, summary}."""

    public_id = models.CharField(max_length=40, unique=True, default=_evidence_public_id)
    dispute = models.ForeignKey(Dispute, on_delete=models.CASCADE, related_name="evidence")
    ref = models.CharField(max_length=200)
    sha256 = models.CharField(max_length=64)
    kind = models.CharField(max_length=20, choices=EvidenceKind.choices)
    summary = models.CharField(max_length=500)
    # An optional file (PDF, PNG or JPEG), stored through Django's storage API under a name made of
    # its SHA-256 (`sha256` is then the file's, computed by Vouch): never a public media URL, the
    # admin streams it. Sent to the provider's Files API when the packet citing it is filed.
    file = models.FileField(max_length=200, blank=True)
    file_name = models.CharField(max_length=200, blank=True)  # as the person's upload named it
    file_size = models.BigIntegerField(null=True, blank=True)
    file_type = models.CharField(max_length=10, blank=True)  # pdf, png, jpg
    admitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    admitted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["admitted_at", "pk"]
        verbose_name_plural = "evidence"
        constraints = [
            models.UniqueConstraint(fields=["dispute", "ref"], name="evidence_unique_ref"),
        ]

    def __str__(self) -> str:
        return self.ref

    def file_facts(self) -> dict[str, object] | None:
        """What a packet binds of the file (besides its SHA-256): name, size, type."""
        if not self.file:
            return None
        return {"name": self.file_name, "size": self.file_size, "type": self.file_type}


class Posture(models.TextChoices):
    ACCEPT = "accept"
    CONTEST = "contest"
    REFUND_ALREADY_SENT = "refund_already_sent"
    NEEDS_MORE_EVIDENCE = "needs_more_evidence"
    OPERATOR_REVIEW = "operator_review"


FILEABLE_POSTURES = (Posture.CONTEST, Posture.REFUND_ALREADY_SENT)


class PacketKind(models.TextChoices):
    """A dispute's response, or its appeal once the response was filed and the dispute lost
    (SPEC §17): each kind is filed once, with its own approval and its own readback contract."""

    RESPONSE = "response", "Response"
    APPEAL = "appeal", "Appeal"


class PacketStatus(models.TextChoices):
    READY_FOR_REVIEW = "ready_for_review", "Ready for review"
    INCOMPLETE = "incomplete", "Incomplete (needs more evidence)"
    INVALID = "invalid", "Failed validation"
    SUPERSEDED = "superseded", "Superseded by a newer version"
    FILED = "filed", "Filed (readback verified)"  # its filing's readback run is VERIFIED


class ApprovalStatus(models.TextChoices):
    NOT_REQUESTED = "not_requested"
    APPROVED = "approved"


class FilingStatus(models.TextChoices):
    NOT_FILED = "not_filed"
    SUBMITTING = "submitting"  # the provider is being called (or was, and the answer is unknown)
    AWAITING_READBACK = "awaiting_readback"  # the provider answered; the readback decides
    FILED = "filed"  # the independent readback run is VERIFIED
    READBACK_FAILED = "readback_failed"  # not proven, and the provider shows a submission
    NOT_SUBMITTED = "not_submitted"  # not proven, and the readback shows nothing submitted


# A filing in these states holds the dispute: it takes one submission at the provider, so no other
# version is prepared or filed meanwhile. A filing whose readback showed nothing submitted
# (`not_submitted`) holds nothing: a new version may be approved and filed.
FILING_HOLDS = (
    FilingStatus.SUBMITTING,
    FilingStatus.AWAITING_READBACK,
    FilingStatus.FILED,
    FilingStatus.READBACK_FAILED,
)


# The readback contracts of a filing (verification/contracts/): a response's; a response carrying
# Visa CE 3.0, read back until Stripe shows it qualified; an appeal's (SPEC §17).
FILED_CONTRACT = "stripe.dispute.filed"
CE3_CONTRACT = "stripe.dispute.filed_ce3"
APPEAL_CONTRACT = "stripe.dispute.appeal_filed"
FILING_CONTRACTS = (FILED_CONTRACT, CE3_CONTRACT, APPEAL_CONTRACT)


class ProviderStatus(models.TextChoices):
    NOT_CALLED = "not_called"
    ANSWERED = "answered"  # the provider answered the call (E1: a claim; the readback decides)
    REFUSED = "refused"
    UNKNOWN = "unknown"


# A version's content status (STYLE rule 6). Preparing or editing sets it from the finalization
# (ready, incomplete, invalid); an edit may leave it as it was. A newer version supersedes it; only
# a ready version is filed, and only its readback VERIFIED makes it `filed`. Superseded and filed
# are final: a version with a filing that holds the dispute is never superseded (nothing else is
# prepared meanwhile), and a filed one is never edited.
_EDITABLE = (PacketStatus.READY_FOR_REVIEW, PacketStatus.INCOMPLETE, PacketStatus.INVALID)
_PACKET_STATUS_MOVES: dict[str, set[str]] = {
    PacketStatus.READY_FOR_REVIEW: {*_EDITABLE, PacketStatus.SUPERSEDED, PacketStatus.FILED},
    PacketStatus.INCOMPLETE: {*_EDITABLE, PacketStatus.SUPERSEDED},
    PacketStatus.INVALID: {*_EDITABLE, PacketStatus.SUPERSEDED},
    PacketStatus.SUPERSEDED: set(),
    PacketStatus.FILED: set(),
}
PACKET_STATUS = StateMachine.of(
    "packet", field="status", choices=PacketStatus, allowed=_PACKET_STATUS_MOVES
)

# Four eyes: an approval binds the digest shown. An edit after it does not take it back (the digest
# no longer matches: `packet_drifted`), and a person may approve the edited content again.
_PACKET_APPROVAL_MOVES: dict[str, set[str]] = {
    ApprovalStatus.NOT_REQUESTED: {ApprovalStatus.APPROVED},
    ApprovalStatus.APPROVED: {ApprovalStatus.APPROVED},
}
PACKET_APPROVAL = StateMachine.of(
    "packet", field="approval_status", choices=ApprovalStatus, allowed=_PACKET_APPROVAL_MOVES
)

# A version's filing: reserved (`submitting`, the recovery point) and sent once per key; an upload
# without an answer is recorded and stays `submitting` (the resume job sends again with the same
# keys); the provider's answer, a refusal or none at all — or a re-filing past the key's life,
# which sends nothing — starts the readback run, and only its verdict ends the filing. A version
# whose filing ended is never filed again: after `not_submitted` a new version is prepared,
# approved and filed.
_PACKET_FILING_MOVES: dict[str, set[str]] = {
    FilingStatus.NOT_FILED: {FilingStatus.SUBMITTING},
    FilingStatus.SUBMITTING: {FilingStatus.SUBMITTING, FilingStatus.AWAITING_READBACK},
    FilingStatus.AWAITING_READBACK: {
        FilingStatus.FILED,
        FilingStatus.NOT_SUBMITTED,
        FilingStatus.READBACK_FAILED,
    },
    FilingStatus.FILED: set(),
    FilingStatus.READBACK_FAILED: set(),
    FilingStatus.NOT_SUBMITTED: set(),
}
PACKET_FILING = StateMachine.of(
    "packet", field="filing_status", choices=FilingStatus, allowed=_PACKET_FILING_MOVES
)


class Packet(models.Model):
    """One version of a dispute's response packet. Its `status`, `approval_status` and
    `filing_status` change only through `core.transitions.transition` with the machines above."""

    public_id = models.CharField(max_length=40, unique=True, default=_packet_public_id)
    dispute = models.ForeignKey(Dispute, on_delete=models.CASCADE, related_name="packets")
    version = models.PositiveIntegerField()
    drafter = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=PacketKind.choices, default=PacketKind.RESPONSE)

    # Content (what the digest covers, with the dispute it answers).
    posture = models.CharField(max_length=30, choices=Posture.choices)
    summary = models.TextField()
    citations = models.JSONField(default=list)  # admitted receipt ids and evidence refs cited
    evidence_refs = models.JSONField(default=list)  # the admitted evidence, as {ref, sha256, ...}
    open_questions = models.JSONField(default=list)
    digest = models.CharField(max_length=64)
    # SPEC §17, each bound by the digest when it holds anything: an appeal's ground (the filed
    # response it follows, the evidence admitted since), the enhanced evidence computed from
    # Vouch's receipts (Visa CE 3.0, a compliance dispute's network fee), and the cost of
    # accepting against contesting.
    appeal = models.JSONField(default=dict, blank=True)
    enhanced = models.JSONField(default=dict, blank=True)
    costs = models.JSONField(default=dict, blank=True)

    # Derived from the content and the receipts when prepared or edited.
    receipt_ids = models.JSONField(default=list)  # the receipts consulted (the admitted ones)
    validation = models.JSONField(default=dict)  # {"ok": bool, "errors": [{"code", "message"}]}
    status = models.CharField(max_length=20, choices=PacketStatus.choices)
    handoff = models.JSONField(default=dict)  # the exact provider-filing request, for review

    # Four eyes (SPEC §5): who asked for this version, admitted evidence to it or edited it.
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    last_edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    contributors = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="+", blank=True)

    approval_status = models.CharField(
        max_length=20, choices=ApprovalStatus.choices, default=ApprovalStatus.NOT_REQUESTED
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField(null=True)
    approved_digest = models.CharField(max_length=64, blank=True)
    # The approver ticked the acknowledgement of a compliance dispute's network fee with this
    # approval: only then does filing send `fee_acknowledged` (SPEC §17).
    fee_acknowledged = models.BooleanField(default=False)

    filing_status = models.CharField(
        max_length=20, choices=FilingStatus.choices, default=FilingStatus.NOT_FILED
    )
    provider_status = models.CharField(
        max_length=20, choices=ProviderStatus.choices, default=ProviderStatus.NOT_CALLED
    )
    filing_key = models.CharField(max_length=255, blank=True)
    filing_request_digest = models.CharField(max_length=64, blank=True)
    filing_reference = models.CharField(max_length=255, blank=True)
    filing_provider_state = models.CharField(max_length=40, blank=True)  # the dispute's status
    filing_error = models.CharField(max_length=100, blank=True)
    filed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    filing_started_at = models.DateTimeField(null=True)
    filed_at = models.DateTimeField(null=True)  # when the readback proved it
    filing_run = models.ForeignKey(
        "verification.VerificationRun",
        null=True,
        on_delete=models.PROTECT,
        related_name="+",
    )
    # The provider's file ids of the evidence files this filing uploaded, by SHA-256: ids exist
    # only at filing time, so the digest binds the SHA-256 and this records what it became.
    filing_files = models.JSONField(default=dict, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["dispute", "-version"]
        permissions = [
            ("approve_packet", "Can approve a dispute packet"),
            ("file_packet", "Can file an approved dispute packet with the provider"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["dispute", "version"], name="packet_unique_version"),
            models.UniqueConstraint(
                fields=["filing_key"],
                condition=~Q(filing_key=""),
                name="packet_unique_filing_key",
            ),
            # One filing per dispute and kind: a dispute takes one submission of its response at
            # the provider, and one of its appeal.
            models.UniqueConstraint(
                fields=["dispute", "kind"],
                condition=Q(filing_status__in=FILING_HOLDS),
                name="packet_one_filing_per_dispute",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} (v{self.version})"


class DeadlineReminder(models.Model):
    """One deadline reminder sent for a dispute: at most one per dispute and window (a unique
    constraint), so concurrent or repeated runs of the job never send it twice."""

    dispute = models.ForeignKey(Dispute, on_delete=models.CASCADE, related_name="reminders")
    # "72h", "24h": hours before the deadline; "appeal 24h": before the appeal stage's deadline.
    window = models.CharField(max_length=20)
    due_by = models.DateTimeField()  # the deadline it reminded of
    sent_at = models.DateTimeField()
    recipients = models.JSONField(default=list)
    escalation = models.ForeignKey(
        "verification.Escalation",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )

    class Meta:
        ordering = ["sent_at", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["dispute", "window"], name="deadline_reminder_once_per_window"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dispute} {self.window}"
