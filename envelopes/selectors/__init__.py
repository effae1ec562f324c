"""Reads on envelopes, one module per concern (STYLE rule 16): what the API shows (`data`), the
ledger check (`ledger`), what a run is about, what is stuck and the admin's lists (`lists`), one
timeline per envelope (`timeline`). `from envelopes.selectors import X` keeps working."""

from envelopes.selectors.buyer import (
    buyer_envelope_page,
    buyer_envelopes_page,
    buyer_refund_preview,
)
from envelopes.selectors.data import (
    balances,
    envelope_data,
    envelope_get_owned,
    envelopes_of,
    failed_later,
    held_note,
    refund_data,
    refund_get_owned,
    refund_preview,
    refund_status,
    refund_summary,
    verification_status,
)
from envelopes.selectors.ledger import Breach, ledger_breaches
from envelopes.selectors.lists import (
    dispute_funds_of,
    envelopes_with_amount,
    envelopes_with_pending_funding,
    funding_legs_stuck,
    refund_legs_stuck,
    refunds_with_amount,
    stuck_before,
    subject_of_run,
)
from envelopes.selectors.timeline import TimelineItem, envelope_timeline

__all__ = [
    "Breach",
    "TimelineItem",
    "balances",
    "buyer_envelope_page",
    "buyer_envelopes_page",
    "buyer_refund_preview",
    "dispute_funds_of",
    "envelope_data",
    "envelope_get_owned",
    "envelope_timeline",
    "envelopes_of",
    "envelopes_with_amount",
    "envelopes_with_pending_funding",
    "failed_later",
    "funding_legs_stuck",
    "held_note",
    "ledger_breaches",
    "refund_data",
    "refund_get_owned",
    "refund_legs_stuck",
    "refund_preview",
    "refund_status",
    "refund_summary",
    "refunds_with_amount",
    "stuck_before",
    "subject_of_run",
    "verification_status",
]
