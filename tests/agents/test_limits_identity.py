"""Issue 39 item 9 (SPEC §19, docs/decisions/0016-limits-by-identity.md): failures at /o/token/,
/o/register/ and /mcp are counted per client and per token fingerprint as well as per address,
the address taken as TRUSTED_PROXY_COUNT says; an attacker's failures never refuse a victim's
valid credential, and the attacker's own next failure is still refused.

Every request comes from the proxy's address (REMOTE_ADDR, or the live server's peer) with the
client's address in X-Forwarded-For. Addresses are random per test: counts live in the shared
cache, in windows that outlive a test."""

from __future__ import annotations

import ipaddress
import json
import random
from typing import Any
from urllib.parse import urlencode

import httpx2
import pytest
from django.http import HttpResponse
from django.test import Client
from oauth2_provider.models import Application

from accounts.models import User
from tests.agents.oauth import issue_token, tokens_for
from tests.drivers.mcp import post_mcp, tool_call

PROXY = "10.0.0.7"  # the reverse proxy, on another host than Vouch


def _address() -> str:
    # 198.18.0.0/15 (RFC 2544): wide enough that no two tests' clients meet in a window.
    return str(ipaddress.IPv4Address(0xC6120000 + random.randint(1, 2**17 - 2)))


def _other(address: str) -> str:
    while (other := _address()) == address:
        pass
    return other


@pytest.fixture
def behind_proxy(settings: Any) -> None:
    settings.ALLAUTH_TRUSTED_PROXY_COUNT = 1


def _refresh(app: Application, refresh_token: str, *, client: str, remote: str = PROXY) -> Any:
    response: HttpResponse = Client().post(
        "/o/token/",
        urlencode(
            {
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "client_id": app.client_id,
            }
        ),
        content_type="application/x-www-form-urlencoded",
        REMOTE_ADDR=remote,
        HTTP_X_FORWARDED_FOR=client,
    )
    return response


def _attack(app: Application, *, client: str, times: int = 21) -> None:
    for guess in range(times):
        response = _refresh(app, f"stale-{random.random()}-{guess}", client=client)
        assert response.status_code in (400, 429), response.content


@pytest.mark.usefixtures("behind_proxy")
def test_an_attackers_bad_refresh_tokens_do_not_refuse_a_victims_valid_refresh(
    app: Application, buyer: User, settings: Any
) -> None:
    """Issue 39 item 9: behind a proxy, 20 bad refresh tokens from an attacker made a victim's
    valid refresh 429 (every failure was counted on the proxy's address)."""
    settings.OAUTH_TOKEN_FAILURE_RATE = "20/min"
    victim = tokens_for(app, buyer)
    attacker = _address()
    _attack(app, client=attacker)

    refreshed = _refresh(app, victim["refresh_token"], client=_other(attacker))

    assert refreshed.status_code == 200, refreshed.content
    assert refreshed.json()["access_token"]
    # The attacker's own next attempt is refused: the limit still bites.
    limited = _refresh(app, "stale-once-more", client=attacker)
    assert limited.status_code == 429
    assert limited.json()["error"] == "slow_down"
    assert 1 <= int(limited["Retry-After"]) <= 60


@pytest.mark.usefixtures("behind_proxy")
def test_a_valid_refresh_from_the_attackers_own_gateway_goes_through(
    app: Application, buyer: User, settings: Any
) -> None:
    """Issue 39 item 9: claude.ai and ChatGPT call from shared addresses with one client id: one
    user's stale tokens filled the address's bucket and every other user's valid refresh was
    429. A valid credential is never refused by another identity's failures."""
    settings.OAUTH_TOKEN_FAILURE_RATE = "20/min"
    victim = tokens_for(app, buyer)
    gateway = _address()
    _attack(app, client=gateway, times=25)

    refreshed = _refresh(app, victim["refresh_token"], client=gateway)

    assert refreshed.status_code == 200, refreshed.content
    assert _refresh(app, "stale-at-the-gateway", client=gateway).status_code == 429


def test_a_forged_forwarded_for_is_ignored_with_no_trusted_proxy(
    app: Application, settings: Any
) -> None:
    """Issue 39 item 9: with TRUSTED_PROXY_COUNT=0 the address is the connection's; a client
    writing a new X-Forwarded-For on each request does not escape its limit."""
    settings.ALLAUTH_TRUSTED_PROXY_COUNT = 0
    settings.OAUTH_TOKEN_FAILURE_RATE = "3/min"
    remote = _address()  # the connection itself, no proxy
    for guess in range(3):
        response = _refresh(app, f"stale-{guess}", client=_address(), remote=remote)
        assert response.status_code == 400, response.content
    assert _refresh(app, "stale-4", client=_address(), remote=remote).status_code == 429


@pytest.mark.usefixtures("behind_proxy")
def test_one_bad_refresh_token_replayed_is_refused_before_it_is_looked_up(
    app: Application, settings: Any
) -> None:
    """Issue 39 item 9: the token's fingerprint is counted wherever it comes from: the same bad
    refresh token sent from ever new addresses is refused once it has failed its limit."""
    settings.OAUTH_TOKEN_FAILURE_RATE = "3/min"
    stale = f"stale-{random.random()}"
    for _ in range(3):
        assert _refresh(app, stale, client=_address()).status_code == 400
    assert _refresh(app, stale, client=_address()).status_code == 429


# --- registrations ------------------------------------------------------------------------------


def _register(name: str, *, client: str) -> Any:
    body = {
        "redirect_uris": ["http://127.0.0.1/callback"],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "client_name": name,
    }
    return Client().post(
        "/o/register/",
        json.dumps(body),
        content_type="application/json",
        REMOTE_ADDR=PROXY,
        HTTP_X_FORWARDED_FOR=client,
    )


@pytest.mark.django_db
@pytest.mark.usefixtures("behind_proxy")
def test_registrations_of_different_clients_from_one_address_are_counted_apart(
    settings: Any,
) -> None:
    """Issue 39 item 9: registrations were counted per address only: behind a shared gateway,
    one host's registrations refused every other host's."""
    settings.MCP_REGISTRATION_RATE = "2/hour"
    gateway = _address()
    run = random.random()
    for host in ("Claude", "ChatGPT", "Cursor"):
        for _ in range(2):
            response = _register(f"{host} {run}", client=gateway)
            assert response.status_code == 201, response.content

    # The same client registering again from there is refused: the limit still bites.
    limited = _register(f"Claude {run}", client=gateway)
    assert limited.status_code == 429
    assert limited.json()["error"] == "slow_down"
    # Another client address behind the same proxy is not.
    assert _register(f"Claude {run}", client=_other(gateway)).status_code == 201


# --- bearer tokens at /mcp ----------------------------------------------------------------------


@pytest.fixture
def proxied_server(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    behind_proxy: None,
    transactional_db: None,
) -> str:
    """The live server with its peer (127.0.0.1 here) taken as a proxy on another host: uvicorn
    rewrites the peer from X-Forwarded-For only for the addresses in FORWARDED_ALLOW_IPS
    (127.0.0.1 by default), which a proxy on another host is not. Committed rows (transactional_db,
    asked before any other database fixture): the server's threads read them."""
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "192.0.2.250")
    url: str = request.getfixturevalue("asgi_server")
    return url


def _whoami(url: str, token: str, *, client: str) -> httpx2.Response:
    return post_mcp(url, tool_call("whoami"), token=token, **{"X-Forwarded-For": client})


@pytest.mark.parametrize("shared_gateway", [False, True], ids=["another address", "one gateway"])
def test_an_attackers_bad_bearer_tokens_do_not_refuse_a_victims_valid_token(
    proxied_server: str, buyer: User, settings: Any, shared_gateway: bool
) -> None:
    """Issue 39 item 9: behind a proxy, 20 bad bearer tokens at /mcp from an attacker made the
    victim's valid token 429 (counted on the proxy's address), from another address or from the
    same gateway."""
    settings.MCP_BEARER_FAILURE_RATE = "20/min"
    attacker = _address()
    for guess in range(21):
        response = _whoami(proxied_server, f"guess-{random.random()}-{guess}", client=attacker)
        assert response.status_code in (401, 429), response.text
    good = issue_token(buyer, resource=f"{proxied_server}/mcp")

    victim = attacker if shared_gateway else _other(attacker)
    answer = _whoami(proxied_server, good, client=victim)

    assert answer.status_code == 200, answer.text
    # The attacker's own next attempt is refused: the limit still bites.
    limited = _whoami(proxied_server, "guess-once-more", client=attacker)
    assert limited.status_code == 429, limited.text
    assert limited.json()["error"]["data"]["code"] == "rate_limited"
