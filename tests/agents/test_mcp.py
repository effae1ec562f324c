"""The MCP server at /mcp (SPEC §16) through the SDK's own streamable-HTTP client against a live
ASGI server: the tools and their schemas, each tool's answer (the REST API's shapes, `_usd`
twins), errors as isError results with the REST codes, paging, and the rate limit."""

from __future__ import annotations

import json
import socket
import time
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone
from mcp.client.client import Client
from mcp_types import CallToolResult

from accounts.models import User
from agents.models import RefundRequest
from envelopes.models import Envelope
from reconciliation.models import Run
from reconciliation.services import Finding, discrepancy_record
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import issue_token
from tests.drivers.api import Api
from tests.drivers.disputes import Ops, World, contest_ready, staff_user
from tests.drivers.mcp import (
    BUYER_TOOLS,
    OPS_TOOLS,
    error_code,
    mcp_session,
    post_mcp,
    run,
    tool_call,
    tool_error,
)
from verification.models import Escalation, EscalationStatus, Verdict, VerificationRun

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = BUYER_TOOLS | OPS_TOOLS
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
    return tool_error(result)


def test_the_tools_with_input_and_output_schemas(asgi_server: str, alice: Api) -> None:
    staff = staff_user("olga", "view_escalation")
    token = token_for(asgi_server, staff, scopes=BUYER + " ops:read")

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


def envelope_made(user: User) -> None:
    """An envelope created from a worker thread, whose connection is closed after."""
    try:
        Envelope.objects.create(owner=user)
    finally:
        connection.close()


def test_lists_are_paged_with_has_more_and_next_cursor_never_cut(
    asgi_server: str, alice: Api, bob: Api
) -> None:
    made = [Envelope.objects.create(owner=alice.user).public_id for _ in range(5)]
    Envelope.objects.create(owner=bob.user)  # never in alice's pages
    token = token_for(asgi_server, alice.user)
    bob_token = token_for(asgi_server, bob.user)
    newest_first = list(reversed(made))

    async def first_page(client: Client) -> dict[str, Any]:
        return ok(await call(client, "envelopes_list", {"limit": 2}))

    async def walk() -> list[dict[str, Any]]:
        async with mcp_session(asgi_server, token) as client:
            pages = [await first_page(client)]
            while pages[-1]["has_more"]:
                cursor = pages[-1]["next_cursor"]
                pages.append(
                    ok(await call(client, "envelopes_list", {"limit": 2, "cursor": cursor}))
                )
            return pages

    pages = run(walk)
    assert [len(p["results"]) for p in pages] == [2, 2, 1]
    assert [p["has_more"] for p in pages] == [True, True, False]
    assert pages[-1]["next_cursor"] is None
    assert [e["envelope_id"] for p in pages for e in p["results"]] == newest_first

    # A row added after the first page was read makes the next page neither skip nor repeat one.
    async def with_a_new_row_between() -> tuple[dict[str, Any], dict[str, Any]]:
        async with mcp_session(asgi_server, token) as client:
            first = await first_page(client)
            await sync_to_async(envelope_made, thread_sensitive=False)(alice.user)
            second = await call(
                client, "envelopes_list", {"limit": 2, "cursor": first["next_cursor"]}
            )
            return first, ok(second)

    first, second = run(with_a_new_row_between)
    assert [e["envelope_id"] for e in first["results"] + second["results"]] == newest_first[:4]

    # A cursor is only good for the list, filters and person it was given for.
    cursor = pages[0]["next_cursor"]

    async def misused() -> list[CallToolResult]:
        async with mcp_session(asgi_server, token) as client:
            answers = [
                await call(client, "envelopes_list", {"cursor": cursor[:-2] + "xy"}),
                await call(client, "refunds_list", {"cursor": cursor}),
                await call(client, "envelopes_list", {"cursor": "not a cursor"}),
            ]
        async with mcp_session(asgi_server, bob_token) as client:
            answers.append(await call(client, "envelopes_list", {"cursor": cursor}))
        return answers

    for answer in run(misused):
        assert error(answer) == {
            "code": "validation_error",
            "message": error(answer)["message"],
            "details": {"cursor": ["Invalid cursor."]},
        }


def test_each_staff_tool_answers_and_pages(asgi_server: str, world: World, ops: Ops) -> None:
    packet = contest_ready(world, ops)
    dispute = packet.dispute
    run_ = VerificationRun.objects.filter(verdict=Verdict.VERIFIED).first()
    for n in range(3):
        Escalation.objects.create(
            run=run_,
            verdict=Verdict.CONTRADICTED,
            verdict_class="duplicate side effect",
            reason=f"seeded {n}",
            subject_type="refund_leg",
            subject_id=f"rfl_seed_{n}",
            status=EscalationStatus.RESOLVED if n == 2 else EscalationStatus.OPEN,
            resolved_at=timezone.now() if n == 2 else None,
        )
    now = timezone.now()
    recon = Run.objects.create(
        kind="manual",
        lane="objects",
        window_start=now - timedelta(days=7),
        window_end=now,
        started_at=now,
        heartbeat_at=now,
        status="completed",
    )
    for code, subject_type, subject_id in (
        ("leg_stuck", "refund_leg", "rfl_seed_a"),
        ("refund_foreign", "refund", "re_seed_foreign"),  # money: first in the queue
    ):
        discrepancy_record(
            run=recon,
            finding=Finding(
                code=code,
                subject_type=subject_type,
                subject_id=subject_id,
                summary=f"seeded {code}",
                charge_id=world.charge_id,
                amount_micro=1_250_000,
            ),
        )
    reader = staff_user(
        "rita", "view_escalation", "view_discrepancy", "view_dispute", "view_packet"
    )
    rest = Api(reader)
    rest_dispute = rest.get(f"/api/v1/disputes/{dispute.public_id}").json()["data"]
    open_escalations = list(
        Escalation.objects.filter(status="open")
        .order_by("created_at", "id")
        .values_list("pk", flat=True)
    )
    token = token_for(asgi_server, reader, scopes="ops:read")

    async def calls() -> dict[str, Any]:
        async with mcp_session(asgi_server, token) as client:
            first = ok(await call(client, "escalations_list", {"limit": 2}))
            rest_of = ok(
                await call(client, "escalations_list", {"limit": 2, "cursor": first["next_cursor"]})
            )
            return {
                "escalations": [first, rest_of],
                "resolved": ok(await call(client, "escalations_list", {"status": "resolved"})),
                "dispute": ok(await call(client, "dispute_get", {"dispute_id": dispute.public_id})),
                "by_provider_id": ok(
                    await call(client, "dispute_get", {"dispute_id": dispute.provider_dispute_id})
                ),
                "packet": ok(await call(client, "packet_get", {"dispute_id": dispute.public_id})),
                "packet_v1": ok(
                    await call(
                        client, "packet_get", {"dispute_id": dispute.public_id, "version": 1}
                    )
                ),
                "no_packet": error(
                    await call(
                        client, "packet_get", {"dispute_id": dispute.public_id, "version": 99}
                    )
                ),
                "no_dispute": error(await call(client, "dispute_get", {"dispute_id": "dsp_none"})),
                "discrepancies": ok(await call(client, "discrepancies_list", {"limit": 1})),
                "all": ok(await call(client, "discrepancies_list", {"status": "all"})),
            }

    results = run(calls)
    pages = results["escalations"]
    assert [p["has_more"] for p in pages] == [True, False]
    listed = [e["escalation_id"] for p in pages for e in p["results"]]
    assert listed == open_escalations  # oldest first; the money discrepancy's own one included
    assert [e["reason"] for e in results["resolved"]["results"]] == ["seeded 2"]
    assert results["dispute"] == rest_dispute
    assert results["by_provider_id"] == rest_dispute
    assert results["packet"] == rest_dispute["packet"]
    assert results["packet"]["version"] == 2
    assert results["packet_v1"]["version"] == 1
    assert results["no_packet"]["code"] == "not_found"
    assert results["no_dispute"]["code"] == "not_found"
    first = results["discrepancies"]
    assert first["has_more"] is True
    assert first["results"][0]["discrepancy_class"] == "refund_foreign"
    assert first["results"][0]["amount_micro"] == 1_250_000
    assert first["results"][0]["amount_usd"] == 1.25
    assert [d["discrepancy_class"] for d in results["all"]["results"]] == [
        "refund_foreign",
        "leg_stuck",
    ]


def test_a_refund_request_resent_with_its_key_is_the_same_request(
    asgi_server: str, alice: Api, sandbox: SandboxControl, settings: Any
) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    rest_key = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 1_000_000}, key="rest-1"
    )
    assert rest_key.status_code == 200
    token = token_for(asgi_server, alice.user)
    ask = {"envelope_id": envelope_id, "amount_micro": 2_000_000, "idempotency_key": "mcp-1"}

    async def calls() -> list[CallToolResult]:
        async with mcp_session(asgi_server, token) as client:
            return [
                await call(client, "envelope_refund_request", ask),
                await call(client, "envelope_refund_request", ask),  # re-sent: a broken stream
                await call(client, "envelope_refund_request", {**ask, "amount_micro": 3_000_000}),
                await call(client, "envelope_refund_request", {**ask, "idempotency_key": "rest-1"}),
            ]

    first, again, other_amount, rest_one = run(calls)
    assert ok(again) == ok(first)
    assert error(other_amount)["code"] == "idempotency_key_conflict"
    assert error(rest_one)["code"] == "idempotency_key_other_surface"
    assert RefundRequest.objects.count() == 1
    # The MCP key on REST: the other surface too, and nothing runs.
    refund = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000}, key="mcp-1"
    )
    assert refund.status_code == 422
    assert refund.json()["error"]["code"] == "idempotency_key_other_surface"
    assert sandbox.state()["counts"]["refunds"] == 1  # the REST refund's one leg


def test_a_tool_call_whose_connection_dropped_and_is_sent_again_makes_one_request(
    asgi_server: str, alice: Api, settings: Any
) -> None:
    """A stateless client whose stream broke cannot know whether its call ran: it sends it
    again. The first POST here is cut off by the client right after sending (no answer read, the
    socket closed); the same call sent again, retried while the first may still hold its key
    (409 `idempotency_key_in_use`), answers the one request the first made: the first ran to its
    end although its client had left."""
    settings.MCP_REFUND_REQUEST_RATE = ""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    token = token_for(asgi_server, alice.user)
    call_body = tool_call(
        "envelope_refund_request",
        {"envelope_id": envelope_id, "amount_micro": 2_000_000, "idempotency_key": "drop-1"},
    )
    payload = json.dumps(call_body).encode()
    host, port = asgi_server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(
            b"POST /mcp HTTP/1.1\r\n"
            + f"Host: {host}:{port}\r\n".encode()
            + b"Content-Type: application/json\r\n"
            + b"Accept: application/json, text/event-stream\r\n"
            + b"MCP-Protocol-Version: 2025-06-18\r\n"
            + f"Authorization: Bearer {token}\r\n".encode()
            + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
    # The connection is gone before any answer was read. The call still runs to its end (a
    # tool is never cut off half-way by a client that left): its request appears.
    deadline = time.monotonic() + 30
    while not RefundRequest.objects.exists():
        assert time.monotonic() < deadline, "the dropped call made no request"
        time.sleep(0.1)
    made = RefundRequest.objects.get().public_id
    # Send the call again, as a client does.
    while True:
        answer = post_mcp(asgi_server, call_body, token=token)
        assert answer.status_code == 200, answer.text
        result = answer.json()["result"]
        code = error_code(result)
        if not (result.get("isError") and code == "idempotency_key_in_use"):
            break
        assert time.monotonic() < deadline, result
        time.sleep(0.2)
    assert not result.get("isError"), result
    assert RefundRequest.objects.count() == 1
    assert result["structuredContent"]["request_id"] == made
