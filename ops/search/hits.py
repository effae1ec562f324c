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
