"""Filing an approved packet: the provider is called once per filing key, outside any transaction or
lock (reserve the filing and commit, call, record), and only the independent readback run makes a
packet `filed` (`disputes.services.verdicts`). A filing whose answer was lost is resumed with the
same keys."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.crash import crash_point
from core.exceptions import InvalidInput, PermissionDenied
from core.transitions import transition
from disputes import exceptions as errors
from disputes.models import (
    APPEAL_CONTRACT,
    CE3_CONTRACT,
    FILEABLE_POSTURES,
    FILED_CONTRACT,
    PACKET_FILING,
    ApprovalStatus,
    Dispute,
    Evidence,
    FilingStatus,
    Packet,
    PacketKind,
    ProviderStatus,
)
from disputes.packets import (
    canonical_digest,
    ce3_claimed,
    evidence_with_file_ids,
    fee_acknowledgement_needed,
    file_placeholders,
    filing_request,
    packet_digest,
)
from disputes.selectors import not_filed_text
from disputes.services import checks
from disputes.services.evidence import evidence_file_bytes
from disputes.services.facts import _facts_void, ledger_facts, provider_facts
from disputes.services.verdicts import packet_on_verdict
from providers import IDEMPOTENCY_KEY_TTL, Outcome, OutcomeKind, provider_from_settings
from verification.models import Verdict
from verification.services import verification_start

if TYPE_CHECKING:
    from accounts.models import User

APPEAL_STAGE = "appeal_needs_response"
PROVIDER_KEY_TTL = IDEMPOTENCY_KEY_TTL
PERM_FILE = "disputes.file_packet"


def packet_file(
    *, packet: Packet, actor: User, confirmed_digest: str, idempotency_key: str
) -> Packet:
    """File exactly the approved packet: reserve (refusals first), call the provider's narrow
    `dispute.file` outside any transaction with the filing's one key, record what it answered, and
    start the readback run that alone can make the packet `filed`. Pressing File again on a filing
    under way with its key repeats it by the resume job's rule (`_send_again`). A dispute the card
    network allows no response to is refused before anything is read or sent
    (`dispute_response_not_allowed`). The facts a response rests on are read again first
    (`provider_facts`, `ledger_facts`): one that changed since the approval voids it — the packet
    is prepared again as a new version and nothing is sent (`packet_facts_changed`, SPEC §18)."""
    if not actor.has_perm(PERM_FILE):
        raise PermissionDenied(f"This needs the permission {PERM_FILE}.")
    key = idempotency_key.strip()
    if not key or len(key) > 255 or not key.isprintable():
        raise InvalidInput("The filing key is 1-255 printable characters.")
    if packet.filing_status == FilingStatus.NOT_FILED:  # a new filing; a repeat sends its own
        checks.refuse_if_no_response_allowed(Dispute.objects.get(pk=packet.dispute_id))
    _check_files_stored(packet)
    stage = _appeal_stage_read(packet)
    seen = provider_facts(packet)
    try:
        reserved, underway = _reserve(
            packet=packet,
            actor=actor,
            confirmed_digest=confirmed_digest,
            key=key,
            stage=stage,
            provider_changes=seen,
        )
    except errors.PacketFactsChanged as changed:
        raise _facts_void(packet, actor=actor, changes=changed.details["changed"]) from None
    if underway:
        return _send_again(reserved)
    return _send_filing(reserved)


def _reserve_filing(*, packet: Packet, actor: User, confirmed_digest: str, key: str) -> Packet:
    """Phase 1: every refusal, then bind the key to this filing and commit (the recovery point)."""
    return _reserve(packet=packet, actor=actor, confirmed_digest=confirmed_digest, key=key)[0]


def _appeal_stage_read(packet: Packet) -> dict[str, Any] | None:
    """An appeal is filed only in the appeal stage, as the provider shows it now (not as Vouch
    last recorded it): one `dispute.read` before anything is reserved, outside any transaction,
    cited in the filing's audit row. Refused, with what the read showed, when the provider does
    not answer or shows another stage. None for a response, or a filing already under way (its
    repeat sends the same request; its readback decides)."""
    if packet.kind != PacketKind.APPEAL or packet.filing_status != FilingStatus.NOT_FILED:
        return None
    read = provider_from_settings().dispute_read(packet.dispute.provider_dispute_id)
    if not read.accepted:
        raise errors.AppealStageClosed(
            "The provider could not be read, so the appeal stage is not shown: nothing was "
            "sent. Try again.",
            details={"read": read.error_code or "unknown", "request_id": read.request_id},
        )
    status = str(read.require().get("status") or "")
    seen = {"status": status, "request_id": read.request_id, "read_at": timezone.now().isoformat()}
    if status != APPEAL_STAGE:
        raise errors.AppealStageClosed(
            f"The provider shows this dispute {status or 'without a status'}, not awaiting an "
            f"appeal ({APPEAL_STAGE}): nothing was sent.",
            details={"provider_read": seen},
        )
    return seen


def _reserve(
    *,
    packet: Packet,
    actor: User,
    confirmed_digest: str,
    key: str,
    stage: dict[str, Any] | None = None,
    provider_changes: list[dict[str, str]] | None = None,
) -> tuple[Packet, bool]:
    """`_reserve_filing`, saying also whether the filing was under way before this call (a
    repeat of it with its own key) rather than reserved by it."""
    with transaction.atomic():
        locked = checks.lock_packet(packet)
        if locked.filing_status in checks.UNDERWAY and locked.filing_key == key:
            return locked, True  # a repeat of this filing: its key, its one rule (_send_again)
        if locked.filing_status in checks.UNDERWAY:
            raise errors.FilingKeyConflict(details={"filing_key": locked.filing_key})
        if locked.filing_status != FilingStatus.NOT_FILED:
            raise checks.filing_refusal(locked)
        checks.refuse_superseded(locked)
        checks.refuse_if_no_response_allowed(locked.dispute)  # as last read, under the lock
        if locked.approval_status != ApprovalStatus.APPROVED:
            raise errors.PacketNotApproved()
        if fee_acknowledgement_needed(locked) and not locked.fee_acknowledged:
            raise errors.FeeNotAcknowledged()
        checks.check_fileable_content(locked)
        if locked.posture not in FILEABLE_POSTURES:
            raise errors.PacketInvalid(
                not_filed_text(locked.posture),
                details={"posture": locked.posture},
            )
        checks.check_budget(locked)  # the limits may have been lowered since the approval
        if packet_digest(locked) != locked.approved_digest or locked.digest != (
            locked.approved_digest
        ):
            raise errors.PacketDrifted(
                details={"approved": locked.approved_digest, "current": packet_digest(locked)}
            )
        checks.check_confirmed(locked, confirmed_digest)
        changes = [*(provider_changes or []), *ledger_facts(locked)]
        if changes:  # the caller voids the approval, in its own transaction (`_facts_void`)
            raise errors.PacketFactsChanged(details={"changed": changes})
        nested = (locked.handoff.get("options") or {}).get("idempotency_key")
        if nested is not None and nested != key:
            raise errors.FilingKeyConflict(
                "The packet carries another idempotency key than the one given for this filing.",
                details={"nested": "idempotency_key"},
            )
        checks.refuse_if_filing(locked.dispute, locked.kind)
        request = _request_of(locked)
        now = timezone.now()
        try:
            with transaction.atomic():
                transition(
                    locked,
                    machine=PACKET_FILING,
                    to=FilingStatus.SUBMITTING,
                    actor=actor,
                    action="packet.file",
                    also={
                        "filing_key": key,
                        "filing_request_digest": canonical_digest(request),
                        "filed_by": actor,
                        "filing_started_at": now,
                        "filing_files": {},
                        "updated_at": now,
                    },
                    details={"digest": locked.approved_digest, "filing_key": key}
                    | ({"provider_read": stage} if stage is not None else {}),
                )
        except IntegrityError as exc:  # the key, or the dispute, is bound to another filing
            raise errors.FilingKeyConflict(details={"filing_key": key}) from exc
    return locked, False


def filing_contract(packet: Packet) -> str:
    """The readback contract of a packet's filing: an appeal's, a response carrying Visa CE 3.0
    (the qualification must show), or a plain response's."""
    if packet.kind == PacketKind.APPEAL:
        return APPEAL_CONTRACT
    return CE3_CONTRACT if ce3_claimed(packet) else FILED_CONTRACT


def _request_of(packet: Packet) -> dict[str, Any]:
    """The approved filing request of a packet whose posture is filed."""
    request = filing_request(packet, digest=packet.approved_digest)
    if request is None:
        raise errors.PacketInvalid(
            not_filed_text(packet.posture),
            details={"posture": packet.posture},
        )
    return request


def _cited_files(packet: Packet) -> dict[str, Evidence]:
    """The dispute's evidence rows of the files the packet's request sends, by SHA-256."""
    request = filing_request(packet, digest=packet.approved_digest or packet.digest)
    wanted = {
        slot["ref"]: slot["sha256"]
        for slot in file_placeholders(request["evidence"] if request else {}).values()
    }
    rows = Evidence.objects.filter(dispute_id=packet.dispute_id, ref__in=wanted)
    return {row.sha256: row for row in rows if wanted.get(row.ref) == row.sha256}


def _check_files_stored(packet: Packet) -> None:
    """Before anything is reserved: every file the request sends is in storage, with the bytes
    whose SHA-256 was admitted (and approved)."""
    request = filing_request(packet, digest=packet.approved_digest or packet.digest)
    if request is None:
        return  # not fileable: the reservation refuses it with its own code
    rows = _cited_files(packet)
    for slot in file_placeholders(request["evidence"]).values():
        row = rows.get(slot["sha256"])
        if row is None or evidence_file_bytes(row) is None:
            raise errors.EvidenceFileMissing(details={"ref": slot["ref"], "sha256": slot["sha256"]})


def file_upload_key(packet: Packet, sha256: str) -> str:
    """The idempotency key of one file's upload for one filing: derived from the packet, the
    filing's key and the file's SHA-256, so a retry or a resumed filing replays the same upload."""
    filing = hashlib.sha256(packet.filing_key.encode()).hexdigest()[:16]
    return f"{packet.public_id}:file:{sha256[:16]}:{filing}"


def _send_filing(packet: Packet, *, again: bool = False) -> Packet:
    """Phase 2, outside any transaction or lock: upload each file the request sends (Stripe's
    Files API, one key per file), then the dispute update with the provider's file ids in place of
    the SHA-256 placeholders, then record. An upload refused: the dispute was not updated by this
    send, but the filing is held for its readback like any refusal (`_record_filing`). An upload
    without an answer: the filing stays `submitting` and the scheduled job resumes it with the same
    keys (the provider replays). A file gone from storage: recorded as unknown, and the readback
    decides (a resumed filing may have been sent already)."""
    request = _request_of(packet)
    provider = provider_from_settings()
    rows = _cited_files(packet)
    file_ids: dict[str, str] = {}
    for slot in file_placeholders(request["evidence"]).values():
        sha256 = slot["sha256"]
        if sha256 in file_ids:
            continue
        row = rows.get(sha256)
        content = evidence_file_bytes(row) if row is not None else None
        if content is None:
            return _record_filing(
                packet=packet,
                outcome=Outcome(OutcomeKind.UNKNOWN, error_code="evidence_file_missing"),
            )
        upload = provider.file_upload(
            filename=str(slot["name"]),
            content=content,
            idempotency_key=file_upload_key(packet, sha256),
        )
        if upload.refused:
            return _record_filing(
                packet=packet,
                outcome=_repeat_refusal(
                    replace(upload, error_code=f"file_upload:{upload.error_code}"), again=again
                ),
            )
        if not upload.accepted:
            return _record_upload_unknown(packet=packet, outcome=upload)
        file_ids[sha256] = str(upload.require()["id"])
    if file_ids:
        Packet.objects.filter(pk=packet.pk).update(filing_files=file_ids, updated_at=timezone.now())
        packet.filing_files = file_ids
    crash_point("filing_after_file_uploads")
    outcome = provider.dispute_file(
        dispute_id=request["dispute_id"],
        evidence=evidence_with_file_ids(request["evidence"], file_ids),
        metadata=request["metadata"],
        idempotency_key=packet.filing_key,
    )
    crash_point("filing_after_provider_call")
    return _record_filing(packet=packet, outcome=_repeat_refusal(outcome, again=again))


def _repeat_refusal(outcome: Outcome, *, again: bool) -> Outcome:
    """A refusal of a filing's repeated send says nothing of its earlier send (Stripe refuses a
    second submission, and a forgotten key is not replayed): unknown, the readback decides."""
    if not (again and outcome.refused):
        return outcome
    return replace(
        outcome,
        kind=OutcomeKind.UNKNOWN,
        value=None,
        error_code=f"refused_on_resume:{outcome.error_code or 'refused'}",
    )


def _send_again(packet: Packet) -> Packet:
    """The one rule for sending a filing that was under way before this call — the resume job, or
    a person pressing File again with the filing's key. Past the key's life the provider may have
    forgotten it, so a repeat would not be replayed: nothing is sent, the outcome is unknown
    (`key_expired`) and the readback decides. Within it, the same keys are sent again (the
    provider replays), and a refusal is unknown, not "nothing was filed" (`_repeat_refusal`).
    Either way the approval cannot send the packet again until the readback has decided: a
    filing whose send the provider refused is not sent again at all (its readback decides)."""
    if (
        packet.filing_status == FilingStatus.AWAITING_READBACK
        and packet.provider_status == ProviderStatus.REFUSED
    ):
        return packet
    started = packet.filing_started_at or packet.updated_at
    if timezone.now() - started > PROVIDER_KEY_TTL:
        return _record_filing(
            packet=packet, outcome=Outcome(OutcomeKind.UNKNOWN, error_code="key_expired")
        )
    return _send_filing(packet, again=True)


def _record_upload_unknown(*, packet: Packet, outcome: Outcome) -> Packet:
    """A file's upload got no answer: the filing stays `submitting` (nothing was sent to the
    dispute), the resume job repeats it with the same keys."""
    with transaction.atomic():
        locked = checks.lock_packet(packet)
        if locked.filing_status != FilingStatus.SUBMITTING:
            return locked
        code = f"file_upload:{outcome.error_code or 'unknown'}"[:100]
        transition(
            locked,
            machine=PACKET_FILING,
            to=FilingStatus.SUBMITTING,
            action="packet.file_upload_unknown",
            also={
                "provider_status": ProviderStatus.UNKNOWN,
                "filing_error": code,
                "updated_at": timezone.now(),
            },
            details={"filing_key": locked.filing_key, "code": code},
        )
    return locked


def _record_filing(*, packet: Packet, outcome: Any) -> Packet:
    """Phase 3: keep only the filing reference, dispute id, request digest and status, and start
    the readback run, which alone decides. Accepted, unknown or refused alike: a refusal (a first
    send's; a repeated send's is unknown, `_repeat_refusal`) is recorded with its code, but it is
    not taken for "nothing was filed" — the filing stays held, its key kept and nothing sent again
    (`_send_again`), until the readback shows what the provider holds (`packet_on_verdict`)."""
    with transaction.atomic():
        locked = checks.lock_packet(packet)
        if locked.filing_status != FilingStatus.SUBMITTING:
            return locked  # recorded already (a retry answered after the first)
        answer = outcome.value if outcome.accepted else {}
        projection = {
            "id": str((answer or {}).get("id") or locked.dispute.provider_dispute_id),
            "status": str((answer or {}).get("status") or ""),
        }
        run = verification_start(
            contract_id=filing_contract(locked),
            operation_id=locked.filing_key,
            operation_created_at=locked.filing_started_at or timezone.now(),
            input={
                "dispute": locked.dispute.provider_dispute_id,
                "packet_digest": locked.approved_digest,
                # The charge the packet answers for: the readback checks the dispute is on it.
                "charge": locked.dispute.charge_id,
            },
            action_result=projection,
        )
        provider_status = (
            ProviderStatus.ANSWERED
            if outcome.accepted
            else ProviderStatus.REFUSED
            if outcome.refused
            else ProviderStatus.UNKNOWN
        )
        error = (
            ""
            if outcome.accepted
            else str(outcome.error_code or ("refused" if outcome.refused else "unknown"))[:100]
        )
        reference = str(outcome.request_id or "")[:255]
        details: dict[str, Any] = {
            "provider_status": provider_status,
            "filing_reference": reference,
            "dispute_status": projection["status"][:40],
            "error_code": error,
            "files": dict(locked.filing_files or {}),
            "run": run.public_id,
        }
        if outcome.refused:  # one row says both: refused, with its code, and what was recorded
            details |= {"filing_key": locked.filing_key, "code": error}
        transition(
            locked,
            machine=PACKET_FILING,
            to=FilingStatus.AWAITING_READBACK,
            action="packet.file_refused" if outcome.refused else "packet.file_answer",
            also={
                "provider_status": provider_status,
                "filing_error": error,
                "filing_reference": reference,
                "filing_provider_state": projection["status"][:40],
                "filing_run": run,
                "updated_at": timezone.now(),
            },
            details=details,
        )
    if run.verdict != Verdict.PENDING:
        packet_on_verdict(run=run)
    return Packet.objects.select_related("dispute").get(pk=packet.pk)


def filings_resume(*, older_than_s: float = 60.0, limit: int = 50) -> int:
    """The scheduled job: every filing left `submitting` for a while is called again."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    stranded = Packet.objects.select_related("dispute").filter(
        filing_status=FilingStatus.SUBMITTING, filing_started_at__lt=cutoff
    )
    done = 0
    for packet in stranded[:limit]:
        packet_resume_filing(packet=packet)
        done += 1
    return done


def packet_resume_filing(*, packet: Packet) -> Packet:
    """A filing left `submitting` (the process died between the call and the record): repeat the
    call with the same key (the provider replays) and record it. Never a new key. The rule of
    every repeated send (`_send_again`): past the key's life nothing is sent and the outcome is
    unknown; a refusal is unknown; the readback run decides, as for any filing whose answer was
    lost."""
    if packet.filing_status != FilingStatus.SUBMITTING or not packet.filing_key:
        return packet
    return _send_again(packet)
