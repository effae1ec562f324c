"""The agent surface in the operations admin (SPEC §16): staff register the OAuth clients that may
ask people for access (authorization code + PKCE only), see the access and refresh tokens issued
and revoke them, and read refund requests made through MCP. django-oauth-toolkit's own admin
pages are replaced: theirs offer every grant type, skip-consent and OpenID settings Vouch does
not serve, and delete tokens rather than revoke them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from oauth2_provider.admin import ApplicationAdmin as DotApplicationAdmin
from oauth2_provider.forms import ApplicationForm as DotApplicationForm
from oauth2_provider.models import AccessToken, Application, Grant, IDToken, RefreshToken

from accounts.models import User
from agents.models import RefundRequest, RegisteredClient
from agents.oauth.policy import redirect_uri_refusal
from agents.oauth.services import oauth_access_token_revoke, oauth_refresh_token_revoke
from agents.selectors import client_acted_for, refund_request_refund, refund_request_status
from core.admin_base import ReadOnlyAdmin, short_id, two_lines
from core.display import money
from core.links import id_link, register_id

for model in (Application, AccessToken, RefreshToken, Grant, IDToken):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


def _actor(request: HttpRequest) -> User:
    user = request.user
    if not isinstance(user, User):  # the admin only lets authenticated staff in
        raise PermissionDenied
    return user


class ApplicationForm(DotApplicationForm):
    """Only the authorization code grant can be chosen; http redirect URIs only on loopback."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields.get("authorization_grant_type")
        if isinstance(field, forms.ChoiceField):
            field.choices = [
                (Application.GRANT_AUTHORIZATION_CODE, "Authorization code (with PKCE S256)")
            ]
            field.initial = Application.GRANT_AUTHORIZATION_CODE
            field.help_text = "The only grant Vouch serves; refresh tokens come with it."

    def clean_redirect_uris(self) -> str:
        value = str(self.cleaned_data.get("redirect_uris") or "")
        problems = [p for p in (redirect_uri_refusal(uri) for uri in value.split()) if p]
        if problems:
            raise ValidationError(problems)
        return value


@admin.register(Application)
class ApplicationAdmin(DotApplicationAdmin):
    """An OAuth client (an AI assistant) that may ask people for access to /mcp. A public
    client (on the person's machine) has no secret; a confidential one authenticates with the
    secret shown here once, when it is created."""

    form = ApplicationForm
    fields = (
        "name",
        "client_id",
        "client_type",
        "authorization_grant_type",
        "redirect_uris",
        "client_secret",
        "hash_client_secret",
        "allowed_origins",
        "user",
    )
    list_display = ("name", "client_id", "client_type", "redirect_uris", "created_when")
    list_filter = ("client_type",)
    search_fields = ("name", "client_id")
    readonly_fields = ()

    @admin.display(description="created", ordering="created")
    def created_when(self, obj: Application) -> SafeString:
        return two_lines(obj.created)


@admin.register(RegisteredClient)
class RegisteredClientAdmin(ReadOnlyAdmin):
    """Clients that registered themselves (RFC 7591, or a client ID metadata document): unverified,
    with whom they acted for. Revoke their tokens on the token pages; an unused one expires."""

    list_display = ("client", "how", "registered_when", "registered_from", "last_used", "acted")
    list_filter = ("how",)
    search_fields = ("application__name", "application__client_id")
    list_select_related = ("application",)
    fields = ("application", "how", "registered_at", "registered_from", "last_used_at", "metadata")

    @admin.display(description="client", ordering="application__name")
    def client(self, obj: RegisteredClient) -> SafeString:
        return format_html("{}<br><code>{}</code>", obj.application.name, obj.application.client_id)

    @admin.display(description="registered", ordering="registered_at")
    def registered_when(self, obj: RegisteredClient) -> SafeString:
        return two_lines(obj.registered_at)

    @admin.display(description="last token issued", ordering="last_used_at")
    def last_used(self, obj: RegisteredClient) -> SafeString | str:
        return two_lines(obj.last_used_at) if obj.last_used_at else "never"

    @admin.display(description="acted for")
    def acted(self, obj: RegisteredClient) -> str:
        return ", ".join(client_acted_for(obj.application_id)) or "nobody yet"


def _resource(resource: list[str] | None) -> str:
    return " ".join(resource or []) or "(none)"


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    """Access tokens issued to OAuth clients (never shown: only a checksum is stored). Revoking
    one also revokes its refresh token; neither works again."""

    list_display = ("id", "user", "application", "scope", "bound_to", "expires_when", "state")
    list_select_related = ("user", "application")
    list_filter = ("application",)
    search_fields = ("user__username", "user__email", "application__name", "application__client_id")
    fields = ("user", "application", "scope", "bound_to", "expires", "created", "state")
    readonly_fields = fields
    actions = ("revoke",)

    @admin.display(description="resource")
    def bound_to(self, obj: AccessToken) -> str:
        return _resource(obj.resource)

    @admin.display(description="expires", ordering="expires")
    def expires_when(self, obj: AccessToken) -> SafeString:
        return two_lines(obj.expires)

    @admin.display(description="state")
    def state(self, obj: AccessToken) -> str:
        return "expired" if obj.is_expired() else "live"

    # Ops hold view and change on tokens (accounts.services.ops_permissions): change is revoking.
    @admin.action(description="Revoke the selected access tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[AccessToken]) -> None:
        actor = _actor(request)
        count = 0
        for token in queryset:
            oauth_access_token_revoke(token=token, actor=actor)
            count += 1
        self.message_user(request, f"Revoked {count} access token(s) and their refresh tokens.")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RefreshToken)
class RefreshTokenAdmin(admin.ModelAdmin):
    """Refresh tokens (rotated on every use; a used one is kept, revoked, so that its replay
    revokes the whole family). Revoking one also revokes the access token it last issued."""

    list_display = ("id", "user", "application", "bound_to", "created_when", "revoked_when")
    list_select_related = ("user", "application")
    list_filter = ("application", ("revoked", admin.EmptyFieldListFilter))
    search_fields = ("user__username", "user__email", "application__name", "application__client_id")
    fields = ("user", "application", "bound_to", "token_family", "created", "revoked")
    readonly_fields = fields
    actions = ("revoke",)

    @admin.display(description="resource")
    def bound_to(self, obj: RefreshToken) -> str:
        return _resource(obj.resource)

    @admin.display(description="created", ordering="created")
    def created_when(self, obj: RefreshToken) -> SafeString:
        return two_lines(obj.created)

    @admin.display(description="revoked", ordering="revoked")
    def revoked_when(self, obj: RefreshToken) -> SafeString | str:
        return two_lines(obj.revoked) if obj.revoked else "-"

    @admin.action(description="Revoke the selected refresh tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[RefreshToken]) -> None:
        actor = _actor(request)
        count = 0
        for token in queryset:
            if token.revoked is None:
                oauth_refresh_token_revoke(token=token, actor=actor)
                count += 1
        self.message_user(request, f"Revoked {count} refresh token(s) and their access tokens.")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RefundRequest)
class RefundRequestAdmin(ReadOnlyAdmin):
    """Refunds proposed through MCP, waiting for (or given) their owner's confirmation. Read
    only: only the owner, in the browser, confirms one."""

    list_display = ("request_id", "owner", "envelope_id", "state", "expires_when", "refund_id")
    list_select_related = ("owner", "envelope", "refund")
    list_filter = ("status",)
    search_fields = ("public_id", "owner__email", "owner__username", "envelope__public_id")
    ordering = ("-created_at", "-id")
    fields = (
        "public_id",
        "owner",
        "envelope_link",
        "amount_money",
        "status",
        "refusal_code",
        "refund_link",
        "client_id",
        "preview",
        "idempotency",
        "expires_at",
        "confirm_lease_until",
        "confirmed_at",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="envelope")
    def envelope_link(self, obj: RefundRequest) -> SafeString | str:
        return id_link(obj.envelope.public_id)

    @admin.display(description="amount")
    def amount_money(self, obj: RefundRequest) -> SafeString | str:
        """`$2.00`, the micro-dollars asked in its title; no amount asks for everything unspent."""
        return money(obj.amount_micro) if obj.amount_micro is not None else "everything unspent"

    @admin.display(description="refund")
    def refund_link(self, obj: RefundRequest) -> SafeString | str:
        return id_link(obj.refund.public_id) if obj.refund is not None else "—"

    @admin.display(description="id", ordering="public_id")
    def request_id(self, obj: RefundRequest) -> SafeString:
        return short_id(obj.public_id, keep=14)

    @admin.display(description="envelope", ordering="envelope__public_id")
    def envelope_id(self, obj: RefundRequest) -> SafeString:
        return short_id(obj.envelope.public_id)

    @admin.display(description="status")
    def state(self, obj: RefundRequest) -> str:
        refund = refund_request_refund(obj)
        return refund_request_status(obj, refund=refund, now=timezone.now())

    @admin.display(description="expires", ordering="expires_at")
    def expires_when(self, obj: RefundRequest) -> SafeString:
        return two_lines(obj.expires_at)

    @admin.display(description="refund")
    def refund_id(self, obj: RefundRequest) -> SafeString | str:
        refund = refund_request_refund(obj)
        if refund is None:
            return "-"
        return format_html('<span class="vouch-mono">{}</span>', refund.public_id)


register_id("rrq_", "agents.RefundRequest")
