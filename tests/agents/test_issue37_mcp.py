"""Issue 37 at the MCP surface (SPEC §16, §18, §3): the envelope tools show the money a dispute
holds or took and each dispute's funds (as the REST API does, and the output schema accepts it),
the refund request's preview says why held money is not refunded, and `refund_get` reads a refund
Stripe later failed as failed, never as verified (item 7)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.client.client import Client
from mcp_types import CallToolResult

from envelopes.models import RefundLeg
from envelopes.selectors import ledger_breaches
from reconciliation.catch_up import catch_up_run
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import issue_token
from tests.drivers.api import Api
from tests.drivers.mcp import mcp_session, run, tool_error
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db(transaction=True)

DOLLAR = 1_000_000
BUYER = "escrow:read escrow:refund_request"


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.structured_content or result.content
    assert isinstance(result.structured_content, dict)
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


def calls(url: str, alice: Api, *wanted: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    token = issue_token(alice.user, scopes=BUYER, resource=f"{url}/mcp")

    async def go() -> list[CallToolResult]:
        async with mcp_session(url, token) as client:
            assert isinstance(client, Client)
            return [await client.call_tool(name, args) for name, args in wanted]

    return run(go)


def events() -> None:
    catch_up_run()
    assert ledger_breaches() == []


def test_the_envelope_tools_show_held_money_and_why(
    asgi_server: str, alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    created = alice.create(10 * DOLLAR)
    envelope_id = created["envelope_id"]
    top_up = alice.top_up(envelope_id, 20 * DOLLAR)
    settle_runs()
    charge = next(leg["charge"] for leg in top_up["funding_legs"] if leg["kind"] == "top_up")
    dispute_id = stripe_at_sandbox.open_dispute(charge, reason="fraudulent")["id"]
    events()
    rest = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]

    got, listed, asked = calls(
        asgi_server,
        alice,
        ("envelope_get", {"envelope_id": envelope_id}),
        ("envelopes_list", {}),
        ("envelope_refund_request", {"envelope_id": envelope_id, "idempotency_key": "k-37"}),
    )
    envelope = ok(got)
    assert envelope == rest
    assert (envelope["held_micro"], envelope["held_usd"]) == (20 * DOLLAR, 20.0)
    assert envelope["unspent_micro"] == 10 * DOLLAR
    assert [(d["dispute"], d["charge"], d["status"]) for d in envelope["disputes"]] == [
        (dispute_id, charge, "held")
    ]
    assert "exposure_micro" not in envelope["disputes"][0]
    assert ok(listed)["results"][0]["held_micro"] == 20 * DOLLAR

    preview = ok(asked)["preview"]
    assert preview["total_micro"] == 10 * DOLLAR  # the held $20 is not refunded
    assert preview["held_micro"] == 20 * DOLLAR
    assert preview["held_note"].startswith(
        "$20.00 held: your bank is reviewing a dispute on this payment. Held money cannot be "
        "refunded"
    )


def test_a_refund_request_for_more_than_is_unspent_says_money_is_held(
    asgi_server: str, alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(20 * DOLLAR)["envelope_id"]
    settle_runs()
    charge = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]["funding_legs"][0][
        "charge"
    ]
    stripe_at_sandbox.open_dispute(charge, reason="fraudulent")
    events()
    [asked] = calls(
        asgi_server,
        alice,
        ("envelope_refund_request", {"envelope_id": envelope_id, "idempotency_key": "k-37b"}),
    )
    error = tool_error(asked)
    assert error["code"] == "nothing_to_refund"
    assert "$20.00 held: your bank is reviewing a dispute" in error["message"]
    assert error["details"]["held_micro"] == 20 * DOLLAR


def test_refund_get_reads_a_refund_stripe_failed_later_as_failed(
    asgi_server: str, alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(1 * DOLLAR)["envelope_id"]
    settle_runs()
    refund_id = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {}).json()["data"][
        "refund_id"
    ]
    settle_runs()
    leg = RefundLeg.objects.get()
    stripe_at_sandbox.set_refund_status(leg.provider_refund_id, "failed", "lost_or_stolen_card")
    events()
    [got] = calls(asgi_server, alice, ("refund_get", {"refund_id": refund_id}))
    refund = ok(got)
    assert (refund["refunded_micro"], refund["failed_micro"]) == (0, 1 * DOLLAR)
    assert refund["status"] == "failed"
    assert refund["verification_status"] == "attention"
    assert refund["legs"][0]["released"] is True
