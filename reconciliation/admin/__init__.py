"""Reconciliation in the admin (SPEC §15.4, §15.5): runs and the provider pages they read, the
discrepancy queue (open first, by severity, then age, with the time left to each one's target;
CSV export), a discrepancy's page (Vouch's side and the provider's next to each other, the
observations behind it, and its actions), and the adjustments queue: propose a correction from an
escalation, a leg or a discrepancy, and — as a second person with
`reconciliation.approve_adjustment` — approve it after confirming its amount, or reject it.
Views parse, check permission, call one service (`reconciliation.services`,
`envelopes.adjustments`), render; the services' refusals are shown as messages.

One module per model group (`adjustments`, `runs` with their observations, `discrepancies`) and
`shared` for the presentation helpers; importing the package registers them all."""

from core.links import register_id, register_referrer
from reconciliation.admin.adjustments import AdjustmentAdmin, ApproveForm, ProposeForm, RejectForm
from reconciliation.admin.discrepancies import (
    AcceptForm,
    ClassFilter,
    DiscrepancyAdmin,
    DiscrepancyProposeForm,
    TargetFilter,
)
from reconciliation.admin.runs import OBSERVATIONS_SHOWN, ObservationAdmin, RunAdmin
from reconciliation.admin.shared import (
    MOVES,
    RUN_TONES,
    SEVERITY_TONES,
    STATUS_TONES,
    badge,
    dashboard_url,
    provider_id,
    span,
    time_left,
    when,
)
from reconciliation.models import Discrepancy
from verification.models import Escalation

__all__ = [
    "MOVES",
    "OBSERVATIONS_SHOWN",
    "RUN_TONES",
    "SEVERITY_TONES",
    "STATUS_TONES",
    "AcceptForm",
    "AdjustmentAdmin",
    "ApproveForm",
    "ClassFilter",
    "DiscrepancyAdmin",
    "DiscrepancyProposeForm",
    "ObservationAdmin",
    "ProposeForm",
    "RejectForm",
    "RunAdmin",
    "TargetFilter",
    "badge",
    "dashboard_url",
    "provider_id",
    "span",
    "time_left",
    "when",
]


def _discrepancies_of_escalation(escalation: Escalation) -> list[tuple[str, str]]:
    """The discrepancy an escalation was opened for, and the envelope it names."""
    found: list[tuple[str, str]] = []
    for public_id, envelope_id in Discrepancy.objects.filter(escalation=escalation).values_list(
        "public_id", "envelope_public_id"
    ):
        found += [("discrepancy", public_id), ("envelope", envelope_id)]
    return found


register_id("rec_", "reconciliation.Run")
register_id("dsc_", "reconciliation.Discrepancy")
register_id("adj_", "reconciliation.Adjustment")
register_referrer("verification.Escalation", _discrepancies_of_escalation)
