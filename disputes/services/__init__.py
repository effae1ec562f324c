"""Every write on disputes (SPEC §9), one module per concern: `disputes` (recording, the provider's
events, the submission method), `evidence`, `preparation` (versions and edits), `approval`,
`filing` (reserve, call, record; resumed filings) and `verdicts` (the readback decides). The
refusals they share live in `checks`. Callers import the services from here."""

from disputes.models import FILING_CONTRACTS
from disputes.packets import packet_digest
from disputes.services.appeals import APPEALABLE, appeal_edit, appeal_prepare
from disputes.services.approval import PERM_APPROVE, filing_key_proposal, packet_approve
from disputes.services.disputes import (
    MANUAL,
    MAX_DISPUTE_MICRO,
    MICRO_PER_CENT,
    RESPONDABLE,
    dispute_enter,
    dispute_normalize,
    dispute_on_provider_event,
    dispute_record,
    dispute_submit_manually,
    submission_methods_resume,
)
from disputes.services.evidence import EVIDENCE_FILES_DIR, evidence_admit, evidence_file_bytes
from disputes.services.filing import (
    FILED_CONTRACT,
    PERM_FILE,
    PROVIDER_KEY_TTL,
    file_upload_key,
    filings_resume,
    packet_file,
    packet_resume_filing,
)
from disputes.services.preparation import (
    material_for,
    packet_edit,
    packet_prepare,
    packets_catch_up,
)
from disputes.services.verdicts import packet_on_verdict

__all__ = [
    "APPEALABLE",
    "EVIDENCE_FILES_DIR",
    "FILED_CONTRACT",
    "FILING_CONTRACTS",
    "MANUAL",
    "MAX_DISPUTE_MICRO",
    "MICRO_PER_CENT",
    "PERM_APPROVE",
    "PERM_FILE",
    "PROVIDER_KEY_TTL",
    "RESPONDABLE",
    "appeal_edit",
    "appeal_prepare",
    "dispute_enter",
    "dispute_normalize",
    "dispute_on_provider_event",
    "dispute_record",
    "dispute_submit_manually",
    "evidence_admit",
    "evidence_file_bytes",
    "file_upload_key",
    "filing_key_proposal",
    "filings_resume",
    "material_for",
    "packet_approve",
    "packet_digest",
    "packet_edit",
    "packet_file",
    "packet_on_verdict",
    "packet_prepare",
    "packet_resume_filing",
    "packets_catch_up",
    "submission_methods_resume",
]
