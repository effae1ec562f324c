"""Refund requests (SPEC §16): an assistant proposes a refund through MCP; only the envelope's
owner, in the browser, makes money move. No bearer token moves money.

- `refund_request_create` validates exactly as the REST refund does (the same codes, in the same
  order), computes the last-in-first-out preview without locking or reserving anything, and stores
  a request that expires after REFUND_REQUEST_TTL_S — under the caller's idempotency key, on
  surface `mcp`, for the operation the REST refund of that envelope is named by.
- `refund_request_confirm` runs SPEC §3's refund under that same idempotency record, so that a
  confirmation that died after reserving resumes its refund and never starts a second one."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

from django.conf import settings
from django.db import IntegrityError, transaction

from accounts.exceptions import EmailUnverified
from accounts.models import User
from accounts.selectors import user_email_verified
from agents import selectors
from agents.models import RefundRequest
from core.api.throttling import window_count
from core.exceptions import NotFound, Throttled
from core.idempotency import (
    SURFACE_MCP,
    StoredAnswer,
    idempotent_run,
    lease_for,
    operation_name,
    render_json,
)
from core.models import IdempotencyRecord
from core.services import audit_record
from envelopes.exceptions import (
    AmountExceedsUnspent,
    InvalidAmount,
    NothingToRefund,
    RefundChanged,
)
from envelopes.models import RefundOperation
from envelopes.selectors import envelope_get_owned, refund_preview
from envelopes.services import envelope_refund
from verification import clock

REFUND_OPERATION = "envelope.refund"  # the REST refund's action: one operation on both surfaces
RATE_SCOPE = "refund_request"
BIGINT_MAX = 2**63 - 1
# What the refund itself may refuse a confirmation with: the request is then refused, for good.
CONFIRM_REFUSALS = (AmountExceedsUnspent, NothingToRefund, EmailUnverified)


def refund_request_rate_check(*, user: User) -> None:
    """At most MCP_REFUND_REQUEST_RATE refund requests per buyer (`"<n>/<s|min|hour|day>"`; empty:
    no limit), counted in the shared cache per fixed window as the REST throttles count
    (core/api/throttling.py), refused calls included. Over it: 429 `rate_limited` with
    `retry_after_s`, before the key is looked at, so nothing is stored under it."""
    rate = settings.MCP_REFUND_REQUEST_RATE
    if not rate:
        return
    wait = window_count(scope=RATE_SCOPE, ident=user.pk, rate=rate)
    if wait is not None:
        retry_after = max(1, math.ceil(wait))
        raise Throttled(
            "Too many refund requests; retry after the number of seconds in retry_after_s.",
            details={"retry_after_s": retry_after},
        )


def _checked_amount(amount_micro: Any) -> int | None:
    """As the REST refund parses `amount_micro`: absent (None) is the whole unspent balance; else
    a JSON integer (no string, float or boolean) within 64 bits, then positive; else
    `invalid_amount`."""
    if amount_micro is None:
        return None
    if (
        not isinstance(amount_micro, int)
        or isinstance(amount_micro, bool)
        or not -BIGINT_MAX - 1 <= amount_micro <= BIGINT_MAX
    ):
        raise InvalidAmount(
            "amount_micro must be an integer number of micro-dollars.",
            details={"amount_micro": ["A valid integer is required."]},
        )
    if amount_micro <= 0:
        raise InvalidAmount("amount_micro must be a positive integer number of micro-dollars.")
    return amount_micro


def refund_request_create(
    *,
    user: User,
    envelope_id: str,
    amount_micro: Any,
    idempotency_key: str,
    client_id: str,
    origin: str,
) -> dict[str, Any]:
    """Propose a refund of the caller's envelope (the MCP tool `envelope_refund_request`). Checks,
    in the REST refund's order: e-mail verified (`email_unverified`), the per-buyer limit
    (`rate_limited`), the key (`invalid_idempotency_key`, `idempotency_key_in_use`,
    `idempotency_key_other_surface`, `idempotency_key_conflict`, or a replay), the amount
    (`invalid_amount`), the envelope (`not_found`, the same for another buyer's as for a missing
    one), then the refund's own refusals (`amount_exceeds_unspent`, `nothing_to_refund`). Moves no
    money and reserves nothing: stores the request, its preview and an audit event
    `refund_request.create` in one transaction. The same key with the same arguments answers the
    same dict (the same request); a refusal stores nothing under the key.

    `amount_micro` None: the whole unspent balance. `envelope_id` is compared percent-decoded, as a
    REST path's is. `origin` (scheme://host) prefixes `confirm_url`."""
    if not user_email_verified(user=user):
        raise EmailUnverified()
    refund_request_rate_check(user=user)
    envelope_id = unquote(str(envelope_id))
    if "\x00" in envelope_id:  # as a REST path's id: names nothing that can exist
        raise NotFound()
    body = {} if amount_micro is None else {"amount_micro": amount_micro}

    def action(record: IdempotencyRecord) -> dict[str, Any]:
        return _refund_request_make(
            user=user,
            envelope_id=envelope_id,
            amount_micro=amount_micro,
            record=record,
            client_id=client_id,
            origin=origin,
        )

    result = idempotent_run(
        user=user,
        key=idempotency_key if isinstance(idempotency_key, str) else "",
        operation=operation_name(REFUND_OPERATION, envelope_id),
        surface=SURFACE_MCP,
        body=body,
        action=action,
        answer=lambda data: (200, render_json(data)),
        provider_calls=0,
    )
    if isinstance(result, StoredAnswer):
        stored: dict[str, Any] = json.loads(result.body)
        return stored
    return result


def _refund_request_make(
    *,
    user: User,
    envelope_id: str,
    amount_micro: Any,
    record: IdempotencyRecord,
    client_id: str,
    origin: str,
) -> dict[str, Any]:
    existing = RefundRequest.objects.filter(idempotency=record).first()
    if existing is not None:  # a resumed call whose first process made the request, then died
        return selectors.refund_request_data(existing, origin=origin)
    amount = _checked_amount(amount_micro)
    envelope = envelope_get_owned(user=user, envelope_id=envelope_id)
    preview = refund_preview(envelope=envelope, amount_micro=amount)
    try:
        with transaction.atomic():
            request = RefundRequest.objects.create(
                owner=user,
                envelope=envelope,
                amount_micro=amount,
                preview=preview,
                idempotency=record,
                client_id=str(client_id)[:100],
                expires_at=clock.now() + timedelta(seconds=settings.REFUND_REQUEST_TTL_S),
            )
            audit_record(
                actor=user,
                action="refund_request.create",
                target_type="refund_request",
                target_id=request.public_id,
                details={
                    "envelope": envelope.public_id,
                    "amount_micro": amount,
                    "preview_total_micro": preview["total_micro"],
                    "client_id": request.client_id,
                    "expires_at": request.expires_at.isoformat(),
                },
            )
    except IntegrityError:  # a concurrent resumption of the same call made it first
        request = RefundRequest.objects.get(idempotency=record)
    return selectors.refund_request_data(request, origin=origin)


def refund_request_get(*, user: User, request_id: str, origin: str) -> dict[str, Any]:
    """The caller's refund request (the MCP tool `refund_request_get`): status
    pending_confirmation | confirmed | expired | refused, the preview it was made with, its
    `confirm_url`, `refusal_code` when refused and `refund` (the refund resource) when confirmed.
    Another buyer's request is `not_found`, exactly as a missing one."""
    request = selectors.refund_request_get_owned(user=user, request_id=request_id)
    return selectors.refund_request_data(request, origin=origin, detail=True)


DECLINED = "declined_by_person"  # the refusal code of a request its owner declined in the host


def refund_request_decline(*, user: User, request_id: str, origin: str) -> dict[str, Any]:
    """The owner declined (or cancelled) the host's offer of the confirmation page (a URL-mode
    elicitation, docs/decisions/0015-the-confirmation-page-as-a-url-elicitation.md): a pending
    request that no confirmation has begun is refused for good with `declined_by_person` and an
    audit event, so the page no longer offers to confirm it. One already confirmed, or whose
    confirmation is under way, is left as it is: the person's confirmation on the page stands.
    Moves no money. Answers the request as `envelope_refund_request` does."""
    request = selectors.refund_request_get_owned(user=user, request_id=request_id)
    with transaction.atomic():
        locked = _lock(request)
        record = locked.idempotency
        begun = record is not None and bool(record.resource)
        leased = locked.confirm_lease_until is not None and locked.confirm_lease_until > clock.now()
        if locked.status == RefundRequest.Status.PENDING and not begun and not leased:
            _refuse(locked, DECLINED, actor=user)
    return selectors.refund_request_data(
        selectors.refund_request_get_owned(user=user, request_id=request_id), origin=origin
    )


# --- confirming, in the browser ------------------------------------------------------------------


@dataclass(frozen=True)
class Confirmation:
    """How a confirmation ended. `outcome`: confirmed (the refund ran: `refund`), changed (the
    preview differs from the one shown: no money moved), expired, already_confirmed, refused
    (`code` says why), in_progress (another confirmation holds the request)."""

    outcome: str
    refund: RefundOperation | None = None
    code: str = ""


def _refuse(request: RefundRequest, code: str, *, actor: User) -> Confirmation:
    """Mark the (locked) request refused with a REST error code, and record the attempt."""
    request.status = RefundRequest.Status.REFUSED
    request.refusal_code = code
    request.confirm_lease_until = None
    request.save(update_fields=["status", "refusal_code", "confirm_lease_until"])
    audit_record(
        actor=actor,
        action="refund_request.confirm",
        target_type="refund_request",
        target_id=request.public_id,
        details={"outcome": "refused", "code": code, "envelope": request.envelope.public_id},
    )
    return Confirmation("refused", code=code)


def _lock(request: RefundRequest) -> RefundRequest:
    return (
        RefundRequest.objects.select_for_update(of=("self",))
        .select_related("envelope", "idempotency")
        .get(pk=request.pk)
    )


# Money moves here only, for the owner, in a browser session:
# docs/decisions/0005-no-bearer-token-moves-money.md
def refund_request_confirm(*, user: User, request_id: str, shown_digest: str) -> Confirmation:
    """The owner confirms their request with the digest of the preview they were shown. Nothing
    moves unless the preview computed now is that one (else `changed`), the request is pending
    and unexpired, and the owner's e-mail is verified. Then the request is leased (a second
    confirmation meanwhile is `in_progress` and starts nothing), SPEC §3's refund runs outside any
    transaction under the request's idempotency record (which names the refund in the transaction
    that reserves it), and the request is marked confirmed with an audit event
    `refund_request.confirm`. A confirmation that died after reserving is finished by the next one
    (once its lease lapsed): the same refund, never a second. A refusal (`amount_exceeds_unspent`,
    `nothing_to_refund`, `email_unverified`) marks the request refused with that code.
    Another buyer's request is `not_found`, exactly as a missing one."""
    request = selectors.refund_request_get_owned(user=user, request_id=request_id)
    now = clock.now()
    with transaction.atomic():
        locked = _lock(request)
        if locked.status == RefundRequest.Status.CONFIRMED:
            return Confirmation("already_confirmed", refund=locked.refund)
        if locked.status == RefundRequest.Status.REFUSED:
            return Confirmation("refused", code=locked.refusal_code)
        if locked.confirm_lease_until is not None and locked.confirm_lease_until > now:
            return Confirmation("in_progress")
        record = locked.idempotency
        begun = record is not None and bool(record.resource)
        legs = len(locked.preview.get("legs") or [])
        # What the person confirmed: the refund re-checks it under the envelope's lock.
        expected: tuple[int, list[tuple[str, int]]] | None = None
        if not begun:
            if now >= locked.expires_at:
                return Confirmation("expired")
            if not user_email_verified(user=user):
                return _refuse(locked, EmailUnverified.code, actor=user)
            try:
                preview = selectors.preview_now(locked)
            except (AmountExceedsUnspent, NothingToRefund) as exc:
                return _refuse(locked, exc.code, actor=user)
            if selectors.preview_digest(preview) != shown_digest:
                return Confirmation("changed")
            legs = len(preview["legs"])
            expected = (
                preview["requested_micro"],
                [(leg["funding_id"], leg["amount_micro"]) for leg in preview["legs"]],
            )
        # Held past the refund's whole provider budget, so it never lapses under a live refund.
        locked.confirm_lease_until = now + lease_for(provider_calls=max(1, legs))
        locked.save(update_fields=["confirm_lease_until"])
    try:
        operation = envelope_refund(
            envelope_id=locked.envelope.public_id,
            actor=user,
            amount_micro=locked.amount_micro,
            idempotency=record,
            expected=expected,
        )
    except RefundChanged:
        # A debit or another refund landed after the check: nothing was reserved. The page
        # shows the refund as it is now, to be confirmed again.
        RefundRequest.objects.filter(pk=locked.pk).update(confirm_lease_until=None)
        return Confirmation("changed")
    except CONFIRM_REFUSALS as exc:
        with transaction.atomic():
            return _refuse(_lock(locked), exc.code, actor=user)
    except BaseException:
        # No process works on it any more: the next confirmation may go at once.
        RefundRequest.objects.filter(pk=locked.pk).update(confirm_lease_until=None)
        raise
    with transaction.atomic():
        done = _lock(locked)
        done.status = RefundRequest.Status.CONFIRMED
        done.refund = operation
        done.confirmed_at = clock.now()
        done.confirm_lease_until = None
        done.save(update_fields=["status", "refund", "confirmed_at", "confirm_lease_until"])
        audit_record(
            actor=user,
            action="refund_request.confirm",
            target_type="refund_request",
            target_id=done.public_id,
            details={
                "outcome": "confirmed",
                "refund": operation.public_id,
                "envelope": done.envelope.public_id,
                "resumed": begun,
            },
        )
    return Confirmation("confirmed", refund=operation)
