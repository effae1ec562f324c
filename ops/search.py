"""The console's search box (SPEC §10, issue 27): any Vouch or provider id, or an e-mail, to the
objects that carry it.

Reads only, and only exact matches on indexed columns: the id's prefix decides which tables are
asked (`KINDS`), each lookup one indexed equality (no LIKE, no scan of JSON or text), so a search
costs a handful of index probes whatever the tables hold (bench/search.py). The indexes it relies
on are declared on the models, each saying so.

A hit is one object with an admin page: the object the id is its own (first), and every object
that names it — a discrepancy or escalation about it, the receipts, runs and events of a charge,
the envelope a provider id belongs to. A person sees only hits of the lists they may open: the
caller says which (`can_view`), and a table they may not read is not even asked."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urlencode

from django.apps import apps
from django.contrib.admin.utils import quote
from django.db.models import Q, QuerySet
from django.db.models.fields.json import KT
from django.urls import reverse

from accounts.models import User
from core.display import dollars, moment
from disputes.models import Dispute, Evidence, Packet
from envelopes.models import Debit, Envelope, FundingLeg, RefundLeg, RefundOperation
from receipts.models import Receipt, ReceiptKind
from reconciliation.models import Adjustment, Discrepancy
from reconciliation.models import Run as ReconciliationRun
from verification.contracts import registry
from verification.models import Escalation, ProviderEvent, RunKey, VerificationRun

# Hits of one lookup shown at most; a lookup that finds more says so (and links its list).
LIMIT = 20
MAX_TERM = 255
_TOKEN = re.compile(r"^[A-Za-z0-9_@.+\-]+$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@dataclass(frozen=True)
class Hit:
    """One object that carries the searched id, and the admin page that shows it."""

    kind: str  # what it is, for a person: "Envelope", "Refund leg", …
    model: str  # `app_label.model_name` of the admin list the page belongs to
    ident: str  # its own id, as the page shows it
    url: str
    how: str  # how it carries the id: "its own id", "charge", "subject", …
    detail: str = ""
    own: bool = False  # the id is this object's own

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.ident)


@dataclass(frozen=True)
class More:
    """A lookup that found more than `LIMIT`: how to see them all."""

    kind: str
    url: str


@dataclass(frozen=True)
class IdKind:
    """What a prefix names, and the lookups that find what carries such an id, in order."""

    prefix: str
    label: str
    lookups: tuple[Lookup, ...]


@dataclass
class SearchResult:
    query: str  # as typed
    term: str  # the id searched (trimmed; the id out of a pasted URL)
    kind: IdKind | None  # None: not an id Vouch knows the shape of
    email: bool = False
    hits: list[Hit] = field(default_factory=list)
    more: list[More] = field(default_factory=list)

    @property
    def recognised(self) -> bool:
        return self.kind is not None or self.email

    @property
    def label(self) -> str:
        if self.email:
            return "e-mail address"
        return self.kind.label if self.kind is not None else ""

    @property
    def single(self) -> Hit | None:
        """The one object to open straight away: the only hit (and nothing cut off)."""
        return self.hits[0] if len(self.hits) == 1 and not self.more else None


# --- what one lookup finds ----------------------------------------------------------------------


@dataclass(frozen=True)
class Lookup:
    """One question to one table: `find(term)` gives its hits (at most LIMIT + 1 rows read)."""

    model: str  # the admin list its hits open (the person must be able to view it)
    find: Callable[[str], Iterable[Hit]]
    more: Callable[[str], str] | None = None  # the admin list showing all (when cut off)


def _change(model: str, pk: Any, anchor: str = "") -> str:
    url = reverse("admin:{}_change".format(model.replace(".", "_")), args=[quote(pk)])
    return f"{url}#{anchor}" if anchor else url


def _changelist(model: str, term: str) -> str:
    """The admin list of `model`, searched for `term` (its own search fields)."""
    url = reverse("admin:{}_changelist".format(model.replace(".", "_")))
    return f"{url}?{urlencode({'q': term})}"


def _first(queryset: QuerySet[Any]) -> list[Any]:
    return list(queryset[: LIMIT + 1])


def _envelope(envelope: Envelope, how: str, *, own: bool = False) -> Hit:
    return Hit(
        kind="Envelope",
        model="envelopes.envelope",
        ident=envelope.public_id,
        url=_change("envelopes.envelope", envelope.pk),
        how=how,
        detail=f"{envelope.owner.email or envelope.owner.get_username()} · "
        f"funded {dollars(envelope.total_funded_micro)}, "
        f"unspent {dollars(envelope.unspent_micro)}",
        own=own,
    )


def _envelopes(queryset: QuerySet[Envelope], how: str, *, own: bool = False) -> list[Hit]:
    rows = _first(queryset.select_related("owner").order_by("-created_at", "-id"))
    return [_envelope(envelope, how, own=own) for envelope in rows]


def _funding_legs(
    queryset: QuerySet[FundingLeg], how: str, *, own: bool = False, envelopes: str = ""
) -> list[Hit]:
    """The legs; with `envelopes` (how they carry it), their envelopes first, read with them."""
    legs = _first(queryset.select_related("envelope__owner").order_by("-created_at", "-id"))
    parents = {leg.envelope_id: leg.envelope for leg in legs} if envelopes else {}
    return [_envelope(envelope, envelopes) for envelope in parents.values()] + [
        Hit(
            kind="Funding leg",
            model="envelopes.envelope",
            ident=leg.public_id,
            url=_change("envelopes.envelope", leg.envelope_id, f"funding-{leg.public_id}"),
            how=how,
            detail=f"of {leg.envelope.public_id} · {leg.status} · {dollars(leg.amount_micro)}"
            + (f" · {leg.charge_id}" if leg.charge_id else ""),
            own=own,
        )
        for leg in legs
    ]


def _refund_legs(queryset: QuerySet[RefundLeg], how: str, *, own: bool = False) -> list[Hit]:
    return [
        Hit(
            kind="Refund leg",
            model="envelopes.refundoperation",
            ident=leg.public_id,
            url=_change("envelopes.refundoperation", leg.operation_id, f"leg-{leg.public_id}"),
            how=how,
            detail=f"of {leg.operation.public_id} · {leg.outcome} · {dollars(leg.amount_micro)}"
            + (f" · {leg.provider_refund_id}" if leg.provider_refund_id else ""),
            own=own,
        )
        for leg in _first(queryset.select_related("operation").order_by("-reserved_at", "-id"))
    ]


def _disputes(queryset: QuerySet[Dispute], how: str, *, own: bool = False) -> list[Hit]:
    return [
        Hit(
            kind="Dispute",
            model="disputes.dispute",
            ident=dispute.public_id,
            url=_change("disputes.dispute", dispute.pk),
            how=how,
            detail=f"{dispute.provider_dispute_id} on {dispute.charge_id} · {dispute.reason} · "
            f"{dollars(dispute.amount_micro)}"
            + (f" · {dispute.provider_status}" if dispute.provider_status else ""),
            own=own,
        )
        for dispute in _first(queryset.order_by("-created_at", "-id"))
    ]


def _receipts(queryset: QuerySet[Receipt], how: str, *, own: bool = False) -> list[Hit]:
    return [
        Hit(
            kind="Receipt",
            model="receipts.receipt",
            ident=receipt.pk,
            url=_change("receipts.receipt", receipt.pk),
            how=how,
            detail=f"{receipt.kind} {receipt.provider_object_id} · {dollars(receipt.amount_micro)}"
            f" · {moment(receipt.occurred_at)}",
            own=own,
        )
        for receipt in _first(queryset.order_by("occurred_at", "id"))
    ]


def _runs(queryset: QuerySet[VerificationRun], how: str, *, own: bool = False) -> list[Hit]:
    return [
        Hit(
            kind="Verification run",
            model="verification.verificationrun",
            ident=run.public_id,
            url=_change("verification.verificationrun", run.pk),
            how=how,
            detail=f"{run.contract_id} · {run.verdict}"
            + (f" · {run.verdict_class}" if run.verdict_class else ""),
            own=own,
        )
        for run in _first(queryset.order_by("-created_at", "-id"))
    ]


def _escalations(queryset: QuerySet[Escalation], how: str) -> list[Hit]:
    return [
        Hit(
            kind="Escalation",
            model="verification.escalation",
            ident=f"#{escalation.pk}",
            url=_change("verification.escalation", escalation.pk),
            how=how,
            detail=f"{escalation.status} · {escalation.verdict}"
            + (f" {escalation.verdict_class}" if escalation.verdict_class else "")
            + (f" · {escalation.subject_label}" if escalation.subject_id else ""),
        )
        for escalation in _first(queryset.order_by("status", "-created_at", "-id"))
    ]


def _discrepancies(queryset: QuerySet[Discrepancy], how: str, *, own: bool = False) -> list[Hit]:
    return [
        Hit(
            kind="Discrepancy",
            model="reconciliation.discrepancy",
            ident=discrepancy.public_id,
            url=_change("reconciliation.discrepancy", discrepancy.pk),
            how=how,
            detail=f"{discrepancy.status} · {discrepancy.severity} · {discrepancy.code} · "
            f"{discrepancy.subject_type} {discrepancy.subject_id}",
            own=own,
        )
        for discrepancy in _first(queryset.order_by("-first_seen_at", "-id"))
    ]


def _events(queryset: QuerySet[ProviderEvent], how: str, *, own: bool = False) -> list[Hit]:
    return [
        Hit(
            kind="Provider event",
            model="verification.providerevent",
            ident=event.event_id,
            url=_change("verification.providerevent", event.pk),
            how=how,
            detail=f"{event.type} · {moment(event.provider_created)}",
            own=own,
        )
        for event in _first(
            queryset.only("id", "event_id", "type", "provider_created").order_by(
                "-provider_created", "-id"
            )
        )
    ]


def _adjustments(queryset: QuerySet[Adjustment], how: str, *, own: bool = False) -> list[Hit]:
    return [
        Hit(
            kind="Adjustment",
            model="reconciliation.adjustment",
            ident=adjustment.public_id,
            url=_change("reconciliation.adjustment", adjustment.pk),
            how=how,
            detail=f"{adjustment.kind} · {adjustment.status} · {dollars(adjustment.amount_micro)}",
            own=own,
        )
        for adjustment in _first(queryset.order_by("-proposed_at", "-id"))
    ]


def _one(model: str, kind: str, row: Any, detail: str) -> list[Hit]:
    return [
        Hit(
            kind=kind,
            model=model,
            ident=row.public_id,
            url=_change(model, row.pk),
            how="its own id",
            detail=detail,
            own=True,
        )
    ]


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
    condition = Q()
    for key in keys:
        condition |= Q(**{f"object_{key}": term})
    annotated = ProviderEvent.objects.annotate(
        **{f"object_{key}": KT(f"payload__data__object__{key}") for key in keys}
    )
    return _events(annotated.filter(condition), "object" if keys == ("id",) else "object or its")


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


def _refund_requests() -> QuerySet[Any]:
    """Refund requests, read through the app registry by their label (as `core.links` reads
    every app's ids): `agents` and `ops` stand on one floor of the import layers (pyproject), and
    neither imports the other."""
    return apps.get_model("agents", "RefundRequest")._default_manager.all()


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


# --- what each prefix names ---------------------------------------------------------------------


def _lookup(model: str, find: Callable[[str], Iterable[Hit]], *, more: bool = True) -> Lookup:
    return Lookup(model, find, (lambda term: _changelist(model, term)) if more else None)


ENVELOPE, REFUNDS = "envelopes.envelope", "envelopes.refundoperation"
DISPUTE, RECEIPT = "disputes.dispute", "receipts.receipt"
RUN, ESCALATION = "verification.verificationrun", "verification.escalation"
EVENT, DISCREPANCY = "verification.providerevent", "reconciliation.discrepancy"
ADJUSTMENT, REQUEST = "reconciliation.adjustment", "agents.refundrequest"

NAMED = (  # what names a Vouch object's id: a discrepancy or an escalation about it
    _lookup(DISCREPANCY, discrepancies_naming),
    _lookup(ESCALATION, escalations_naming),
)
CHARGE = (
    _lookup(ENVELOPE, funding_legs_of_charge),
    _lookup(REFUNDS, refund_legs_of_charge),
    _lookup(DISPUTE, disputes_of_charge),
    _lookup(RECEIPT, receipts_of_charge),
    _lookup(RUN, runs_keyed),
    _lookup(EVENT, events_of_charge, more=False),
    *NAMED,
)
PAYMENT_INTENT = (
    _lookup(ENVELOPE, funding_legs_of_payment_intent),
    _lookup(DISPUTE, disputes_of_payment_intent, more=False),
    _lookup(RECEIPT, receipts_of_payment_intent, more=False),
    _lookup(RUN, runs_keyed),
    _lookup(EVENT, events_of_payment_intent, more=False),
    _lookup(ADJUSTMENT, adjustments_naming),
    _lookup(DISCREPANCY, discrepancies_of_payment_intent, more=False),
)
REFUND = (
    _lookup(REFUNDS, refund_legs_of_refund),
    _lookup(RECEIPT, receipts_of_refund),
    _lookup(ADJUSTMENT, adjustments_naming),
    _lookup(RUN, runs_keyed),
    _lookup(EVENT, events_of_object, more=False),
    *NAMED,
)
PROVIDER_DISPUTE = (
    _lookup(DISPUTE, dispute_of_provider_id),
    _lookup(ENVELOPE, envelopes_of_dispute, more=False),
    _lookup(REFUNDS, refund_legs_of_dispute, more=False),
    _lookup(RUN, runs_keyed),
    _lookup(EVENT, events_of_object, more=False),
    *NAMED,
)


def _own(model: str, find: Callable[[str], Iterable[Hit]]) -> Lookup:
    return Lookup(model, find)


KINDS: tuple[IdKind, ...] = (
    IdKind("env_", "Vouch envelope", (_own(ENVELOPE, envelope_own), *NAMED)),
    IdKind("fnd_", "Vouch funding leg", (_own(ENVELOPE, funding_leg_own), *NAMED)),
    IdKind("dbt_", "Vouch debit", (_own(ENVELOPE, debit_own),)),
    IdKind("erf_", "Vouch refund", (_own(REFUNDS, refund_operation_own), *NAMED)),
    IdKind("rfl_", "Vouch refund leg", (_own(REFUNDS, refund_leg_own), *NAMED)),
    IdKind("adj_", "Vouch adjustment", (_own(ADJUSTMENT, adjustment_own),)),
    IdKind("dsp_", "Vouch dispute", (_own(DISPUTE, dispute_own),)),
    IdKind("pkt_", "Vouch dispute packet", (_own("disputes.packet", packet_own),)),
    IdKind("evd_", "Vouch evidence", (_own("disputes.evidence", evidence_own),)),
    IdKind("vrun_", "Vouch verification run", (_own(RUN, run_own), *NAMED)),
    IdKind(
        "rec_", "Vouch reconciliation run", (_own("reconciliation.run", reconciliation_run_own),)
    ),
    IdKind("dsc_", "Vouch discrepancy", (_own(DISCREPANCY, discrepancy_own),)),
    IdKind("rrq_", "Vouch refund request", (_own(REQUEST, refund_request_own),)),
    IdKind("rcpt_", "Vouch receipt", (_own(RECEIPT, receipt_own),)),
    IdKind("ch_", "Stripe charge", CHARGE),
    IdKind("py_", "Stripe payment (charge)", CHARGE),
    IdKind("pi_", "Stripe PaymentIntent", PAYMENT_INTENT),
    IdKind("re_", "Stripe refund", REFUND),
    IdKind("pyr_", "Stripe payment refund", REFUND),
    IdKind("dp_", "Stripe dispute", PROVIDER_DISPUTE),
    IdKind("du_", "Stripe dispute", PROVIDER_DISPUTE),
    IdKind("evt_", "Stripe event", (_own(EVENT, event_own),)),
)
EMAIL = (
    _lookup("accounts.user", users_by_email, more=False),
    Lookup(ENVELOPE, envelopes_of_email, lambda term: _changelist(ENVELOPE, term)),
    Lookup(REQUEST, refund_requests_of_email, lambda term: _changelist(REQUEST, term)),
)
PREFIXES = tuple(kind.prefix for kind in KINDS)


def search_term(query: str) -> str:
    """The id a person pasted: trimmed of spaces and quotes, and out of a URL (a Stripe Dashboard
    address ends with the object's id)."""
    term = query.strip().strip("\"'`<>").strip()
    if "/" in term:
        term = term.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0].split("#", 1)[0]
    return term


def kind_of(term: str) -> IdKind | None:
    """What kind of id `term` is, by its prefix (the longest that matches); None if none does."""
    if len(term) > MAX_TERM or not _TOKEN.match(term):
        return None
    matches = [
        kind for kind in KINDS if term.startswith(kind.prefix) and len(term) > len(kind.prefix)
    ]
    return max(matches, key=lambda kind: len(kind.prefix), default=None)


def search(query: str, *, can_view: Callable[[str], bool]) -> SearchResult:
    """Every object carrying the id (or e-mail) in `query` that the person may see, the object
    the id is its own first; `can_view(model_label)` says which admin lists they may open (a
    table behind a list they may not is not asked). Unknown shapes and ids find nothing."""
    term = search_term(query)
    email = bool(len(term) <= MAX_TERM and _EMAIL.match(term))
    kind = None if email else kind_of(term)
    result = SearchResult(query=query, term=term, kind=kind, email=email)
    lookups = EMAIL if email else kind.lookups if kind is not None else ()
    seen: set[tuple[str, str]] = set()
    allowed: dict[str, bool] = {}
    for lookup in lookups:
        if lookup.model not in allowed:
            allowed[lookup.model] = bool(can_view(lookup.model))
        if not allowed[lookup.model]:
            continue
        hits = list(lookup.find(term))
        if len(hits) > LIMIT:
            hits = hits[:LIMIT]
            url = lookup.more(term) if lookup.more is not None else ""
            result.more.append(More(kind=hits[0].kind, url=url))
        for hit in hits:
            if hit.key not in seen:
                seen.add(hit.key)
                result.hits.append(hit)
    result.hits.sort(key=lambda hit: not hit.own)  # stable: the lookups' order otherwise
    return result
