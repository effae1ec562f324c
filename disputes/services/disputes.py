"""Disputes as Vouch keeps them (SPEC §9): a provider's dispute normalized and recorded once, a
dispute entered by staff, the provider's `charge.dispute.*` events, and the provider told that
evidence is submitted by hand (never by Smart Disputes)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.crash import crash_point
from core.exceptions import InvalidInput
from core.idempotency import idempotency_attach
from core.services import audit_record
from disputes import exceptions as errors
from disputes.models import (
    Dispute,
    DisputeSource,
    Packet,
)
from disputes.services.preparation import _version_draft, _version_save
from envelopes.services import dispute_funds_follow
from providers import Outcome, provider_from_settings

if TYPE_CHECKING:
    from accounts.models import User
    from core.models import IdempotencyRecord

logger = logging.getLogger("vouch.disputes")

MICRO_PER_CENT = 10_000
# Stripe's largest amount, 99,999,999 cents, in micro-dollars.
MAX_DISPUTE_MICRO = 99_999_999 * MICRO_PER_CENT
MANUAL = "manual"
RESPONDABLE = ("needs_response", "warning_needs_response")  # the provider awaits evidence
DECIDED = ("won", "lost")  # the provider's decision (a dispute's, or its appeal's)


# Stripe's `evidence_details.due_by` when the card network allows no response to the dispute.
NO_RESPONSE_DUE_BY = 0


def _deadline(value: Any) -> datetime | None:
    """Stripe's `due_by` (epoch seconds) as a deadline: none when it is null (no deadline
    known) or 0 (no response allowed, never 1970-01-01)."""
    if value in (None, "", NO_RESPONSE_DUE_BY):
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromtimestamp(int(value), tz=UTC)


def dispute_normalize(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A provider Dispute object (Stripe's shape, as the pinned SDK's `stripe.Dispute` declares
    it) as the fields Vouch keeps, every one as the provider last said it."""
    charge = obj.get("charge")
    if isinstance(charge, Mapping):
        charge = charge.get("id")
    details = obj.get("evidence_details") or {}
    card = (obj.get("payment_method_details") or {}).get("card") or {}
    due_by = details.get("due_by")
    refundable = obj.get("is_charge_refundable")
    return {
        "provider_dispute_id": str(obj["id"]),
        "charge_id": str(charge or ""),
        "amount_micro": int(obj["amount"]) * MICRO_PER_CENT,
        "currency": str(obj.get("currency") or "usd").lower(),
        "reason": str(obj.get("reason") or "general"),
        "response_deadline": _deadline(due_by),
        "response_allowed": due_by != NO_RESPONSE_DUE_BY,
        "provider_status": str(obj.get("status") or ""),
        "intended_submission_method": str(obj.get("intended_submission_method") or ""),
        # The card network's own code, as Stripe gives it for a card dispute; the dispute's
        # top-level `network_reason_code` (any payment method) when the card has none.
        "network_reason_code": str(
            card.get("network_reason_code") or obj.get("network_reason_code") or ""
        ),
        "card_brand": str(card.get("brand") or ""),
        "case_type": str(card.get("case_type") or ""),
        "is_charge_refundable": refundable if isinstance(refundable, bool) else None,
        "enhanced_eligibility_types": sorted(
            str(kind) for kind in obj.get("enhanced_eligibility_types") or [] if kind
        ),
        "provider_fees_micro": _fees(obj.get("balance_transactions")),
    }


def _fees(transactions: Any) -> int | None:
    """The fees the dispute's balance transactions show (Stripe's `fee`, in cents, of each), in
    micro-dollars; None when it shows none (an inquiry withdraws nothing, so it has none)."""
    fees = [
        int(txn["fee"])
        for txn in transactions or []
        if isinstance(txn, Mapping) and isinstance(txn.get("fee"), int)
    ]
    return sum(fees) * MICRO_PER_CENT if fees else None


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
    decided = values.get("provider_status") in DECIDED
    with transaction.atomic():
        dispute = (
            Dispute.objects.select_for_update()
            .filter(provider="stripe", provider_dispute_id=key)
            .first()
        )
        if dispute is not None:
            if source == DisputeSource.PROVIDER:
                changed = [f for f, v in values.items() if getattr(dispute, f) != v]
                if decided and "provider_status" in changed:
                    values["decided_at"] = timezone.now()  # a decision, or an appeal's after it
                    changed.append("decided_at")
                for name in changed:
                    setattr(dispute, name, values[name])
                if changed:
                    dispute.save(update_fields=[*changed, "updated_at"])
            return dispute, False
        try:
            with transaction.atomic():
                dispute = Dispute.objects.create(
                    provider_dispute_id=key,
                    source=source,
                    entered_by=entered_by,
                    decided_at=timezone.now() if decided else None,
                    **values,
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


# What a person types of a dispute, checked against what the provider's read shows.
TYPED_FIELDS = ("charge_id", "amount_micro", "currency", "reason")


def dispute_enter(
    *, actor: User, data: Mapping[str, Any], idempotency: IdempotencyRecord | None = None
) -> Packet:
    """A dispute entered by staff, recorded as the provider shows it (SPEC §18): the provider's
    dispute is read first, outside any transaction, and its charge, amount, currency and reason
    (and everything else `dispute_normalize` keeps) are recorded from that read, never from what
    was typed. What was typed must agree with it: a disagreement is refused
    (`dispute_mismatch`, each field typed against the provider's), a dispute the provider does not
    hold is refused (`dispute_not_at_provider`), and a read without an answer records nothing
    (`dispute_read_unavailable`: try again). Then its first version is prepared (the person asked
    for it) and, unless the provider says `manual` already, it is set to be submitted manually
    (never by Smart Disputes). Three commits, the provider's update after the last: a resumed
    request continues with the dispute its record names, from where it stopped, and never records
    another. Returns the entry's version."""
    if idempotency is not None and idempotency.resource:
        dispute = Dispute.objects.get(public_id=idempotency.resource)
    else:
        typed = {
            "charge_id": data["charge_id"],
            "amount_micro": data["amount_micro"],
            "currency": str(data.get("currency") or "").lower() or None,  # None: not typed
            "reason": data["reason"],
        }
        if typed["amount_micro"] <= 0 or typed["amount_micro"] % MICRO_PER_CENT:
            raise InvalidInput("amount_micro must be a positive whole number of cents in micro.")
        if typed["amount_micro"] > MAX_DISPUTE_MICRO:  # also beyond what a digest can carry
            raise InvalidInput(
                "amount_micro is at most 999,999,990,000 ($999,999.99, Stripe's most)."
            )
        if typed["currency"] is not None and str(typed["currency"]).lower() != "usd":
            raise errors.UnsupportedCurrency()
        fields = _provider_fields(str(data["dispute_id"]), typed)
        # Until the provider answers `manual` (below, or the resume job if this dies first).
        fields["submission_method_pending"] = fields["intended_submission_method"] != MANUAL
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


def _provider_fields(dispute_id: str, typed: Mapping[str, Any]) -> dict[str, Any]:
    """The provider's dispute as the fields Vouch keeps, read now (outside any transaction), after
    checking that what was typed agrees with it. Refuses a dispute the provider does not hold, a
    read without an answer, and any field typed otherwise than the provider shows it."""
    read = provider_from_settings().dispute_read(dispute_id)
    if read.refused:
        raise errors.DisputeNotAtProvider(
            details={
                "dispute_id": dispute_id,
                "provider_error": read.error_code or "refused",
                "http_status": read.http_status,
            }
        )
    if not read.accepted:
        raise errors.DisputeReadUnavailable(
            details={"dispute_id": dispute_id, "provider_error": read.error_code or "unknown"}
        )
    fields = dispute_normalize(read.require())
    mismatched = {
        name: {"typed": typed[name], "provider": fields[name]}
        for name in TYPED_FIELDS
        if typed.get(name) is not None and typed[name] != fields[name]
    }
    if mismatched:
        raise errors.DisputeMismatch(
            "What was typed disagrees with the dispute as the provider shows it: "
            + ", ".join(
                f"{name} typed {v['typed']!r}, the provider shows {v['provider']!r}"
                for name, v in mismatched.items()
            )
            + ". Nothing was recorded.",
            details={"dispute_id": dispute_id, "fields": mismatched},
        )
    return fields


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
    """`charge.dispute.*`: re-read the dispute (events may be stale or out of order), record it and
    the money it moved (`dispute_funds_follow`: held, reinstated, charged back), prepare its first
    version if it has none, and, while it awaits a response and the provider does not say
    `manual` yet, set its submission method to manual. A dispute the network allows
    no response to (`due_by` 0) is recorded, and nothing else. Raises if the provider cannot
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
    # The money the dispute moved, as its balance transactions show it (SPEC §18).
    dispute_funds_follow(dispute=read.require(), source=f"{event.get('type')} {event.get('id')}")
    if not dispute.response_allowed:
        # The network allows no response (`due_by` 0): nothing is prepared, and nothing can be
        # submitted, by Vouch or by Smart Disputes.
        return
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
