from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from core.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: audit events are written by services, never by hand."""

    list_display = ("created_at", "actor_label", "action", "target_type", "target_id")
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
