"""A refund's reference at the card network (its ARN, issue 41 item 9) on the API, in the OpenAPI
schema and through the MCP tools, each with the sentence on how to use it."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from mcp_types import CallToolResult

from envelopes.services import refund_references_follow_up
from stripe_sandbox.client import SandboxControl
from tests.agents.test_mcp import call, ok, token_for
from tests.drivers.api import Api
from tests.drivers.mcp import mcp_session, run
from tests.helpers import settle_runs

pytestmark = pytest.mark.django_db(transaction=True)

HOW_TO = "Give your bank this reference (ARN) if the refund has not reached your statement after 10"


def _refund(alice: Api) -> tuple[str, str]:
    envelope_id = alice.create(10_000_000)["envelope_id"]
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000}
    )
    settle_runs()
    return envelope_id, response.json()["data"]["refund_id"]


def test_the_api_shows_the_reference_pending_then_available_with_how_to_use_it(
    alice: Api, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(5000)
    _, refund_id = _refund(alice)
    leg = alice.get(f"/api/v1/escrow/refunds/{refund_id}").json()["data"]["legs"][0]
    assert leg["bank_reference"]["status"] == "pending"
    assert leg["bank_reference"]["reference"] is None
    assert (
        "has not given this refund its reference (ARN) yet" in leg["bank_reference"]["how_to_use"]
    )

    sandbox.advance_clock(6)
    assert refund_references_follow_up(now=timezone.now() + timedelta(minutes=1)) == 1
    leg = alice.get(f"/api/v1/escrow/refunds/{refund_id}").json()["data"]["legs"][0]
    reference = leg["bank_reference"]
    assert reference["status"] == "available"
    assert re.fullmatch(r"\d{23}", reference["reference"])
    assert reference["reference_type"] == "acquirer_reference_number"
    assert reference["how_to_use"].startswith(HOW_TO)


def test_the_openapi_schema_describes_the_reference() -> None:
    schemas = Client().get("/api/v1/schema/", {"format": "json"}).json()["components"]["schemas"]
    leg = schemas["RefundLegOut"]["properties"]["bank_reference"]
    assert leg.get("nullable") or any(
        option.get("type") == "null" for option in leg.get("oneOf", []) + leg.get("anyOf", [])
    )
    out = schemas["BankReferenceOut"]["properties"]
    assert set(out) == {"status", "reference", "reference_type", "how_to_use"}
    assert schemas["BankReferenceOutStatusEnum"]["enum"] == [
        "pending",
        "available",
        "unavailable",
        "not_available",
    ]
    assert "10 business days" in out["how_to_use"]["description"]


def test_the_mcp_tools_show_the_reference_and_declare_it(
    asgi_server: str, alice: Api, sandbox: SandboxControl
) -> None:
    sandbox.reference_delay(0)
    envelope_id, refund_id = _refund(alice)
    rest = alice.get(f"/api/v1/escrow/refunds/{refund_id}").json()["data"]
    token = token_for(asgi_server, alice.user)

    async def calls() -> dict[str, Any]:
        async with mcp_session(asgi_server, token) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            got: CallToolResult = await call(client, "refund_get", {"refund_id": refund_id})
            listed = await call(client, "refunds_list", {"envelope_id": envelope_id})
            return {"tools": tools, "get": got, "list": listed}

    results = run(calls)
    refund = ok(results["get"])
    assert refund == rest
    reference = refund["legs"][0]["bank_reference"]
    assert reference["status"] == "available"
    assert re.fullmatch(r"\d{23}", reference["reference"])
    assert reference["how_to_use"].startswith(HOW_TO)
    assert ok(results["list"])["results"][0]["legs"][0]["bank_reference"] == reference
    schema = results["tools"]["refund_get"].output_schema
    assert "bank_reference" in schema["$defs"]["RefundLeg"]["properties"]
    assert (
        "10 business days"
        in schema["$defs"]["BankReference"]["properties"]["how_to_use"]["description"]
    )
