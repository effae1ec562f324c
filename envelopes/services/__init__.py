"""Every write on envelopes, one module per concern (STYLE rule 16). Money moves only here, each
movement a journal entry written with the balances in one transaction under the envelope's row
lock (`journal`). The provider is never called inside a transaction or while a lock is held:
reserve and commit, call, then record (atomic phases, with a recovery point so that an interrupted
operation resumes and is never repeated).

- `funding`: an envelope's creation and top-ups, their recording and lookup;
- `provider_events`: the provider's events about payments and refunded charges;
- `debits`: unspent money committed to delivered work;
- `allocation`: how a refund is shared across the funding legs;
- `refunds`: reserve, send and record a refund's legs;
- `releases`: the one release service, and what leads to it (verdicts, provider events);
- `resume`: the scheduled resumption of legs left without an answer;
- `refund_references`: a refund's reference at the card network (its ARN), followed until known;
- `dispute_funds`: the money a chargeback holds, gives back or takes (SPEC §18).

The names callers use are re-exported here: `from envelopes.services import X` keeps working."""

from envelopes.services.allocation import RefundAllocation, allocate_lifo, refund_allocate
from envelopes.services.debits import debit_add
from envelopes.services.dispute_funds import dispute_funds_follow, dispute_moved
from envelopes.services.funding import (
    CHARGE_CONTRACT,
    FUNDING_REFUSALS,
    MAX_ENVELOPE_MICRO,
    MIN_FUNDING_MICRO,
    FundingResult,
    charge_run_start,
    envelope_create,
    envelope_top_up,
    funding_leg_find,
    funding_record,
    funding_send,
)
from envelopes.services.journal import PROVIDER_KEY_TTL, _provider
from envelopes.services.provider_events import (
    charge_on_refunded_event,
    funding_on_provider_event,
    refund_event_needs_no_read,
)
from envelopes.services.refund_references import (
    refund_leg_reference_on_verdict,
    refund_leg_reference_record,
    refund_references_follow_up,
)
from envelopes.services.refunds import (
    REFUND_CONTRACT,
    envelope_refund,
    refund_leg_find,
    refund_leg_record,
    refund_leg_send,
    refund_send,
)
from envelopes.services.releases import (
    foreign_refund_release,
    refund_leg_on_provider_event,
    refund_leg_on_verdict,
    refund_leg_release,
)
from envelopes.services.resume import stranded_resume
from envelopes.services.waiting import waiting_count, waiting_send

__all__ = [
    "CHARGE_CONTRACT",
    "FUNDING_REFUSALS",
    "MAX_ENVELOPE_MICRO",
    "MIN_FUNDING_MICRO",
    "PROVIDER_KEY_TTL",
    "REFUND_CONTRACT",
    "FundingResult",
    "RefundAllocation",
    "_provider",
    "allocate_lifo",
    "charge_on_refunded_event",
    "charge_run_start",
    "debit_add",
    "dispute_funds_follow",
    "dispute_moved",
    "envelope_create",
    "envelope_refund",
    "envelope_top_up",
    "foreign_refund_release",
    "funding_leg_find",
    "funding_on_provider_event",
    "funding_record",
    "funding_send",
    "refund_allocate",
    "refund_event_needs_no_read",
    "refund_leg_find",
    "refund_leg_on_provider_event",
    "refund_leg_on_verdict",
    "refund_leg_record",
    "refund_leg_reference_on_verdict",
    "refund_leg_reference_record",
    "refund_leg_release",
    "refund_leg_send",
    "refund_references_follow_up",
    "refund_send",
    "stranded_resume",
    "waiting_count",
    "waiting_send",
]
