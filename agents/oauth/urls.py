"""The authorization server's routes, included at the site root (config/urls.py): /o/… (on
django-oauth-toolkit's views), RFC 7591 registration of public clients (/o/register/, ours) and the
well-known metadata documents. Nothing else of django-oauth-toolkit is routed: no application
self-service, no introspection, no device flow, no OpenID Connect."""

from django.urls import URLPattern, URLResolver, path

from agents.oauth import views

app_name = "oauth"

urlpatterns: list[URLPattern | URLResolver] = [
    path("o/authorize/", views.AuthorizationView.as_view(), name="authorize"),
    path("o/token/", views.TokenView.as_view(), name="token"),
    path("o/register/", views.RegistrationView.as_view(), name="register"),
    path("o/revoke_token/", views.RevokeTokenView.as_view(), name="revoke-token"),
    path(
        ".well-known/oauth-authorization-server",
        views.AuthorizationServerMetadataView.as_view(),
        name="authorization-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource/mcp",
        views.ProtectedResourceMetadataView.as_view(),
        name="protected-resource-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource",
        views.ProtectedResourceMetadataView.as_view(),
        name="protected-resource-metadata-root",
    ),
]
