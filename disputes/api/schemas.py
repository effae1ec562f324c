"""Output shapes of the disputes API, for the OpenAPI schema (the views render selectors' dicts)."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.parsing import MicroField, StrictCharField
from disputes.permissions import Rule
from disputes.services import MAX_DISPUTE_MICRO
from envelopes.api.schemas import money_serializer
from envelopes.models import MICRO_PER_CENT

# The admission rules' own patterns (disputes/evidence.py), for the schema.
EVIDENCE_REF_PATTERN = r"^[A-Za-z0-9][!#-&(-z|~]{0,199}$"
EVIDENCE_SHA256_PATTERN = r"^[0-9a-f]{64}$"

POSTURES = ["accept", "contest", "refund_already_sent", "needs_more_evidence", "operator_review"]


class EvidenceFileOut(serializers.Serializer):
    """The file admitted with a piece of evidence (its SHA-256 is the evidence's `sha256`)."""

    name = serializers.CharField()
    size = serializers.IntegerField(min_value=1, help_text="Bytes.")
    type = serializers.ChoiceField(choices=["pdf", "png", "jpg"])


class EvidenceRefOut(serializers.Serializer):
    """Evidence as a packet cites it."""

    ref = serializers.CharField()
    sha256 = serializers.CharField()
    kind = serializers.ChoiceField(
        choices=["delivery", "consent", "communication", "policy", "other"]
    )
    summary = serializers.CharField()
    file = EvidenceFileOut(
        required=False,
        help_text="Present when the evidence was admitted with a file (in the admin).",
    )


class EvidenceOut(EvidenceRefOut):
    """An admission: the evidence, who admitted it and when."""

    evidence_id = serializers.CharField(help_text="The admission's id (evd_…).")
    admitted_by = serializers.CharField(allow_null=True)
    admitted_at = serializers.DateTimeField()


class ApprovalOut(serializers.Serializer):
    status = serializers.ChoiceField(choices=["not_requested", "approved"])
    approved_by = serializers.CharField(allow_null=True)
    approved_at = serializers.DateTimeField(allow_null=True)
    approved_digest = serializers.CharField(allow_null=True)
    fee_acknowledged = serializers.BooleanField(
        help_text="The approver acknowledged a Visa or Mastercard compliance dispute's network "
        "fee with this approval (SPEC §17): only then does filing send "
        "`enhanced_evidence.<visa_compliance|mastercard_compliance>.fee_acknowledged`."
    )


class FilingOut(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=[
            "not_filed",
            "submitting",
            "awaiting_readback",
            "filed",
            "readback_failed",
            "not_submitted",
        ],
        help_text="`filed` only once an independent readback (stripe.dispute.filed) is VERIFIED. "
        "A filed response is not a won, closed or settled dispute. `not_submitted`: the readback "
        "proved nothing and shows nothing submitted (a new version may be filed); "
        "`readback_failed`: it proved nothing and the provider shows a submission.",
    )
    provider_status = serializers.ChoiceField(
        choices=["not_called", "answered", "refused", "unknown"],
        help_text="What the provider answered the filing call (evidence level E1, not proof).",
    )
    filing_reference = serializers.CharField(allow_null=True)
    dispute_id = serializers.CharField()
    request_digest = serializers.CharField(allow_null=True)
    provider_dispute_status = serializers.CharField(allow_null=True)
    error_code = serializers.CharField(allow_null=True)
    verification_run = serializers.CharField(allow_null=True)
    verification_verdict = serializers.CharField(allow_null=True)
    filed_at = serializers.DateTimeField(allow_null=True)


class PacketOut(serializers.Serializer):
    packet_id = serializers.CharField()
    version = serializers.IntegerField()
    kind = serializers.ChoiceField(
        choices=["response", "appeal"],
        help_text="A dispute's response, or its appeal after the response was filed and lost.",
    )
    status = serializers.ChoiceField(
        choices=["ready_for_review", "incomplete", "invalid", "superseded", "filed"],
        help_text="`filed` once the filing's independent readback run is VERIFIED.",
    )
    posture = serializers.ChoiceField(choices=POSTURES)
    summary = serializers.CharField()
    citations = serializers.ListField(
        child=serializers.CharField(), help_text="Admitted receipt ids and evidence refs."
    )
    receipt_ids = serializers.ListField(child=serializers.CharField())
    evidence_refs = EvidenceRefOut(many=True)
    open_questions = serializers.ListField(child=serializers.CharField())
    validation = serializers.JSONField(help_text='{"ok": bool, "errors": [{"code", "message"}]}')
    digest = serializers.CharField(help_text="SHA-256 of the canonical JSON of the content.")
    drafter = serializers.CharField()
    contributors = serializers.ListField(child=serializers.CharField())
    approval = ApprovalOut()
    filing = FilingOut()
    handoff = serializers.JSONField(help_text="The exact provider-filing request, for review.")
    appeal = serializers.JSONField(
        allow_null=True,
        help_text="An appeal's ground: the filed response it follows ({packet, version, digest}) "
        "and the evidence admitted since (`new_evidence`). Null for a response.",
    )
    enhanced = serializers.JSONField(
        allow_null=True,
        help_text="Enhanced evidence from Vouch's receipts: `visa_compelling_evidence_3` (status, "
        "the disputed charge, the two prior charges with their receipt ids, every candidate "
        "considered), `visa_compliance` and `mastercard_compliance`. Null when the dispute is "
        "eligible for none.",
    )
    costs = serializers.JSONField(
        allow_null=True,
        help_text="The amount at stake, the fees, and the outcome of accepting against "
        "contesting (integer micro-dollars).",
    )
    created_at = serializers.DateTimeField()


_DISPUTE_FIELDS = {
    "dispute_id": serializers.CharField(),
    "provider": serializers.CharField(),
    "provider_dispute_id": serializers.CharField(),
    "charge": serializers.CharField(),
    "currency": serializers.CharField(),
    "reason": serializers.CharField(),
    "response_deadline": serializers.DateTimeField(
        allow_null=True,
        help_text="Stripe's `evidence_details.due_by`. Null when the card network allows no "
        "response (`due_by` 0: `response_allowed` false) or no deadline is known.",
    ),
    "response_allowed": serializers.BooleanField(
        help_text="False when Stripe shows `evidence_details.due_by` as 0: the card network "
        "allows no response, so none is prepared, approved or filed "
        "(`dispute_response_not_allowed`)."
    ),
    "response_deadline_note": serializers.ChoiceField(
        choices=[
            "No response allowed (the card network allows none)",
            "No deadline known",
        ],
        allow_null=True,
        help_text="Why there is no response deadline, in words; null when there is one.",
    ),
    "case_type": serializers.CharField(
        allow_null=True,
        help_text="Stripe's `payment_method_details.card.case_type` as last read: `chargeback`, "
        "`inquiry`, `compliance`, `block`, `resolution`; null if never read.",
    ),
    "is_charge_refundable": serializers.BooleanField(
        allow_null=True,
        help_text="Stripe's `is_charge_refundable` as last read (an inquiry's charge may still "
        "be refunded); null for a dispute never read from the provider.",
    ),
    "provider_status": serializers.CharField(allow_null=True),
    "intended_submission_method": serializers.CharField(
        allow_null=True,
        help_text="What the provider says of how evidence is submitted: `manual` once Vouch set "
        "it (Smart Disputes never submits); null if the provider does not hold the dispute.",
    ),
    "source": serializers.ChoiceField(choices=["provider", "staff"]),
    "created_at": serializers.DateTimeField(),
}

DisputeListItemOut = money_serializer("DisputeListItemOut", dict(_DISPUTE_FIELDS), ["amount"])

DisputeOut = money_serializer(
    "DisputeOut",
    {
        **_DISPUTE_FIELDS,
        "evidence": EvidenceOut(many=True),
        "packet": PacketOut(allow_null=True),
    },
    ["amount"],
)


class DisputeListOut(serializers.Serializer):
    results = DisputeListItemOut(many=True)
    count = serializers.IntegerField()
    next_offset = serializers.IntegerField(allow_null=True)


class EvidenceAdmittedOut(serializers.Serializer):
    evidence = EvidenceOut()
    created = serializers.BooleanField()
    dispute = DisputeOut()


@extend_schema_field(
    {
        "type": "integer",
        "format": "int64",
        "minimum": MICRO_PER_CENT,
        "maximum": MAX_DISPUTE_MICRO,
        "multipleOf": MICRO_PER_CENT,
    }
)
class DisputeMicroField(MicroField):
    """A disputed amount: a positive whole number of cents, in micro-dollars (else
    `validation_error`)."""


@extend_schema_field({"type": "string", "enum": ["usd"]})
class DisputeCurrencyField(StrictCharField):
    """`usd`, the only currency; else `unsupported_currency`."""


def permission_needed(rule: Rule) -> str:
    """The sentence an operation's description ends with: the permission it needs, the same the
    admin asks (disputes/permissions.py), and the 403 that refuses it before any lookup."""
    sentence = (
        f" Needs the permission `{rule.permission}` (any of "
        + ", ".join(f"`{p}`" for p in rule.any_of)
        + ")"
    )
    for also in rule.also:
        sentence += (
            f" and may read what it answers: `{also.permission}` (any of "
            + ", ".join(f"`{p}`" for p in also.any_of)
            + ")"
        )
    return (
        sentence + ", exactly as the admin asks; without it: 403 `permission_denied`, "
        "before any id is looked up."
    )
