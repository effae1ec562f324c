"""Every write of receipts (SPEC §8). Receipts are written from verification verdicts, inside the
transaction that records the verdict or the release they follow, and never call the provider: the
native detail is what the deciding attempt read back (or what the releasing caller just read).

- A VERIFIED `stripe.charge.succeeded` run gives a `charge` receipt; then the refund receipts that
  were waiting for it are written.
- A VERIFIED `stripe.refund.created` run gives a `refund` receipt whose parent is the charge's
  receipt; without a charge receipt yet, it waits (written when the charge receipt is).
- A verified refund whose leg is later released (the provider says failed or canceled) gives a
  `refund_reversal` receipt whose parent is the refund's receipt.
- A verified refund whose reference at the card network (its ARN) Vouch recorded available gives
  a `refund_reference` receipt whose parent is the refund's receipt: a receipt is signed once,
  and the reference comes days after it:
  docs/decisions/0020-a-refunds-reference-has-its-own-receipt.md.

Every write is idempotent: one receipt per (kind, provider object); a second call returns it.

Body version 2 records `livemode` (which money moved: live or test mode): the provider object's
own, or, for an object that carries none (a Stripe Refund), its parent receipt's, since a refund
is in the mode of the charge it refunds. Version-1 receipts, written before, are judged by their
native detail or their parent (receipts.selectors.recorded_livemode)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from core.db import transaction_lock
from envelopes.models import MICRO_PER_CENT, LegOutcome, RefundLeg
from receipts import keys
from receipts.canonical import canonical_bytes, receipt_id_of
from receipts.exceptions import ReceiptNotWritable
from receipts.models import Receipt, ReceiptKind
from receipts.redaction import redact
from receipts.selectors import recorded_livemode
from receipts.signals import receipt_written
from verification.contracts import Verdict, get_contract
from verification.models import Observation, VerificationRun

logger = logging.getLogger("vouch.receipts")

BODY_VERSION = 2


@dataclass(frozen=True)
class Source:
    """Which receipt a VERIFIED run of a contract proves, and the provider object it reads."""

    kind: ReceiptKind
    object_type: str


# Data, not branches: the contracts whose VERIFIED runs give receipts.
SOURCES: dict[str, Source] = {
    "stripe.charge.succeeded": Source(ReceiptKind.CHARGE, "charge"),
    "stripe.refund.created": Source(ReceiptKind.REFUND, "refund"),
}
REFUND_CONTRACTS = [cid for cid, source in SOURCES.items() if source.kind == ReceiptKind.REFUND]


# --- the body ----------------------------------------------------------------------------------


def iso_utc(moment: datetime) -> str:
    """ISO-8601 in UTC to the second, `Z`-suffixed: one spelling of one instant."""
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch_to_datetime(created: Any) -> datetime:
    if isinstance(created, bool) or not isinstance(created, int):
        raise ReceiptNotWritable(
            f"the provider object's `created` is not epoch seconds: {created!r}"
        )
    return datetime.fromtimestamp(created, UTC)


def livemode_of(obj: dict[str, Any] | None, parent: Receipt | None, what: str) -> bool:
    """The provider object's `livemode`, or the parent receipt's when the object carries none
    (Stripe's Refund has no `livemode`; a refund is in its charge's mode). A receipt that cannot
    say which money moved is not written."""
    livemode = obj.get("livemode") if obj is not None else None
    if isinstance(livemode, bool):
        return livemode
    inherited = recorded_livemode(parent) if parent is not None else None
    if inherited is None:
        raise ReceiptNotWritable(f"{what}: no `livemode` in the provider object or its parent")
    return inherited


def receipt_body(
    *,
    kind: str,
    provider: str,
    livemode: bool,
    provider_object_id: str,
    amount_micro: int,
    currency: str,
    charge_id: str,
    occurred_at: datetime,
    parent_id: str | None,
    run_id: str,
    verdict: str,
    detail: dict[str, Any],
    reason: str | None = None,
) -> dict[str, Any]:
    """The body that is canonicalized, hashed and signed. `reason`: a reversal's only."""
    body: dict[str, Any] = {
        "version": BODY_VERSION,
        "kind": kind,
        "provider": provider,
        "livemode": livemode,
        "provider_object_id": provider_object_id,
        "amount_micro": amount_micro,
        "currency": currency,
        "charge_id": charge_id,
        "time": iso_utc(occurred_at),
        "parent": parent_id,
        "verification": {"run": run_id, "verdict": verdict},
        "detail": detail,
    }
    if reason is not None:
        body["reason"] = reason
    return body


def _write(
    *,
    body: dict[str, Any],
    parent: Receipt | None,
    run: VerificationRun,
    occurred_at: datetime,
) -> Receipt:
    """Canonicalize, address, sign and insert one receipt, or return the one already written for
    the same effect (kind, provider object)."""
    existing = Receipt.objects.filter(
        kind=body["kind"], provider_object_id=body["provider_object_id"]
    ).first()
    if existing is not None:
        return existing
    canonical = canonical_bytes(body)
    key = keys.signing_key()
    receipt = Receipt(
        id=receipt_id_of(canonical),
        kind=body["kind"],
        provider=body["provider"],
        provider_object_id=body["provider_object_id"],
        charge_id=body["charge_id"],
        amount_micro=body["amount_micro"],
        currency=body["currency"],
        occurred_at=occurred_at,
        parent=parent,
        verification_run=run,
        verdict=body["verification"]["verdict"],
        body=body,
        canonical=canonical.decode("utf-8"),
        signature=key.sign(canonical),
        key_id=key.key_id,
        key_environment=key.environment,
    )
    try:
        with transaction.atomic():
            receipt.save()
    except IntegrityError:  # written concurrently by another caller
        return Receipt.objects.get(kind=body["kind"], provider_object_id=body["provider_object_id"])
    logger.info("receipt %s: %s %s", receipt.id, receipt.kind, receipt.provider_object_id)
    receipt_written.send(sender=Receipt, receipt=receipt)
    return receipt


def readback_of(run: VerificationRun, object_type: str) -> dict[str, Any]:
    """The provider object as the run's deciding attempt read it back: the observation of the
    contract's `http` channel reading `object_type`."""
    contract = get_contract(run.contract_id)
    channels = [
        c.name
        for c in contract.channels
        if c.verifier == "http" and c.read is not None and c.read.resource == object_type
    ]
    if run.decided_by_id is None or not channels:
        raise ReceiptNotWritable(f"run {run.public_id} has no deciding {object_type} readback")
    observation = (
        Observation.objects.filter(attempt_id=run.decided_by_id, channel__in=channels)
        .order_by("id")
        .first()
    )
    data = observation.data if observation is not None else None
    if not isinstance(data, dict) or not data.get("id") or data.get("found") is False:
        raise ReceiptNotWritable(f"run {run.public_id}: the readback holds no {object_type}")
    return data


# --- charge and refund receipts ------------------------------------------------------------------


def _charge_receipt_of(charge_id: str) -> Receipt | None:
    return Receipt.objects.filter(kind=ReceiptKind.CHARGE, provider_object_id=charge_id).first()


def receipt_for_run(*, run: VerificationRun) -> Receipt | None:
    """The receipt a VERIFIED run proves, written now if it was not yet. None when the run's
    contract gives no receipt, or for a refund whose charge has no receipt yet (it is written with
    the charge's receipt). ReceiptNotWritable if the run is not VERIFIED or read nothing."""
    source = SOURCES.get(run.contract_id)
    if source is None:
        return None
    if run.verdict != Verdict.VERIFIED:
        raise ReceiptNotWritable(f"run {run.public_id} is {run.verdict}, not VERIFIED")
    obj = readback_of(run, source.object_type)
    charge_id = str(
        obj["id"]
        if source.kind == ReceiptKind.CHARGE
        else obj.get("charge") or run.input.get("charge") or ""
    )
    # A charge's receipt and its refunds' are written in one order: a refund verified while its
    # charge is being verified either sees the charge's receipt or is seen by it, never neither.
    transaction_lock(f"receipts:charge:{charge_id}")
    if source.kind == ReceiptKind.CHARGE:
        parent = None
    else:
        parent = _charge_receipt_of(charge_id)
        if parent is None:
            return None  # waits for the charge's receipt
    amount = obj.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise ReceiptNotWritable(f"run {run.public_id}: the readback's amount is {amount!r}")
    occurred_at = epoch_to_datetime(obj.get("created"))
    body = receipt_body(
        kind=source.kind,
        provider=get_contract(run.contract_id).provider,
        livemode=livemode_of(obj, parent, f"run {run.public_id}"),
        provider_object_id=str(obj["id"]),
        amount_micro=amount * MICRO_PER_CENT,  # the cents Stripe reports, times 10,000
        currency=str(obj.get("currency") or ""),
        charge_id=charge_id,
        occurred_at=occurred_at,
        parent_id=parent.id if parent is not None else None,
        run_id=run.public_id,
        verdict=run.verdict,
        detail=redact(source.object_type, obj),
    )
    receipt = _write(body=body, parent=parent, run=run, occurred_at=occurred_at)
    if receipt.kind == ReceiptKind.CHARGE:
        receipts_waiting_for_charge(charge_receipt=receipt)
    else:
        _reversal_of_released(run)
        leg = RefundLeg.objects.filter(verification_run=run).first()
        if leg is not None:
            receipt_reference_write(leg=leg, run=run)
    return receipt


def _reversal_of_released(run: VerificationRun) -> None:
    """A refund whose leg was released before its receipt could be written (it waited for its
    charge's receipt, or the release overtook the verdict): its reversal is written now. The
    provider's object of that moment was not kept, so it carries no detail (its tree says so)."""
    leg = RefundLeg.objects.filter(verification_run=run, released=True).first()
    if leg is not None:
        receipt_reversal_write(
            leg=leg, provider_refund=None, reason="released before the refund's receipt", run=run
        )


def receipts_waiting_for_charge(*, charge_receipt: Receipt) -> list[Receipt]:
    """Write the refund receipts that waited for this charge's receipt: VERIFIED refund runs on
    the charge without a receipt (and the reversal of any whose leg was released since)."""
    has_receipt = Receipt.objects.filter(kind=ReceiptKind.REFUND, verification_run=OuterRef("pk"))
    runs = (
        VerificationRun.objects.filter(
            contract_id__in=REFUND_CONTRACTS,
            verdict=Verdict.VERIFIED,
            input__charge=charge_receipt.provider_object_id,
        )
        .exclude(Exists(has_receipt))
        .order_by("id")
    )
    written = []
    for run in runs:
        try:
            with transaction.atomic():  # one refund that cannot be written spoils no other
                receipt = receipt_for_run(run=run)
        except ReceiptNotWritable as exc:
            logger.warning("no receipt for run %s: %s", run.public_id, exc)
            continue
        if receipt is not None:
            written.append(receipt)
    return written


def receipt_on_run_decided(*, run: VerificationRun) -> Receipt | None:
    """The run_decided listener's service: a VERIFIED run of a receipt contract gets its receipt
    (or waits for its parent); any other verdict writes nothing."""
    if run.verdict != Verdict.VERIFIED or run.contract_id not in SOURCES:
        return None
    return receipt_for_run(run=run)


# --- reversals -----------------------------------------------------------------------------------


def receipt_reversal_write(
    *,
    leg: RefundLeg,
    provider_refund: dict[str, Any] | None,
    reason: str,
    run: VerificationRun | None = None,
) -> Receipt | None:
    """A verified refund whose leg was released (the provider reports it failed or canceled): a
    `refund_reversal` receipt whose parent is the refund's receipt, its detail the provider's
    refund as the releasing caller read it back. Its time is when Vouch recorded the reversal (a
    Stripe refund carries no time of failure). None if the refund has no receipt (not verified,
    or still waiting for its charge's receipt, which writes the reversal too). `run`: the leg's
    run as the caller holds it (a verdict being recorded is not saved yet)."""
    run = run if run is not None else leg.verification_run
    if leg.outcome != LegOutcome.ACCEPTED or run is None or run.verdict != Verdict.VERIFIED:
        return None
    refund_receipt = Receipt.objects.filter(
        kind=ReceiptKind.REFUND, provider_object_id=leg.provider_refund_id
    ).first()
    if refund_receipt is None:
        return None
    detail: dict[str, Any] = {}
    amount_micro = refund_receipt.amount_micro
    readback = None
    if provider_refund is not None and provider_refund.get("id") == leg.provider_refund_id:
        readback = provider_refund
        detail = redact("refund", provider_refund)
        amount = provider_refund.get("amount")
        if isinstance(amount, int) and not isinstance(amount, bool):
            amount_micro = amount * MICRO_PER_CENT
    occurred_at = timezone.now().replace(microsecond=0)
    body = receipt_body(
        kind=ReceiptKind.REFUND_REVERSAL,
        provider=refund_receipt.provider,
        livemode=livemode_of(readback, refund_receipt, f"the release of {leg.public_id}"),
        provider_object_id=refund_receipt.provider_object_id,
        amount_micro=amount_micro,
        currency=refund_receipt.currency,
        charge_id=refund_receipt.charge_id,
        occurred_at=occurred_at,
        parent_id=refund_receipt.id,
        run_id=run.public_id,
        verdict=run.verdict,
        detail=detail,
        reason=reason[:200],
    )
    return _write(body=body, parent=refund_receipt, run=run, occurred_at=occurred_at)


def receipt_on_refund_leg_released(
    *, leg: RefundLeg, reason: str, provider_refund: dict[str, Any] | None
) -> Receipt | None:
    """The refund_leg_released listener's service."""
    return receipt_reversal_write(leg=leg, provider_refund=provider_refund, reason=reason)


# --- a refund's reference at the card network ----------------------------------------------------


def receipt_reference_write(
    *, leg: RefundLeg, run: VerificationRun | None = None
) -> Receipt | None:
    """A verified refund's reference at the card network, recorded available on its leg: a
    `refund_reference` receipt whose parent is the refund's receipt, its detail the reference as
    Stripe showed it and the SHA-256 of the read that showed it, its time when that read was
    made. None if the leg holds no available reference or the refund has no receipt yet (its
    receipt, when written, writes this one). `run`: the leg's run as the caller holds it."""
    run = run if run is not None else leg.verification_run
    if (
        leg.refund_reference_status != "available"
        or not leg.refund_reference
        or leg.refund_reference_seen_at is None
        or run is None
        or run.verdict != Verdict.VERIFIED
    ):
        return None
    refund_receipt = Receipt.objects.filter(
        kind=ReceiptKind.REFUND, provider_object_id=leg.provider_refund_id
    ).first()
    if refund_receipt is None:
        return None
    occurred_at = leg.refund_reference_seen_at.replace(microsecond=0)
    body = receipt_body(
        kind=ReceiptKind.REFUND_REFERENCE,
        provider=refund_receipt.provider,
        livemode=livemode_of(None, refund_receipt, f"the reference of {leg.public_id}"),
        provider_object_id=refund_receipt.provider_object_id,
        amount_micro=refund_receipt.amount_micro,
        currency=refund_receipt.currency,
        charge_id=refund_receipt.charge_id,
        occurred_at=occurred_at,
        parent_id=refund_receipt.id,
        run_id=run.public_id,
        verdict=run.verdict,
        detail={
            "id": refund_receipt.provider_object_id,
            "object": "refund",
            "destination_details": {
                "type": "card",
                "card": {
                    "reference": leg.refund_reference,
                    "reference_status": leg.refund_reference_status,
                    "reference_type": leg.refund_reference_type,
                },
            },
            "read_sha256": leg.refund_reference_sha256,
        },
    )
    return _write(body=body, parent=refund_receipt, run=run, occurred_at=occurred_at)


# --- catching up ---------------------------------------------------------------------------------


def receipts_catch_up(*, limit: int = 500) -> int:
    """Write the receipts of VERIFIED runs that have none (a deployment that had no signing key
    yet, a listener that failed): charges first, so refunds find their parents. Idempotent.
    Returns how many receipts were written."""
    before = Receipt.objects.count()
    without_receipt = Receipt.objects.filter(verification_run=OuterRef("pk"))
    charge_contracts = [cid for cid, s in SOURCES.items() if s.kind == ReceiptKind.CHARGE]
    for contracts in (charge_contracts, REFUND_CONTRACTS):
        runs = (
            VerificationRun.objects.filter(contract_id__in=contracts, verdict=Verdict.VERIFIED)
            .exclude(Exists(without_receipt))
            .order_by("id")[:limit]
        )
        for run in runs:
            try:
                with transaction.atomic():
                    receipt_for_run(run=run)  # a charge's also writes its waiting refunds'
            except ReceiptNotWritable as exc:
                logger.warning("no receipt for run %s: %s", run.public_id, exc)
    return Receipt.objects.count() - before
