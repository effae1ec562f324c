"""Every write on disputes (SPEC §9). Preparation never calls the provider to mutate anything;
filing calls it once per filing key, outside any transaction or lock (reserve the filing, call,
record), and only the independent readback run makes a packet `filed`."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.crash import crash_point
from core.exceptions import InvalidInput, PermissionDenied, VouchError
from core.idempotency import idempotency_attach
from core.services import audit_record
from disputes import exceptions as errors
from disputes.drafting import Draft, DraftMaterial, ReceiptFact, drafter_from_settings
from disputes.evidence import (
    AdmittedEvidence,
    EvidenceFile,
    evidence_file_parse,
    evidence_parse,
)
from disputes.finalization import finalize
from disputes.models import (
    FILEABLE_POSTURES,
    FILING_HOLDS,
    ApprovalStatus,
    Dispute,
    DisputeSource,
    Evidence,
    FilingStatus,
    Packet,
    PacketStatus,
    Posture,
    ProviderStatus,
)
from disputes.packets import (
    canonical_digest,
    dispute_facts,
    evidence_with_file_ids,
    file_placeholders,
    filing_request,
    handoff,
    packet_budget,
    packet_digest,
)
from providers import IDEMPOTENCY_KEY_TTL, Outcome, OutcomeKind, provider_from_settings
from verification.models import Observation

if TYPE_CHECKING:
    from accounts.models import User
    from core.models import IdempotencyRecord
    from verification.models import VerificationRun

logger = logging.getLogger("vouch.disputes")

FILED_CONTRACT = "stripe.dispute.filed"
PROVIDER_KEY_TTL = IDEMPOTENCY_KEY_TTL
MICRO_PER_CENT = 10_000
# Stripe's largest amount, 99,999,999 cents, in micro-dollars.
MAX_DISPUTE_MICRO = 99_999_999 * MICRO_PER_CENT
PERM_APPROVE = "disputes.approve_packet"
PERM_FILE = "disputes.file_packet"
_UNDERWAY = (FilingStatus.SUBMITTING, FilingStatus.AWAITING_READBACK)
MANUAL = "manual"
RESPONDABLE = ("needs_response", "warning_needs_response")  # the provider awaits evidence
# The channel of the `stripe.dispute.filed` contract that reads the dispute back.
READBACK_CHANNEL = "dispute_readback"


# --- disputes ------------------------------------------------------------------------------------


def _deadline(value: Any) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromtimestamp(int(value), tz=UTC)


def dispute_normalize(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A provider Dispute object (Stripe's shape) as the fields Vouch keeps."""
    charge = obj.get("charge")
    if isinstance(charge, Mapping):
        charge = charge.get("id")
    details = obj.get("evidence_details") or {}
    return {
        "provider_dispute_id": str(obj["id"]),
        "charge_id": str(charge or ""),
        "amount_micro": int(obj["amount"]) * MICRO_PER_CENT,
        "currency": str(obj.get("currency") or "usd").lower(),
        "reason": str(obj.get("reason") or "general"),
        "response_deadline": _deadline(details.get("due_by")),
        "provider_status": str(obj.get("status") or ""),
        "intended_submission_method": str(obj.get("intended_submission_method") or ""),
    }


def dispute_record(
    *,
    fields: Mapping[str, Any],
    source: str,
    entered_by: User | None = None,
    idempotency: IdempotencyRecord | None = None,
) -> tuple[Dispute, bool]:
    """Create the dispute once (unique provider id), or refresh what the provider says of it.
    A request's idempotency record names the dispute it created, in the creating transaction.
    Returns (dispute, created)."""
    if fields.get("currency", "usd") != "usd":
        raise errors.UnsupportedCurrency()
    values = dict(fields)
    key = values.pop("provider_dispute_id")
    with transaction.atomic():
        dispute = (
            Dispute.objects.select_for_update()
            .filter(provider="stripe", provider_dispute_id=key)
            .first()
        )
        if dispute is not None:
            if source == DisputeSource.PROVIDER:
                changed = [f for f, v in values.items() if getattr(dispute, f) != v]
                for name in changed:
                    setattr(dispute, name, values[name])
                if changed:
                    dispute.save(update_fields=[*changed, "updated_at"])
            return dispute, False
        try:
            with transaction.atomic():
                dispute = Dispute.objects.create(
                    provider_dispute_id=key, source=source, entered_by=entered_by, **values
                )
        except IntegrityError:  # created by a concurrent delivery
            return Dispute.objects.get(provider="stripe", provider_dispute_id=key), False
        idempotency_attach(idempotency, dispute.public_id)
        if entered_by is not None:
            audit_record(
                actor=entered_by,
                action="dispute.enter",
                target_type="dispute",
                target_id=dispute.public_id,
                details={"dispute_id": key, "charge_id": dispute.charge_id},
            )
    return dispute, True


def dispute_enter(
    *, actor: User, data: Mapping[str, Any], idempotency: IdempotencyRecord | None = None
) -> Packet:
    """A dispute entered by staff: recorded (the request's idempotency record naming it), its
    first version prepared (the person asked for it), then, if the provider holds it, set to be
    submitted manually (never by Smart Disputes). Three commits, the provider called after the
    last: a resumed request continues with the dispute its record names, from where it stopped,
    and never records another. Returns the entry's version."""
    if idempotency is not None and idempotency.resource:
        dispute = Dispute.objects.get(public_id=idempotency.resource)
    else:
        fields = {
            "provider_dispute_id": data["dispute_id"],
            "charge_id": data["charge_id"],
            "amount_micro": data["amount_micro"],
            "currency": data.get("currency") or "usd",
            "reason": data["reason"],
            "response_deadline": data.get("response_deadline"),
            "provider_status": "",
            # Until the provider answers `manual` (below, or the resume job if this dies first).
            "submission_method_pending": True,
        }
        if fields["amount_micro"] <= 0 or fields["amount_micro"] % MICRO_PER_CENT:
            raise InvalidInput("amount_micro must be a positive whole number of cents in micro.")
        if fields["amount_micro"] > MAX_DISPUTE_MICRO:  # also beyond what a digest can carry
            raise InvalidInput(
                "amount_micro is at most 999,999,990,000 ($999,999.99, Stripe's most)."
            )
        dispute, created = dispute_record(
            fields=fields, source=DisputeSource.STAFF, entered_by=actor, idempotency=idempotency
        )
        if not created:
            raise errors.DisputeAlreadyRecorded(details={"dispute_id": dispute.public_id})
        crash_point("dispute_entry_after_record")
    packet = _packet_first(dispute=dispute, requested_by=actor, trigger="entry")
    crash_point("dispute_entry_after_prepare")
    dispute_submit_manually(dispute=dispute)  # if the provider holds it; after the commits
    packet.dispute = dispute  # as it is now
    return packet


def _packet_first(*, dispute: Dispute, requested_by: User | None, trigger: str) -> Packet:
    """The dispute's first version: the one prepared already (a resumed entry, an event delivered
    again after a crash), or prepared now."""
    with transaction.atomic():
        locked = Dispute.objects.select_for_update().get(pk=dispute.pk)
        first = locked.packets.order_by("version").first()
        if first is not None:
            return first
        return _version_save(_version_draft(locked, requested_by=requested_by), trigger)


def dispute_on_provider_event(*, event: dict[str, Any]) -> None:
    """`charge.dispute.*`: re-read the dispute (events may be stale or out of order), record it,
    prepare its first version if it has none, and, while it awaits a response and the provider
    does not say `manual` yet, set its submission method to manual. Raises if the provider cannot
    be read or does not answer the update, so the event stays unprocessed and the retry job comes
    back to it (each step is idempotent)."""
    obj = (event.get("data") or {}).get("object") or {}
    dispute_id = str(obj.get("id") or "")
    if not dispute_id:
        return
    read = provider_from_settings().dispute_read(dispute_id)
    if not read.accepted:
        raise RuntimeError(
            f"dispute {dispute_id} could not be read: {read.error_code}"
            f" ({read.error_message or 'no message'})"
        )
    dispute, _ = dispute_record(
        fields=dispute_normalize(read.require()), source=DisputeSource.PROVIDER
    )
    _packet_first(dispute=dispute, requested_by=None, trigger="provider_event")
    if dispute.provider_status in RESPONDABLE:
        outcome = dispute_submit_manually(dispute=dispute)
        if outcome is not None and outcome.unknown:
            raise RuntimeError(
                f"dispute {dispute_id}: setting the submission method got no answer "
                f"({outcome.error_code}); the event is retried"
            )


def dispute_submit_manually(*, dispute: Dispute) -> Outcome | None:
    """Tell the provider that this dispute's evidence is submitted by hand — by Vouch, once a
    person approved it — so Stripe's Smart Disputes never submits on its own. Called outside any
    transaction or lock, with a key derived from the dispute's row; records what the provider
    then says. Returns the provider's outcome, or None when it already says `manual`. Without an
    answer the dispute is left pending, and the resume job (`submission_methods_resume`) sends the
    update again with the same key; a refusal (the provider does not hold the dispute, say) is an
    answer: nothing is retried."""
    if dispute.intended_submission_method == MANUAL:
        return None
    outcome = provider_from_settings().dispute_submit_manually(
        dispute_id=dispute.provider_dispute_id, idempotency_key=f"{dispute.public_id}:manual"
    )
    if not outcome.accepted:
        logger.warning(
            "dispute %s: intended_submission_method not set (%s %s)",
            dispute.public_id,
            outcome.kind,
            outcome.error_code,
        )
        Dispute.objects.filter(pk=dispute.pk).exclude(intended_submission_method=MANUAL).update(
            submission_method_pending=outcome.unknown, updated_at=timezone.now()
        )
        dispute.submission_method_pending = outcome.unknown
        return outcome
    method = str(outcome.require().get("intended_submission_method") or "")[:30]
    with transaction.atomic():
        Dispute.objects.filter(pk=dispute.pk).update(
            intended_submission_method=method,
            submission_method_pending=method != MANUAL,
            updated_at=timezone.now(),
        )
        audit_record(
            actor=None,
            action="dispute.submission_method",
            target_type="dispute",
            target_id=dispute.public_id,
            details={"dispute_id": dispute.provider_dispute_id, "intended": method},
        )
    dispute.intended_submission_method = method
    dispute.submission_method_pending = method != MANUAL
    return outcome


def submission_methods_resume(*, limit: int = 50) -> int:
    """The scheduled job (run with the filings' resume): every dispute whose setting to `manual`
    got no answer yet, or was never asked (a staff entry that died first), is asked again with the
    dispute's one key (`dispute_submit_manually`), the longest waiting first, until the provider
    answers `manual` or refuses. Returns how many were asked."""
    waiting = (
        Dispute.objects.filter(submission_method_pending=True)
        .exclude(intended_submission_method=MANUAL)
        .order_by("updated_at", "pk")[:limit]
    )
    asked = 0
    for dispute in waiting:
        dispute_submit_manually(dispute=dispute)
        asked += 1
    return asked


# --- evidence ------------------------------------------------------------------------------------


EVIDENCE_FILES_DIR = "disputes/evidence"


def _evidence_file_store(upload: EvidenceFile) -> str:
    """Keep the bytes through the storage API under a name made of their SHA-256 (the same bytes,
    one file; an admission that then fails leaves a file no row names, which is harmless). Written
    before the admission's transaction: storage is not transactional."""
    name = f"{EVIDENCE_FILES_DIR}/{upload.sha256}.{upload.type}"
    if default_storage.exists(name):
        return name
    saved = default_storage.save(name, ContentFile(upload.content))
    # Saved at the same moment by another admission, storage picked another name: both hold the
    # same bytes, and the content-addressed one is kept.
    return name if default_storage.exists(name) else saved


def evidence_file_bytes(evidence: Evidence) -> bytes | None:
    """An evidence file's bytes from storage, or None when they are gone or no longer match the
    SHA-256 admitted (nothing else is ever sent or served as that evidence)."""
    name = evidence.file.name if evidence.file else None
    if not name:
        return None
    try:
        with default_storage.open(name, "rb") as handle:
            content = handle.read()
    except OSError:
        return None
    return content if hashlib.sha256(content).hexdigest() == evidence.sha256 else None


def evidence_admit(
    *,
    dispute: Dispute,
    actor: User,
    data: Any,
    file: tuple[str, bytes] | None = None,
    idempotency: IdempotencyRecord | None = None,
) -> tuple[Evidence, bool]:
    """Admit one evidence item after every rule of SPEC §9 step 4. The same item twice is the
    same admission; the same ref with other content is refused. With a `file` (name, bytes) — a
    PDF, PNG or JPEG within the files' limit, nothing in it that looks like a credential — Vouch
    computes the SHA-256 (one given must be the same) and keeps the bytes through the storage API.
    A new admission, in its own transaction, also gives the dispute a new packet version holding
    it when the current one is neither approved nor filed (the admitter contributes to it). The
    request's idempotency record names the admission in that transaction; a resumed request
    replays it. Returns (evidence, created)."""
    if idempotency is not None and idempotency.resource:
        return Evidence.objects.get(public_id=idempotency.resource), True
    upload = None
    if file is not None:
        if not isinstance(data, dict):
            raise errors.EvidenceRawPayload(
                "Evidence is a JSON object {ref, sha256, kind, summary}."
            )
        upload = evidence_file_parse(name=file[0], content=file[1])
        given = data.get("sha256")
        if given not in (None, "") and given != upload.sha256:
            raise errors.EvidenceSha256Mismatch(
                details={"field": "sha256", "given": str(given)[:64], "file": upload.sha256}
            )
        data = {**data, "sha256": upload.sha256}
    item = evidence_parse(data)
    stored = _evidence_file_store(upload) if upload is not None else ""
    with transaction.atomic():
        locked = Dispute.objects.select_for_update().get(pk=dispute.pk)
        existing = Evidence.objects.filter(dispute=dispute, ref=item.ref).first()
        if existing is not None:
            if (existing.sha256, existing.kind, existing.summary, bool(existing.file)) != (
                item.sha256,
                item.kind,
                item.summary,
                upload is not None,
            ):
                raise errors.EvidenceRefConflict(details={"ref": item.ref})
            return existing, False
        evidence = Evidence.objects.create(
            dispute=dispute,
            admitted_by=actor,
            file=stored,
            file_name=upload.name if upload else "",
            file_size=upload.size if upload else None,
            file_type=upload.type if upload else "",
            **item.as_dict(),
        )
        idempotency_attach(idempotency, evidence.public_id)
        details: dict[str, Any] = {"ref": item.ref, "kind": item.kind, "sha256": item.sha256}
        if upload is not None:
            details["file"] = upload.facts()
        audit_record(
            actor=actor,
            action="dispute.evidence_admit",
            target_type="dispute",
            target_id=dispute.public_id,
            details=details,
        )
        if _catches_up(locked):  # the packet catches up, its admitter contributing
            _version_save(_version_draft(locked, requested_by=None), "evidence")
    return evidence, True


# --- preparation ---------------------------------------------------------------------------------


def _fact(check: Any) -> ReceiptFact:
    receipt = check.receipt
    body = receipt.body if isinstance(receipt.body, dict) else {}
    return ReceiptFact(
        id=receipt.id,
        kind=receipt.kind,
        amount_micro=int(receipt.amount_micro),
        provider_object_id=receipt.provider_object_id,
        detail=dict(body.get("detail") or {}),
    )


def material_for(dispute: Dispute) -> DraftMaterial:
    """SPEC §9 steps 1-4: the normalized dispute, its charge and refunds resolved by receipt id
    from Vouch's own receipts (never from the caller), and the admitted evidence."""
    from receipts.selectors import receipt_tree

    tree = receipt_tree(charge_id=dispute.charge_id)
    charge = _fact(tree.charge) if tree.charge is not None and tree.charge.ok else None
    refunds = [_fact(c) for c in tree.unreversed_refunds() if c.ok]
    evidence = [
        AdmittedEvidence(
            ref=e.ref, sha256=e.sha256, kind=e.kind, summary=e.summary, file=e.file_facts()
        )
        for e in dispute.evidence.all()
    ]
    return DraftMaterial(
        dispute=dispute_facts(dispute),
        tree_complete=bool(tree.complete),
        tree_problems=list(tree.problems),
        undecided_refund_legs=list(tree.undecided_refund_legs),
        charge_receipt=charge,
        refund_receipts=refunds,
        evidence=evidence,
    )


def _status_for(posture: str, ok: bool) -> str:
    if not ok:
        return PacketStatus.INVALID
    if posture == Posture.NEEDS_MORE_EVIDENCE:
        return PacketStatus.INCOMPLETE
    return PacketStatus.READY_FOR_REVIEW


def _apply(packet: Packet, draft: Draft | Mapping[str, Any], material: DraftMaterial) -> None:
    """Step 6 on a draft, then the derived fields: validation, status, digest, handoff."""
    final = finalize(draft, material)
    packet.posture = final.draft.posture
    packet.summary = final.draft.summary
    packet.citations = list(final.draft.citations)
    packet.open_questions = list(final.draft.open_questions)
    packet.validation = final.validation()
    packet.status = _status_for(packet.posture, final.ok)
    packet.receipt_ids = list(material.receipt_ids)
    packet.digest = packet_digest(packet)
    packet.handoff = handoff(packet, digest=packet.digest, options=final.draft.filing_options)


def _refuse_if_filing(dispute: Dispute) -> None:
    """A filing that holds the dispute (one submission per dispute at the provider) refuses any
    other version, saying which filing holds it and what is known of it."""
    holding = (
        dispute.packets.filter(filing_status__in=FILING_HOLDS).select_related("filing_run").first()
    )
    if holding is not None:
        raise _filing_refusal(holding)


def _readback_shows(packet: Packet) -> dict[str, Any] | None:
    """The dispute as the filing's readback last saw it at the provider (its evidence details),
    or None when no readback could read it."""
    if packet.filing_run_id is None:
        return None
    seen = (
        Observation.objects.filter(attempt__run_id=packet.filing_run_id, channel=READBACK_CHANNEL)
        .order_by("-observed_at", "-id")
        .values_list("data", flat=True)
        .first()
    )
    if not isinstance(seen, dict) or not isinstance(seen.get("evidence_details"), dict):
        return None
    return seen


def _nothing_submitted(seen: Mapping[str, Any] | None) -> bool:
    return seen is not None and seen["evidence_details"].get("submission_count") == 0


def _filing_refusal(packet: Packet) -> VouchError:
    """The refusal a version's filing state gives to any act on it (or, if it holds the dispute,
    on the dispute), naming the version, the filing and what its readback showed."""
    which = f"Version {packet.version} ({packet.public_id})"
    run = packet.filing_run
    run_name = run.public_id if run else "(none)"
    details: dict[str, Any] = {
        "packet": packet.public_id,
        "version": packet.version,
        "filing_status": packet.filing_status,
        "filing_key": packet.filing_key or None,
        "verification_run": run.public_id if run else None,
        "verification_verdict": run.verdict if run else None,
    }
    if packet.filing_status == FilingStatus.FILED:
        return errors.PacketAlreadyFiled(
            f"{which} is filed: its readback run {run_name} is VERIFIED. "
            "Nothing more is filed for this dispute.",
            details=details,
        )
    if packet.filing_status in _UNDERWAY:
        return errors.PacketFilingUnderway(
            f"{which} is being filed ({packet.filing_status.replace('_', ' ')}, key "
            f"{packet.filing_key}): its readback decides whether it is filed; nothing else is "
            "prepared or filed for this dispute meanwhile.",
            details=details,
        )
    seen = _readback_shows(packet)
    shown = (
        "no readback could read the dispute"
        if seen is None
        else f"the provider shows {seen['evidence_details'].get('submission_count')} "
        f"submission(s), method {seen['evidence_details'].get('submission_method') or 'unknown'}, "
        f"status {seen.get('status') or 'unknown'}"
    )
    verdict = f"{run.verdict} ({run.verdict_reason})" if run else "no readback run"
    if packet.filing_status == FilingStatus.NOT_SUBMITTED:
        return errors.PacketNotSubmitted(
            f"{which}'s filing was not proven (readback {verdict}) and {shown}: nothing "
            "submitted. This version is done: prepare a new version, have it approved and file "
            "that.",
            details=details,
        )
    return errors.PacketReadbackFailed(
        f"{which}'s filing was not proven: its readback ended {verdict}, and {shown}, so it "
        "cannot be shown that nothing was submitted. Nothing else is prepared or filed for this "
        f"dispute until a person resolves the escalation of run {run_name}.",
        details=details,
    )


def packet_prepare(
    *,
    dispute: Dispute,
    requested_by: User | None,
    idempotency: IdempotencyRecord | None = None,
) -> Packet:
    """Prepare a new version (SPEC §9 steps 1-7) with the configured drafter, its output finalized.
    Earlier versions are superseded. Its contributors: whoever asked for it and whoever admitted
    the evidence it holds; a version the system prepared on its own from receipts alone has none.
    Refused while a filing holds the dispute. The request's idempotency record names the version
    in the transaction that saves it; a resumed request returns that version, never a new one."""
    if idempotency is not None and idempotency.resource:
        return Packet.objects.select_related("dispute").get(public_id=idempotency.resource)
    with transaction.atomic():
        locked = Dispute.objects.select_for_update().get(pk=dispute.pk)
        _refuse_if_filing(locked)
        packet = _version_save(_version_draft(locked, requested_by=requested_by), "request")
        idempotency_attach(idempotency, packet.public_id)
    return packet


def _version_draft(locked: Dispute, *, requested_by: User | None) -> Packet:
    """The next version of a locked dispute's packet, drafted and finalized, not yet saved."""
    drafter = drafter_from_settings()
    material = material_for(locked)
    draft = drafter.draft(material)
    newest = locked.packets.order_by("-version").first()
    packet = Packet(
        dispute=locked,
        version=(newest.version if newest is not None else 0) + 1,
        drafter=getattr(drafter, "name", type(drafter).__name__),
        evidence_refs=[e.as_dict() for e in material.evidence],
        requested_by=requested_by,
    )
    _apply(packet, draft, material)
    return packet


def _version_save(packet: Packet, trigger: str) -> Packet:
    """Keep a drafted version (in the caller's transaction, under the dispute's lock): earlier
    versions are superseded, its contributors recorded, the preparation audited."""
    dispute = packet.dispute
    dispute.packets.exclude(status=PacketStatus.SUPERSEDED).update(status=PacketStatus.SUPERSEDED)
    packet.save()
    contributors = {e.admitted_by_id for e in dispute.evidence.all() if e.admitted_by_id}
    if packet.requested_by_id is not None:
        contributors.add(packet.requested_by_id)
    if contributors:
        packet.contributors.add(*contributors)
    audit_record(
        actor=packet.requested_by,
        action="packet.prepare",
        target_type="packet",
        target_id=packet.public_id,
        details={
            "version": packet.version,
            "posture": packet.posture,
            "digest": packet.digest,
            "trigger": trigger,
        },
    )
    return packet


def _catches_up(dispute: Dispute) -> bool:
    """A dispute whose current version is neither approved nor filed (nor being filed) takes a new
    version by itself when its material changes; an approved one waits for a person (a new
    version would silently drop the approval)."""
    if dispute.packets.filter(filing_status__in=FILING_HOLDS).exists():
        return False
    newest = dispute.packets.order_by("-version").first()
    return newest is None or newest.approval_status != ApprovalStatus.APPROVED


def packets_catch_up(*, charge_id: str) -> list[Packet]:
    """A receipt for `charge_id` was written (and committed): every dispute on that charge whose
    current version may be replaced gets a new version from the receipts as they are now, if it
    says anything new. Nobody asked for it: the receipt adds no contributor. Each dispute in its
    own transaction, so one that fails leaves the others caught up."""
    prepared = []
    for dispute_pk in Dispute.objects.filter(charge_id=charge_id).values_list("pk", flat=True):
        try:
            with transaction.atomic():
                locked = Dispute.objects.select_for_update().get(pk=dispute_pk)
                if not _catches_up(locked):
                    continue
                packet = _version_draft(locked, requested_by=None)
                newest = locked.packets.order_by("-version").first()
                if newest is not None and (newest.digest, newest.receipt_ids) == (
                    packet.digest,
                    packet.receipt_ids,
                ):
                    continue  # the receipt changes nothing the packet says
                prepared.append(_version_save(packet, "receipt"))
        except Exception:  # one dispute's failure must not keep the others behind
            logger.exception("dispute %s: catching up on charge %s failed", dispute_pk, charge_id)
    return prepared


def _lock_packet(packet: Packet) -> Packet:
    return (
        Packet.objects.select_for_update(of=("self",)).select_related("dispute").get(pk=packet.pk)
    )


def _current(packet: Packet) -> None:
    if packet.status == PacketStatus.SUPERSEDED:
        raise errors.PacketDrifted(
            "A newer version of this packet exists: review that one.",
            details={"packet": packet.public_id},
        )


def _edit_material(packet: Packet, citations: Any) -> tuple[DraftMaterial, list[Evidence]]:
    """What an edit of `packet` is finalized against: the receipts as they are now, the version's
    own evidence, and the dispute's other admitted evidence that the edit cites (which joins the
    version; returned second). Evidence neither held nor cited stays out: an edit cannot lean on
    material the digest would not bind."""
    material = material_for(packet.dispute)
    held = [AdmittedEvidence(**e) for e in packet.evidence_refs]
    own = {e.ref for e in held}
    cited = {str(c) for c in citations} if isinstance(citations, list) else set()
    joined = [e for e in packet.dispute.evidence.all() if e.ref in cited and e.ref not in own]
    evidence = held + [
        AdmittedEvidence(e.ref, e.sha256, e.kind, e.summary, e.file_facts()) for e in joined
    ]
    return replace(material, evidence=evidence), joined


def packet_edit(
    *,
    packet: Packet,
    actor: User,
    changes: Mapping[str, Any],
    confirmed_digest: str | None = None,
) -> Packet:
    """A person's edit of the current version, in place: it goes through finalization again, its
    digest changes (an approval of the old content no longer matches), and the editor becomes a
    contributor who cannot approve this version. Evidence admitted to the dispute after this
    version was prepared, when the edit cites it, joins the version: its evidence refs gain it (so
    the digest binds its SHA-256 and filing sends it) and its admitter becomes a contributor."""
    allowed = {"posture", "summary", "citations", "open_questions"}
    unknown = sorted(set(changes) - allowed)
    if unknown:
        raise InvalidInput(details={name: ["Unknown field."] for name in unknown})
    if not actor.has_perm("disputes.change_packet"):
        raise PermissionDenied("This needs the permission disputes.change_packet.")
    with transaction.atomic():
        locked = _lock_packet(packet)
        _current(locked)
        if locked.filing_status != FilingStatus.NOT_FILED:
            raise _filing_refusal(locked)
        if confirmed_digest is not None:  # the edit applies to the content the editor saw
            _check_confirmed(locked, confirmed_digest)
        before = locked.digest
        draft = {
            "posture": locked.posture,
            "summary": locked.summary,
            "citations": list(locked.citations),
            "open_questions": list(locked.open_questions),
            "filing_options": dict(locked.handoff.get("options") or {}),
            **changes,
        }
        material, joined = _edit_material(locked, draft["citations"])
        locked.evidence_refs = [e.as_dict() for e in material.evidence]
        _apply(locked, draft, material)
        locked.last_edited_by = actor
        locked.save()
        locked.contributors.add(actor, *{e.admitted_by_id for e in joined if e.admitted_by_id})
        details: dict[str, Any] = {
            "fields": sorted(changes),
            "digest_before": before,
            "digest": locked.digest,
        }
        if joined:
            details["evidence_joined"] = [e.ref for e in joined]
        audit_record(
            actor=actor,
            action="packet.edit",
            target_type="packet",
            target_id=locked.public_id,
            details=details,
        )
    return locked


# --- approval and filing -------------------------------------------------------------------------


def _check_confirmed(packet: Packet, confirmed_digest: str) -> None:
    if confirmed_digest != packet.digest:
        raise errors.PacketDrifted(
            "The packet changed since it was shown: review it again.",
            details={"confirmed": confirmed_digest, "current": packet.digest},
        )


def _check_fileable_content(packet: Packet) -> None:
    if packet.status == PacketStatus.INCOMPLETE:
        raise errors.PacketIncomplete(details={"open_questions": packet.open_questions})
    if packet.status == PacketStatus.INVALID or not packet.validation.get("ok"):
        raise errors.PacketInvalid(details={"errors": packet.validation.get("errors", [])})


def _check_budget(packet: Packet) -> None:
    """Pre-flight: the filing request within the provider's limits (`disputes.packets.Budget`)."""
    budget = packet_budget(packet)
    if budget is not None and not budget.ok:
        raise errors.PacketOverLimit(
            "The packet is over the provider's limits: "
            + " ".join(p["message"] for p in budget.problems),
            details={"problems": budget.problems},
        )


def packet_approve(*, packet: Packet, actor: User, confirmed_digest: str) -> Packet:
    """Four eyes: a person with `disputes.approve_packet` who did not contribute to this version
    approves the content it shows them; the approval records who, when and the digest. A packet
    over the provider's limits (text, one field, files) is refused (`packet_over_limit`)."""
    if not actor.has_perm(PERM_APPROVE):
        raise PermissionDenied(f"This needs the permission {PERM_APPROVE}.")
    with transaction.atomic():
        locked = _lock_packet(packet)
        _current(locked)
        if locked.filing_status != FilingStatus.NOT_FILED:
            raise _filing_refusal(locked)
        _check_confirmed(locked, confirmed_digest)
        _check_fileable_content(locked)
        _check_budget(locked)
        if locked.contributors.filter(pk=actor.pk).exists():
            raise errors.ApproverIsContributor()
        locked.approval_status = ApprovalStatus.APPROVED
        locked.approved_by = actor
        locked.approved_at = timezone.now()
        locked.approved_digest = locked.digest
        locked.save(
            update_fields=[
                "approval_status",
                "approved_by",
                "approved_at",
                "approved_digest",
                "updated_at",
            ]
        )
        audit_record(
            actor=actor,
            action="packet.approve",
            target_type="packet",
            target_id=locked.public_id,
            details={"digest": locked.digest, "version": locked.version},
        )
    return locked


def filing_key_proposal(packet: Packet) -> str:
    """The key the File form proposes: stable for a packet and its approved digest."""
    return f"{packet.public_id}:{(packet.approved_digest or packet.digest)[:16]}"


def _reserve_filing(*, packet: Packet, actor: User, confirmed_digest: str, key: str) -> Packet:
    """Phase 1: every refusal, then bind the key to this filing and commit (the recovery point)."""
    return _reserve(packet=packet, actor=actor, confirmed_digest=confirmed_digest, key=key)[0]


def _reserve(
    *, packet: Packet, actor: User, confirmed_digest: str, key: str
) -> tuple[Packet, bool]:
    """`_reserve_filing`, saying also whether the filing was under way before this call (a
    repeat of it with its own key) rather than reserved by it."""
    with transaction.atomic():
        locked = _lock_packet(packet)
        if locked.filing_status in _UNDERWAY and locked.filing_key == key:
            return locked, True  # a repeat of this filing: its key, its one rule (_send_again)
        if locked.filing_status in _UNDERWAY:
            raise errors.FilingKeyConflict(details={"filing_key": locked.filing_key})
        if locked.filing_status != FilingStatus.NOT_FILED:
            raise _filing_refusal(locked)
        _current(locked)
        if locked.approval_status != ApprovalStatus.APPROVED:
            raise errors.PacketNotApproved()
        _check_fileable_content(locked)
        if locked.posture not in FILEABLE_POSTURES:
            raise errors.PacketInvalid(
                f"A {locked.posture} packet is not filed: only contest and refund_already_sent.",
                details={"posture": locked.posture},
            )
        _check_budget(locked)  # the limits may have been lowered since the approval
        if packet_digest(locked) != locked.approved_digest or locked.digest != (
            locked.approved_digest
        ):
            raise errors.PacketDrifted(
                details={"approved": locked.approved_digest, "current": packet_digest(locked)}
            )
        _check_confirmed(locked, confirmed_digest)
        nested = (locked.handoff.get("options") or {}).get("idempotency_key")
        if nested is not None and nested != key:
            raise errors.FilingKeyConflict(
                "The packet carries another idempotency key than the one given for this filing.",
                details={"nested": "idempotency_key"},
            )
        _refuse_if_filing(locked.dispute)
        request = _request_of(locked)
        locked.filing_status = FilingStatus.SUBMITTING
        locked.filing_key = key
        locked.filing_request_digest = canonical_digest(request)
        locked.filed_by = actor
        locked.filing_started_at = timezone.now()
        locked.filing_files = {}
        try:
            with transaction.atomic():
                locked.save()
        except IntegrityError as exc:  # the key, or the dispute, is bound to another filing
            raise errors.FilingKeyConflict(details={"filing_key": key}) from exc
        audit_record(
            actor=actor,
            action="packet.file",
            target_type="packet",
            target_id=locked.public_id,
            details={"digest": locked.approved_digest, "filing_key": key},
        )
    return locked, False


def packet_file(
    *, packet: Packet, actor: User, confirmed_digest: str, idempotency_key: str
) -> Packet:
    """File exactly the approved packet: reserve (refusals first), call the provider's narrow
    `dispute.file` outside any transaction with the filing's one key, record what it answered, and
    start the readback run that alone can make the packet `filed`. Pressing File again on a filing
    under way with its key repeats it by the resume job's rule (`_send_again`)."""
    if not actor.has_perm(PERM_FILE):
        raise PermissionDenied(f"This needs the permission {PERM_FILE}.")
    key = idempotency_key.strip()
    if not key or len(key) > 255 or not key.isprintable():
        raise InvalidInput("The filing key is 1-255 printable characters.")
    _check_files_stored(packet)
    reserved, underway = _reserve(
        packet=packet, actor=actor, confirmed_digest=confirmed_digest, key=key
    )
    if underway:
        return _send_again(reserved)
    return _send_filing(reserved)


def _request_of(packet: Packet) -> dict[str, Any]:
    """The approved filing request of a packet whose posture is filed."""
    request = filing_request(packet, digest=packet.approved_digest)
    if request is None:
        raise errors.PacketInvalid(
            f"A {packet.posture} packet is not filed: only contest and refund_already_sent.",
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
        locked = _lock_packet(packet)
        if locked.filing_status != FilingStatus.SUBMITTING:
            return locked
        locked.provider_status = ProviderStatus.UNKNOWN
        locked.filing_error = f"file_upload:{outcome.error_code or 'unknown'}"[:100]
        locked.save(update_fields=["provider_status", "filing_error", "updated_at"])
        audit_record(
            actor=None,
            action="packet.file_upload_unknown",
            target_type="packet",
            target_id=locked.public_id,
            details={"filing_key": locked.filing_key, "code": locked.filing_error},
        )
    return locked


def _record_filing(*, packet: Packet, outcome: Any) -> Packet:
    """Phase 3: keep only the filing reference, dispute id, request digest and status, and start
    the readback run, which alone decides. Accepted, unknown or refused alike: a refusal (a first
    send's; a repeated send's is unknown, `_repeat_refusal`) is recorded with its code, but it is
    not taken for "nothing was filed" — the filing stays held, its key kept and nothing sent again
    (`_send_again`), until the readback shows what the provider holds (`packet_on_verdict`)."""
    from verification.services import verification_start

    with transaction.atomic():
        locked = _lock_packet(packet)
        if locked.filing_status != FilingStatus.SUBMITTING and locked.filing_run_id:
            return locked  # recorded already (a retry answered after the first)
        if outcome.refused:
            audit_record(
                actor=None,
                action="packet.file_refused",
                target_type="packet",
                target_id=locked.public_id,
                details={
                    "filing_key": locked.filing_key,
                    "code": str(outcome.error_code or "refused")[:100],
                },
            )
        answer = outcome.value if outcome.accepted else {}
        projection = {
            "id": str((answer or {}).get("id") or locked.dispute.provider_dispute_id),
            "status": str((answer or {}).get("status") or ""),
        }
        run = verification_start(
            contract_id=FILED_CONTRACT,
            operation_id=locked.filing_key,
            operation_created_at=locked.filing_started_at or timezone.now(),
            input={
                "dispute": locked.dispute.provider_dispute_id,
                "packet_digest": locked.approved_digest,
            },
            action_result=projection,
        )
        locked.provider_status = (
            ProviderStatus.ANSWERED
            if outcome.accepted
            else ProviderStatus.REFUSED
            if outcome.refused
            else ProviderStatus.UNKNOWN
        )
        locked.filing_error = (
            ""
            if outcome.accepted
            else str(outcome.error_code or ("refused" if outcome.refused else "unknown"))[:100]
        )
        locked.filing_reference = str(outcome.request_id or "")[:255]
        locked.filing_provider_state = projection["status"][:40]
        locked.filing_run = run
        if locked.filing_status == FilingStatus.SUBMITTING:
            locked.filing_status = FilingStatus.AWAITING_READBACK
        locked.save()
        audit_record(
            actor=None,
            action="packet.file_answer",
            target_type="packet",
            target_id=locked.public_id,
            details={
                "provider_status": locked.provider_status,
                "filing_reference": locked.filing_reference,
                "dispute_status": locked.filing_provider_state,
                "error_code": locked.filing_error,
                "files": dict(locked.filing_files or {}),
                "run": run.public_id,
            },
        )
    if run.verdict != "PENDING":
        packet_on_verdict(run=run)
    return Packet.objects.select_related("dispute").get(pk=packet.pk)


def packet_on_verdict(*, run: VerificationRun) -> None:
    """The readback decided: VERIFIED makes the packet `filed`. Any other verdict leaves it not
    filed (the engine escalates it to a person): `not_submitted` when the readback shows nothing
    submitted (the dispute is free for a new version), else `readback_failed` (it stays held)."""
    with transaction.atomic():
        packet = Packet.objects.select_for_update(of=("self",)).filter(filing_run_id=run.pk).first()
        if packet is None or packet.filing_status not in _UNDERWAY:
            return
        if run.verdict == "VERIFIED":
            packet.filing_status = FilingStatus.FILED
            packet.status = PacketStatus.FILED  # what every page and the API say of it now
            packet.filed_at = timezone.now()
        elif run.verdict != "PENDING":
            # Not proven. If the readback shows nothing submitted, this filing did not happen and
            # the dispute is free for a new approved version; otherwise something was submitted
            # that is not shown to be this packet, and the dispute stays held for a person.
            packet.filing_status = (
                FilingStatus.NOT_SUBMITTED
                if _nothing_submitted(_readback_shows(packet))
                else FilingStatus.READBACK_FAILED
            )
        else:
            return
        packet.save(update_fields=["filing_status", "status", "filed_at", "updated_at"])
        audit_record(
            actor=None,
            action=f"packet.readback_{run.verdict.lower()}",
            target_type="packet",
            target_id=packet.public_id,
            details={
                "run": run.pk,
                "reason": run.verdict_reason,
                "filing_status": packet.filing_status,
            },
        )


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
