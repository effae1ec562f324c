"""The console search's lookups, by table: each one indexed equality (ops.search, issue 27)."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db.models import Q, QuerySet
from django.db.models.fields.json import KT
from django.db.models.lookups import Exact

from accounts.models import User
from agents.models import RefundRequest
from core.display import dollars, moment
from disputes.models import Dispute, Evidence, Packet
from envelopes.models import Debit, Envelope, FundingLeg, RefundLeg, RefundOperation
from ops.search.hits import (
    LIMIT,
    Hit,
    _adjustments,
    _change,
    _discrepancies,
    _disputes,
    _envelopes,
    _escalations,
    _events,
    _first,
    _funding_legs,
    _one,
    _receipts,
    _refund_legs,
    _runs,
)
from receipts.models import Receipt, ReceiptKind
from reconciliation.models import Adjustment, Discrepancy
from reconciliation.models import Run as ReconciliationRun
from verification.contracts import registry
from verification.models import Escalation, ProviderEvent, RunKey, VerificationRun

# --- the lookups, by table ----------------------------------------------------------------------


def envelope_own(term: str) -> list[Hit]:
    return _envelopes(Envelope.objects.filter(public_id=term), "its own id", own=True)


def funding_leg_own(term: str) -> list[Hit]:
    return _funding_legs(FundingLeg.objects.filter(public_id=term), "its own id", own=True)


def debit_own(term: str) -> list[Hit]:
    return [
        Hit(
            kind="Debit",
            model="envelopes.envelope",
            ident=debit.public_id,
            url=_change("envelopes.envelope", debit.envelope_id, f"debit-{debit.public_id}"),
            how="its own id",
            detail=f"of {debit.envelope.public_id} · {debit.reference} · "
            f"{dollars(debit.amount_micro)}",
            own=True,
        )
        for debit in Debit.objects.filter(public_id=term).select_related("envelope")
    ]


def refund_operation_own(term: str) -> list[Hit]:
    return [
        Hit(
            kind="Refund",
            model="envelopes.refundoperation",
            ident=operation.public_id,
            url=_change("envelopes.refundoperation", operation.pk),
            how="its own id",
            detail=f"of {operation.envelope.public_id} · requested "
            f"{dollars(operation.requested_micro)} · {moment(operation.created_at)}",
            own=True,
        )
        for operation in RefundOperation.objects.filter(public_id=term).select_related("envelope")
    ]


def refund_leg_own(term: str) -> list[Hit]:
    return _refund_legs(RefundLeg.objects.filter(public_id=term), "its own id", own=True)


def adjustment_own(term: str) -> list[Hit]:
    return _adjustments(Adjustment.objects.filter(public_id=term), "its own id", own=True)


def dispute_own(term: str) -> list[Hit]:
    return _disputes(Dispute.objects.filter(public_id=term), "its own id", own=True)


def packet_own(term: str) -> list[Hit]:
    rows = Packet.objects.filter(public_id=term).select_related("dispute")
    return [
        hit
        for packet in rows
        for hit in _one(
            "disputes.packet",
            "Dispute packet",
            packet,
            f"v{packet.version} of {packet.dispute.provider_dispute_id} · {packet.status}",
        )
    ]


def evidence_own(term: str) -> list[Hit]:
    rows = Evidence.objects.filter(public_id=term).select_related("dispute")
    return [
        hit
        for evidence in rows
        for hit in _one(
            "disputes.evidence",
            "Evidence",
            evidence,
            f"{evidence.ref} for {evidence.dispute.provider_dispute_id} · {evidence.kind}",
        )
    ]


def run_own(term: str) -> list[Hit]:
    return _runs(VerificationRun.objects.filter(public_id=term), "its own id", own=True)


def reconciliation_run_own(term: str) -> list[Hit]:
    return [
        hit
        for run in ReconciliationRun.objects.filter(public_id=term)
        for hit in _one(
            "reconciliation.run",
            "Reconciliation run",
            run,
            f"{run.kind} · {run.status} · started {moment(run.started_at)}",
        )
    ]


def discrepancy_own(term: str) -> list[Hit]:
    return _discrepancies(Discrepancy.objects.filter(public_id=term), "its own id", own=True)


def refund_request_own(term: str) -> list[Hit]:
    rows = _refund_requests().filter(public_id=term).select_related("envelope")
    return [
        hit
        for request in rows
        for hit in _one(
            "agents.refundrequest",
            "Refund request",
            request,
            f"for {request.envelope.public_id} · {request.status}"
            + (f" · {dollars(request.amount_micro)}" if request.amount_micro is not None else ""),
        )
    ]


def receipt_own(term: str) -> list[Hit]:
    return _receipts(Receipt.objects.filter(pk=term), "its own id", own=True)


def event_own(term: str) -> list[Hit]:
    return _events(ProviderEvent.objects.filter(event_id=term), "its own id", own=True)


def discrepancies_naming(term: str) -> list[Hit]:
    """Discrepancies whose subject, charge or envelope is the id (each an indexed column)."""
    return _discrepancies(
        Discrepancy.objects.filter(
            Q(subject_id=term) | Q(charge_id=term) | Q(envelope_public_id=term)
        ),
        "subject, charge or envelope",
    )


def escalations_naming(term: str) -> list[Hit]:
    """Escalations about the id (their subject), and those opened for a discrepancy that names
    it: a foreign refund's escalation is about the funding leg it was taken from. The
    discrepancies' escalations are read first, their keys then given as values: `subject_id = …
    OR pk IN (subquery)` is a scan of every escalation (no index serves an OR with a subquery)."""
    of_discrepancies = list(
        Discrepancy.objects.filter(
            Q(subject_id=term) | Q(charge_id=term) | Q(envelope_public_id=term),
            escalation__isnull=False,
        )
        .order_by()
        .values_list("escalation_id", flat=True)[: LIMIT + 1]
    )
    about = Q(subject_id=term) | Q(pk__in=of_discrepancies)
    return _escalations(Escalation.objects.filter(about), "subject, or its discrepancy's")


@cache
def _key_names() -> tuple[str, ...]:
    """Every correlation key a contract declares (runs' keys are indexed by name and value)."""
    return tuple(
        sorted(
            {
                name
                for contract in registry().values()
                for correlation in contract.correlation
                for name in correlation.keys
            }
        )
    )


def runs_keyed(term: str) -> list[Hit]:
    """Runs with a correlation key of that value: the charge, PaymentIntent, refund or dispute
    they verify (and a refund's run, by its charge)."""
    keyed = RunKey.objects.filter(name__in=_key_names(), value=term).values("run_id")
    return _runs(VerificationRun.objects.filter(pk__in=keyed), "correlation key")


def _events_with(term: str, *keys: str) -> list[Hit]:
    """Events whose object's `id` (or its `charge`, `payment_intent`) is `term`. Compared as text
    with the plain `Exact` lookup: the same expression as the indexes on PostgreSQL
    (`payload #>> '{data,object,id}'`), and on SQLite (`make run`) a text comparison, where
    Django's JSON key lookup would read the term itself as JSON and fail on `re_…`."""
    condition = Q()
    for key in keys:
        condition |= Q(Exact(KT(f"payload__data__object__{key}"), term))
    return _events(
        ProviderEvent.objects.filter(condition), "object" if keys == ("id",) else "object or its"
    )


def events_of_charge(term: str) -> list[Hit]:
    return _events_with(term, "id", "charge")


def events_of_payment_intent(term: str) -> list[Hit]:
    return _events_with(term, "id", "payment_intent")


def events_of_object(term: str) -> list[Hit]:
    return _events_with(term, "id")


def funding_legs_of_charge(term: str) -> list[Hit]:
    """The envelope the charge funded, and its funding leg."""
    return _funding_legs(
        FundingLeg.objects.filter(charge_id=term), "charge", envelopes="funded by this charge"
    )


def refund_legs_of_charge(term: str) -> list[Hit]:
    return _refund_legs(RefundLeg.objects.filter(funding_leg__charge_id=term), "refunds the charge")


def disputes_of_charge(term: str) -> list[Hit]:
    return _disputes(Dispute.objects.filter(charge_id=term), "disputed charge")


def receipts_of_charge(term: str) -> list[Hit]:
    return _receipts(Receipt.objects.filter(charge_id=term), "charge")


def _charges_of_payment_intent(term: str) -> QuerySet[FundingLeg, Any]:
    """The charges of the PaymentIntent's legs, as a subquery (a leg not charged yet has none)."""
    legs = FundingLeg.objects.filter(payment_intent_id=term).exclude(charge_id="")
    return legs.values("charge_id")


def funding_legs_of_payment_intent(term: str) -> list[Hit]:
    """The envelope the PaymentIntent funded, and its funding leg."""
    return _funding_legs(
        FundingLeg.objects.filter(payment_intent_id=term),
        "PaymentIntent",
        envelopes="funded by this PaymentIntent",
    )


def disputes_of_payment_intent(term: str) -> list[Hit]:
    charges = _charges_of_payment_intent(term)
    return _disputes(Dispute.objects.filter(charge_id__in=charges), "its charge")


def receipts_of_payment_intent(term: str) -> list[Hit]:
    charges = _charges_of_payment_intent(term)
    return _receipts(Receipt.objects.filter(charge_id__in=charges), "its charge")


def discrepancies_of_payment_intent(term: str) -> list[Hit]:
    charges = _charges_of_payment_intent(term)
    return _discrepancies(Discrepancy.objects.filter(charge_id__in=charges), "its charge")


def adjustments_naming(term: str) -> list[Hit]:
    return _adjustments(Adjustment.objects.filter(provider_object_id=term), "provider object")


def refund_legs_of_refund(term: str) -> list[Hit]:
    return _refund_legs(RefundLeg.objects.filter(provider_refund_id=term), "provider refund")


def receipts_of_refund(term: str) -> list[Hit]:
    # The unique (kind, provider_object_id) index serves it when every kind is named.
    return _receipts(
        Receipt.objects.filter(kind__in=ReceiptKind.values, provider_object_id=term),
        "provider refund",
    )


def dispute_of_provider_id(term: str) -> list[Hit]:
    return _disputes(Dispute.objects.filter(provider_dispute_id=term), "provider dispute id")


def _disputed_charges(term: str) -> QuerySet[Dispute, Any]:
    return Dispute.objects.filter(provider_dispute_id=term).values("charge_id")


def envelopes_of_dispute(term: str) -> list[Hit]:
    """The envelope whose charge the provider dispute is about."""
    legs = FundingLeg.objects.filter(charge_id__in=_disputed_charges(term))
    return _envelopes(Envelope.objects.filter(pk__in=legs.values("envelope")), "its charge")


def refund_legs_of_dispute(term: str) -> list[Hit]:
    """The refunds already made of the disputed charge."""
    return _refund_legs(
        RefundLeg.objects.filter(funding_leg__charge_id__in=_disputed_charges(term)), "its charge"
    )


def _refund_requests() -> QuerySet[RefundRequest]:
    """The agent surface's refund requests: `ops` stands above `agents` (decision 0010)."""
    return RefundRequest.objects.all()


def _users(term: str) -> QuerySet[User]:
    return User.objects.filter(email__iexact=term)  # UPPER(email) = UPPER(term): indexed


def users_by_email(term: str) -> list[Hit]:
    return [
        Hit(
            kind="Person",
            model="accounts.user",
            ident=user.email,
            url=_change("accounts.user", user.pk),
            how="e-mail",
            detail=f"{user.get_username()}"
            + (" · staff" if user.is_staff else "")
            + ("" if user.is_active else " · inactive"),
            own=True,
        )
        for user in _first(_users(term).order_by("pk"))
    ]


def envelopes_of_email(term: str) -> list[Hit]:
    return _envelopes(Envelope.objects.filter(owner__in=_users(term)), "owner's e-mail")


def refund_requests_of_email(term: str) -> list[Hit]:
    rows = _first(
        _refund_requests()
        .filter(owner__in=_users(term))
        .select_related("envelope")
        .order_by("-created_at", "-id")
    )
    return [
        Hit(
            kind="Refund request",
            model="agents.refundrequest",
            ident=request.public_id,
            url=_change("agents.refundrequest", request.pk),
            how="owner's e-mail",
            detail=f"for {request.envelope.public_id} · {request.status}",
        )
        for request in rows
    ]
