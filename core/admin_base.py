"""Shared admin building blocks."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse


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
