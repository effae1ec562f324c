"""Issue 39 item 1: the buyer's connected assistants when one identifies by a Client ID Metadata
Document (its client id an `https://host/path` URL). The page lists it and its Revoke form ends
its access; another buyer's assistant and an unknown id answer the same 404 (SPEC §5)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from typing import Any

import httpx2
import pytest
from django.test import Client
from oauth2_provider.models import AccessToken, RefreshToken

from accounts.models import User
from agents.oauth.tokens import TokenRefused, bearer_authenticate
from tests.agents.oauth import (
    MCP,
    authorize_query,
    browser_as,
    consent,
    consent_answer,
    exchange,
    pkce_pair,
    redirect_params,
)
from tests.drivers.https_documents import DocumentServer
from tests.drivers.mcp import tool_call

pytestmark = pytest.mark.django_db

PAGE = "/escrow/assistants/"
CALLBACK = "http://127.0.0.1/callback"


class _Client:
    """What authorize_query needs of an application: its client id."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id


def _document_client_authorized(
    server: DocumentServer, user: User, path: str = "/clients/assistant.json"
) -> tuple[str, dict[str, Any]]:
    """A client identified by its metadata document URL, authorized by `user` through the
    consent page: (its client id, the token response)."""
    url = server.serve(
        path,
        {
            "client_id": server.url(path),
            "client_name": "Published assistant",
            "redirect_uris": [CALLBACK],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    verifier, challenge = pkce_pair()
    browser = browser_as(user)
    page = consent(browser, authorize_query(_Client(url), challenge))  # type: ignore[arg-type]
    assert page.status_code == 200, page.content
    code = redirect_params(consent_answer(browser, page, allow=True)["Location"])["code"]
    tokens = exchange(_Client(url), code, verifier, resource=MCP)  # type: ignore[arg-type]
    assert tokens.status_code == 200, tokens.content
    return url, tokens.json()


class _Forms(HTMLParser):
    """Each form of a page: its method, action and fields (hidden inputs and buttons)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.forms.append({"action": found.get("action") or "", "fields": {}})
        elif tag in ("input", "button") and self.forms and found.get("name"):
            self.forms[-1]["fields"][str(found["name"])] = found.get("value") or ""


def _revoke_form(browser: Client, html: str, client_id: str) -> dict[str, Any]:
    """The Revoke form as a browser would post it: the row of `client_id` opens the confirmation
    page (issue 41: revoking asks first), whose form is the one that revokes."""
    row = re.search(rf'<tr data-client="{re.escape(client_id)}">(.*?)</tr>', html, flags=re.DOTALL)
    assert row is not None, html
    parser = _Forms()
    parser.feed(row.group(1))
    (ask,) = parser.forms
    confirmation = browser.get(ask["action"], ask["fields"])
    assert confirmation.status_code == 200, confirmation.content
    parser = _Forms()
    parser.feed(confirmation.content.decode())
    (form,) = parser.forms
    return form


def test_a_document_clients_assistant_is_listed_and_revoked_from_the_page(
    document_server: DocumentServer, buyer: User
) -> None:
    """Issue 39 item 1: the page answered 500 (NoReverseMatch: `<str:client_id>` cannot hold the
    `/` of a document URL) once the buyer had authorized such a client."""
    url, issued = _document_client_authorized(document_server, buyer)
    browser = browser_as(buyer)

    page = browser.get(PAGE)

    assert page.status_code == 200
    form = _revoke_form(browser, page.content.decode(), url)
    answer = browser.post(form["action"], form["fields"], follow=True)
    assert answer.status_code == 200
    assert "Revoked: Published assistant" in answer.content.decode()
    with pytest.raises(TokenRefused):
        bearer_authenticate(raw=issued["access_token"], resource=MCP)
    assert not RefreshToken.objects.filter(
        application__client_id=url, revoked__isnull=True
    ).exists()
    assert f'data-client="{url}"' not in answer.content.decode()


def test_another_buyers_document_client_and_an_unknown_id_answer_the_same_404(
    document_server: DocumentServer, buyer: User, staff: User
) -> None:
    """Issue 39 item 1: a revocation naming a document URL must reach the view (it was a 404 of
    the URL router for any id with a `/`), and then answer another person's assistant exactly as
    an unknown one (SPEC §5), revoking nothing."""
    mine, _ = _document_client_authorized(document_server, buyer, "/mine.json")
    theirs, issued = _document_client_authorized(document_server, staff, "/theirs.json")
    browser = browser_as(buyer)
    form = _revoke_form(browser, browser.get(PAGE).content.decode(), mine)

    answers = [
        browser.post(form["action"], {**form["fields"], "client_id": client_id})
        for client_id in (theirs, document_server.url("/nobody.json"), "")
    ]

    assert {a.status_code for a in answers} == {404}
    assert len({a.content for a in answers}) == 1
    assert b"Not found" in answers[0].content
    assert bearer_authenticate(raw=issued["access_token"], resource=MCP).user == staff
    assert AccessToken.objects.filter(application__client_id=mine).exists()


def test_a_revocation_without_the_csrf_token_is_refused(
    document_server: DocumentServer, buyer: User
) -> None:
    """Issue 39 item 1: the new form keeps CSRF (a cross-site page cannot revoke)."""
    url, _ = _document_client_authorized(document_server, buyer)
    browser = browser_as(buyer)
    form = _revoke_form(browser, browser.get(PAGE).content.decode(), url)
    fields = {k: v for k, v in form["fields"].items() if k != "csrfmiddlewaretoken"}

    answer = browser.post(form["action"], fields)

    assert answer.status_code == 403
    assert AccessToken.objects.filter(application__client_id=url).exists()


def test_the_revoke_route_takes_no_get(buyer: User) -> None:
    """A GET never revokes (a link or an image cannot end an assistant's access)."""
    browser = Client()
    browser.force_login(buyer)
    assert browser.get(f"{PAGE}revoke/").status_code in (404, 405)


def test_make_run_settings_accept_a_document_on_a_local_address() -> None:
    """Issue 39 item 5: under `make run` (config.settings.local, DEBUG on by default) a document
    on a local address was refused: MCP_CLIENT_DOCUMENT_PRIVATE_OK followed base settings' DEBUG,
    read before local.py turned DEBUG on."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DJANGO_DEBUG", "MCP_CLIENT_DOCUMENT_PRIVATE_OK")
    }
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    script = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.DEBUG, settings.MCP_CLIENT_DOCUMENT_PRIVATE_OK)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert shown == ["True", "True"]
    env["DJANGO_DEBUG"] = "false"
    shown = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert shown == ["False", "False"]


def test_post_to_mcp_with_a_trailing_slash_is_answered_as_mcp(asgi_server: str) -> None:
    """Issue 39 item 5: `POST /mcp/` was Django's HTML 404, with no challenge, so a client that
    added the slash never learned where to authorize. It is the same endpoint as `/mcp`."""
    answer = httpx2.post(
        f"{asgi_server}/mcp/",
        json=tool_call("whoami"),
        headers={"Accept": "application/json, text/event-stream"},
        timeout=30,
    )

    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"].startswith("Bearer ")
    assert "resource_metadata=" in answer.headers["WWW-Authenticate"]
    assert answer.json()["error"]["data"]["code"] == "not_authenticated"
