"""The ops staff's view of verification (SPEC §10): runs with the timeline of their attempts and
the evidence each one saw (`runs`), the escalations queue with its Resolve action
(`escalations`), and the provider events received by webhook (`events`).

Everything is read-only, as the engine alone writes runs and events. The one write, Resolve, goes
through `escalation_resolve`, which checks the permission and the note and writes the audit event.
What this package adds is presentation: pretty JSON, labels and colours for people who have never
read the engine's code (`shared`, borrowed by other apps' admin pages)."""

from core.links import register_id
from verification.admin.escalations import EscalationAdmin
from verification.admin.events import ProviderEventAdmin
from verification.admin.runs import VerificationRunAdmin, run_page_context
from verification.admin.shared import (
    VERDICT_TONES,
    compact_json,
    duration,
    pretty_json,
    verdict_html,
    worded,
)

__all__ = [
    "VERDICT_TONES",
    "EscalationAdmin",
    "ProviderEventAdmin",
    "VerificationRunAdmin",
    "compact_json",
    "duration",
    "pretty_json",
    "run_page_context",
    "verdict_html",
    "worded",
]

register_id("vrun_", "verification.VerificationRun")
