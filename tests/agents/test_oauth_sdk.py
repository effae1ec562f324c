"""The official MCP SDK's OAuth client (mcp 2.3.0, `OAuthClientProvider`) completes Vouch's flow
against a live server: protected-resource discovery from the 401's `resource_metadata`, the
authorization-server metadata and its issuer check, authorization with PKCE S256 and `resource`,
the RFC 9207 `iss` check, the token exchange, and a refresh when the token has expired. The
client is registered beforehand, as staff do in the admin: its client_id is in the SDK's
storage, so no registration endpoint is needed.

The resource here is a stand-in for /mcp (helper C's ASGI app serves the real one): a Django
view in this module that authenticates with the same `bearer_authenticate` and answers 401 with
`WWW-Authenticate: Bearer resource_metadata=...` as SPEC §16 says /mcp does."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx2
import pytest
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.test import Client
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientMetadata,
)
from oauth2_provider.models import AccessToken, RefreshToken
from pydantic import AnyUrl

from accounts.models import User
from agents.oauth.tokens import (
    TokenRefused,
    bearer_authenticate,
    mcp_resource_url,
    resource_metadata_url,
)
from tests.agents.oauth import REDIRECT_URI, client_register, form_fields, redirect_params
from tests.drivers.oauth_browser import SdkStorage

BUYER_SCOPES = "escrow:read escrow:refund_request"


@csrf_exempt
def _mcp_stand_in(request: HttpRequest) -> JsonResponse:
    resource = mcp_resource_url(scheme=request.scheme or "http", host=request.get_host())
    header = request.headers.get("Authorization", "")
    raw = header[7:] if header[:7].lower() == "bearer " else ""
    try:
        principal = bearer_authenticate(raw=raw, resource=resource)
    except TokenRefused as refused:
        response = JsonResponse({"error": refused.reason}, status=401)
        response["WWW-Authenticate"] = (
            f'Bearer resource_metadata="{resource_metadata_url(resource)}", scope="{BUYER_SCOPES}"'
        )
        return response
    return JsonResponse({"user": principal.user.get_username(), "scopes": sorted(principal.scopes)})


urlpatterns = [path("mcp", _mcp_stand_in), path("", include("config.urls"))]


async def _session(base: str, session_cookie: str, storage: SdkStorage) -> dict[str, Any]:
    """Call the stand-in /mcp through the SDK's auth; the person consents in a 'browser' that
    holds their Vouch session (the consent page's form, posted back with its CSRF token)."""
    seen: dict[str, Any] = {"authorize_urls": []}

    async def redirect_handler(url: str) -> None:
        seen["authorize_urls"].append(url)
        async with httpx2.AsyncClient(cookies={settings.SESSION_COOKIE_NAME: session_cookie}) as b:
            page = await b.get(url)
            assert page.status_code == 200, page.text
            fields = {**form_fields(page.text), "allow": "Allow"}
            answer = await b.post(f"{base}/o/authorize/", data=fields)
            assert answer.status_code == 302, answer.text
            seen["location"] = answer.headers["location"]

    async def callback_handler() -> AuthorizationCodeResult:
        params = redirect_params(seen["location"])
        return AuthorizationCodeResult(
            code=params["code"], state=params.get("state"), iss=params.get("iss")
        )

    provider = OAuthClientProvider(
        server_url=f"{base}/mcp",
        client_metadata=OAuthClientMetadata(
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            token_endpoint_auth_method="none",
            client_name="SDK test",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    async with httpx2.AsyncClient(auth=provider) as client:
        first = await client.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1})
        seen["first"] = (first.status_code, first.json())
        seen["first_tokens"] = storage.tokens
        # The access token has expired (as far as the client knows): it refreshes first.
        provider.context.token_expiry_time = time.time() - 1
        second = await client.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 2})
        seen["second"] = (second.status_code, second.json())
        seen["second_tokens"] = storage.tokens
    return seen


@pytest.mark.urls(__name__)
def test_the_mcp_sdk_completes_the_flow_and_refreshes(live_server: Any, buyer: User) -> None:
    app = client_register(name="SDK test")
    browser = Client()
    browser.force_login(buyer)
    cookie = browser.cookies[settings.SESSION_COOKIE_NAME].value
    base = live_server.url
    resource = f"{base}/mcp"

    seen = asyncio.run(_session(base, cookie, SdkStorage(app.client_id, may_register=False)))

    assert seen["first"] == (200, {"user": "alice", "scopes": BUYER_SCOPES.split()})
    (authorize_url,) = seen["authorize_urls"]  # one consent, then only refresh
    assert authorize_url.startswith(f"{base}/o/authorize/?")
    assert f"resource={resource.replace(':', '%3A').replace('/', '%2F')}" in authorize_url
    assert "code_challenge_method=S256" in authorize_url

    first, second = seen["first_tokens"], seen["second_tokens"]
    assert first.refresh_token
    assert second.refresh_token != first.refresh_token
    assert second.access_token != first.access_token
    assert seen["second"] == (200, {"user": "alice", "scopes": BUYER_SCOPES.split()})
    assert list(AccessToken.objects.values_list("resource", flat=True)) == [[resource]]
    assert RefreshToken.objects.filter(revoked__isnull=False).count() == 1
    with pytest.raises(TokenRefused):
        bearer_authenticate(raw=first.access_token, resource=resource)
