"""A money confirmation hosts can show (SPEC §19, issue 39 item 6): `envelope_refund_request`
offers the owner's confirmation page as a URL-mode elicitation to a host that declares the
capability (the official SDK's client with an elicitation callback), and answers the link in the
result to one that does not. Money moves only when the owner confirms on the page; declining or
cancelling the elicitation moves none. The elicited page is the owner's alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import Client as BrowserClient
from mcp_types import ElicitRequestURLParams, ElicitResult

from agents.models import RefundRequest
from envelopes.models import RefundOperation
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import issue_token
from tests.agents.test_confirm import Browser, provider_refunds
from tests.drivers.api import Api
from tests.drivers.mcp import eliciting_mcp_session, mcp_session, run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_request_limit(settings: Any) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""


@dataclass
class Host:
    """What a host shows the person: the elicitations it received, and the person's answer."""

    answer: str = "accept"
    elicited: list[ElicitRequestURLParams] = field(default_factory=list)

    async def callback(self, ctx: Any, params: Any) -> ElicitResult:
        self.elicited.append(params)
        return ElicitResult(action=self.answer)  # type: ignore[arg-type]


def request_refund(url: str, token: str, envelope_id: str, host: Host | None) -> Any:
    arguments = {"envelope_id": envelope_id, "amount_micro": 2_000_000, "idempotency_key": "k-1"}

    async def call() -> Any:
        if host is None:
            async with mcp_session(url, token) as client:
                return await client.call_tool("envelope_refund_request", arguments)
        async with eliciting_mcp_session(url, token, host.callback) as client:
            return await client.call_tool("envelope_refund_request", arguments)

    return run(call)


def request_get(url: str, token: str, request_id: str) -> dict[str, Any]:
    async def call() -> Any:
        async with mcp_session(url, token) as client:
            return await client.call_tool("refund_request_get", {"request_id": request_id})

    return dict(run(call).structured_content)


def test_a_host_declaring_url_elicitation_is_sent_to_the_confirmation_page(
    asgi_server: str, alice: Api, sandbox: SandboxControl
) -> None:
    """Issue 39 item 6: the host that declares `elicitation.url` is offered the owner's
    confirmation page as a URL-mode elicitation (failed before: the tool only answered the link,
    the host's elicitation callback was never called); the owner confirms on the page and the
    refund is made once."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    token = issue_token(alice.user, resource=f"{asgi_server}/mcp")
    host = Host()
    refunds_before = provider_refunds(sandbox)

    result = request_refund(asgi_server, token, envelope_id, host)

    assert not result.is_error, result
    made = result.structured_content
    request_id = made["request_id"]
    assert len(host.elicited) == 1, "the host was not offered the confirmation page"
    (offered,) = host.elicited
    assert offered.mode == "url"
    assert offered.url == made["confirm_url"]
    assert offered.url == f"{asgi_server}/escrow/refund-requests/{request_id}/"
    assert "$2.00" in offered.message, offered.message
    assert envelope_id in offered.message, offered.message
    assert made["status"] == "pending_confirmation"
    # Accepting the elicitation moves no money: only the owner's confirmation on the page does.
    assert provider_refunds(sandbox) == refunds_before
    assert RefundOperation.objects.count() == 0

    page = Browser(alice.user)
    assert page.open(request_id).status_code == 200
    form = page.form(request_id)
    page.confirm(request_id, form)
    page.confirm(request_id, form)  # pressed twice (the form as first shown): one refund

    assert RefundOperation.objects.count() == 1
    assert provider_refunds(sandbox) == refunds_before + 1
    shown = request_get(asgi_server, token, request_id)
    assert shown["status"] == "confirmed"
    assert shown["refund"]["requested_micro"] == 2_000_000


def test_a_host_without_the_capability_gets_the_link_in_the_result(
    asgi_server: str, alice: Api, sandbox: SandboxControl
) -> None:
    """Issue 39 item 6: a host that declares no elicitation gets today's result, the link in it."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    token = issue_token(alice.user, resource=f"{asgi_server}/mcp")

    result = request_refund(asgi_server, token, envelope_id, None)

    made = result.structured_content
    assert made["status"] == "pending_confirmation"
    assert made["confirm_url"] == f"{asgi_server}/escrow/refund-requests/{made['request_id']}/"
    assert RefundOperation.objects.count() == 0


@pytest.mark.parametrize("answer", ["decline", "cancel"])
def test_declining_or_cancelling_the_elicitation_moves_no_money(
    asgi_server: str, alice: Api, sandbox: SandboxControl, answer: str
) -> None:
    """Issue 39 item 6: the person declines (or cancels) the host's elicitation: the request is
    refused (failed before: no elicitation was offered, so nothing the person said was heard),
    and a later confirmation on the page moves no money."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    token = issue_token(alice.user, resource=f"{asgi_server}/mcp")
    host = Host(answer=answer)
    refunds_before = provider_refunds(sandbox)

    result = request_refund(asgi_server, token, envelope_id, host)

    assert len(host.elicited) == 1
    made = result.structured_content
    assert made["status"] == "refused"
    request = RefundRequest.objects.get(public_id=made["request_id"])
    assert request.refusal_code == "declined_by_person"
    page = Browser(alice.user)
    response = page.open(made["request_id"])
    assert response.status_code == 200
    assert 'name="preview_digest"' not in response.content.decode()  # no Confirm button
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == refunds_before
    assert request_get(asgi_server, token, made["request_id"])["refusal_code"] == (
        "declined_by_person"
    )


def test_the_elicited_page_is_the_owners_alone(
    asgi_server: str, alice: Api, bob: Api, sandbox: SandboxControl
) -> None:
    """Issue 39 item 6: the URL a host is sent to verifies who opens it: another signed-in buyer
    gets exactly the 404 of an unknown request; signed out, the sign-in page, then back."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    token = issue_token(alice.user, resource=f"{asgi_server}/mcp")
    host = Host()
    request_refund(asgi_server, token, envelope_id, host)
    path = host.elicited[0].url.removeprefix(asgi_server)

    other = BrowserClient()
    other.force_login(bob.user)
    theirs, unknown = other.get(path), other.get("/escrow/refund-requests/rrq_doesnotexist/")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.content == unknown.content

    anonymous = BrowserClient()
    response = anonymous.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"
    anonymous.force_login(alice.user)  # signed in: the `next` page is the owner's page
    assert anonymous.get(path).status_code == 200
    assert RefundOperation.objects.count() == 0
