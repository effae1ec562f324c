"""What the generated types cannot say, each with the Stripe page that says it. Small on purpose:
a row here is a fact about Stripe the SDK's types do not carry, never a copy of what they do."""

from __future__ import annotations

ERROR_CODES_SOURCE = "https://docs.stripe.com/error-codes"

# Parameters Stripe removed at the pinned API version: the generated Params type no longer has
# them, and Stripe answers them with their own error (not parameter_unknown). Keyed by the SDK
# operation (`Service.method`), checked before the unknown-parameter rule.
_PMT_SOURCE = (
    "https://docs.stripe.com/changelog/endive/2026-09-30/"
    "removes-the-payment-method-types-parameter-from-payment-intents-and-setup-intents"
)
_PMT = {
    "payment_method_types": (
        "payment_method_types_no_longer_supported",
        "The `payment_method_types` parameter is no longer supported on this API version. Use "
        "dynamic payment methods, `excluded_payment_method_types` or "
        "`allowed_payment_method_types` instead.",
        _PMT_SOURCE,
    )
}
REMOVED_PARAMS: dict[str, dict[str, tuple[str, str, str]]] = {
    "PaymentIntentService.create": _PMT,
    "PaymentIntentService.update": _PMT,
    "PaymentIntentService.confirm": _PMT,
    "SetupIntentService.create": _PMT,
    "SetupIntentService.update": _PMT,
}

# Fields Stripe includes only when the request expands them ("includable"): absent otherwise,
# even where Stripe's fixture (which lags) still shows them.
INCLUDABLE: dict[tuple[str, str], str] = {
    ("charge", "refunds"): (
        "https://docs.stripe.com/changelog/2022-11-15/deprecates-charges-auto-expand"
    ),
}

# The SDK's ListObject and SearchResultObject are written by hand, not generated, and declare
# less than Stripe answers: the fields of a page as Stripe's API reference shows them, beyond
# what the SDK class declares. name -> (type, required), types as in the SDK ("str", "int", …).
COLLECTION_FIELDS: dict[str, dict[str, tuple[str, bool]]] = {
    "list": {"object": ("str", True)},
    "search_result": {
        "object": ("str", True),
        "url": ("str", True),
        "next_page": ("str|null", True),  # null on the last page
        "total_count": ("int", False),  # only with expand[]=total_count
    },
}
COLLECTION_SOURCES = {
    "list": "https://docs.stripe.com/api/pagination",
    "search_result": "https://docs.stripe.com/api/pagination/search",
}

# Declared fields a served resource does not return, and why (shown in the fidelity report). A
# gap without a row here (or the rule of type_specific_fields) is a defect.
_PRESENTMENT = (
    "only when Adaptive Pricing presented the payment in another currency, which a server-side "
    "USD card payment never is: https://docs.stripe.com/payments/checkout/adaptive-pricing"
)
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("event", "account"): (
        "only on an event of a connected account (Connect, which Vouch does not use): "
        "https://docs.stripe.com/changelog/2017-05-25/events-connect-specify-originating-account"
    ),
    ("event", "context"): (
        "only on an event fetched in another account's authentication context (Stripe-Context, "
        "organizations and Connect): https://docs.stripe.com/context"
    ),
    ("charge", "authorization_code"): (
        "internal and not usually returned (https://github.com/stripe/stripe-go/pull/669); a "
        "card charge shows its code in payment_method_details.card.authorization_code, which the "
        "sandbox returns: "
        "https://docs.stripe.com/changelog/acacia/2024-09-30/displays-authorization-code-for-charges"
    ),
    ("charge", "level3"): (
        "only on a charge made with Level III data (the Charges API's level3 parameter, which a "
        "PaymentIntent never sends): https://docs.stripe.com/api/charges/object"
    ),
    ("charge", "presentment_details"): _PRESENTMENT,
    ("charge", "radar_options"): (
        "only when the payment carried a Radar session: https://docs.stripe.com/radar/radar-session"
    ),
    ("payment_method", "radar_options"): (
        "only when the payment method was created with a Radar session: "
        "https://docs.stripe.com/radar/radar-session"
    ),
    ("charge", "transfer"): (
        "only on a destination charge (Connect), as the SDK's docstring says: "
        "https://docs.stripe.com/connect/destination-charges"
    ),
    ("payment_intent", "hooks"): (
        "only when the PaymentIntent was created with hooks inputs: "
        "https://docs.stripe.com/api/payment_intents/object"
    ),
    ("payment_intent", "payment_details"): (
        "only when the PaymentIntent was created with payment_details (customer and order "
        "references): https://docs.stripe.com/api/payment_intents/object"
    ),
    ("payment_intent", "payment_record"): (
        "only when the PaymentIntent created a Payment Record: "
        "https://docs.stripe.com/api/payment-record"
    ),
    ("payment_intent", "presentment_details"): _PRESENTMENT,
    ("refund", "description"): (
        "available on non-card refunds only, as the SDK's docstring says: "
        "https://docs.stripe.com/api/refunds/object"
    ),
    ("refund", "instructions_email"): (
        "only for payment methods without native refund support (Konbini, PromptPay), as the "
        "SDK's docstring says: https://docs.stripe.com/api/refunds/object"
    ),
    ("refund", "presentment_details"): _PRESENTMENT,
}
