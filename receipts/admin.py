"""The ops staff's view of receipts (SPEC §8, §10): read-only, since receipts are immutable and
written only by services. A receipt's page shows its canonical body, its signature and key, and
the result of verifying it now against this deployment's trusted keys; the dispute review page
links here (`/admin/receipts/receipt/<id>/change/`)."""

from __future__ import annotations

import json

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.admin_base import ReadOnlyAdmin, two_lines
from core.dashboard import stripe_link
from core.display import money
from core.links import register_id
from receipts.keys import deployment_environment
from receipts.models import Receipt
from receipts.selectors import receipt_verify


def _receipt_link(receipt: Receipt) -> SafeString:
    url = reverse("admin:receipts_receipt_change", args=[quote(receipt.pk)])
    return format_html('<a href="{}">{}</a>', url, receipt.pk)


def _pre(text: str) -> SafeString:
    return format_html('<pre style="white-space: pre-wrap; margin: 0">{}</pre>', text)


@admin.register(Receipt)
class ReceiptAdmin(ReadOnlyAdmin):
    list_display = (
        "short_id",
        "kind",
        "provider_object",
        "charge",
        "amount",
        "occurred",
        "key_environment",
    )
    list_display_links = ("short_id",)
    list_filter = ("kind", "key_environment")
    search_fields = ("id", "provider_object_id", "charge_id")
    date_hierarchy = "occurred_at"
    list_select_related = ("verification_run",)
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "verification_result",
                    "kind",
                    "provider",
                    "provider_object",
                    "charge",
                    "amount_money",
                    "currency",
                    "occurred_at",
                    "parent_link",
                    "children_links",
                    "run_link",
                    "verdict",
                    "created_at",
                )
            },
        ),
        ("Signature", {"fields": ("signature", "key_id", "key_environment")}),
        ("Body", {"fields": ("canonical_text", "body_pretty")}),
    )
    readonly_fields = (
        "id",
        "verification_result",
        "kind",
        "provider",
        "provider_object",
        "charge",
        "amount_money",
        "currency",
        "occurred_at",
        "parent_link",
        "children_links",
        "run_link",
        "verdict",
        "created_at",
        "signature",
        "key_id",
        "key_environment",
        "canonical_text",
        "body_pretty",
    )

    @admin.display(description="receipt", ordering="id")
    def short_id(self, obj: Receipt) -> SafeString:
        # The id is 69 characters: shown shortened, whole on hover and on its page.
        return format_html('<span class="vouch-mono" title="{}">{}…</span>', obj.id, obj.id[:17])

    @admin.display(description="provider object", ordering="provider_object_id")
    def provider_object(self, obj: Receipt) -> SafeString | str:
        return stripe_link(obj.provider_object_id)

    @admin.display(description="charge", ordering="charge_id")
    def charge(self, obj: Receipt) -> SafeString | str:
        return stripe_link(obj.charge_id)

    @admin.display(description="amount", ordering="amount_micro")
    def amount(self, obj: Receipt) -> SafeString | str:
        """In the list: `$10.00`, the micro-dollars in its title (a receipt's amounts are USD)."""
        return money(obj.amount_micro)

    @admin.display(description="amount")
    def amount_money(self, obj: Receipt) -> SafeString | str:
        """`$20.00`, the micro-dollars the receipt signs in its title, and the currency."""
        return format_html("{} {}", money(obj.amount_micro), obj.currency.upper())

    @admin.display(description="occurred", ordering="occurred_at")
    def occurred(self, obj: Receipt) -> SafeString:
        return two_lines(obj.occurred_at)

    @admin.display(description="verified now")
    def verification_result(self, obj: Receipt) -> SafeString:
        check = receipt_verify(obj)
        if check.ok:
            return format_html(
                '<strong style="color: #2e7d32">trusted</strong>: the digest matches, the '
                "signature verifies with trusted key {} ({}) and the detail is present.",
                obj.key_id,
                deployment_environment(),
            )
        return format_html(
            '<strong style="color: #c62828">not trusted: {}</strong> (this deployment: {}; the '
            "receipt names key {}, environment {}, which is not believed by itself).",
            check.problem,
            deployment_environment(),
            obj.key_id,
            obj.key_environment,
        )

    @admin.display(description="parent")
    def parent_link(self, obj: Receipt) -> SafeString | str:
        return _receipt_link(obj.parent) if obj.parent is not None else "—"

    @admin.display(description="children")
    def children_links(self, obj: Receipt) -> SafeString | str:
        children = list(obj.children.order_by("occurred_at", "id"))
        if not children:
            return "—"
        return format_html_join(
            "",
            "<div>{} {}</div>",
            ((child.kind, _receipt_link(child)) for child in children),
        )

    @admin.display(description="verification run")
    def run_link(self, obj: Receipt) -> SafeString:
        run = obj.verification_run
        url = reverse("admin:verification_verificationrun_change", args=[run.pk])
        return format_html(
            '<a href="{}">{}</a> ({}, {})', url, run.public_id, run.contract_id, run.verdict
        )

    @admin.display(description="canonical body (RFC 8785, the bytes hashed and signed)")
    def canonical_text(self, obj: Receipt) -> SafeString:
        return _pre(obj.canonical)

    @admin.display(description="body, for reading")
    def body_pretty(self, obj: Receipt) -> SafeString:
        return _pre(json.dumps(obj.body, indent=2, sort_keys=True, ensure_ascii=False))


register_id("rcpt_", "receipts.Receipt", field="id")
