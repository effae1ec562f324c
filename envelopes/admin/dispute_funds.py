"""The money each provider dispute moved, for ops staff (SPEC §18): held, exposure, charged back,
the journal entries each dispute's funds wrote and the provider read each cites. Read only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.admin_base import ReadOnlyAdmin, two_lines
from core.dashboard import stripe_link
from core.display import dollars
from core.links import id_link
from envelopes.admin import FUNDS_TONES, micro
from envelopes.models import DisputeFunds
from envelopes.selectors.words import (
    dispute_funds_status_label,
    journal_kind_label,
    journal_note_words,
    provider_dispute_status_label,
    provider_read_purpose_label,
)
from verification.admin import worded


def _money_column(name: str, label: str) -> Any:
    @admin.display(description=label, ordering=name)
    def column(self: Any, obj: DisputeFunds) -> SafeString:
        value = getattr(obj, name)
        return format_html('<span title="{} micro">{}</span>', micro(value), dollars(value))

    return column


@admin.register(DisputeFunds)
class DisputeFundsAdmin(ReadOnlyAdmin):
    """One row per provider dispute whose funds Stripe withdrew: what it withdrew and reinstated,
    what Vouch holds of the charge's unspent money, the platform's exposure (money the charge no
    longer had, escalated to a person) and what a lost dispute charged back; the journal entries
    it wrote and the provider read each cites. Read only: only the dispute-funds service writes."""

    list_display = (
        "dispute",
        "charge",
        "envelope_link",
        "status_badge",
        "withdrawn",
        "held",
        "exposure",
        "charged_back",
        "updated",
    )
    list_display_links = ("dispute",)
    list_select_related = ("envelope", "envelope__owner")
    list_filter = ("status",)
    search_fields = ("public_id", "=provider_dispute_id", "=charge_id", "envelope__public_id")
    search_help_text = "Dispute (dp_…), charge (ch_…), envelope or dispute-funds id."
    date_hierarchy = "created_at"
    fields = (
        "public_id",
        "provider_dispute_id",
        "charge_id",
        "envelope_id_link",
        "funding_leg_id_link",
        "status_words",
        "provider_status_words",
        "disputed_amount",
        "withdrawn",
        "reinstated",
        "fees",
        "held",
        "exposure",
        "charged_back",
        "escalation_link",
        "provider_read",
        "journal_entries",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    withdrawn = _money_column("withdrawn_micro", "withdrawn")
    reinstated = _money_column("reinstated_micro", "reinstated")
    fees = _money_column("fees_micro", "Stripe's fees")
    held = _money_column("held_micro", "held")
    exposure = _money_column("exposure_micro", "exposure")
    charged_back = _money_column("charged_back_micro", "charged back")
    disputed_amount = _money_column("disputed_micro", "disputed (as Stripe shows it)")

    @admin.display(description="dispute", ordering="provider_dispute_id")
    def dispute(self, obj: DisputeFunds) -> str:
        return obj.provider_dispute_id

    @admin.display(description="charge", ordering="charge_id")
    def charge(self, obj: DisputeFunds) -> SafeString | str:
        return stripe_link(obj.charge_id)

    @admin.display(description="envelope", ordering="envelope__public_id")
    def envelope_link(self, obj: DisputeFunds) -> SafeString:
        url = reverse("admin:envelopes_envelope_change", args=[obj.envelope_id])
        return format_html(
            '<a href="{}">{}</a><span class="vouch-sub">{}</span>',
            url,
            obj.envelope.public_id,
            obj.envelope.owner.email or obj.envelope.owner.get_username(),
        )

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: DisputeFunds) -> SafeString:
        # In a list the codes are one hover away (title), as in the run and refund lists: a
        # details line under each row would widen the list past a 1366-pixel screen.
        # The badge says the state in a word ("Held"); its sentence and code are on hover.
        label = dispute_funds_status_label(obj.status)
        return format_html(
            '<span class="vouch-badge vouch-{}" title="{} ({})">{}</span>'
            '<span class="vouch-sub" title="{}">at Stripe: {}</span>',
            FUNDS_TONES.get(obj.status, "neutral"),
            label,
            obj.status,
            label.split(":")[0],
            obj.provider_status,
            provider_dispute_status_label(obj.provider_status).lower()
            if obj.provider_status
            else "—",
        )

    @admin.display(description="status")
    def status_words(self, obj: DisputeFunds) -> SafeString:
        return worded(dispute_funds_status_label(obj.status), obj.status)

    @admin.display(description="status at Stripe")
    def provider_status_words(self, obj: DisputeFunds) -> SafeString | str:
        if not obj.provider_status:
            return "—"
        return worded(provider_dispute_status_label(obj.provider_status), obj.provider_status)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # The page names the row by its ids: its str() carries the status's code.
        funds = self.get_object(request, object_id)
        named = {"subtitle": f"{funds.public_id} · {funds.provider_dispute_id}"} if funds else {}
        return super().change_view(request, object_id, form_url, {**named, **(extra_context or {})})

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, obj: DisputeFunds) -> SafeString:
        return two_lines(obj.updated_at)

    @admin.display(description="envelope")
    def envelope_id_link(self, obj: DisputeFunds) -> SafeString | str:
        return id_link(obj.envelope.public_id)

    @admin.display(description="funding charge")
    def funding_leg_id_link(self, obj: DisputeFunds) -> SafeString | str:
        return id_link(obj.funding_leg.public_id)

    @admin.display(description="escalation (the exposure's case)")
    def escalation_link(self, obj: DisputeFunds) -> SafeString | str:
        escalation = obj.escalation
        if escalation is None:
            return "— (no exposure)" if not obj.exposure_micro else "—"
        url = reverse("admin:verification_escalation_change", args=[escalation.pk])
        return format_html(
            '<a href="{}">escalation #{}</a> · {}',
            url,
            escalation.pk,
            worded(escalation.get_status_display(), escalation.status),
        )

    @admin.display(description="provider read (last)")
    def provider_read(self, obj: DisputeFunds) -> SafeString | str:
        read = obj.last_read
        if read is None:
            return "—"
        return format_html(
            '<span class="vouch-mono">{}</span> · {} · sha256 {} · observed {}<br>'
            '<pre class="vouch-json" style="white-space: pre-wrap; overflow-wrap: anywhere">'
            "{}</pre>",
            read.public_id,
            worded(provider_read_purpose_label(read.purpose), read.purpose),
            read.sha256,
            read.observed_at.isoformat(),
            read.shows_json(),
        )

    @admin.display(description="journal entries")
    def journal_entries(self, obj: DisputeFunds) -> SafeString | str:
        entries = list(obj.journal.select_related("provider_read", "funding_leg").order_by("id"))
        if not entries:
            return "—"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class='vouch-num'>{}</td>"
            "<td class='vouch-num'>{}</td><td class='vouch-num'>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    entry.pk,
                    entry.created_at.isoformat(),
                    worded(journal_kind_label(entry.kind), entry.kind),
                    dollars(entry.unspent_delta),
                    dollars(entry.held_delta),
                    dollars(entry.charged_back_delta),
                    entry.provider_read.public_id if entry.provider_read else "—",
                    worded(*journal_note_words(entry.note)),
                )
                for entry in entries
            ),
        )
        return format_html(
            '<table class="vouch-full"><thead><tr><th>#</th><th>When</th><th>Kind</th>'
            '<th class="vouch-num">Unspent Δ</th><th class="vouch-num">Held Δ</th>'
            '<th class="vouch-num">Charged back Δ</th><th>Provider read cited</th><th>Note</th>'
            "</tr></thead><tbody>{}</tbody></table>",
            rows,
        )
