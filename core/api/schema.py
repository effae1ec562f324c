"""drf-spectacular hooks: the schema lists each route once, at /api/v1/, and knows Vouch's two
authentication schemes."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


def versioned_routes_only(endpoints: list[tuple[Any, ...]], **kwargs: Any) -> list[tuple[Any, ...]]:
    """Drop the unversioned /api/ alias: it serves the same routes as /api/v1/."""
    return [endpoint for endpoint in endpoints if endpoint[0].startswith("/api/v1/")]


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token from `manage.py issue_token <username>`. "
            "Tokens may read; they cannot move money.",
        }


class CsrfSessionScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.CsrfSessionAuthentication"
    name = "cookieAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": "sessionid",
            "description": "The session of a person logged in at /accounts/login/. Unsafe "
            "methods also need the X-CSRFToken header.",
        }
