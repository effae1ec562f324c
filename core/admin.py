from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin_base import breakable, short_id, two_lines
from core.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: audit events are written by services, never by hand."""

    list_display = ("when", "actor_label", "action_name", "target")
    list_filter = ("action", "target_type")
    search_fields = ("target_id", "actor_label", "action")
    date_hierarchy = "created_at"
    readonly_fields = (
        "created_at",
        "actor",
        "actor_label",
        "action",
        "target_type",
        "target_id",
        "details",
    )

    @admin.display(description="when", ordering="created_at")
    def when(self, obj: AuditEvent) -> SafeString:
        return two_lines(obj.created_at)

    @admin.display(description="action", ordering="action")
    def action_name(self, obj: AuditEvent) -> SafeString:
        return breakable(obj.action)

    @admin.display(description="target", ordering="target_type")
    def target(self, obj: AuditEvent) -> SafeString:
        """Its type above its id (shortened, whole on hover and on the event's page)."""
        return format_html(
            '{}<span class="vouch-sub">{}</span>',
            breakable(obj.target_type),
            short_id(obj.target_id, keep=16),
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
