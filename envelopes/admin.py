"""The ops staff's view of envelopes (SPEC §10): balances, funding legs, debits, the journal,
refund operations with each leg's outcome and verification verdict, and the ledger check.

Everything is read-only: money moves only through `envelopes.services`, never by hand in the
admin. What this module adds is presentation: amounts in micro-dollars and in dollars, and the
rows of each envelope gathered on one page."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin_base import ReadOnlyAdmin
from envelopes.models import (
    MICRO_PER_CENT,
    Envelope,
    FundingLeg,
    JournalEntry,
    RefundLeg,
    RefundOperation,
)
from envelopes.selectors import Breach, ledger_breaches, refund_status
from verification.admin import VERDICT_TONES

BALANCE_LABELS = (
    ("total_funded_micro", "Funded"),
    ("total_debited_micro", "Debited"),
    ("total_refunded_micro", "Refunded"),
    ("reserved_micro", "Reserved"),
    ("unspent_micro", "Unspent"),
)
DELTAS = ("funded_delta", "debited_delta", "refunded_delta", "reserved_delta", "unspent_delta")
OUTCOME_TONES = {
    "accepted": "good",
    "refused": "bad",
    "void": "bad",
    "unknown": "warn",
    "reserved": "neutral",
}


def dollars(micro: int) -> str:
    """`$13.76` for whole cents, every digit otherwise (`$0.005433`): exact, from the integer."""
    value = abs(Decimal(micro).scaleb(-6))
    places = 2 if micro % MICRO_PER_CENT == 0 else 6
    return f"{'-' if micro < 0 else ''}${value:,.{places}f}"


def micro(value: int) -> str:
    return f"{value:,}"


@dataclass(frozen=True)
class Amount:
    """One amount as the page shows it: micro-dollars and dollars."""

    micro: int

    @property
    def text(self) -> str:
        return micro(self.micro)

    @property
    def usd(self) -> str:
        return dollars(self.micro)


@dataclass(frozen=True)
class JournalRow:
    entry: JournalEntry
    deltas: list[Amount]
    link: str


@dataclass(frozen=True)
class LegRow:
    leg: RefundLeg
    amount: Amount
    outcome_tone: str
    verdict: str
    verdict_tone: str
    run_url: str


@dataclass(frozen=True)
class RefundRow:
    operation: RefundOperation
    url: str
    status: str
    requested: Amount
    remainder: Amount
    legs: list[LegRow]


def _leg_rows(operation: RefundOperation) -> list[LegRow]:
    rows = []
    for leg in operation.legs.select_related("funding_leg", "verification_run").order_by(
        "sequence"
    ):
        run = leg.verification_run
        verdict = run.verdict if run is not None else ""
        if run is not None and run.verdict_class:
            verdict = f"{verdict} · {run.verdict_class}"
        rows.append(
            LegRow(
                leg=leg,
                amount=Amount(leg.amount_micro),
                outcome_tone=OUTCOME_TONES.get(leg.outcome, "neutral"),
                verdict=verdict,
                verdict_tone=VERDICT_TONES.get(run.verdict, "neutral") if run else "neutral",
                run_url=(
                    reverse("admin:verification_verificationrun_change", args=[run.pk])
                    if run is not None
                    else ""
                ),
            )
        )
    return rows


def refund_row(operation: RefundOperation) -> RefundRow:
    legs = _leg_rows(operation)
    return RefundRow(
        operation=operation,
        url=reverse("admin:envelopes_refundoperation_change", args=[operation.pk]),
        status=refund_status([row.leg for row in legs]),
        requested=Amount(operation.requested_micro),
        remainder=Amount(operation.remainder_micro),
        legs=legs,
    )


def _journal_link(entry: JournalEntry) -> str:
    if entry.refund_leg is not None:
        return f"refund leg {entry.refund_leg.public_id}"
    if entry.debit is not None:
        return f"debit {entry.debit.public_id}"
    if entry.funding_leg is not None:
        return f"funding {entry.funding_leg.public_id}"
    return ""


def envelope_page_context(envelope: Envelope) -> dict[str, Any]:
    entries = list(
        envelope.journal.select_related("funding_leg", "debit", "refund_leg").order_by("id")
    )
    breaches: list[Breach] = ledger_breaches(Envelope.objects.filter(pk=envelope.pk))
    funding: list[FundingLeg] = list(envelope.funding_legs.order_by("sequence"))
    return {
        "envelope": envelope,
        "balances": [(label, Amount(getattr(envelope, name))) for name, label in BALANCE_LABELS],
        "funding_legs": [
            (
                leg,
                Amount(leg.amount_micro),
                Amount(leg.refunded_micro),
                Amount(leg.reserved_micro),
                Amount(leg.capacity_micro),
            )
            for leg in funding
        ],
        "debits": [
            (debit, Amount(debit.amount_micro))
            for debit in envelope.debits.select_related("created_by").order_by("created_at", "id")
        ],
        "journal": [
            JournalRow(
                entry=entry,
                deltas=[Amount(getattr(entry, name)) for name in DELTAS],
                link=_journal_link(entry),
            )
            for entry in entries
        ],
        "journal_totals": [Amount(sum(getattr(e, name) for e in entries)) for name in DELTAS],
        "refunds": [
            refund_row(operation)
            for operation in envelope.refunds.select_related("created_by").order_by(
                "-created_at", "-id"
            )
        ],
        "breaches": [
            (breach, Amount(breach.stored), Amount(breach.from_journal), Amount(breach.from_legs))
            for breach in breaches
        ],
        "ledger_clean": not breaches,
    }


def _balance_column(name: str, label: str) -> Any:
    @admin.display(description=label.lower(), ordering=name)
    def column(self: Any, obj: Envelope) -> SafeString:
        value = getattr(obj, name)
        return format_html('{}<br><span class="vouch-usd">{}</span>', micro(value), dollars(value))

    return column


@admin.register(Envelope)
class EnvelopeAdmin(ReadOnlyAdmin):
    list_display = (
        "public_id",
        "owner",
        "total_funded",
        "total_debited",
        "total_refunded",
        "reserved",
        "unspent",
        "created_at",
    )
    list_select_related = ("owner",)
    search_fields = ("public_id", "owner__username")
    date_hierarchy = "created_at"
    fields = ("public_id", "owner", "currency", "created_at")
    readonly_fields = fields
    change_form_template = "admin/envelopes/envelope/change_form.html"

    total_funded = _balance_column("total_funded_micro", "Funded")
    total_debited = _balance_column("total_debited_micro", "Debited")
    total_refunded = _balance_column("total_refunded_micro", "Refunded")
    reserved = _balance_column("reserved_micro", "Reserved")
    unspent = _balance_column("unspent_micro", "Unspent")

    def page_context(self, request: HttpRequest, obj: Envelope | None) -> dict[str, Any]:
        return envelope_page_context(obj) if obj is not None else {}


@admin.register(RefundOperation)
class RefundOperationAdmin(ReadOnlyAdmin):
    list_display = (
        "public_id",
        "envelope_link",
        "status",
        "requested",
        "remainder",
        "created_by",
        "created_at",
    )
    list_select_related = ("envelope", "created_by")
    search_fields = ("public_id", "envelope__public_id", "envelope__owner__username")
    date_hierarchy = "created_at"
    fields = ("public_id", "envelope_link", "created_by", "created_at")
    readonly_fields = fields
    change_form_template = "admin/envelopes/refundoperation/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[RefundOperation]:
        return super().get_queryset(request).prefetch_related("legs")

    @admin.display(description="envelope", ordering="envelope__public_id")
    def envelope_link(self, obj: RefundOperation) -> SafeString:
        url = reverse("admin:envelopes_envelope_change", args=[obj.envelope_id])
        return format_html('<a href="{}">{}</a>', url, obj.envelope.public_id)

    @admin.display(description="status")
    def status(self, obj: RefundOperation) -> str:
        return refund_status(list(obj.legs.all()))

    @admin.display(description="requested", ordering="requested_micro")
    def requested(self, obj: RefundOperation) -> str:
        return f"{micro(obj.requested_micro)} ({dollars(obj.requested_micro)})"

    @admin.display(description="remainder", ordering="remainder_micro")
    def remainder(self, obj: RefundOperation) -> str:
        return f"{micro(obj.remainder_micro)} ({dollars(obj.remainder_micro)})"

    def page_context(self, request: HttpRequest, obj: RefundOperation | None) -> dict[str, Any]:
        return {"refund": refund_row(obj)} if obj is not None else {}
