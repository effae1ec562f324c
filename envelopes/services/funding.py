"""Funding: an envelope's creation and top-ups (one provider charge each), their recording, lookup
after the provider forgot the key, and the provider's events about payments and refunded charges.
The provider is never called inside a transaction: reserve and commit, call, then record."""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Sum
from django.utils import timezone

from core.crash import crash_point
from core.exceptions import VouchError
from core.idempotency import (
    idempotency_attach,
    idempotency_renew,
    idempotency_settle_error,
)
from core.request_facts import FundingFacts
from envelopes.exceptions import (
    CardDeclined,
    InvalidAmount,
    InvalidPaymentMethod,
    PaymentRefused,
    ProviderUnavailable,
    UnsupportedCurrency,
)
from envelopes.locks import lock_envelope
from envelopes.models import (
    MICRO_PER_CENT,
    Envelope,
    FundingLeg,
    FundingStatus,
    JournalEntry,
)
from envelopes.money import to_cents
from envelopes.services.journal import PROVIDER_KEY_TTL, _move, _provider, legs_waiting
from providers import Outcome, OutcomeKind
from verification import clock
from verification.models import Verdict
from verification.services import (
    escalation_open,
    verification_start,
)
from verification.subjects import Subject

if TYPE_CHECKING:
    from accounts.models import User
    from core.models import IdempotencyRecord

logger = logging.getLogger("vouch.envelopes")

MIN_FUNDING_MICRO = 1_000_000
MAX_ENVELOPE_MICRO = 5_000_000_000
CHARGE_CONTRACT = "stripe.charge.succeeded"


def _check_funding(amount_micro: Any, currency: str | None) -> int:
    if currency is not None and str(currency).lower() != "usd":
        raise UnsupportedCurrency(f"Only USD is supported, not {currency!r}.")
    if not isinstance(amount_micro, int) or isinstance(amount_micro, bool):
        raise InvalidAmount("amount_micro must be an integer number of micro-dollars.")
    if amount_micro % MICRO_PER_CENT:
        raise InvalidAmount(
            "A funding amount is a whole number of cents (a multiple of 10,000 micro)."
        )
    if amount_micro < MIN_FUNDING_MICRO:
        raise InvalidAmount("Each funding charge is at least 1,000,000 micro ($1.00).")
    if amount_micro > MAX_ENVELOPE_MICRO:
        raise InvalidAmount(
            "An envelope's total funding is at most 5,000,000,000 micro ($5,000.00)."
        )
    return amount_micro


@dataclass
class FundingResult:
    envelope: Envelope
    leg: FundingLeg

    @property
    def pending(self) -> bool:
        return self.leg.status == FundingStatus.PENDING


def _gone(what: str) -> PaymentRefused:
    """A resumed request whose funding leg is gone: only a definite refusal deletes one, and that
    refusal is stored as the request's answer in the same transaction, so this is never reached
    unless rows were removed by hand. Nothing was charged."""
    return PaymentRefused(
        f"The provider refused this payment earlier; nothing was charged ({what} is gone).",
        details={"resource": what},
    )


def account_element(owner_id: int) -> str:
    """The buyer's customer account id as the provider sees it: a keyed digest of the user's
    primary key, stable for the user, revealing neither the key nor how many users there are."""
    digest = hmac.new(
        settings.SECRET_KEY.encode(), f"vouch-account:{owner_id}".encode(), hashlib.sha256
    ).hexdigest()
    return f"acct_{digest[:24]}"


def data_elements(*, owner_id: int, facts: FundingFacts | None) -> dict[str, str]:
    """The data elements a funding charge sends as PaymentIntent metadata (Visa Compelling
    Evidence 3.0: customer account, IP address, device; absent ones omitted). The provider copies
    them onto the charge and the charge's signed receipt keeps them
    (docs/decisions/0012-ce3-data-elements-in-receipts.md)."""
    elements = {"vouch_account": account_element(owner_id)}
    if facts is not None and facts.ip:
        elements["vouch_ip"] = facts.ip
    if facts is not None and facts.device:
        elements["vouch_device"] = facts.device
    return elements


def envelope_create(
    *,
    owner: User,
    amount_micro: Any,
    payment_method: str,
    currency: str | None = None,
    idempotency: IdempotencyRecord | None = None,
    facts: FundingFacts | None = None,
) -> FundingResult:
    """Create an envelope funded by one charge. A declined card leaves no envelope and no leg
    (CardDeclined, kept as the request's answer); an unknown outcome leaves a pending leg that a
    scheduled job, a provider event or a retry resolves — never by a second payment. The leg's
    data elements (`facts`: the request's IP address and device) are fixed when it is made: a
    resumed request sends what the first one did."""
    if idempotency is not None and idempotency.resource:  # a resumed request: continue it
        envelope = Envelope.objects.filter(public_id=idempotency.resource).first()
        if envelope is None:
            raise _gone(idempotency.resource)
        return funding_send(leg=envelope.funding_legs.get(sequence=1), idempotency=idempotency)
    leg = envelope_reserve(
        owner=owner,
        amount_micro=amount_micro,
        payment_method=payment_method,
        currency=currency,
        idempotency=idempotency,
        facts=facts,
    )
    crash_point("funding_after_reserve")
    return funding_send(leg=leg, idempotency=idempotency)


def envelope_reserve(
    *,
    owner: User,
    amount_micro: Any,
    payment_method: str,
    currency: str | None = None,
    idempotency: IdempotencyRecord | None = None,
    facts: FundingFacts | None = None,
) -> FundingLeg:
    """An envelope and its first funding leg, pending and committed, with nothing sent: the
    reserve phase of `envelope_create`. Alone, it serves a caller that records a payment the
    provider already holds for this leg (`funding_leg_find`, by the leg's metadata): the
    `demo_ce3` command's earlier payments (disputes/demo.py)."""
    amount = _check_funding(amount_micro, currency)
    with transaction.atomic():
        envelope = Envelope.objects.create(owner=owner)
        leg = FundingLeg(
            envelope=envelope,
            kind=FundingLeg.Kind.ORIGINAL,
            sequence=1,
            amount_micro=amount,
            payment_method=payment_method,
            provider_metadata=data_elements(owner_id=owner.pk, facts=facts),
        )
        leg.idempotency_key = f"{envelope.public_id}:{leg.public_id}"  # this leg's alone
        leg.save()
        idempotency_attach(idempotency, envelope.public_id)
    return leg


def envelope_top_up(
    *,
    envelope: Envelope,
    amount_micro: Any,
    payment_method: str,
    currency: str | None = None,
    idempotency: IdempotencyRecord | None = None,
    facts: FundingFacts | None = None,
) -> FundingResult:
    """Another funding charge on an envelope, under the same rules as its creation (its data
    elements name the envelope's owner, whoever asks)."""
    if idempotency is not None and idempotency.resource:  # a resumed request: continue it
        leg = FundingLeg.objects.filter(public_id=idempotency.resource).first()
        if leg is None:
            raise _gone(idempotency.resource)
        return funding_send(leg=leg, idempotency=idempotency)
    amount = _check_funding(amount_micro, currency)
    with transaction.atomic():
        locked = lock_envelope(envelope.pk)
        legs = locked.funding_legs.exclude(status=FundingStatus.ABANDONED)
        committed = legs.aggregate(total=Sum("amount_micro"))["total"] or 0  # pending ones too
        if committed + amount > MAX_ENVELOPE_MICRO:
            raise InvalidAmount(
                "An envelope's total funding is at most 5,000,000,000 micro ($5,000.00)."
            )
        sequence = (locked.funding_legs.aggregate(last=Max("sequence"))["last"] or 0) + 1
        leg = FundingLeg(
            envelope=locked,
            kind=FundingLeg.Kind.TOP_UP,
            sequence=sequence,
            amount_micro=amount,
            payment_method=payment_method,
            provider_metadata=data_elements(owner_id=locked.owner_id, facts=facts),
        )
        # The key names this leg alone. A declined top-up's leg is removed, so its sequence
        # number comes again; a key built from it reached the provider with other parameters
        # (idempotency_error, pending forever) or replayed the old decline to the new top-up.
        leg.idempotency_key = f"{locked.public_id}:{leg.public_id}"
        leg.save()
        idempotency_attach(idempotency, leg.public_id)
    crash_point("funding_after_reserve")
    return funding_send(leg=leg, idempotency=idempotency)


def funding_metadata(leg: FundingLeg) -> dict[str, str]:
    """The metadata a funding leg's PaymentIntent carries (the lookup finds it by them). A leg made
    before data elements were recorded holds none, and sends what it sent then."""
    return {
        "vouch_envelope": leg.envelope.public_id,
        "vouch_funding": leg.public_id,
        **leg.provider_metadata,
    }


def funding_send(
    *,
    leg: FundingLeg,
    idempotency: IdempotencyRecord | None = None,
    queued_since: datetime | None = None,
) -> FundingResult:
    """Call the provider for a pending funding leg (again: the key makes it safe) and record. Once
    the provider may have forgotten the key (PROVIDER_KEY_TTL after the leg was made), sending it
    again could charge the buyer a second time: the PaymentIntent is looked up instead.

    Stripe's rate limit (issue 40), as for a refund leg (`refund_leg_send`): behind legs already
    waiting, or with no room within the call's wait, the leg stays pending and waits
    (`deferred_at`) for the worker, which passes `queued_since`, its place in the queue."""
    if leg.status == FundingStatus.SUCCEEDED:
        return FundingResult(leg.envelope, leg)
    if leg.status == FundingStatus.ABANDONED:
        raise PaymentRefused(
            "No payment was made for this funding charge: the provider holds none, as a person "
            "confirmed.",
            details={"funding_id": leg.public_id},
        )
    idempotency_renew(idempotency)
    if clock.now() - leg.created_at > PROVIDER_KEY_TTL:
        return funding_leg_find(leg=leg)
    if queued_since is None and legs_waiting(FundingLeg):
        return funding_leg_defer(leg)
    outcome = _provider().payment_create(
        amount_cents=to_cents(leg.amount_micro),
        currency="usd",
        payment_method=leg.payment_method,
        idempotency_key=leg.idempotency_key,
        metadata=funding_metadata(leg),
    )
    crash_point("funding_after_provider_call")
    if outcome.not_sent:  # no room in Stripe's rate limit: nothing went out
        return funding_leg_defer(leg, since=queued_since)
    if outcome.unknown and outcome.replayed:
        # The provider keeps an unknown answer (a 500 after its endpoint began) under the key and
        # replays it to every retry: only reading the provider can tell.
        found = _intent_of_leg(leg)
        if found is not None:
            outcome = Outcome(OutcomeKind.ACCEPTED, found)
    return funding_record(leg=leg, outcome=outcome)


def funding_leg_defer(leg: FundingLeg, *, since: datetime | None = None) -> FundingResult:
    """The pending leg waits for room in Stripe's rate limit: `since` its place in the queue (now:
    the end). A leg answered meanwhile is left as it is."""
    at = since or timezone.now()
    FundingLeg.objects.filter(pk=leg.pk, status=FundingStatus.PENDING).update(deferred_at=at)
    leg.deferred_at = at
    return FundingResult(leg.envelope, leg)


def intent_is_the_legs(leg: FundingLeg, intent: dict[str, Any]) -> bool:
    """A PaymentIntent found by a lookup or named by an event is this leg's only if it says so
    (Vouch's metadata) and asks for the leg's amount and currency."""
    metadata = intent.get("metadata") or {}
    currency = intent.get("currency")
    return (
        metadata.get("vouch_funding") == leg.public_id
        and intent.get("amount") == to_cents(leg.amount_micro)
        and isinstance(currency, str)
        and currency.lower() == "usd"
    )


def _intents_of_leg(leg: FundingLeg) -> list[dict[str, Any]] | None:
    """The PaymentIntents the provider holds for this leg (by its id if known, else by Vouch's
    metadata), or None when they could not be read."""
    provider = _provider()
    if leg.payment_intent_id:
        read = provider.payment_intent_read(leg.payment_intent_id)
        if read.refused:
            return []
        if not read.accepted:
            return None
        intents = [read.require()]
    else:
        found = provider.payment_intents_with_metadata("vouch_funding", leg.public_id)
        if not found.accepted:
            return None
        intents = list(found.require()["data"])
    return [intent for intent in intents if intent_is_the_legs(leg, intent)]


def _chosen(intents: list[dict[str, Any]]) -> dict[str, Any]:
    """The PaymentIntent a leg records of several: the oldest succeeded one, else the oldest."""
    succeeded = [intent for intent in intents if intent.get("status") == "succeeded"]
    return min(succeeded or intents, key=lambda intent: int(intent.get("created") or 0))


def _intent_of_leg(leg: FundingLeg) -> dict[str, Any] | None:
    """The leg's PaymentIntent as the provider holds it (`_chosen`), or None."""
    intents = _intents_of_leg(leg)
    return _chosen(intents) if intents else None


def funding_leg_find(*, leg: FundingLeg) -> FundingResult:
    """After the provider has forgotten the key: read the PaymentIntent (by its id if known, else
    by Vouch's metadata) and record what it shows. Never creates one. Nothing found: one
    escalation (with its notification) for a person; the leg stays pending (not funded money)."""
    intents = _intents_of_leg(leg)
    if intents is None:
        return FundingResult(leg.envelope, leg)  # unknown: look again on the next tick
    succeeded = [intent for intent in intents if intent.get("status") == "succeeded"]
    if len(succeeded) > 1:  # charged more than once (by code older than this lookup)
        escalation_open(
            verdict=Verdict.CONTRADICTED,
            verdict_class="duplicate side effect",
            reason=f"The provider holds {len(succeeded)} succeeded PaymentIntents for funding leg "
            f"{leg.public_id}: {', '.join(str(i['id']) for i in succeeded)}. The oldest is "
            "recorded; refund the others.",
            subject=Subject("funding_leg", leg.public_id, money=True),
        )
    if intents:
        return funding_record(leg=leg, outcome=Outcome(OutcomeKind.ACCEPTED, _chosen(intents)))
    escalation_open(
        verdict=Verdict.UNVERIFIABLE,
        verdict_class="not at the provider",
        reason=f"Funding leg {leg.public_id} ({leg.amount_micro:,} micro) is pending, its "
        "idempotency key has expired at the provider, and the provider holds no PaymentIntent "
        "for it (looked up by "
        + (f"id {leg.payment_intent_id}" if leg.payment_intent_id else "Vouch's metadata")
        + "). Nothing is counted as funded. Check the Stripe Dashboard, then propose an "
        "adjustment: abandon the leg, or accept it naming the PaymentIntent.",
        subject=Subject("funding_leg", leg.public_id, money=True),
    )
    return FundingResult(leg.envelope, leg)


# A card that asks for 3-D Secure: funding is a server-side call, with no browser in which the
# buyer could authenticate, so such a payment can never complete (issue 36).
AUTHENTICATION_REQUIRED = "authentication_required"
AUTHENTICATION_MESSAGE = (
    "This card asks for 3-D Secure authentication, which funding through Vouch's API cannot "
    "perform: nothing was charged. Use a card that does not ask for authentication."
)


def _refusal_of(intent: dict[str, Any]) -> Outcome | None:
    """A PaymentIntent that shows its payment failed (a decline, or canceled) as the refusal it
    is; None for one still on its way (processing). One waiting for the customer's
    authentication (`requires_action`) is a refusal too: Vouch sends `error_on_requires_action`,
    so Stripe fails such an attempt itself, but a PaymentIntent found in that state (made
    otherwise) would wait for an authentication that cannot come — never a leg pending for
    ever."""
    status = intent.get("status")
    if status == "requires_action":
        return Outcome(
            OutcomeKind.REFUSED,
            error_code=AUTHENTICATION_REQUIRED,
            error_message=AUTHENTICATION_MESSAGE,
            http_status=402,
            error_detail={"payment_intent": intent.get("id"), "status": status},
        )
    if status not in ("requires_payment_method", "canceled"):
        return None
    error = intent.get("last_payment_error") or {}
    if status == "requires_payment_method" and not error:
        return None  # never confirmed: not a refusal yet
    card = error.get("type") == "card_error"
    return Outcome(
        OutcomeKind.REFUSED,
        error_code=str(error.get("code") or ("card_declined" if card else status)),
        error_message=str(error.get("message") or "The payment failed."),
        http_status=402 if card else 400,
        error_detail=dict(error),
    )


def _funding_refusal(outcome: Outcome) -> VouchError:
    if outcome.http_status == 402:
        code = outcome.error_code or "card_declined"
        return CardDeclined(
            code,
            AUTHENTICATION_MESSAGE if code == AUTHENTICATION_REQUIRED else outcome.error_message,
            details={"decline_code": outcome.error_detail.get("decline_code")},
        )
    if outcome.error_detail.get("param") == "payment_method":
        return InvalidPaymentMethod(details={"provider_code": outcome.error_code})
    if outcome.http_status in (401, 403):  # our credentials: nothing could be attempted
        return ProviderUnavailable()
    return PaymentRefused(details={"provider_code": outcome.error_code})


def funding_record(*, leg: FundingLeg, outcome: Outcome) -> FundingResult:
    """Record a funding charge's answer, once, whoever brings it (the request, the resumption
    job, a provider event). Succeeded: the leg becomes funded money (one journal entry) and, in
    the same transaction, a `stripe.charge.succeeded` verification run starts, so the charge is
    proven by a readback rather than believed from the PaymentIntent's answer. A definite
    refusal (or a PaymentIntent that shows one) removes the pending leg — and the envelope of a
    declined creation — and is kept as the answer of the request that made it. Anything else
    stays pending, with the PaymentIntent's id when known (for the lookup by id)."""
    if outcome.accepted:
        intent = outcome.require()
        if intent.get("status") == "succeeded":
            return _funding_succeeded(leg, intent)
        refusal = _refusal_of(intent)
        if refusal is None:
            FundingLeg.objects.filter(pk=leg.pk, status=FundingStatus.PENDING).update(
                payment_intent_id=str(intent.get("id") or "")[:100], deferred_at=None
            )
            leg.refresh_from_db()
            return FundingResult(leg.envelope, leg)
        outcome = refusal
    if outcome.refused:
        error = _funding_refusal(outcome)
        with transaction.atomic():
            envelope = (
                Envelope.objects.select_for_update(of=("self",)).filter(pk=leg.envelope_id).first()
            )
            if envelope is not None:  # else a provider event recorded this refusal first
                FundingLeg.objects.filter(pk=leg.pk, status=FundingStatus.PENDING).delete()
                idempotency_settle_error(resource=leg.public_id, error=error)
                if leg.sequence == 1 and not envelope.funding_legs.exists():
                    idempotency_settle_error(resource=envelope.public_id, error=error)
                    envelope.delete()  # a declined creation leaves nothing behind
        crash_point("funding_after_record")
        raise error
    # Unknown: a pending leg, not funded money.
    fresh = FundingLeg.objects.select_related("envelope").filter(pk=leg.pk).first()
    if fresh is None:  # a provider event recorded a refusal meanwhile
        raise _gone(leg.public_id)
    return FundingResult(fresh.envelope, fresh)


def _funding_succeeded(leg: FundingLeg, intent: dict[str, Any]) -> FundingResult:
    latest = intent.get("latest_charge")
    charge_id = str((latest.get("id") if isinstance(latest, dict) else latest) or "")
    with transaction.atomic():
        envelope = lock_envelope(leg.envelope_id)
        fresh = FundingLeg.objects.select_for_update(of=("self",)).get(pk=leg.pk)
        if fresh.status == FundingStatus.PENDING:
            fresh.status = FundingStatus.SUCCEEDED
            fresh.payment_intent_id = intent["id"]
            fresh.charge_id = charge_id
            fresh.funded_at = timezone.now()
            fresh.deferred_at = None  # an answer ends any wait for room
            fields = ["status", "payment_intent_id", "charge_id", "funded_at", "deferred_at"]
            fresh.save(update_fields=fields)
            _move(
                envelope,
                JournalEntry.Kind.FUND,
                funded=fresh.amount_micro,
                unspent=fresh.amount_micro,
                funding_leg=fresh,
            )
            charge_run_start(leg=fresh, intent=intent)
    crash_point("funding_after_record")
    return FundingResult(envelope, fresh)


def charge_run_start(*, leg: FundingLeg, intent: dict[str, Any]) -> None:
    """Start the `stripe.charge.succeeded` run of a funding leg just counted as funded, in the
    caller's transaction: the charge is proven by a readback, not believed."""
    if not leg.charge_id:  # without a charge id there is nothing to read back
        logger.warning("funding leg %s succeeded without a charge id", leg.public_id)
        return
    verification_start(
        contract_id=CHARGE_CONTRACT,
        operation_id=leg.idempotency_key,
        operation_created_at=leg.created_at,
        input={"charge": leg.charge_id, "amount": to_cents(leg.amount_micro)},
        # The action's own claim (E1): the charge as the PaymentIntent names it.
        action_result={
            "id": leg.charge_id,
            "object": "charge",
            "payment_intent": intent["id"],
            "amount": intent.get("amount"),
            "currency": intent.get("currency"),
        },
    )


FUNDING_REFUSALS = (CardDeclined, InvalidPaymentMethod, PaymentRefused, ProviderUnavailable)
