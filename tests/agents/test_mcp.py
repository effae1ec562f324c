"""The MCP server at /mcp (SPEC §16) through the SDK's own streamable-HTTP client against a live
ASGI server: the tools and their schemas, each tool's answer (the REST API's shapes, `_usd`
twins), errors as isError results with the REST codes, paging, and the rate limit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.client.client import Client
from mcp_types import CallToolResult

from accounts.models import User
from stripe_sandbox.client import SandboxControl
from tests.agents.conftest import mcp_session, run
from tests.agents.oauth import issue_token
from tests.envelopes import conftest as envelopes_fixtures
from tests.envelopes.conftest import Api

alice = envelopes_fixtures.alice
bob = envelopes_fixtures.bob
stripe_at_sandbox = envelopes_fixtures.stripe_at_sandbox

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = {
    "whoami",
    "envelopes_list",
    "envelope_get",
    "refunds_list",
    "refund_get",
    "envelope_refund_request",
    "refund_request_get",
    "escalations_list",
    "dispute_get",
    "packet_get",
    "discrepancies_list",
}
BUYER = "escrow:read escrow:refund_request"


def token_for(url: str, user: User, scopes: str = BUYER, **options: Any) -> str:
    return issue_token(user, scopes=scopes, resource=f"{url}/mcp", **options)


async def call(
    client: Client, name: str, arguments: dict[str, Any] | None = None
) -> CallToolResult:
    return await client.call_tool(name, arguments or {})


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.structured_content or result.content
    assert isinstance(result.structured_content, dict)
    # The text content says the same as the structured content.
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


def error(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error, result.structured_content
    assert isinstance(result.structured_content, dict)
    assert set(result.structured_content) == {"code", "message", "details"}
    return result.structured_content


def test_the_tools_with_input_and_output_schemas(asgi_server: str, alice: Api) -> None:
    token = token_for(asgi_server, alice.user)

    async def listed() -> Any:
        async with mcp_session(asgi_server, token) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run(listed)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema.get("additionalProperties") is False, tool.name
        assert tool.output_schema is not None
        assert tool.output_schema["type"] == "object"
        assert tool.description
    for name in ("envelopes_list", "envelope_get", "refund_get", "envelope_refund_request"):
        assert "micro-dollars" in tools[name].description.lower(), name
        assert "12340000" in tools[name].description, name
    amount = tools["envelope_refund_request"].input_schema["properties"]["amount_micro"]
    assert "1,000,000" in amount["description"]
    unspent = tools["envelope_get"].output_schema["properties"]["unspent_micro"]
    assert "Micro-dollars" in unspent["description"]
    assert "unspent_usd" in tools["envelope_get"].output_schema["properties"]
    assert tools["envelope_refund_request"].annotations.read_only_hint is False
    assert tools["envelope_get"].annotations.read_only_hint is True


def test_each_buyer_tool_answers_as_the_rest_api(
    asgi_server: str, alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 3_000_000)
    refund = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 4_000_000}
    )
    refund_id = refund.json()["data"]["refund_id"]
    rest_envelope = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]
    rest_refund = alice.get(f"/api/v1/escrow/refunds/{refund_id}").json()["data"]
    rest_list = alice.get("/api/v1/escrow/envelopes").json()["data"]["results"]
    token = token_for(asgi_server, alice.user)

    async def calls() -> dict[str, CallToolResult]:
        async with mcp_session(asgi_server, token) as client:
            return {
                "whoami": await call(client, "whoami"),
                "envelopes_list": await call(client, "envelopes_list"),
                "envelope_get": await call(client, "envelope_get", {"envelope_id": envelope_id}),
                "refunds_list": await call(client, "refunds_list", {"envelope_id": envelope_id}),
                "refunds_all": await call(client, "refunds_list"),
                "refund_get": await call(client, "refund_get", {"refund_id": refund_id}),
            }

    results = run(calls)
    me = ok(results["whoami"])
    assert me["username"] == "alice"
    assert me["is_staff"] is False
    assert me["scopes"] == ["escrow:read", "escrow:refund_request"]
    assert ok(results["envelopes_list"]) == {
        "results": rest_list,
        "has_more": False,
        "next_cursor": None,
    }
    envelope = ok(results["envelope_get"])
    assert envelope == rest_envelope
    assert envelope["unspent_micro"] == 9_000_000
    assert envelope["unspent_usd"] == 9.0
    assert ok(results["refund_get"]) == rest_refund
    assert ok(results["refunds_list"])["results"] == [rest_refund]
    assert ok(results["refunds_all"])["results"] == [rest_refund]
    # The REST refund's two legs (last in, first out: the top-up, then the original), no more.
    assert sandbox.state()["counts"]["refunds"] == len(rest_refund["legs"]) == 2
