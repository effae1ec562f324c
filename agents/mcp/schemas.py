"""The tools' input and output JSON schemas, as pydantic models (the MCP SDK publishes them in
`tools/list` and checks every result against its output schema). Outputs mirror the REST API's
shapes (the same selectors render both): every `<base>_micro` field is integer micro-dollars and
comes with its `<base>_usd` twin. Inputs refuse unknown arguments."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StrictInt, StrictStr
from pydantic.json_schema import WithJsonSchema
from typing_extensions import TypedDict

from envelopes.services import MAX_ENVELOPE_MICRO

MICRO = (
    "Micro-dollars (an integer; 1 USD = 1,000,000 micro, not cents): $12.34 is 12340000, "
    "$0.01 is 10000."
)
USD = "The same amount in US dollars, for reading only (compute on the `_micro` field)."
MAX_ID = 255
PAGE_MAX = 100
PAGE_DEFAULT = 20

# --- inputs -------------------------------------------------------------------------------------


class ToolInput(ArgModelBase):
    """A tool's arguments: unknown ones are refused (`validation_error`), not ignored."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


EnvelopeId = Annotated[
    StrictStr,
    Field(min_length=1, max_length=MAX_ID, description="The envelope's id, e.g. env_2Qx7f3KpLm9R."),
]
RefundId = Annotated[
    StrictStr,
    Field(min_length=1, max_length=MAX_ID, description="The refund's id, e.g. rfd_8HcT2mWq4ZsN."),
]
RequestId = Annotated[
    StrictStr,
    Field(
        min_length=1,
        max_length=MAX_ID,
        description="The refund request's id, e.g. rrq_5VbN3kLp8TqW.",
    ),
]
DisputeId = Annotated[
    StrictStr,
    Field(
        min_length=1,
        max_length=MAX_ID,
        description="Vouch's dispute id (dsp_…) or the provider's (dp_…).",
    ),
]
Limit = Annotated[
    StrictInt,
    Field(ge=1, le=PAGE_MAX, description=f"Rows per page, 1 to {PAGE_MAX}."),
]
Cursor = Annotated[
    StrictStr | None,
    Field(
        max_length=2000,
        description="The previous page's `next_cursor` (same filters); omit for the first page.",
    ),
]
# Values passed on as sent: the service validates them, with the REST API's codes and in the REST
# API's order. Typed `str` (but taking anything) so that the SDK never first parses a string that
# looks like JSON into something else.
RefundAmount = Annotated[
    str,
    PlainValidator(lambda value: value),
    WithJsonSchema({"type": "integer", "minimum": 10_000, "maximum": MAX_ENVELOPE_MICRO}),
]
IdempotencyKey = Annotated[
    str,
    PlainValidator(lambda value: value),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": "^[\\x20-\\x7e]+$",
            "description": "Any 1-255 printable ASCII characters, new for each refund you mean "
            "(e.g. a UUID). Re-sending the same key with the same arguments answers the same "
            "request; with other arguments: `idempotency_key_conflict`; a key already used for "
            "this envelope's refund through the REST API: `idempotency_key_other_surface`.",
        }
    ),
]


class WhoamiInput(ToolInput):
    pass


class EnvelopesListInput(ToolInput):
    limit: Limit = PAGE_DEFAULT
    cursor: Cursor = None


class EnvelopeGetInput(ToolInput):
    envelope_id: EnvelopeId


class RefundsListInput(ToolInput):
    envelope_id: Annotated[
        StrictStr | None,
        Field(
            min_length=1,
            max_length=MAX_ID,
            description="Only this envelope's refunds, e.g. env_2Qx7f3KpLm9R; omit for all of "
            "yours.",
        ),
    ] = None
    limit: Limit = PAGE_DEFAULT
    cursor: Cursor = None


class RefundGetInput(ToolInput):
    refund_id: RefundId


class EnvelopeRefundRequestInput(ToolInput):
    envelope_id: EnvelopeId
    amount_micro: Annotated[
        RefundAmount | None,
        Field(
            description=MICRO + " How much to refund; omit (or null) for the whole unspent "
            "balance. More than the unspent balance: `amount_exceeds_unspent`; not an integer "
            "of at least 10,000 (one cent): `invalid_amount`."
        ),
    ] = None
    idempotency_key: IdempotencyKey


class RefundRequestGetInput(ToolInput):
    request_id: RequestId


class EscalationsListInput(ToolInput):
    status: Annotated[
        Literal["open", "resolved"],
        Field(description="open (the default): still waiting for a person; or resolved."),
    ] = "open"
    limit: Limit = PAGE_DEFAULT
    cursor: Cursor = None


class DisputeGetInput(ToolInput):
    dispute_id: DisputeId


class PacketGetInput(ToolInput):
    dispute_id: DisputeId
    version: Annotated[
        StrictInt | None,
        Field(ge=1, le=2**31 - 1, description="A version of the packet; omit for the latest."),
    ] = None


class DiscrepanciesListInput(ToolInput):
    status: Annotated[
        Literal["open", "resolved", "all"],
        Field(
            description="open (the default: open or acknowledged), resolved, or all. The queue's "
            "order: open first, then money, evidence, hygiene, then the oldest."
        ),
    ] = "open"
    limit: Limit = PAGE_DEFAULT
    cursor: Cursor = None


# --- outputs ------------------------------------------------------------------------------------

HELD = (
    "Held by a dispute: money Stripe withdrew when the buyer's bank opened a chargeback, while "
    "the bank reviews it. Never debited, refunded or allocated; back to unspent if the dispute "
    "is won."
)
CHARGED_BACK = "Charged back: held money a lost dispute took for good (final)."

Micro = Annotated[StrictInt, Field(description=MICRO)]
Usd = Annotated[float, Field(description=USD)]


class Out(BaseModel):
    """A result shape: a field the selectors add without it here is an error, never dropped."""

    model_config = ConfigDict(extra="forbid")


class Balances(Out):
    total_funded_micro: Micro
    total_funded_usd: Usd
    total_debited_micro: Micro
    total_debited_usd: Usd
    total_refunded_micro: Micro
    total_refunded_usd: Usd
    reserved_micro: Micro
    reserved_usd: Usd
    unspent_micro: Micro = Field(description=MICRO + " What may still be refunded or debited.")
    unspent_usd: Usd
    held_micro: Micro = Field(description=MICRO + " " + HELD)
    held_usd: Usd
    charged_back_micro: Micro = Field(description=MICRO + " " + CHARGED_BACK)
    charged_back_usd: Usd


class EnvelopeListItem(Balances):
    envelope_id: str
    currency: str = Field(description="usd")
    created_at: str = Field(description="ISO 8601.")


class FundingLeg(Out):
    funding_id: str
    kind: Literal["original", "top_up"]
    sequence: int
    status: Literal["pending", "succeeded", "abandoned"] = Field(
        description="pending: the provider's answer is not known yet; abandoned: the provider "
        "holds no payment for it (no money)."
    )
    amount_micro: Micro
    amount_usd: Usd
    refunded_micro: Micro
    refunded_usd: Usd
    reserved_micro: Micro
    reserved_usd: Usd
    held_micro: Micro = Field(description=MICRO + " Of this charge: " + HELD)
    held_usd: Usd
    charged_back_micro: Micro = Field(description=MICRO + " Of this charge: " + CHARGED_BACK)
    charged_back_usd: Usd
    charge: str | None
    payment_intent: str | None
    created_at: str


class Debit(Out):
    debit_id: str
    amount_micro: Micro
    amount_usd: Usd
    reference: str
    created_at: str


class RefundSummary(Out):
    refund_id: str
    status: str
    requested_micro: Micro
    requested_usd: Usd


class DisputeFunds(Out):
    """What one dispute on the envelope's charges holds or took: why money is held."""

    dispute: str = Field(description="The provider's dispute id (dp_…).")
    charge: str = Field(description="The disputed charge (ch_…).")
    status: Literal["held", "reinstated", "charged_back"] = Field(
        description="held: Stripe withdrew the disputed money while the bank reviews the "
        "dispute; reinstated: the dispute was won, the money is back in the envelope; "
        "charged_back: the dispute was lost, the money went back to the buyer's bank."
    )
    held_micro: Micro = Field(description=MICRO + " " + HELD)
    held_usd: Usd
    charged_back_micro: Micro = Field(description=MICRO + " " + CHARGED_BACK)
    charged_back_usd: Usd
    updated_at: str


class Envelope(EnvelopeListItem):
    funding_legs: list[FundingLeg]
    debits: list[Debit]
    refunds: list[RefundSummary]
    disputes: list[DisputeFunds] = Field(
        description="The money each dispute on its charges holds or took (only disputes whose "
        "funds Stripe withdrew; an inquiry holds nothing)."
    )


class BankReference(Out):
    status: Literal["pending", "available", "unavailable", "not_available"] = Field(
        description="Stripe's reference_status (pending, available, unavailable), or "
        "not_available: still pending three weeks after the refund, Vouch stopped asking."
    )
    reference: str | None = Field(
        description="The acquirer reference number (ARN), e.g. 74987512345678901234567: what the "
        "buyer's bank needs to find the refund. Null until available."
    )
    reference_type: str | None = Field(description="e.g. acquirer_reference_number.")
    how_to_use: str = Field(
        description='One sentence to pass on to the buyer, e.g. "Give your bank this reference '
        '(ARN) if the refund has not reached your statement after 10 business days".'
    )


class RefundLeg(Out):
    leg_id: str
    charge: str
    amount_micro: Micro
    amount_usd: Usd
    provider_refund_id: str | None
    outcome: Literal["reserved", "accepted", "refused", "unknown", "void"] = Field(
        description="accepted: the provider returned a refund (not proof: see the verdict); "
        "refused: the money is back; unknown: no trusted answer yet, the money stays reserved; "
        "void: never made, the money is back."
    )
    error_code: str | None
    released: bool = Field(description="Its money went back to the unspent balance.")
    verification_verdict: str | None = Field(
        description="VERIFIED once an independent readback proves it."
    )
    verification_run: str | None
    queued: bool = Field(
        description="Stripe's rate limit had no room when this leg was to be sent: it waits, its "
        "money reserved, and Vouch sends it as room frees, in turn, under the same key."
    )
    bank_reference: BankReference | None = Field(
        description="The refund's reference at the card network (ARN) and how to use it; null "
        "until a verified readback showed it."
    )


class Refund(Out):
    refund_id: str
    envelope_id: str
    status: Literal["refunded", "partially_refunded", "failed", "pending"] = Field(
        description="What the provider last said of every leg, not proof. A leg Stripe accepted "
        "and later reported failed or canceled counts as failed (`released`, in failed_micro): "
        "its money is back in the envelope."
    )
    requested_micro: Micro
    requested_usd: Usd
    refunded_micro: Micro
    refunded_usd: Usd
    failed_micro: Micro
    failed_usd: Usd
    pending_micro: Micro
    pending_usd: Usd
    remainder_micro: Micro = Field(description=MICRO + " Sub-cent money kept in the envelope.")
    remainder_usd: Usd
    legs: list[RefundLeg]
    verification_status: Literal["pending", "verified", "attention", "not_applicable"] = Field(
        description="pending until every accepted leg is decided; then verified or attention "
        "(a leg not proven, or one Stripe later reported failed: never verified)."
    )
    balances: Balances
    created_at: str


class Paged(Out):
    has_more: bool = Field(description="More rows follow: ask again with `cursor` = `next_cursor`.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last."
    )


class EnvelopesPage(Paged):
    results: list[EnvelopeListItem]


class RefundsPage(Paged):
    results: list[Refund]


class Whoami(Out):
    username: str
    email: str
    is_staff: bool = Field(description="Staff may use ops:read tools (with that scope).")
    scopes: list[str] = Field(description="What this token was granted.")
    client_id: str = Field(description="The OAuth client (the assistant) the token was issued to.")
    token_expires_at: str = Field(description="ISO 8601.")


class PreviewLeg(Out):
    funding_id: str
    kind: Literal["original", "top_up"]
    sequence: int
    charge: str | None
    amount_micro: Micro
    amount_usd: Usd


class Preview(Out):
    requested_micro: Micro
    requested_usd: Usd
    legs: list[PreviewLeg] = Field(
        description="Last in, first out; each leg rounded down to a cent."
    )
    total_micro: Micro = Field(description=MICRO + " What the legs refund in all.")
    total_usd: Usd
    remainder_micro: Micro = Field(description=MICRO + " Sub-cent money kept in the envelope.")
    remainder_usd: Usd
    unspent_micro: Micro = Field(description=MICRO + " The unspent balance when requested.")
    unspent_usd: Usd
    # Defaults: a request stored before these fields existed still answers (SPEC §18).
    held_micro: Micro = Field(
        0, description=MICRO + " Held by a dispute when requested: not unspent, never refunded."
    )
    held_usd: Usd = 0.0
    held_note: str | None = Field(
        None, description="Why held money cannot be refunded, in words (null when nothing is held)."
    )


class RefundRequest(Out):
    request_id: str
    status: Literal["pending_confirmation", "confirmed", "expired", "refused"] = Field(
        description="pending_confirmation until the owner confirms at confirm_url (no money has "
        "moved until then)."
    )
    envelope_id: str
    preview: Preview = Field(description="The refund as it would be made when requested.")
    confirm_url: str = Field(
        description="The envelope's owner opens it, logged in, to see the refund and confirm it."
    )
    expires_at: str = Field(description="ISO 8601: not confirmed by then, the request lapses.")


class RefundRequestDetail(RefundRequest):
    created_at: str
    confirmed_at: str | None
    refusal_code: str | None = Field(description="Why confirming was refused (a REST error code).")
    refund: Refund | None = Field(description="The refund, once confirmed.")


class Escalation(Out):
    escalation_id: int = Field(description="The escalation's number (as in the admin).")
    status: Literal["open", "resolved"]
    money: bool = Field(description="It concerns money: only an approved adjustment resolves it.")
    verdict: str
    verdict_class: str | None
    reason: str
    subject_type: str | None = Field(description="e.g. refund_leg, funding_leg.")
    subject_id: str | None
    verification_run: str | None
    created_at: str
    resolved_at: str | None
    resolved_by: str | None
    resolution: str | None
    resolution_note: str | None


class EscalationsPage(Paged):
    results: list[Escalation]


class Discrepancy(Out):
    discrepancy_id: str
    discrepancy_class: str = Field(description="The class, a stable code (e.g. refund_missing).")
    severity: Literal["money", "evidence", "hygiene"]
    status: Literal["open", "acknowledged", "resolved"]
    resolution: str | None
    subject_type: str
    subject_id: str
    charge_id: str | None
    envelope_id: str | None
    amount_micro: Micro = Field(description=MICRO + " The money it concerns (0: none or unknown).")
    amount_usd: Usd
    summary: str
    differing: list[str] = Field(
        description="The fields that differ between Vouch and the provider."
    )
    first_seen_at: str
    last_seen_at: str
    seen_count: int
    due_at: str = Field(description="The target to resolve it by.")
    overdue: bool


class DiscrepanciesPage(Paged):
    results: list[Discrepancy]


class EvidenceFile(Out):
    name: str
    size: int
    type: str


class EvidenceRef(TypedDict):
    """Evidence as a packet cites it; `file` only when it was admitted with one."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    ref: str
    sha256: str
    kind: str
    summary: str
    file: NotRequired[EvidenceFile]


class Evidence(Out):
    evidence_id: str
    ref: str
    sha256: str
    kind: str
    summary: str
    admitted_by: str | None
    admitted_at: str | None


class Approval(Out):
    status: str
    approved_by: str | None
    approved_at: str | None
    approved_digest: str | None
    fee_acknowledged: bool = Field(
        description="The approver acknowledged a Visa compliance dispute's network fee."
    )


class Filing(Out):
    status: str = Field(description="`filed` only once an independent readback is VERIFIED.")
    provider_status: str
    filing_reference: str | None
    dispute_id: str
    request_digest: str | None
    provider_dispute_status: str | None
    error_code: str | None
    verification_run: str | None
    verification_verdict: str | None
    filed_at: str | None


class Packet(Out):
    packet_id: str
    version: int
    kind: str = Field(description="`response`, or `appeal` after a filed response was lost.")
    status: str
    posture: str
    summary: str
    citations: list[str]
    receipt_ids: list[str]
    evidence_refs: list[EvidenceRef]
    open_questions: list[str]
    validation: Any
    digest: str
    drafter: str
    contributors: list[str]
    approval: Approval
    filing: Filing
    handoff: Any
    appeal: Any = Field(description="An appeal's ground: the filed response and new evidence.")
    enhanced: Any = Field(
        description="Enhanced evidence from Vouch's receipts (Visa CE 3.0, Visa compliance)."
    )
    costs: Any = Field(description="The amount at stake, the fees, accepting against contesting.")
    created_at: str | None


class Dispute(Out):
    dispute_id: str
    provider: str
    provider_dispute_id: str
    charge: str
    amount_micro: Micro
    amount_usd: Usd
    currency: str
    reason: str
    response_deadline: str | None
    response_allowed: bool = Field(
        description="False when Stripe's `due_by` is 0: the card network allows no response."
    )
    response_deadline_note: str | None = Field(
        description="Why there is no deadline ('No response allowed …', 'No deadline known')."
    )
    case_type: str | None = Field(description="Stripe's card case type: chargeback, inquiry, …")
    is_charge_refundable: bool | None = Field(description="Stripe's flag, as last read.")
    provider_status: str | None
    intended_submission_method: str | None
    source: str
    created_at: str | None
    evidence: list[Evidence]
    packet: Packet | None
