"""Output shapes, for the OpenAPI schema (the views render selectors' dicts). Every `_micro` field
is documented as micro-dollars and gets its `_usd` twin."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api.parsing import MICRO, MicroField, StrictCharField
from envelopes.models import MICRO_PER_CENT
from envelopes.services import MAX_ENVELOPE_MICRO, MIN_FUNDING_MICRO

MICRO_HELP = "Micro-dollars (1 USD = 1,000,000 micro), an integer: compute on this."
USD_HELP = "The same amount in US dollars, for reading only."


def money_serializer(
    name: str, fields: dict[str, Any], micro: list[str], helps: dict[str, str] | None = None
) -> type[serializers.Serializer]:
    """A serializer class with `fields`, plus `<base>_micro` and `<base>_usd` for each base;
    `helps`: what some bases mean, after the unit."""
    attrs: dict[str, Any] = dict(fields)
    for base in micro:
        meaning = (helps or {}).get(base)
        attrs[f"{base}_micro"] = serializers.IntegerField(
            help_text=f"{MICRO_HELP} {meaning}" if meaning else MICRO_HELP
        )
        attrs[f"{base}_usd"] = serializers.FloatField(help_text=USD_HELP)
    return type(name, (serializers.Serializer,), attrs)


# envelopes.models.BALANCES, without the `_micro`: funded = debited + refunded + reserved +
# unspent + held + charged back (SPEC §2, §18).
BALANCES = [
    "total_funded",
    "total_debited",
    "total_refunded",
    "reserved",
    "unspent",
    "held",
    "charged_back",
]
_HELD = {
    "held": "Held by a dispute: Stripe withdrew it while the buyer's bank reviews the dispute; "
    "never debited, refunded or allocated; back to unspent if the dispute is won.",
    "charged_back": "Charged back: held money a lost dispute took for good (final).",
}

BalancesOut = money_serializer("BalancesOut", {}, BALANCES, _HELD)

FundingLegOut = money_serializer(
    "FundingLegOut",
    {
        "funding_id": serializers.CharField(),
        "kind": serializers.ChoiceField(choices=["original", "top_up"]),
        "sequence": serializers.IntegerField(),
        "status": serializers.ChoiceField(
            choices=["pending", "succeeded", "abandoned"],
            help_text="pending: the provider's answer is not known yet; abandoned: the provider "
            "holds no payment for it, as two people confirmed (no money)",
        ),
        "charge": serializers.CharField(allow_null=True),
        "payment_intent": serializers.CharField(allow_null=True),
        "created_at": serializers.DateTimeField(),
    },
    ["amount", "refunded", "reserved", "held", "charged_back"],
    _HELD,
)

EnvelopeDisputeFundsOut = money_serializer(
    "EnvelopeDisputeFundsOut",
    {
        "dispute": serializers.CharField(help_text="The provider's dispute id (dp_…)."),
        "charge": serializers.CharField(help_text="The disputed charge (ch_…)."),
        "status": serializers.ChoiceField(
            choices=["held", "reinstated", "charged_back"],
            help_text="held: Stripe withdrew the disputed money while the bank reviews the "
            "dispute; reinstated: the dispute was won and the money is back in the envelope; "
            "charged_back: the dispute was lost, the money went back to the buyer's bank.",
        ),
        "updated_at": serializers.DateTimeField(),
    },
    ["held", "charged_back"],
    _HELD,
)

DebitOut = money_serializer(
    "DebitOut",
    {
        "debit_id": serializers.CharField(),
        "reference": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
    },
    ["amount"],
)

RefundSummaryOut = money_serializer(
    "RefundSummaryOut",
    {"refund_id": serializers.CharField(), "status": serializers.CharField()},
    ["requested"],
)

EnvelopeOut = money_serializer(
    "EnvelopeOut",
    {
        "envelope_id": serializers.CharField(),
        "currency": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "funding_legs": FundingLegOut(many=True),
        "debits": DebitOut(many=True),
        "refunds": RefundSummaryOut(many=True),
        "disputes": EnvelopeDisputeFundsOut(
            many=True,
            help_text="The money each dispute on the envelope's charges holds or took, oldest "
            "first: why money is held (only disputes whose funds Stripe withdrew; an inquiry "
            "holds nothing).",
        ),
    },
    BALANCES,
    _HELD,
)

EnvelopeListItemOut = money_serializer(
    "EnvelopeListItemOut",
    {
        "envelope_id": serializers.CharField(),
        "currency": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
    },
    BALANCES,
    _HELD,
)


class EnvelopeListOut(serializers.Serializer):
    results = EnvelopeListItemOut(many=True)
    count = serializers.IntegerField()
    next_offset = serializers.IntegerField(allow_null=True)


class DebitCreatedOut(serializers.Serializer):
    debit_id = serializers.CharField()
    envelope = EnvelopeListItemOut()


class BankReferenceOut(serializers.Serializer):
    """A refund leg's reference at the card network (issue 41 item 9)."""

    status = serializers.ChoiceField(
        choices=["pending", "available", "unavailable", "not_available"],
        help_text="Stripe's `reference_status` (pending, available, unavailable), or "
        "not_available: still pending three weeks after the refund, Vouch stopped asking.",
    )
    reference = serializers.CharField(
        allow_null=True,
        help_text="The acquirer reference number (ARN), e.g. 74987512345678901234567: what the "
        "buyer's bank needs to find the refund. Null until available.",
    )
    reference_type = serializers.CharField(
        allow_null=True, help_text="As Stripe names it, e.g. acquirer_reference_number."
    )
    how_to_use = serializers.CharField(
        help_text='One sentence for the buyer, e.g. "Give your bank this reference (ARN) if the '
        'refund has not reached your statement after 10 business days".'
    )


RefundLegOut = money_serializer(
    "RefundLegOut",
    {
        "leg_id": serializers.CharField(),
        "charge": serializers.CharField(),
        "provider_refund_id": serializers.CharField(allow_null=True),
        "outcome": serializers.ChoiceField(
            choices=["reserved", "accepted", "refused", "unknown", "void"],
            help_text="accepted: Stripe returned a Refund (not proof: see the verdict); "
            "refused: Stripe definitely refused, the money is back; "
            "unknown: no trusted answer yet, the money stays reserved; "
            "void: Stripe never made it, the money is back (a correction two people approved).",
        ),
        "error_code": serializers.CharField(allow_null=True),
        "released": serializers.BooleanField(
            help_text="Its money went back to the unspent balance."
        ),
        "verification_verdict": serializers.CharField(allow_null=True),
        "verification_run": serializers.CharField(allow_null=True),
        "queued": serializers.BooleanField(
            help_text="Stripe's rate limit (25 refunds a second on an account) had no room when "
            "this leg was to be sent: it waits, its money reserved, and Vouch sends it as room "
            "frees, oldest first, under the same idempotency key. False once it is sent."
        ),
        "bank_reference": BankReferenceOut(
            allow_null=True,
            help_text="The refund's reference at the card network (ARN), as Stripe last showed "
            "it, with a sentence on how to use it; null until a verified readback showed it. "
            "Vouch reads it again until Stripe settles it.",
        ),
    },
    ["amount"],
)

RefundOut = money_serializer(
    "RefundOut",
    {
        "refund_id": serializers.CharField(),
        "envelope_id": serializers.CharField(),
        "status": serializers.ChoiceField(
            choices=["refunded", "partially_refunded", "failed", "pending"],
            help_text="What the provider last said of every leg, not proof: refunded (every leg "
            "accepted), partially_refunded (some legs refused or failed later: that money is back "
            "in the envelope), failed (every leg refused or failed later), pending (some leg "
            "unknown). A leg Stripe accepted and later reported failed or canceled counts as "
            "failed (`released`, in `failed_micro`).",
        ),
        "legs": RefundLegOut(many=True),
        "verification_status": serializers.ChoiceField(
            choices=["pending", "verified", "attention", "not_applicable"],
            help_text="pending until every accepted leg is decided; then verified or attention "
            "(a leg not proven, or one Stripe later reported failed or canceled: never verified). "
            "not_applicable: no leg was accepted, so nothing is there to verify.",
        ),
        "balances": BalancesOut(),
        "created_at": serializers.DateTimeField(),
    },
    ["requested", "refunded", "failed", "pending", "remainder"],
)


# What a refund's request asked for (issue 38, item 6): a body with no amount is the documented
# way to ask for everything unspent, so the answer says that is what it was taken to mean.
REQUESTED_AMOUNT = "amount"
REQUESTED_WHOLE_UNSPENT = "whole_unspent"


class RefundCreatedOut(RefundOut):  # type: ignore[misc, valid-type]  # a class money_serializer made
    """The refund just made (or replayed): the refund resource, and what its request asked for."""

    requested = serializers.ChoiceField(
        choices=[REQUESTED_AMOUNT, REQUESTED_WHOLE_UNSPENT],
        help_text="What the request asked for. whole_unspent: the body gave no `amount_micro` (an "
        "empty body, or `{}`), so the refund asked for the whole unspent balance, which "
        "`requested_micro` says; amount: the body's `amount_micro`.",
    )


class RefundListOut(serializers.Serializer):
    results = RefundOut(many=True)


# --- amounts in request bodies: the bounds the services enforce, for the schema ----------------
# Each validates as MicroField (a JSON integer within 64 bits); the service checks the bounds and
# answers `invalid_amount` with a message naming the rule. The schema states the same bounds.


@extend_schema_field(
    {
        "type": "integer",
        "format": "int64",
        "minimum": MIN_FUNDING_MICRO,
        "maximum": MAX_ENVELOPE_MICRO,
        "multipleOf": MICRO_PER_CENT,
    }
)
class FundingMicroField(MicroField):
    """A funding charge: whole cents, at least $1.00; an envelope's funding (this charge and every
    charge not abandoned before it) is at most $5,000.00, else `invalid_amount`."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            MICRO + " A whole number of cents (a multiple of 10,000), at least 1,000,000 ($1.00); "
            "an envelope's funding in all is at most 5,000,000,000 ($5,000.00). Else "
            "`invalid_amount`.",
        )
        super().__init__(**kwargs)


@extend_schema_field(
    {"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ENVELOPE_MICRO}
)
class PositiveMicroField(MicroField):
    """A debit or a refund: any positive number of micro-dollars (a refund rounds each leg down
    to a cent); more than the unspent balance is 422 `amount_exceeds_unspent`. The unspent balance
    is never more than an envelope's funding, at most MAX_ENVELOPE_MICRO: no larger amount can
    succeed, so the schema's maximum says so (the answer to one is that 422)."""


@extend_schema_field(
    {"type": "integer", "format": "int64", "minimum": MICRO_PER_CENT, "maximum": MAX_ENVELOPE_MICRO}
)
class RefundMicroField(MicroField):
    """A refund: at least one cent (10,000 micro), else 400 `invalid_amount`; each leg rounds
    down to a cent, the rest stays in the envelope; more than the unspent balance is 422
    `amount_exceeds_unspent` (the maximum: as PositiveMicroField's)."""


@extend_schema_field({"type": "string", "pattern": "^[uU][sS][dD]$"})
class FundingCurrencyField(StrictCharField):
    """`usd` in any case, the only currency; else `unsupported_currency`."""
