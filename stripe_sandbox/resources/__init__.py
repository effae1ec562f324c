"""Stripe's API, the subset Vouch uses, one module per resource. Each handler runs under the
state lock, reads its parameters with Stripe's checks, applies the effect, emits Stripe's events
and answers with the object (or raises a StripeError). Callers import from here."""

from stripe_sandbox.resources.common import Handler, Result, retriever
from stripe_sandbox.resources.dispute_appeals import appeal_open
from stripe_sandbox.resources.disputes import (
    DISPUTE_DUE_S,
    MAX_EVIDENCE_CHARS,
    SUBMISSION_METHODS,
    dispute_close,
    dispute_list,
    dispute_open,
    dispute_retrieve,
    dispute_set_status,
    dispute_smart_submit,
    dispute_update,
)
from stripe_sandbox.resources.events import event_list, event_retrieve
from stripe_sandbox.resources.files import (
    DISPUTE_FILE_TYPES,
    FILE_PURPOSES,
    FILE_TYPES,
    MAX_FILE_BYTES,
    file_create,
    file_list,
    file_retrieve,
)
from stripe_sandbox.resources.payments import (
    MAX_CHARGE,
    MIN_CHARGE,
    charge_list,
    charge_retrieve,
    payment_intent_confirm,
    payment_intent_create,
    payment_intent_retrieve,
    payment_intent_search,
)
from stripe_sandbox.resources.refunds import (
    REFUND_FAILURE_REASONS,
    REFUND_REASONS,
    REFUND_TRANSITIONS,
    refund_cancel,
    refund_create,
    refund_list,
    refund_retrieve,
    refund_set_status,
    refund_status_fields,
    refund_update,
)

__all__ = [
    "DISPUTE_DUE_S",
    "DISPUTE_FILE_TYPES",
    "FILE_PURPOSES",
    "FILE_TYPES",
    "MAX_CHARGE",
    "MAX_EVIDENCE_CHARS",
    "MAX_FILE_BYTES",
    "MIN_CHARGE",
    "REFUND_FAILURE_REASONS",
    "REFUND_REASONS",
    "REFUND_TRANSITIONS",
    "SUBMISSION_METHODS",
    "Handler",
    "Result",
    "appeal_open",
    "charge_list",
    "charge_retrieve",
    "dispute_close",
    "dispute_list",
    "dispute_open",
    "dispute_retrieve",
    "dispute_set_status",
    "dispute_smart_submit",
    "dispute_update",
    "event_list",
    "event_retrieve",
    "file_create",
    "file_list",
    "file_retrieve",
    "payment_intent_confirm",
    "payment_intent_create",
    "payment_intent_retrieve",
    "payment_intent_search",
    "refund_cancel",
    "refund_create",
    "refund_list",
    "refund_retrieve",
    "refund_set_status",
    "refund_status_fields",
    "refund_update",
    "retriever",
]
