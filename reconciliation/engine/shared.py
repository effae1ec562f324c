"""What every part of a run uses: the run's context (its grace period, what it found so far),
recording a finding, storing a provider read as the bytes received with their SHA-256, reading
one provider object alone, and the small readers of provider objects' fields."""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction

from envelopes.models import MICRO_PER_CENT
from providers import ProviderUnavailable
from providers.outcomes import Outcome
from providers.stripe_provider import StripeProvider
from reconciliation.classes import REFUND_MONEY
from reconciliation.models import Observation, Run
from reconciliation.services import Finding, discrepancy_record
from verification import clock

LIVE = ("pending", "requires_action", "succeeded")
GONE = ("failed", "canceled")


@dataclass
class _Context:
    run: Run
    provider: StripeProvider
    budget: Any
    now: datetime
    grace: timedelta
    progress: Callable[[Run], None] | None
    # Charges with a refund-level money finding in this run: their totals are explained by it.
    # Only this run's findings explain (SPEC §15.3): a discrepancy an earlier run left open
    # explains nothing, for this run may clear it.
    explained: set[str] = field(default_factory=set)
    # A dry run releases nothing: what it would release, by charge (micro-dollars).
    would_release: dict[str, int] = field(default_factory=dict)
    # A dry run records nothing: the keys (class, subject type, subject id) it found.
    dry_findings: set[tuple[str, str, str]] = field(default_factory=set)
    # Refunds carrying Vouch's metadata whose leg is not recorded yet, by charge (micro-dollars):
    # in flight, like an open leg, so their charge may show them refunded already.
    in_flight: dict[str, int] = field(default_factory=dict)

    def recent(self, moment: datetime | int | float | None) -> bool:
        """Inside the grace period (what Vouch has in flight is expected, not a discrepancy)."""
        if moment is None:
            return False
        if not isinstance(moment, datetime):
            return self.now.timestamp() - float(moment) < self.grace.total_seconds()
        return self.now - moment < self.grace


def _carried_in(ctx: _Context) -> None:
    """What the run had found before it was interrupted, from its checkpoint: the charges its
    findings explain, what a dry run would release and the findings a dry run keeps."""
    carried = (ctx.run.checkpoint or {}).get("carried") or {}
    ctx.explained.update(carried.get("explained") or [])
    ctx.would_release.update(carried.get("would_release") or {})
    ctx.in_flight.update(carried.get("in_flight") or {})
    ctx.dry_findings.update(tuple(key) for key in carried.get("dry_findings") or [])


def _carried(ctx: _Context) -> dict[str, Any]:
    """What the checkpoint carries for a resumed run (nothing, when nothing was found)."""
    carried: dict[str, Any] = {}
    if ctx.explained:
        carried["explained"] = sorted(ctx.explained)
    if ctx.would_release:
        carried["would_release"] = ctx.would_release
    if ctx.in_flight:
        carried["in_flight"] = ctx.in_flight
    if ctx.dry_findings:
        carried["dry_findings"] = sorted(list(key) for key in ctx.dry_findings)
    return {"carried": carried} if carried else {}


def _tick(ctx: _Context) -> None:
    if ctx.progress is not None:
        ctx.progress(ctx.run)


def _count(ctx: _Context, kind: str, n: int = 1) -> None:
    ctx.run.compared[kind] = ctx.run.compared.get(kind, 0) + n


def _found(ctx: _Context, finding: Finding) -> None:
    if finding.code in REFUND_MONEY and finding.charge_id:
        ctx.explained.add(finding.charge_id)
    if ctx.run.dry_run:
        ctx.dry_findings.add(finding.key)
        return
    if finding.observation is not None and finding.observation.pk is None:
        # The page it was seen in, stored before the discrepancy that cites it.
        with _committed_lazily():
            finding.observation.save(force_insert=True)
    discrepancy_record(run=ctx.run, finding=finding)


# docs/decisions/0007-compressed-observations.md: the bytes kept, compressed, with their hash.
@dataclass(frozen=True)
class _Stored:
    """An answer as it is stored: the SHA-256 of its bytes, the bytes zlib-compressed (level 1:
    a page of 100 charges, 565 KB, in a few milliseconds), and their length."""

    sha256: str
    compressed: bytes
    length: int


def _stored(raw: bytes) -> _Stored:
    return _Stored(hashlib.sha256(raw).hexdigest(), zlib.compress(raw, 1), len(raw))


def _observe(
    ctx: _Context,
    kind: str,
    request: dict[str, Any],
    data: Any = None,
    body: bytes | None = None,
    stored: _Stored | None = None,
) -> Observation:
    """Store what the provider answered as the bytes received (`body`, or `stored` already hashed
    and compressed); what has no body (Vouch's own side, an error) as canonical JSON of `data`.
    The stored bytes hash to the recorded SHA-256."""
    if stored is None:
        stored = _stored(body if body is not None else json.dumps(data, sort_keys=True).encode())
    observation = _observation(ctx, kind, request, stored)
    with _committed_lazily():
        observation.save(force_insert=True)
    return observation


def _observation(ctx: _Context, kind: str, request: dict[str, Any], stored: _Stored) -> Observation:
    """An observation not saved yet (a list page is saved with its checkpoint, or before a
    discrepancy that cites it, whichever comes first)."""
    return Observation(
        run=ctx.run,
        kind=kind,
        request=request,
        body=stored.compressed,
        body_length=stored.length,
        sha256=stored.sha256,
        observed_at=clock.now(),
    )


@contextmanager
def _committed_lazily() -> Iterator[None]:
    """A transaction whose commit does not wait for PostgreSQL to flush it to disk
    (`synchronous_commit` off for it alone): a run's observations, its Seen rows and its
    checkpoints, a few hundred a run, each commit otherwise waiting for a flush. A crash of
    PostgreSQL can lose the last fraction of a second of them, never out of order: the run then
    resumes from an earlier checkpoint and reads those pages again. Discrepancies and money commit
    as always, and such a commit makes everything committed before it durable too."""
    inside_another = connection.in_atomic_block  # then it is that one's commit: left as it is
    with transaction.atomic():
        if connection.vendor == "postgresql" and not inside_another:
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield


def _read(ctx: _Context, kind: str, object_id: str) -> tuple[Outcome, Observation]:
    reader = {
        "refund": ctx.provider.refund_read,
        "charge": ctx.provider.charge_read,
        "dispute": ctx.provider.dispute_read,
    }[kind]
    outcome = reader(object_id, budget=ctx.budget)
    ctx.run.provider_calls += outcome.attempts
    if not outcome.accepted and not outcome.refused:
        raise ProviderUnavailable(kind=kind, params={"id": object_id}, outcome=outcome)
    request = {"path": f"/v1/{kind}s/{object_id}", "http_status": outcome.http_status}
    if outcome.accepted and outcome.body is not None:
        return outcome, _observe(ctx, kind, request, body=outcome.body)
    # A refusal is kept as what it said (its code), as canonical JSON.
    data = outcome.value if outcome.accepted else {"error": outcome.error_code, "id": object_id}
    return outcome, _observe(ctx, kind, request, data)


def _ledger_observation(ctx: _Context, what: str, data: dict[str, Any]) -> Observation:
    return _observe(ctx, "ledger", {"what": what}, data)


def _id(value: Any) -> str:
    """An id field (`"ch_…"`; Vouch never asks the provider to expand one), or "" for none."""
    return str(value or "")


def _leg_named(refund: dict[str, Any]) -> str:
    metadata = refund.get("metadata") or {}
    return str(metadata.get("vouch_leg") or "") if isinstance(metadata, dict) else ""


def _micro(cents: Any) -> int:
    """An amount the provider shows in cents, in micro-dollars (0 if it shows no number)."""
    number = isinstance(cents, int) and not isinstance(cents, bool)
    return cents * MICRO_PER_CENT if number else 0


def _submissions(dispute: dict[str, Any]) -> Any:
    """How many times evidence was submitted for a dispute, as the provider shows it."""
    return (dispute.get("evidence_details") or {}).get("submission_count", 0)


def _differing(vouch: dict[str, Any], provider: dict[str, Any], names: Iterable[str]) -> list[str]:
    return [name for name in names if vouch.get(name) != provider.get(name)]


def _chunks(ids: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]
