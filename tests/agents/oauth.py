"""Real OAuth rows for tests that need a token without walking the browser flow: a registered
public client (authorization code + PKCE) and an access token issued to it, as django-oauth-toolkit
stores them. The flow itself is tested in tests/agents/test_oauth*.py and end to end."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from django.core.cache import cache
from django.http import HttpResponse
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, set_token_value

from accounts.models import User
from core.api.throttling import throttle_cache_key


def client_register(
    *, name: str = "test assistant", redirect_uri: str = "http://127.0.0.1/callback"
) -> Application:
    return Application.objects.create(
        name=name,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=redirect_uri,
        algorithm="",
    )


def issue_token(
    user: User,
    *,
    scopes: str = "escrow:read escrow:refund_request",
    resource: str = "http://testserver/mcp",
    expires_in: int = 3600,
    application: Application | None = None,
) -> str:
    """A fresh access token (the raw string a client sends) for `user`, bound to `resource`."""
    raw = secrets.token_urlsafe(30)
    token = AccessToken(
        user=user,
        application=application or client_register(),
        scope=scopes,
        expires=timezone.now() + timedelta(seconds=expires_in),
        resource=[resource] if resource else [],
    )
    set_token_value(token, raw)  # stored as the server stores it: a checksum only (RFC 9700)
    token.save()
    return raw


# --- Walking the flow (tests/agents/test_oauth*.py) ----------------------------------------------

MCP = "http://testserver/mcp"
REDIRECT_URI = "http://127.0.0.1/callback"


def document_body(url: str, **changes: Any) -> dict[str, Any]:
    """A client id metadata document published at `url`: a public client redirecting to
    REDIRECT_URI, with `changes` over it."""
    return {
        "client_id": url,
        "client_name": "Published assistant",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **changes,
    }


class DocumentClient:
    """What authorize_query needs of a client known by its document's URL: its client id."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id


def pkce_pair() -> tuple[str, str]:
    """A code_verifier and its S256 code_challenge (RFC 7636 §4.2)."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def authorize_query(
    application: Application | DocumentClient, challenge: str, **overrides: str | None
) -> str:
    """The query string of an authorization request as an MCP client sends it (the SDK's
    parameters); an override of None leaves that parameter out."""
    params: dict[str, str | None] = {
        "response_type": "code",
        "client_id": application.client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "state-123",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": MCP,
        "scope": "escrow:read escrow:refund_request",
    }
    params.update(overrides)
    return urlencode({k: v for k, v in params.items() if v is not None})


class _HiddenInputs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "input" and found.get("type") == "hidden" and found.get("name"):
            self.fields[str(found["name"])] = found.get("value") or ""


def form_fields(html: str) -> dict[str, str]:
    """The hidden fields of the consent form, as a browser would post them back."""
    parser = _HiddenInputs()
    parser.feed(html)
    return parser.fields


def redirect_params(location: str) -> dict[str, str]:
    """The query parameters of a redirect to the client (code, state, iss, or error...)."""
    parts = urlsplit(location)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == REDIRECT_URI, location
    return dict(parse_qsl(parts.query))


def token_request(**data: str) -> HttpResponse:
    """A token request as a public client sends it: form-encoded, no cookie, no CSRF token."""
    return Client().post(
        "/o/token/", urlencode(data), content_type="application/x-www-form-urlencoded"
    )


def browser_as(user: User) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def consent(browser: Client, query: str) -> HttpResponse:
    return browser.get(f"/o/authorize/?{query}")


def consent_answer(
    browser: Client, page: HttpResponse, *, allow: bool, **tamper: str
) -> HttpResponse:
    """Post the consent form back as the browser would (its hidden fields, CSRF token), with
    Allow or Deny; `tamper` changes hidden fields first."""
    fields = form_fields(page.content.decode())
    fields.update(tamper)
    if allow:
        fields["allow"] = "Allow"
    return browser.post("/o/authorize/", fields)


def code_for(user: User, app: Application, challenge: str, **overrides: str | None) -> str:
    browser = browser_as(user)
    page = consent(browser, authorize_query(app, challenge, **overrides))
    assert page.status_code == 200, page.content
    allowed = consent_answer(browser, page, allow=True)
    assert allowed.status_code == 302
    return redirect_params(allowed["Location"])["code"]


def exchange(app: Application, code: str, verifier: str, **extra: str) -> HttpResponse:
    return token_request(
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT_URI,
        client_id=app.client_id,
        code_verifier=verifier,
        **extra,
    )


def tokens_for(app: Application, user: User, scope: str = "escrow:read") -> dict[str, Any]:
    verifier, challenge = pkce_pair()
    code = code_for(user, app, challenge, scope=scope)
    response = exchange(app, code, verifier, resource=MCP)
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def forget_counts(scope: str, ident: str = "127.0.0.1") -> None:
    """Drop `ident`'s counts in `scope` for the windows now under way (every period a rate may
    name), as if they had passed: a test that sets a low limit starts from nothing. Never
    cache.clear(): the cache is shared with every other run on the machine."""
    now = time.time()
    for window_s in (1, 60, 3600, 86400):
        cache.delete(throttle_cache_key(scope, ident, int(now // window_s)))
