"""Writes of the verification engine, one module per concern: starting a run (`runs`), attempts
on it (`attempts`: claim, observe, decide, record, route the verdict), escalations
(`escalations`) and provider events (`provider_events`: store, process, give up, prune). The
provider is read outside any transaction or lock. Callers import from here."""

from verification.services.attempts import (
    observe,
    run_attempt,
    run_claim_for_event,
    runs_claim_due,
    runs_claim_monitor_due,
    runs_claim_monitor_within,
    runs_claim_within,
)
from verification.services.escalations import (
    OPS_GROUP,
    EscalationNeedsAdjustment,
    escalation_clear,
    escalation_held_by,
    escalation_holder_register,
    escalation_open,
    escalation_resolve,
)
from verification.services.provider_events import (
    EVENT_FAILED,
    InvalidProviderEvent,
    provider_event_process,
    provider_event_store,
    provider_events_prune,
)
from verification.services.runs import (
    PreparedRun,
    run_context,
    verification_prepare,
    verification_start,
)

__all__ = [
    "EVENT_FAILED",
    "OPS_GROUP",
    "EscalationNeedsAdjustment",
    "InvalidProviderEvent",
    "PreparedRun",
    "escalation_clear",
    "escalation_held_by",
    "escalation_holder_register",
    "escalation_open",
    "escalation_resolve",
    "observe",
    "provider_event_process",
    "provider_event_store",
    "provider_events_prune",
    "run_attempt",
    "run_claim_for_event",
    "run_context",
    "runs_claim_due",
    "runs_claim_monitor_due",
    "runs_claim_monitor_within",
    "runs_claim_within",
    "verification_prepare",
    "verification_start",
]
