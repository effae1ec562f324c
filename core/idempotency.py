"""Idempotency keys for every mutating endpoint, on every surface (SPEC §4, §16).

A surface (REST, MCP) names itself and the operation; the mechanism is the same: `idempotent_run`
claims the key, then replays, refuses or runs, then stores or drops. Checks run in this order: in
use (409), other surface (422), conflict (422), replay. A response is stored only when the request
changed state or called the provider; otherwise the record is dropped so the client can correct and
retry under the same key. core/api/idempotent.py is the REST surface's wrapper; agents/services.py
runs the MCP refund request under the same function."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.module_loading import import_string
from rest_framework.renderers import JSONRenderer

from core import db
from core.api.responses import error_body
from core.crash import crash_point
from core.exceptions import VouchError
from core.metrics import idempotency_refused, idempotency_replayed
from core.models import IdempotencyRecord

# The surfaces an operation can be asked on. A key is scoped to one: the same key for the same
# operation on the other surface is refused (`idempotency_key_other_surface`), never replayed.
SURFACE_REST = "rest"
SURFACE_MCP = "mcp"


class InvalidIdempotencyKey(VouchError):
    code = "invalid_idempotency_key"
    status_code = 400
    default_message = "Idempotency-Key must be 1 to 255 printable ASCII characters."


class IdempotencyKeyInUse(VouchError):
    code = "idempotency_key_in_use"
    status_code = 409
    default_message = "A request with this Idempotency-Key is still running; retry shortly."


class IdempotencyKeyConflict(VouchError):
    code = "idempotency_key_conflict"
    status_code = 422
    default_message = "This Idempotency-Key was used for this operation with another body."


class IdempotencyKeyOtherSurface(VouchError):
    code = "idempotency_key_other_surface"
    status_code = 422
    default_message = (
        "This Idempotency-Key was used for this operation on another surface. It may have run: "
        "read the state before retrying under a new key."
    )


def validate_key(key: str) -> str:
    if not 1 <= len(key) <= 255 or not all(0x20 <= ord(ch) <= 0x7E for ch in key):
        raise InvalidIdempotencyKey()
    return key


# The column the operation name is stored in (IdempotencyRecord.operation).
OPERATION_MAX_LENGTH = 255


def operation_bounded(name: str) -> str:
    """The stored form of an operation name, within its column. A name that fits is kept as it is
    (every record stored before stays matched); a longer one (an id nobody could own, or a very
    long one) becomes its action and a SHA-256 of the whole name: stable, so a retry replays, and
    distinct per id. The `/` cannot appear in an id taken from a URL path segment, so a digested
    name never equals a name that fits."""
    if len(name) <= OPERATION_MAX_LENGTH:
        return name
    action = name.split(":", 1)[0][:100]
    return f"{action}:/sha256/{hashlib.sha256(name.encode()).hexdigest()}"


def operation_name(action: str, *ids: Any) -> str:
    """`action:id:…`, named the same on every surface (ids as the caller means them: a REST path
    segment after Django's percent-decoding, an MCP argument as sent), as stored (a name too long
    for its column is digested, one that fits is unchanged)."""
    return operation_bounded(":".join([action, *(str(i) for i in ids)]))


def body_digest(body: Any) -> str:
    """Canonical JSON (sorted keys, no spaces); no body equals {}."""
    canonical = json.dumps(
        body if body not in (None, "") else {}, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def lease_for(*, provider_calls: int) -> timedelta:
    """How long a running request holds its key before a retry may resume it: Vouch's own work
    (`IDEMPOTENCY_LEASE_MARGIN_S`) plus the provider adapter's whole retry budget for each provider
    call it is about to make (`IDEMPOTENCY_PROVIDER_BUDGET` names the function that tells it).
    A request that makes more calls renews its lease before each (`idempotency_renew`), so a dead
    process holds the key for at most one call's budget, never a fixed quarter of an hour."""
    budget = import_string(settings.IDEMPOTENCY_PROVIDER_BUDGET)() if provider_calls else 0.0
    return timedelta(
        seconds=float(settings.IDEMPOTENCY_LEASE_MARGIN_S) + provider_calls * float(budget)
    )


@dataclass
class Claim:
    """The outcome of presenting a key: a record to run under, or a stored answer to replay."""

    record: IdempotencyRecord
    replay: bool
    resumed: bool = False


def idempotency_claim(
    *, user: Any, key: str, operation: str, surface: str, body: Any, provider_calls: int = 1
) -> Claim:
    """Present a key for an operation: a new record to run under (leased for `provider_calls`
    provider calls), a stored answer to replay, or a record whose process died to resume."""
    operation = operation_bounded(operation)
    digest = body_digest(body)
    now = timezone.now()
    lease = lease_for(provider_calls=provider_calls)
    for _ in range(2):  # the record dropped between our two statements: insert it again
        # A new key (the common case): its record in one statement, with no transaction around
        # it. A key presented before is left as it is (its unique constraint), decided locked.
        fresh = IdempotencyRecord(
            user=user,
            key=key,
            operation=operation,
            surface=surface,
            request_digest=digest,
            lease_until=now + lease,
        )
        inserted = db.execute([db.insert(fresh, unless_conflict=True)])[0]
        if inserted:
            db.inserted(fresh, inserted)
            return Claim(fresh, replay=False)
        with transaction.atomic():
            record = (
                IdempotencyRecord.objects.select_for_update()
                .filter(user=user, key=key, operation=operation)
                .first()
            )
            if record is None:
                continue
            if record.running and record.lease_until > now:
                raise idempotency_refused(IdempotencyKeyInUse(), surface=surface)
            if record.surface != surface:
                raise idempotency_refused(IdempotencyKeyOtherSurface(), surface=surface)
            if record.request_digest != digest:
                raise idempotency_refused(IdempotencyKeyConflict(), surface=surface)
            if not record.running:
                idempotency_replayed(surface=surface)
                return Claim(record, replay=True)
            # The first request's process died: its lease lapsed. Resume what it names.
            record.lease_until = now + lease
            record.save(update_fields=["lease_until"])
            return Claim(record, replay=False, resumed=True)
    raise idempotency_refused(IdempotencyKeyInUse(), surface=surface)


def idempotency_attach(record: IdempotencyRecord | None, resource: str) -> None:
    """Name what this request created, in the transaction that creates it, so a resumption
    continues it instead of starting anew. No record (no key was sent): nothing to name."""
    db.execute(idempotency_attach_statements(record, resource))
    idempotency_attached(record, resource)


def idempotency_attach_statements(
    record: IdempotencyRecord | None, resource: str
) -> list[db.Statement]:
    """`idempotency_attach` as a statement for a batch (core.db.execute) of the transaction that
    creates `resource`; after the batch ran, `idempotency_attached` notes it on the record."""
    if record is None:
        return []
    table = connection.ops.quote_name(IdempotencyRecord._meta.db_table)
    return [db.Statement(f"UPDATE {table} SET resource = %s WHERE id = %s", (resource, record.pk))]  # noqa: S608


def idempotency_attached(record: IdempotencyRecord | None, resource: str) -> None:
    if record is not None:
        record.resource = resource


def idempotency_renew(record: IdempotencyRecord | None, *, provider_calls: int = 1) -> None:
    """A live worker about to call the provider again extends its lease by that call's budget,
    so a retry never resumes work that is still running."""
    if record is None:
        return
    lease_until = timezone.now() + lease_for(provider_calls=provider_calls)
    IdempotencyRecord.objects.filter(pk=record.pk, running=True).update(lease_until=lease_until)
    record.lease_until = lease_until


def idempotency_lease_end(record: IdempotencyRecord) -> None:
    """The server caught an error: no process works on this request any more, so a retry may
    resume at once instead of waiting for the lease to lapse."""
    IdempotencyRecord.objects.filter(pk=record.pk, running=True).update(lease_until=timezone.now())


def idempotency_store(record: IdempotencyRecord, *, status: int, body: str) -> None:
    """Keep the answer, rendered, so that a replay is the same bytes."""
    IdempotencyRecord.objects.filter(pk=record.pk).update(
        running=False, response_status=status, response_body=body
    )


def render_json(data: Any) -> str:
    """The bytes DRF's JSON renderer sends for `data`: what a replay must send again."""
    return JSONRenderer().render(data).decode()


def idempotency_settle_error(*, resource: str, error: VouchError) -> int:
    """Keep a refusal that ends an operation (a declined card) as the answer of every running
    request that created `resource`, in the transaction that records the refusal — whoever
    records it (the request itself, the resumption job, a provider event). A retry after a crash
    then replays the refusal, even though the resource it named is gone (a declined creation
    leaves no envelope). Returns how many records it settled."""
    if not resource or not error.stores_idempotent_response:
        return 0
    body = render_json(error_body(error.code, error.message, error.details))
    return IdempotencyRecord.objects.filter(resource=resource, running=True).update(
        running=False, response_status=error.status_code, response_body=body
    )


def idempotency_drop(record: IdempotencyRecord) -> None:
    """Nothing happened: forget the key (a validation error, a 404)."""
    IdempotencyRecord.objects.filter(pk=record.pk, running=True).delete()


T = TypeVar("T")


@dataclass(frozen=True)
class StoredAnswer:
    """An answer kept under the key, to send again: the first request's (`replayed`), or the one
    another observer of this very operation recorded while it ran (a provider event, the
    resumption job), which is the truth about how it ended."""

    status: int
    body: str
    replayed: bool


def idempotent_run(
    *,
    user: Any,
    key: str,
    operation: str,
    surface: str,
    body: Any,
    action: Callable[[IdempotencyRecord], T],
    answer: Callable[[T], tuple[int, str]],
    provider_calls: int = 1,
) -> T | StoredAnswer:
    """Run `action` once under `key` for `operation` on `surface`, whatever the surface: an
    invalid key is refused; a key in use, used on another surface or with another `body` is
    refused; a finished one replays its stored answer; otherwise `action` runs with the record
    (a resumed record names what its dead first request created: `record.resource`). `answer`
    turns the action's result into the (status, rendered body) kept for replays. A refusal that
    changed nothing drops the record so the corrected request may use the key again; one that
    ended an operation at the provider is stored; an error the server did not expect ends the
    lease at once, so a retry resumes what the record names without waiting."""
    validate_key(key)
    claim = idempotency_claim(
        user=user,
        key=key,
        operation=operation,
        surface=surface,
        body=body,
        provider_calls=provider_calls,
    )
    record = claim.record
    if claim.replay:
        return StoredAnswer(int(record.response_status or 200), record.response_body, True)
    try:
        result = action(record)
    except VouchError as exc:
        settled = IdempotencyRecord.objects.filter(pk=record.pk, running=False).first()
        if settled is not None and settled.response_status is not None:
            return StoredAnswer(settled.response_status, settled.response_body, False)
        if exc.stores_idempotent_response:
            rendered = render_json(error_body(exc.code, exc.message, exc.details))
            idempotency_store(record, status=exc.status_code, body=rendered)
        elif record.resource:
            # Something was created before the refusal: the record must keep naming it.
            idempotency_lease_end(record)
        else:
            idempotency_drop(record)
        raise
    except BaseException:
        idempotency_lease_end(record)
        raise
    crash_point("idempotent_before_store")
    status, rendered = answer(result)
    idempotency_store(record, status=status, body=rendered)
    return result


def idempotency_prune(*, older_than_days: int) -> int:
    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = IdempotencyRecord.objects.filter(created_at__lt=cutoff, running=False).delete()
    return deleted
