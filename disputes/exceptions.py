"""Refusals of the disputes app. Each code is stable: the API, the admin and tests rely on it."""

from typing import ClassVar

from core.exceptions import VouchError


class EvidenceRefused(VouchError):
    """Evidence that breaks an admission rule (SPEC §9 step 4); the code names the rule."""

    code: ClassVar[str] = "evidence_refused"
    status_code = 400
    default_message = "The evidence was refused."


class EvidenceUnknownField(EvidenceRefused):
    code = "evidence_unknown_field"
    default_message = "Evidence is admitted only as {ref, sha256, kind, summary}."


class EvidenceMissingField(EvidenceRefused):
    code = "evidence_missing_field"
    default_message = "Evidence needs ref, sha256, kind and summary."


class EvidenceInvalidRef(EvidenceRefused):
    code = "evidence_invalid_ref"
    default_message = "ref must be 1-200 printable characters without spaces, quotes or braces."


class EvidenceInvalidSha256(EvidenceRefused):
    code = "evidence_invalid_sha256"
    default_message = "sha256 must be 64 lowercase hexadecimal characters."


class EvidenceInvalidKind(EvidenceRefused):
    code = "evidence_invalid_kind"
    default_message = "kind must be delivery, consent, communication, policy or other."


class EvidenceTooLong(EvidenceRefused):
    code = "evidence_too_long"
    default_message = "summary must be 1-500 characters."


class EvidenceRawPayload(EvidenceRefused):
    code = "evidence_raw_payload"
    default_message = (
        "Raw payloads are not admitted: send a reference, its SHA-256 and a short summary."
    )


class EvidenceCredential(EvidenceRefused):
    code = "evidence_credential"
    default_message = "The evidence looks like it contains a credential; it was not admitted."


class EvidenceCardNumber(EvidenceRefused):
    code = "evidence_card_number"
    default_message = "The evidence looks like it contains a card number; it was not admitted."


class EvidenceRefConflict(EvidenceRefused):
    code = "evidence_ref_conflict"
    status_code = 409
    default_message = "This ref is already admitted to the dispute with other content."


class EvidenceFileRefused(EvidenceRefused):
    code = "evidence_file_refused"
    default_message = "The evidence file was refused."


class EvidenceFileType(EvidenceFileRefused):
    code = "evidence_file_type"
    default_message = "An evidence file is a PDF, PNG or JPEG (by its name and by its content)."


class EvidenceFileTooLarge(EvidenceFileRefused):
    code = "evidence_file_too_large"
    default_message = "The evidence file is larger than a packet's files may be together."


class EvidenceSha256Mismatch(EvidenceRefused):
    code = "evidence_sha256_mismatch"
    default_message = "The SHA-256 given is not the file's: leave it empty, Vouch computes it."


class EvidenceFileMissing(VouchError):
    code = "evidence_file_missing"
    status_code = 409
    default_message = (
        "An evidence file the packet cites is missing from storage or no longer matches its "
        "SHA-256: nothing was filed."
    )


class PacketOverLimit(VouchError):
    code = "packet_over_limit"
    status_code = 409
    default_message = (
        "The packet's evidence is over the provider's limits (text, one field, or files): "
        "shorten it before it is approved."
    )


class ReceiptDetailRefused(VouchError):
    code = "receipt_detail_refused"
    status_code = 400
    default_message = (
        "Receipts are resolved from Vouch's own history; caller-supplied receipt rows, ids or "
        "summaries are not accepted."
    )


class PacketNotApproved(VouchError):
    code = "packet_not_approved"
    status_code = 409
    default_message = "The packet is not approved."


class PacketIncomplete(VouchError):
    code = "packet_incomplete"
    status_code = 422
    default_message = "The packet is not complete enough to approve or file."


class PacketInvalid(VouchError):
    code = "packet_invalid"
    status_code = 422
    default_message = "The packet failed validation, or its posture is not one that is filed."


class PacketAlreadyFiled(VouchError):
    code = "packet_already_filed"
    status_code = 409
    default_message = "A response to this dispute is already filed or being filed."


class PacketDrifted(VouchError):
    code = "packet_drifted"
    status_code = 409
    default_message = "The packet changed since it was approved or shown: review it again."


class FilingKeyConflict(VouchError):
    code = "idempotency_key_conflict"
    status_code = 422
    default_message = "Another idempotency key is already bound to this filing."


class ApproverIsContributor(VouchError):
    code = "approver_is_contributor"
    status_code = 403
    default_message = "You contributed to this version of the packet: another person must approve."


class UnsupportedCurrency(VouchError):
    code = "unsupported_currency"
    status_code = 400
    default_message = "Only USD is supported."


class DisputeAlreadyRecorded(VouchError):
    code = "dispute_already_recorded"
    status_code = 409
    default_message = "This provider dispute is already recorded; prepare its packet again instead."


class PacketFilingUnderway(VouchError):
    code = "packet_filing_underway"
    status_code = 409
    default_message = "A filing of this dispute's packet is under way: its readback decides."


class PacketReadbackFailed(VouchError):
    code = "packet_readback_failed"
    status_code = 409
    default_message = (
        "The readback of this dispute's filing did not prove it filed, and the provider shows "
        "evidence submitted: a person must resolve it before anything else is filed."
    )


class PacketNotSubmitted(VouchError):
    code = "packet_not_submitted"
    status_code = 409
    default_message = (
        "This version's filing did not reach the provider (its readback shows nothing "
        "submitted): prepare a new version, have it approved and file that."
    )


class FeeNotAcknowledged(VouchError):
    code = "fee_not_acknowledged"
    status_code = 422
    default_message = (
        "Contesting a Visa or Mastercard compliance dispute costs the card network's fee: the "
        "approver must acknowledge it with the approval, and only then is the packet filed."
    )


class AppealNotPossible(VouchError):
    code = "appeal_not_possible"
    status_code = 409
    default_message = (
        "An appeal follows a filed response to a lost dispute: this dispute has none to appeal."
    )


class AppealStageClosed(VouchError):
    code = "appeal_stage_closed"
    status_code = 409
    default_message = (
        "The provider does not show this dispute awaiting an appeal (appeal_needs_response): "
        "nothing was sent."
    )


class AppealNotEditable(VouchError):
    code = "appeal_not_editable"
    status_code = 400
    default_message = "An appeal's summary (its reason for filing) is the only part a person edits."


class DisputeResponseNotAllowed(VouchError):
    code = "dispute_response_not_allowed"
    status_code = 409
    default_message = (
        "No response allowed (the card network allows none): the provider shows this dispute's "
        "evidence_details.due_by as 0. Nothing was prepared, approved or sent."
    )


class PacketFactsChanged(VouchError):
    """A fact an approved packet rests on changed since its approval (SPEC §18): the approval is
    void, the packet is prepared again as a new version, and nothing is sent. A state change (the
    new version), so the answer is kept under the filing request's idempotency key."""

    code = "packet_facts_changed"
    status_code = 409
    stores_idempotent_response = True
    default_message = (
        "A fact this packet rests on changed since it was approved: it was prepared again as a "
        "new version, which needs a new approval. Nothing was sent to the provider."
    )


class DisputeMismatch(VouchError):
    """A dispute typed by staff disagrees with the provider's (SPEC §18): `details.fields` names
    each field typed against what the provider shows. Nothing is recorded."""

    code = "dispute_mismatch"
    status_code = 409
    default_message = (
        "What was typed disagrees with the dispute as the provider shows it: nothing was recorded."
    )


class DisputeNotAtProvider(VouchError):
    code = "dispute_not_at_provider"
    status_code = 404
    default_message = (
        "The provider does not hold a dispute with this id (check the dp_… id): nothing was "
        "recorded."
    )


class DisputeReadUnavailable(VouchError):
    """The provider's dispute could not be read (no answer, a server error): nothing is recorded
    or sent on a guess. Retrying is safe."""

    code = "dispute_read_unavailable"
    status_code = 503
    default_message = (
        "The provider's dispute could not be read just now: nothing was recorded or sent. Try "
        "again."
    )
