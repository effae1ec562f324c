"""OAuth access tokens are for /mcp only (SPEC §16): the REST API answers them 401 in its error
envelope, with a message and a stable `details.reason` saying where they belong, whether the
token is live, expired or bound to another resource."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from accounts.models import User
from tests.agents.oauth import MCP, issue_token


@pytest.mark.parametrize(
    ("resource", "expires_in"),
    [(MCP, 3600), (MCP, -60), ("http://other.example/mcp", 3600)],
    ids=["live", "expired", "other-resource"],
)
@pytest.mark.parametrize("path", ["/api/v1/me", "/api/me", "/api/v1/escrow/envelopes"])
def test_the_rest_api_refuses_an_oauth_access_token_with_401(
    buyer: User, path: str, resource: str, expires_in: int
) -> None:
    raw = issue_token(buyer, resource=resource, expires_in=expires_in)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = client.get(path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="vouch"'
    assert response.json() == {
        "success": False,
        "error": {
            "code": "authentication_failed",
            "message": "This is an OAuth access token for Vouch's MCP server: send it to /mcp. "
            "The REST API takes a personal API token or a logged-in session.",
            "details": {"reason": "oauth_access_token"},
        },
    }


def test_a_personal_api_token_still_works_and_an_unknown_token_gets_the_plain_refusal(
    bearer_client: APIClient,
) -> None:
    assert bearer_client.get("/api/v1/me").status_code == 200
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer not-a-token-of-anyone")
    response = client.get("/api/v1/me")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"
    assert response.json()["error"]["details"] == {}
