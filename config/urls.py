from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from django.views.decorators.cache import cache_control, never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import TemplateView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from accounts.views import admin_login
from core.api.responses import error_body
from ops import views as ops_views
from ops.admin_views import console_index
from verification.api.webhooks import stripe_webhook

# One table of API routes, served twice: /api/v1/... (namespace "api", used by reverse()) and
# the unversioned alias /api/... (namespace "api-alias"). Later issues add routes to
# config/api_urls.py only.
API_ROUTES = ("config.api_urls", "api")


@csrf_exempt
@never_cache
def mcp_needs_asgi(request: HttpRequest) -> JsonResponse:
    """/mcp under the WSGI app (`manage.py runserver`, config/wsgi.py), which never serves the
    MCP server: say where it runs rather than a bare 404. Under the ASGI app config/asgi.py
    hands /mcp to the MCP server before Django sees it, so this never answers there."""
    return JsonResponse(
        error_body(
            "mcp_needs_asgi",
            "The MCP server runs in Vouch's ASGI app (config/asgi.py), not in the WSGI app that "
            "`manage.py runserver` serves: use `make run`, or "
            "`uvicorn config.asgi:application`.",
        ),
        status=501,
    )


urlpatterns = [
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    # Every page's icon (browsers ask for it at this path), so no page view logs a 404.
    path(
        "favicon.ico",
        cache_control(max_age=86400, public=True)(
            TemplateView.as_view(template_name="favicon.svg", content_type="image/svg+xml")
        ),
        name="favicon",
    ),
    # Before the admin's own: its login goes through allauth's (and its limits), accounts/views.py.
    path("admin/login/", admin_login, name="admin-login"),
    # The admin's home page is the ops console (ops/console.py); the rest is the stock admin.
    path("admin/", admin.site.admin_view(console_index), name="admin-console"),
    path("admin/search/", include("ops.admin_urls")),  # the console's search box (ops/search/)
    path("admin/disputes/outcomes/", include("disputes.admin.outcomes")),  # SPEC §17
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/v1/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/v1/", include(API_ROUTES, namespace="api")),
    path("api/", include(API_ROUTES, namespace="api-alias")),
    # The agent surface (SPEC §16): OAuth 2.1 (/o/…, /.well-known/…) and refund confirmations.
    # /mcp itself is served by config/asgi.py's MCP server; these answer only under WSGI.
    path("mcp", mcp_needs_asgi, name="mcp-needs-asgi"),
    path("mcp/", mcp_needs_asgi),
    path("", include("agents.oauth.urls")),
    path("escrow/", include("agents.urls", namespace="agents")),
    # The buyer's own pages (SPEC §10.1): their envelopes, one envelope, the refund form.
    path("escrow/", include("envelopes.pages.urls", namespace="buyer")),
    path("webhooks/stripe", stripe_webhook, name="stripe-webhook"),
    # Operations (ops/): liveness, readiness, Prometheus metrics.
    path("healthz", ops_views.healthz, name="healthz"),
    path("readyz", ops_views.readyz, name="readyz"),
    path("metrics", ops_views.metrics, name="metrics"),
]

admin.site.site_header = "Vouch operations"
admin.site.site_title = "Vouch"
admin.site.index_title = "Operations"

# A refused page (PermissionDenied) is styled; in the admin it names the permission it needs.
handler403 = "ops.admin_views.forbidden"
