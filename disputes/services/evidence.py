"""Evidence admitted to a dispute (SPEC §9 step 4): a bounded reference, with an optional file kept
through the storage API under its SHA-256."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from core.idempotency import idempotency_attach
from core.services import audit_record
from disputes import exceptions as errors
from disputes.evidence import (
    EvidenceFile,
    evidence_file_parse,
    evidence_parse,
)
from disputes.models import (
    Dispute,
    Evidence,
)
from disputes.services.preparation import _catches_up, _version_draft, _version_save

if TYPE_CHECKING:
    from accounts.models import User
    from core.models import IdempotencyRecord

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
