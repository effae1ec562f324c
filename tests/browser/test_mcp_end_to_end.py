"""Issue 14, acceptance 1, end to end: an AI assistant connects to Vouch's MCP server with the
official SDK (mcp 2.3.0: the streamable-HTTP client and its OAuthClientProvider), against a live
ASGI server on a free port (config/asgi.py under uvicorn: Django and /mcp), with a real Celery
worker and beat verifying at the Stripe sandbox.

- The buyer's assistant: the first call is refused 401; the SDK discovers the protected-resource
  and authorization-server metadata, sends the person to /o/authorize/ (PKCE S256, `resource`),
  where Chromium (Debian's, driven by Playwright) signs in through allauth and presses Allow; the
  redirect to the client's loopback callback is caught and its code and state handed back; the
  SDK exchanges the code and calls again. The assistant lists the tools, calls each buyer tool,
  and asks for a refund: a confirm_url, no money moved. The buyer opens it in the browser and
  confirms; the refund reaches VERIFIED, as `refund_request_get` then shows.
- A staff member's assistant: consent for the buyer scopes first; the first ops tool answers 403
  insufficient_scope naming ops:read, the SDK asks again (a step-up, one more consent), and each
  ops tool answers.

The clients are registered beforehand (as staff do in the admin): their client_id is in the SDK's
storage, so no dynamic registration is needed. Screenshots go to the artifacts folder."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.contrib.auth.models import Permission
from mcp.client.auth import OAuthClientProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    OAuthClientMetadata,
)
from oauth2_provider.models import AccessToken
from playwright.async_api import expect
from pydantic import AnyUrl

from accounts.models import User
from accounts.services import email_address_verify
from agents.models import RefundRequest
from disputes import services as disputes
from disputes.models import Dispute
from envelopes.models import RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import REDIRECT_URI, client_register
from tests.drivers.api import Api
from tests.drivers.mcp import BUYER_TOOLS
from tests.drivers.oauth_browser import PASSWORDS, Person, SdkStorage, chromium

VERIFIED_WITHIN_S = 90


def oauth(base: str, person: Person, client_id: str) -> OAuthClientProvider:
    return OAuthClientProvider(
        server_url=f"{base}/mcp",
        client_metadata=OAuthClientMetadata(
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
            client_name=f"{person.username}'s assistant",
        ),
        storage=SdkStorage(client_id, may_register=False),
        redirect_handler=person.consent,
        callback_handler=person.callback,
    )


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.structured_content or result.content
    return dict(result.structured_content)


async def buyer_session(
    base: str, person: Person, client_id: str, envelope_id: str, refund_id: str
) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with (
        httpx2.AsyncClient(auth=oauth(base, person, client_id), timeout=60) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        seen["tools"] = {tool.name for tool in (await client.list_tools()).tools}
        seen["consents_before_calls"] = len(person.authorize_urls)
        calls = {
            "whoami": {},
            "envelopes_list": {},
            "envelope_get": {"envelope_id": envelope_id},
            "refunds_list": {"envelope_id": envelope_id},
            "refund_get": {"refund_id": refund_id},
        }
        seen["answers"] = {
            name: structured(await client.call_tool(name, arguments))
            for name, arguments in calls.items()
        }
        request = structured(
            await client.call_tool(
                "envelope_refund_request",
                {"envelope_id": envelope_id, "idempotency_key": "e2e-refund-1"},
            )
        )
        seen["request"] = request
        seen["pending"] = structured(
            await client.call_tool("refund_request_get", {"request_id": request["request_id"]})
        )

        # The buyer confirms in the browser, where she is signed in already.
        page = person.page
        assert page is not None
        await page.goto(request["confirm_url"])
        button = page.get_by_role("button", name=re.compile(r"^Confirm refund of \$12\.00"))
        await expect(button).to_be_visible()
        await page.screenshot(path=str(person.shots / "mcp-e2e-confirm.png"), full_page=True)
        await button.click()
        await expect(page.locator("[data-status]")).to_have_text("confirmed")

        deadline = time.monotonic() + VERIFIED_WITHIN_S
        while True:
            shown = structured(
                await client.call_tool("refund_request_get", {"request_id": request["request_id"]})
            )
            refund = shown["refund"]
            if refund is not None and refund["verification_status"] != "pending":
                break
            assert time.monotonic() < deadline, shown
            await asyncio.sleep(0.5)
        seen["confirmed"] = shown
        await page.reload()
        await page.screenshot(path=str(person.shots / "mcp-e2e-verified.png"), full_page=True)
    return seen


async def staff_session(base: str, person: Person, client_id: str, dispute_id: str) -> Any:
    async with (
        httpx2.AsyncClient(auth=oauth(base, person, client_id), timeout=60) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        calls = {
            "escalations_list": {},
            "dispute_get": {"dispute_id": dispute_id},
            "packet_get": {"dispute_id": dispute_id},
            "discrepancies_list": {"status": "all"},
            "whoami": {},
        }
        return {
            name: structured(await client.call_tool(name, arguments))
            for name, arguments in calls.items()
        }


@pytest.mark.django_db(transaction=True)
def test_an_assistant_connects_reads_proposes_and_the_buyer_confirms_to_verified(
    worker_with_beat: None,
    asgi_server: str,
    alice: Api,
    sandbox: SandboxControl,
    artifacts: Path,
    settings: Any,
) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""
    base = asgi_server
    envelope = alice.create(10_000_000)
    envelope_id = envelope["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    earlier = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000}
    )
    refund_id = earlier.json()["data"]["refund_id"]
    # A dispute on another envelope's charge (a disputed charge cannot be refunded).
    disputed = alice.create(2_000_000)
    opened = sandbox.open_dispute(disputed["funding_legs"][0]["charge"], reason="fraudulent")
    disputes.dispute_on_provider_event(
        event={"type": "charge.dispute.created", "data": {"object": {"id": opened["id"]}}}
    )
    dispute = Dispute.objects.get(provider_dispute_id=opened["id"])
    olga = User.objects.create_user("olga", "olga@example.com", PASSWORDS["olga"], is_staff=True)
    email_address_verify(user=olga)
    olga.user_permissions.add(
        Permission.objects.get(codename="view_escalation"),
        Permission.objects.get(codename="view_discrepancy"),
        Permission.objects.get(codename="view_dispute"),
        Permission.objects.get(codename="view_packet"),
    )
    buyer_app = client_register(name="Claude on Alice's laptop", redirect_uri=REDIRECT_URI)
    staff_app = client_register(name="Ops assistant", redirect_uri=REDIRECT_URI)

    async def scenario() -> tuple[dict[str, Any], Any, list[str], list[str]]:
        async with chromium() as browser:
            viewport = {"width": 1366, "height": 900}
            buyer = await Person(
                await browser.new_context(viewport=viewport), "alice", artifacts
            ).start()
            staff = await Person(
                await browser.new_context(viewport=viewport), "olga", artifacts
            ).start()
            bought = await buyer_session(base, buyer, buyer_app.client_id, envelope_id, refund_id)
            ops = await staff_session(base, staff, staff_app.client_id, dispute.public_id)
        return bought, ops, buyer.authorize_urls, staff.authorize_urls

    bought, ops, buyer_consents, staff_consents = asyncio.run(scenario())

    # One consent for the buyer, for the buyer's scopes, bound to the MCP resource.
    assert len(buyer_consents) == 1
    asked = parse_qs(urlsplit(buyer_consents[0]).query)
    assert asked["scope"] == ["escrow:read escrow:refund_request"]
    assert asked["resource"] == [f"{base}/mcp"]
    assert asked["code_challenge_method"] == ["S256"]
    assert bought["tools"] == BUYER_TOOLS  # a buyer is never shown the staff tools
    answers = bought["answers"]
    assert answers["whoami"]["username"] == "alice"
    assert answers["whoami"]["client_id"] == buyer_app.client_id
    listed = [e["envelope_id"] for e in answers["envelopes_list"]["results"]]
    assert listed == [disputed["envelope_id"], envelope_id]  # newest first
    assert answers["envelope_get"]["unspent_micro"] == 12_000_000
    assert answers["envelope_get"]["unspent_usd"] == 12.0
    assert answers["refund_get"]["refund_id"] == refund_id
    assert [r["refund_id"] for r in answers["refunds_list"]["results"]] == [refund_id]

    request = bought["request"]
    assert request["status"] == "pending_confirmation"
    assert request["preview"]["total_micro"] == 12_000_000
    assert request["confirm_url"] == f"{base}/escrow/refund-requests/{request['request_id']}/"
    assert bought["pending"]["refund"] is None
    confirmed = bought["confirmed"]
    assert confirmed["status"] == "confirmed"
    refund = confirmed["refund"]
    assert refund["status"] == "refunded"
    assert refund["verification_status"] == "verified"
    assert [leg["verification_verdict"] for leg in refund["legs"]] == ["VERIFIED"] * len(
        refund["legs"]
    )
    assert sum(leg["amount_micro"] for leg in refund["legs"]) == 12_000_000

    # The staff member: buyer scopes at first, then ops:read asked for by the 403 (a step-up).
    assert len(staff_consents) == 2
    first, second = (parse_qs(urlsplit(url).query)["scope"][0].split() for url in staff_consents)
    assert first == ["escrow:read", "escrow:refund_request"]
    assert "ops:read" in second
    assert ops["whoami"]["username"] == "olga"
    assert "ops:read" in ops["whoami"]["scopes"]
    assert ops["dispute_get"]["dispute_id"] == dispute.public_id
    assert ops["packet_get"]["version"] >= 1
    assert "results" in ops["escalations_list"]
    assert "results" in ops["discrepancies_list"]

    # In the database: the request confirmed with its refund, tokens bound to /mcp, the ledger.
    stored = RefundRequest.objects.get(public_id=request["request_id"])
    assert stored.status == RefundRequest.Status.CONFIRMED
    assert stored.refund == RefundOperation.objects.get(public_id=refund["refund_id"])
    resources = list(AccessToken.objects.values_list("resource", flat=True))
    assert resources
    assert all(bound == [f"{base}/mcp"] for bound in resources)
    assert ledger_breaches() == []
