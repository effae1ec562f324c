"""The provider events received by webhook (read-only), with whether and how they were
processed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from core.admin_base import ReadOnlyAdmin, breakable, short_id, two_lines
from core.dashboard import stripe_link
from verification.admin.shared import pretty_json
from verification.models import ProviderEvent


class ProcessedFilter(admin.SimpleListFilter):
    title = "processed"
    parameter_name = "processed"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Processed"), ("no", "Not processed")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(processed_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(processed_at__isnull=True)
        return queryset


EVENT_FIELDS = (
    "provider",
    "event_id",
    "dashboard",
    "type",
    "provider_created_at",
    "received_at",
    "processed_at",
    "duplicates",
    "attempts",
    "next_attempt_at",
    "processing_error",
    "payload_json",
)


@admin.register(ProviderEvent)
class ProviderEventAdmin(ReadOnlyAdmin):
    list_display = (
        "event",
        "dashboard",
        "event_type",
        "sent",
        "received",
        "processed",
        "duplicates",
        "attempts",
    )
    list_display_links = ("event",)
    list_filter = ("type", ProcessedFilter)
    search_fields = ("event_id",)
    date_hierarchy = "received_at"
    fieldsets = (
        (
            None,
            {"fields": EVENT_FIELDS},
        ),
        ("The body exactly as received", {"classes": ("collapse",), "fields": ("raw",)}),
    )
    readonly_fields = (*EVENT_FIELDS, "raw")

    @admin.display(description="event", ordering="event_id")
    def event(self, obj: ProviderEvent) -> SafeString:
        return short_id(obj.event_id, keep=14)

    @admin.display(description="type", ordering="type")
    def event_type(self, obj: ProviderEvent) -> SafeString:
        return breakable(obj.type)

    @admin.display(description="provider created", ordering="provider_created")
    def sent(self, obj: ProviderEvent) -> SafeString:
        """When the provider made it (its epoch is on the event's page)."""
        return two_lines(datetime.fromtimestamp(obj.provider_created, UTC))

    @admin.display(description="received", ordering="received_at")
    def received(self, obj: ProviderEvent) -> SafeString:
        return two_lines(obj.received_at)

    @admin.display(description="processed", ordering="processed_at")
    def processed(self, obj: ProviderEvent) -> SafeString | str:
        return two_lines(obj.processed_at) if obj.processed_at is not None else "—"

    @admin.display(description="Stripe")
    def dashboard(self, obj: ProviderEvent) -> SafeString | str:
        """The event, and the object it is about, in the Stripe Dashboard."""
        data = obj.payload.get("data") if isinstance(obj.payload, dict) else None
        inner = data.get("object") if isinstance(data, dict) else None
        object_id = inner.get("id") if isinstance(inner, dict) else None
        links = [stripe_link(obj.event_id)]
        if isinstance(object_id, str) and object_id:
            links.append(stripe_link(object_id))
        return format_html_join(mark_safe("<br>"), "{}", ((link,) for link in links))

    @admin.display(description="provider created", ordering="provider_created")
    def provider_created_at(self, obj: ProviderEvent) -> str:
        moment = datetime.fromtimestamp(obj.provider_created, UTC)
        return f"{date_format(moment, 'DATETIME_FORMAT')} ({obj.provider_created})"

    @admin.display(description="payload")
    def payload_json(self, obj: ProviderEvent) -> SafeString:
        return format_html('<pre class="vouch-json">{}</pre>', pretty_json(obj.payload))
