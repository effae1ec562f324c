"""Shared admin building blocks."""

import re
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from core.amounts import micro_from_dollars


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable by staff with the view permission; nobody adds, changes or deletes by hand: these
    rows change only through services. A page adds its own context with `page_context`."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def page_context(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        return {}

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        context.update(self.page_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)


def amount_micro_searched(term: str) -> int | None:
    """The amount a search term names in dollars, in micro-dollars, or None (core.amounts)."""
    return micro_from_dollars(term)


class AmountSearchAdmin(admin.ModelAdmin):
    """Search also by an amount in dollars (`12.50` finds 12,500,000 micro): a subclass says
    which rows carry that amount (`rows_with_amount`)."""

    def rows_with_amount(self, queryset: QuerySet[Any], amount_micro: int) -> QuerySet[Any]:
        return queryset.none()

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        amount = amount_micro_searched(search_term)
        if amount is not None:
            results = results | self.rows_with_amount(queryset, amount)
            may_have_duplicates = True
        return results, may_have_duplicates


def two_lines(moment: datetime) -> SafeString:
    """A datetime in the site's one format (config/formats), the date above the time and zone,
    so list columns stay narrow."""
    day, _, rest = date_format(timezone.localtime(moment), "DATETIME_FORMAT").partition(" ")
    return format_html('<span class="vouch-when">{}<br>{}</span>', day, rest)


def short_id(public_id: str, *, keep: int = 10) -> SafeString:
    """A long id shortened for a list column (`env_fd6441…`), whole on hover; searching finds
    it whole."""
    if len(public_id) <= keep + 1:
        return format_html('<span class="vouch-mono">{}</span>', public_id)
    return format_html(
        '<span class="vouch-mono" title="{}">{}…</span>', public_id, public_id[:keep]
    )


def breakable(text: str) -> SafeString:
    """A dotted or snake_case name (`charge.dispute.funds_withdrawn`) that may wrap after its dots
    and underscores, so a list column stays narrow without breaking it mid-word."""
    parts = re.split(r"(?<=[._:])", text)
    return format_html_join(mark_safe("<wbr>"), "{}", ((part,) for part in parts if part))
