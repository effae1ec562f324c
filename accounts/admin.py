from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.models import ApiToken, User
from accounts.services import api_token_revoke

admin.site.register(User, UserAdmin)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are issued with `manage.py issue_token`; here they can be seen and revoked."""

    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("user__username", "prefix", "name")
    readonly_fields = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    exclude = ("digest",)
    actions = ("revoke",)

    # Ops hold view and change on tokens (accounts.services.ops_permissions): change is revoking.
    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        user = request.user
        if not isinstance(user, User):  # the admin only lets authenticated staff in
            raise PermissionDenied
        for token in queryset:
            api_token_revoke(token=token, actor=user)
        self.message_user(request, f"Revoked {queryset.count()} token(s).")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
