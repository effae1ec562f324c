from django.apps import AppConfig
from oauth2_provider.apps import DOTConfig


class AgentsConfig(AppConfig):
    """The agent surface (SPEC §16): the MCP server at /mcp, its OAuth 2.1 authorization server
    (django-oauth-toolkit) and the refund requests a person confirms in the browser."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"


class OAuthProviderConfig(DOTConfig):
    """django-oauth-toolkit, named in the admin for what staff do there."""

    verbose_name = "OAuth clients and tokens (MCP)"
