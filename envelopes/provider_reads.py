"""Keeping what the provider showed (SPEC §15.4): every read behind a correction of the ledger is
stored — each answer's bytes and their SHA-256 — so that the journal entry it justifies cites the
exact provider data. Storing is plain database work (never a provider call)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from envelopes.models import ProviderAnswer, ProviderRead
from providers import Outcome


def canonical_bytes(value: Any) -> bytes:
    """A value as canonical JSON (sorted keys, no spaces, UTF-8): what is hashed when the bytes
    the provider sent are not at hand (an error object the adapter parsed, a refund a caller
    gives)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Answer:
    """One answer, ready to store: what was asked, and the bytes the provider answered."""

    request: dict[str, Any]
    outcome: str
    body: bytes
    http_status: int | None = None
    observed_at: Any = field(default_factory=timezone.now)

    @classmethod
    def of(cls, request: dict[str, Any], outcome: Outcome) -> Answer:
        """An answer from a provider call's outcome: the body as received when accepted; a
        refusal's error object (code, message, status) as canonical JSON."""
        if outcome.accepted:
            body = outcome.body if outcome.body is not None else canonical_bytes(outcome.value)
        else:
            body = canonical_bytes(
                {
                    "error": {
                        **outcome.error_detail,
                        "code": outcome.error_code,
                        "message": outcome.error_message,
                    }
                }
            )
        return cls(request, outcome.kind.value, body, outcome.http_status)

    @classmethod
    def given(cls, request: dict[str, Any], value: Mapping[str, Any]) -> Answer:
        """An object a caller read and hands over (its canonical JSON)."""
        return cls(request, "given", canonical_bytes(dict(value)))


def provider_read_store(
    *,
    purpose: str,
    answers: Sequence[Answer],
    shows: Mapping[str, Any],
    envelope_id: int | None = None,
    kind: str = "",
    subject: str = "",
) -> ProviderRead:
    """Store one read: its answers, each with the SHA-256 of its bytes, and the read's SHA-256 (of
    theirs, one per line, in order)."""
    digests = [hashlib.sha256(answer.body).hexdigest() for answer in answers]
    read = ProviderRead.objects.create(
        envelope_id=envelope_id,
        purpose=purpose,
        kind=kind,
        subject=subject[:100],
        shows=dict(shows),
        sha256=hashlib.sha256("\n".join(digests).encode()).hexdigest(),
        observed_at=min((a.observed_at for a in answers), default=timezone.now()),
    )
    ProviderAnswer.objects.bulk_create(
        ProviderAnswer(
            read=read,
            sequence=sequence,
            request=answer.request,
            outcome=answer.outcome,
            http_status=answer.http_status,
            body=answer.body,
            sha256=digest,
            observed_at=answer.observed_at,
        )
        for sequence, (answer, digest) in enumerate(zip(answers, digests, strict=True), start=1)
    )
    return read
