from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """The agent surface (SPEC §16): the MCP server at /mcp, its OAuth 2.1 authorization server
    (django-oauth-toolkit) and the refund requests a person confirms in the browser."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "agents"
