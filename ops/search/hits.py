"""The console search's results: a hit, what a kind of id asks, and how each table's rows read
as hits (ops.search, issue 27)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.contrib.admin.utils import quote
from django.db.models import QuerySet
from django.urls import reverse

from core.display import dollars, moment
from disputes.models import Dispute
from envelopes.models import Envelope, FundingLeg, RefundLeg
from receipts.models import Receipt
from reconciliation.models import Adjustment, Discrepancy
from verification.models import Escalation, ProviderEvent, VerificationRun

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
    """What a prefix names, and the lookups that find what carries such an id, in order.

    `names` is the model of the object such an id is (a Vouch id's own; a Stripe dispute's the
    disputes'): a person who may not view it is asked nothing for such an id, so a real one
    answers exactly as an unknown one (issue 38 item 2: a `dp_` led to the disputed envelope).
    "" for a provider object Vouch keeps no one list of (a charge): each hit is its own list's."""

    prefix: str
    label: str
    lookups: tuple[Lookup, ...]
    names: str = ""


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
        f"unspent {dollars(envelope.unspent_micro)}"
        + (f", held by dispute {dollars(envelope.held_micro)}" if envelope.held_micro else "")
        + (
            f", charged back {dollars(envelope.charged_back_micro)}"
            if envelope.charged_back_micro
            else ""
        ),
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


@dataclass(frozen=True)
class Shown:
    """How one table's rows read as hits: what they are, the admin page that shows them (a row of
    a parent's page, by its anchor), their own id, a line of detail, and their order."""

    kind: str
    model: str
    ident: Callable[[Any], str]
    detail: Callable[[Any], str]
    order: tuple[str, ...]
    page: Callable[[Any], tuple[Any, str]] = lambda row: (row.pk, "")
    related: tuple[str, ...] = ()
    only: tuple[str, ...] = ()


def _shown(spec: Shown, queryset: QuerySet[Any], how: str, *, own: bool = False) -> list[Hit]:
    if spec.related:
        queryset = queryset.select_related(*spec.related)
    if spec.only:
        queryset = queryset.only(*spec.only)
    hits = []
    for row in _first(queryset.order_by(*spec.order)):
        pk, anchor = spec.page(row)
        hits.append(
            Hit(
                kind=spec.kind,
                model=spec.model,
                ident=spec.ident(row),
                url=_change(spec.model, pk, anchor),
                how=how,
                detail=spec.detail(row),
                own=own,
            )
        )
    return hits


def _then(value: str, before: str = " · ") -> str:
    return f"{before}{value}" if value else ""


REFUND_LEG = Shown(
    kind="Refund leg",
    model="envelopes.refundoperation",
    ident=lambda leg: leg.public_id,
    page=lambda leg: (leg.operation_id, f"leg-{leg.public_id}"),
    detail=lambda leg: (
        f"of {leg.operation.public_id} · {leg.outcome} · "
        f"{dollars(leg.amount_micro)}{_then(leg.provider_refund_id)}"
    ),
    order=("-reserved_at", "-id"),
    related=("operation",),
)
DISPUTE = Shown(
    kind="Dispute",
    model="disputes.dispute",
    ident=lambda dispute: dispute.public_id,
    detail=lambda dispute: (
        f"{dispute.provider_dispute_id} on {dispute.charge_id} · "
        f"{dispute.reason} · {dollars(dispute.amount_micro)}{_then(dispute.provider_status)}"
    ),
    order=("-created_at", "-id"),
)
RECEIPT = Shown(
    kind="Receipt",
    model="receipts.receipt",
    ident=lambda receipt: receipt.pk,
    detail=lambda receipt: (
        f"{receipt.kind} {receipt.provider_object_id} · "
        f"{dollars(receipt.amount_micro)} · {moment(receipt.occurred_at)}"
    ),
    order=("occurred_at", "id"),
)
RUN = Shown(
    kind="Verification run",
    model="verification.verificationrun",
    ident=lambda run: run.public_id,
    detail=lambda run: f"{run.contract_id} · {run.verdict}{_then(run.verdict_class)}",
    order=("-created_at", "-id"),
)
ESCALATION = Shown(
    kind="Escalation",
    model="verification.escalation",
    ident=lambda escalation: f"#{escalation.pk}",
    detail=lambda escalation: (
        f"{escalation.status} · {escalation.verdict}"
        + _then(escalation.verdict_class, " ")
        + (f" · {escalation.subject_label}" if escalation.subject_id else "")
    ),
    order=("status", "-created_at", "-id"),
)
DISCREPANCY = Shown(
    kind="Discrepancy",
    model="reconciliation.discrepancy",
    ident=lambda discrepancy: discrepancy.public_id,
    detail=lambda discrepancy: (
        f"{discrepancy.status} · {discrepancy.severity} · "
        f"{discrepancy.code} · {discrepancy.subject_type} {discrepancy.subject_id}"
    ),
    order=("-first_seen_at", "-id"),
)
EVENT = Shown(
    kind="Provider event",
    model="verification.providerevent",
    ident=lambda event: event.event_id,
    detail=lambda event: f"{event.type} · {moment(event.provider_created)}",
    order=("-provider_created", "-id"),
    only=("id", "event_id", "type", "provider_created"),
)
ADJUSTMENT = Shown(
    kind="Adjustment",
    model="reconciliation.adjustment",
    ident=lambda adjustment: adjustment.public_id,
    detail=lambda adjustment: (
        f"{adjustment.kind} · {adjustment.status} · {dollars(adjustment.amount_micro)}"
    ),
    order=("-proposed_at", "-id"),
)


def _refund_legs(queryset: QuerySet[RefundLeg], how: str, *, own: bool = False) -> list[Hit]:
    return _shown(REFUND_LEG, queryset, how, own=own)


def _disputes(queryset: QuerySet[Dispute], how: str, *, own: bool = False) -> list[Hit]:
    return _shown(DISPUTE, queryset, how, own=own)


def _receipts(queryset: QuerySet[Receipt], how: str, *, own: bool = False) -> list[Hit]:
    return _shown(RECEIPT, queryset, how, own=own)


def _runs(queryset: QuerySet[VerificationRun], how: str, *, own: bool = False) -> list[Hit]:
    return _shown(RUN, queryset, how, own=own)


def _escalations(queryset: QuerySet[Escalation], how: str) -> list[Hit]:
    return _shown(ESCALATION, queryset, how)


def _discrepancies(queryset: QuerySet[Discrepancy], how: str, *, own: bool = False) -> list[Hit]:
    return _shown(DISCREPANCY, queryset, how, own=own)


def _events(queryset: QuerySet[ProviderEvent], how: str, *, own: bool = False) -> list[Hit]:
    return _shown(EVENT, queryset, how, own=own)


def _adjustments(queryset: QuerySet[Adjustment], how: str, *, own: bool = False) -> list[Hit]:
    return _shown(ADJUSTMENT, queryset, how, own=own)


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
