"""The ops staff's view of disputes (SPEC §10): disputes deadline first with their current
packet's state, each dispute with its evidence and packet versions, and the packet review page
with its four acts: Approve, File, Edit, Prepare again.

Nothing here is edited through a generic form: every act is a POST of its own, checked for its
permission before anything is looked up, and calls one service (`disputes.services`), which is the
judge; a refusal is shown with its stable code. What this module adds is presentation: links to
receipts, evidence and verification runs, the digest being acted on, and wording that never claims
more than the readback proved (a filed packet is `filed (readback verified)`, nothing more).

One module per model group: `disputes` (the dispute list and page), `evidence`, `packets` (the
review page's acts), with what they share in `common` and the review page's and timeline's context
in `review`. Importing this package registers the three admins; what the others
share is imported from its own module."""

from core.links import register_id
from disputes.admin.disputes import DisputeAdmin
from disputes.admin.evidence import EvidenceAdmin
from disputes.admin.packets import PacketAdmin

__all__ = ["DisputeAdmin", "EvidenceAdmin", "PacketAdmin"]

register_id("dsp_", "disputes.Dispute")
register_id("pkt_", "disputes.Packet")
register_id("evd_", "disputes.Evidence")
