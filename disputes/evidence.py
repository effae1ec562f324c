"""Admission of external evidence (SPEC §9 step 4): only `{ref, sha256, kind, summary}`, bounded,
and nothing that is a raw payload, a credential or a card number. Pure functions: the service
stores what `evidence_parse` returns, and nothing that it refuses."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from disputes import exceptions as errors
from disputes.models import EvidenceKind

FIELDS = ("ref", "sha256", "kind", "summary")
MAX_REF = 200
MAX_SUMMARY = 500
RECEIPT_FIELDS = frozenset(
    {"receipt", "receipts", "receipt_id", "receipt_ids", "receipt_detail", "detail", "native"}
)

_REF = re.compile(r"^[A-Za-z0-9][!#-&(-z|~]{0,199}$")  # printable, no space, quotes or braces
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CREDENTIALS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b[spr]k_(live|test)_[A-Za-z0-9]{6,}",  # Stripe secret, publishable, restricted keys
        r"\bwhsec_[A-Za-z0-9]{6,}",  # Stripe webhook secrets
        r"\bbearer\s+[A-Za-z0-9._~+/-]{8,}",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
        r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
        r"\b(gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,})",
        r"\b(password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|token)\s*[:=]",
        r"://[^/\s:@]+:[^/\s@]+@",  # credentials inside a URL
    )
]
_DIGITS = re.compile(r"(?:\d[ -]?){13,19}")
_JSONISH = re.compile(r'"[A-Za-z_][A-Za-z0-9_]*"\s*:')


@dataclass(frozen=True)
class AdmittedEvidence:
    ref: str
    sha256: str
    kind: str
    summary: str
    # For evidence admitted with a file: {"name", "size", "type"} (its SHA-256 is `sha256`).
    file: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ref": self.ref,
            "sha256": self.sha256,
            "kind": self.kind,
            "summary": self.summary,
        }
        if self.file is not None:
            out["file"] = dict(self.file)
        return out


# The file types Stripe takes as dispute evidence, each known by its extension and its first bytes
# (a name alone proves nothing about the content).
FILE_SIGNATURES = {"pdf": b"%PDF-", "png": b"\x89PNG\r\n\x1a\n", "jpg": b"\xff\xd8\xff"}
FILE_EXTENSIONS = {"pdf": "pdf", "png": "png", "jpg": "jpg", "jpeg": "jpg"}
FILE_CONTENT_TYPES = {"pdf": "application/pdf", "png": "image/png", "jpg": "image/jpeg"}
MAX_FILE_NAME = 200
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ ()-]{0,199}$")


@dataclass(frozen=True)
class EvidenceFile:
    """An evidence file that passed admission: its name, bytes, SHA-256 and type."""

    name: str
    content: bytes = field(repr=False)
    sha256: str
    type: str

    @property
    def size(self) -> int:
        return len(self.content)

    def facts(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "type": self.type}


def evidence_file_parse(*, name: str, content: bytes) -> EvidenceFile:
    """Check an evidence file: a PDF, PNG or JPEG (by extension and by its first bytes), not
    empty, at most DISPUTES_EVIDENCE_FILES_MAX_BYTES (the most a packet's files may weigh
    together), with a plain name, and nothing in the name or the bytes that looks like a
    credential. Returns it with its SHA-256, computed here."""
    name = name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1].strip()
    if looks_like_credential(name):
        raise errors.EvidenceCredential(details={"field": "file"})
    if not _FILE_NAME.match(name):
        raise errors.EvidenceFileRefused(
            "The file name must be 1-200 letters, digits, spaces, dots, dashes or brackets.",
            details={"field": "file", "max_length": MAX_FILE_NAME},
        )
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    file_type = FILE_EXTENSIONS.get(extension)
    if file_type is None or not content.startswith(FILE_SIGNATURES[file_type]):
        raise errors.EvidenceFileType(details={"field": "file", "allowed": ["pdf", "png", "jpg"]})
    limit = int(settings.DISPUTES_EVIDENCE_FILES_MAX_BYTES)
    if len(content) > limit:
        raise errors.EvidenceFileTooLarge(
            details={"field": "file", "size": len(content), "max_bytes": limit}
        )
    # A secret pasted into a document is still a secret; the bytes are searched as Latin-1 text.
    if looks_like_credential(content.decode("latin-1")):
        raise errors.EvidenceCredential(details={"field": "file"})
    return EvidenceFile(
        name=name, content=content, sha256=hashlib.sha256(content).hexdigest(), type=file_type
    )


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _configured_secrets() -> list[str]:
    found = [str(getattr(settings, "STRIPE_API_KEY", "") or "")]
    found += [str(s) for s in getattr(settings, "STRIPE_WEBHOOK_SECRETS", []) or []]
    return [s for s in found if len(s) >= 8]


def looks_like_credential(text: str) -> bool:
    if any(secret in text for secret in _configured_secrets()):
        return True
    return any(p.search(text) for p in _CREDENTIALS)


def looks_like_card_number(text: str) -> bool:
    for match in _DIGITS.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn(digits):
            return True
    return False


def looks_like_raw_payload(text: str) -> bool:
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return isinstance(json.loads(stripped), dict | list)
        except ValueError:
            pass
    return len(_JSONISH.findall(text)) >= 2 or '"object":' in text.replace(" ", "")


def evidence_parse(data: Any) -> AdmittedEvidence:
    """Check one evidence item against every admission rule, in a fixed order, and return it
    normalized; raise the refusal naming the first rule it breaks."""
    if not isinstance(data, dict):
        raise errors.EvidenceRawPayload("Evidence is a JSON object {ref, sha256, kind, summary}.")
    keys = set(data)
    if keys & RECEIPT_FIELDS:
        raise errors.ReceiptDetailRefused(details={"fields": sorted(keys & RECEIPT_FIELDS)})
    unknown = sorted(keys - set(FIELDS))
    if unknown:
        raise errors.EvidenceUnknownField(details={"fields": unknown})
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise errors.EvidenceMissingField(details={"fields": missing})
    for name in FIELDS:
        value = data[name]
        if isinstance(value, dict | list):
            raise errors.EvidenceRawPayload(details={"field": name})
        if not isinstance(value, str):
            raise errors.EvidenceRefused(
                f"{name} must be a string.", details={"field": name, "rule": "type"}
            )
    ref, sha256, kind, summary = (str(data[f]) for f in FIELDS)
    for name, text in (("ref", ref), ("summary", summary)):
        if looks_like_credential(text):
            raise errors.EvidenceCredential(details={"field": name})
        if looks_like_card_number(text):
            raise errors.EvidenceCardNumber(details={"field": name})
        if looks_like_raw_payload(text):
            raise errors.EvidenceRawPayload(details={"field": name})
    if ref.startswith("rcpt_"):
        raise errors.ReceiptDetailRefused(
            "A receipt is not evidence: Vouch resolves receipts from its own history.",
            details={"field": "ref"},
        )
    if ref.startswith("adj_"):  # cited as a refund made (SPEC §18): never admitted by hand
        raise errors.ReceiptDetailRefused(
            "A refund recorded by adjustment is not evidence: Vouch resolves it from its own "
            "ledger.",
            details={"field": "ref"},
        )
    if not _REF.match(ref):
        raise errors.EvidenceInvalidRef(details={"field": "ref", "max_length": MAX_REF})
    if not _SHA256.match(sha256):
        raise errors.EvidenceInvalidSha256(details={"field": "sha256"})
    if kind not in EvidenceKind.values:
        raise errors.EvidenceInvalidKind(details={"field": "kind", "allowed": EvidenceKind.values})
    summary = summary.strip()
    if not summary or len(summary) > MAX_SUMMARY or any(ord(c) < 32 and c != "\n" for c in summary):
        raise errors.EvidenceTooLong(details={"field": "summary", "max_length": MAX_SUMMARY})
    return AdmittedEvidence(ref=ref, sha256=sha256, kind=kind, summary=summary)
