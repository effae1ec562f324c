"""No tool moves money (issue 14, acceptance 4). Every tool, called through the SDK's client at a
live server with every argument shape its input schema admits or refuses (valid, wrong types,
missing, extra, huge, negative, unknown ids, someone else's ids), by a caller holding every scope
(a staff member who is also a buyer): the ledger, the envelopes' balances and the sandbox's
charges and refunds are the same afterwards. Refund requests were made, and wait for a person;
money moves only when the owner confirms one in the browser session."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from mcp.shared.exceptions import MCPError

from accounts.models import User
from agents.models import RefundRequest
from agents.selectors import preview_digest
from envelopes.models import Envelope, JournalEntry, RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import issue_token
from tests.drivers.api import Api
from tests.drivers.disputes import World
from tests.drivers.mcp import mcp_session, run, tool_error

pytestmark = pytest.mark.django_db(transaction=True)

# What a refused call may answer: the REST API's codes, never a crash or a protocol error.
REFUSALS = {
    "validation_error",
    "invalid_amount",
    "amount_exceeds_unspent",
    "nothing_to_refund",
    "not_found",
    "invalid_idempotency_key",
    "idempotency_key_conflict",
}
WRONG_TYPES: list[Any] = [None, True, 0, -1, 1.5, "x", [], {}, ["a"], {"a": 1}]
FRESH = "<a new key>"
HUGE: list[Any] = ["x" * 300, "x" * 100_000, 2**63, 10**30, -(2**63) - 1]


def money_state(sandbox: SandboxControl) -> dict[str, Any]:
    counts = sandbox.state()["counts"]
    return {
        "breaches": ledger_breaches(),
        "balances": sorted(
            Envelope.objects.values_list(
                "public_id",
                "total_funded_micro",
                "total_debited_micro",
                "total_refunded_micro",
                "reserved_micro",
                "unspent_micro",
            )
        ),
        "journal": JournalEntry.objects.count(),
        "refund_operations": RefundOperation.objects.count(),
        "provider": {k: counts[k] for k in ("payment_intents", "charges", "refunds", "disputes")},
    }


def shapes(
    schema: dict[str, Any], valid: dict[str, Any], others: dict[str, list[Any]]
) -> list[dict[str, Any]]:
    """Argument sets for one tool: the valid one, then each property replaced by every wrong
    type, huge, negative or other value (`others`: unknown and someone else's ids, and values
    the schema admits), each required property missing, an unknown property, and nothing."""
    sets: list[dict[str, Any]] = [dict(valid), {}, {**valid, "unexpected": 1}]
    for name in schema.get("properties", {}):
        for value in [*WRONG_TYPES, *HUGE, *others.get(name, [])]:
            sets.append({**valid, name: value})
        if name in schema.get("required", []):
            sets.append({k: v for k, v in valid.items() if k != name})
    return sets


def test_no_tool_moves_money_whatever_the_arguments(
    asgi_server: str, world: World, alice: Api, bob: Api, sandbox: SandboxControl, settings: Any
) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""
    settings.MCP_TOOL_CALL_RATE = ""
    # The caller: staff with the admin's read permissions, and a buyer with envelopes of her own.
    user = alice.user
    User.objects.filter(pk=user.pk).update(is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="view_escalation"),
        Permission.objects.get(codename="view_discrepancy"),
        Permission.objects.get(codename="view_dispute"),
        Permission.objects.get(codename="view_packet"),
    )
    world.fund(10_000_000)
    mine = world.envelope_id
    alice.top_up(mine, 3_000_000)
    my_refund = world.refund(1_000_000, settle=False)["refund_id"]
    dispute = world.dispute(reason="fraudulent")
    theirs = bob.create(5_000_000)["envelope_id"]
    their_refund = bob.post(
        f"/api/v1/escrow/envelopes/{theirs}/refund", {"amount_micro": 1_000_000}
    )
    their_refund_id = their_refund.json()["data"]["refund_id"]
    token = issue_token(
        User.objects.get(pk=user.pk),
        scopes="escrow:read escrow:refund_request ops:read",
        resource=f"{asgi_server}/mcp",
    )
    bob_token = issue_token(bob.user, resource=f"{asgi_server}/mcp")

    async def a_request(token: str, envelope_id: str) -> str:
        async with mcp_session(asgi_server, token) as client:
            made = await client.call_tool(
                "envelope_refund_request", {"envelope_id": envelope_id, "idempotency_key": "first"}
            )
            return str(made.structured_content["request_id"])

    their_request = run(lambda: a_request(bob_token, theirs))
    my_request = run(lambda: a_request(token, mine))
    before = money_state(sandbox)
    assert before["breaches"] == []
    unspent = Envelope.objects.get(public_id=mine).unspent_micro

    ids = {
        "envelope_id": [mine, theirs, "env_unknown", "env\x00", "%00", "env_%2F"],
        "refund_id": [my_refund, their_refund_id, "erf_unknown"],
        "request_id": [my_request, their_request, "rrq_unknown"],
        "dispute_id": [dispute.public_id, dispute.provider_dispute_id, "dsp_unknown"],
        "amount_micro": [1, 10_000, unspent, unspent + 1, 0, -1, -(2**63), "100", 1.5, True],
        "idempotency_key": ["", "k" * 255, "k" * 256, "é", "\x7f", 5, None],
        "limit": [1, 100, 101, 0, -1],
        "cursor": ["", "not a cursor"],
        "status": ["open", "resolved", "all", "OPEN", ""],
        "version": [1, 2, 0, -1, 2**31],
    }
    valid = {
        "whoami": {},
        "envelopes_list": {"limit": 2},
        "envelope_get": {"envelope_id": mine},
        "refunds_list": {"envelope_id": mine},
        "refund_get": {"refund_id": my_refund},
        "envelope_refund_request": {
            "envelope_id": mine,
            "amount_micro": 2_000_000,
            "idempotency_key": FRESH,
        },
        "refund_request_get": {"request_id": my_request},
        "escalations_list": {"status": "open"},
        "dispute_get": {"dispute_id": dispute.public_id},
        "packet_get": {"dispute_id": dispute.public_id},
        "discrepancies_list": {"status": "all"},
    }

    async def walk() -> list[tuple[str, dict[str, Any], str]]:
        outcomes: list[tuple[str, dict[str, Any], str]] = []
        async with mcp_session(asgi_server, token) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(listed) == set(valid)
            keys = iter(range(10**6))
            for name, tool in listed.items():
                for arguments in shapes(tool.input_schema, valid[name], ids):
                    if arguments.get("idempotency_key") == FRESH:  # a new key for each call
                        arguments = {**arguments, "idempotency_key": f"key-{next(keys)}"}
                    try:
                        result = await client.call_tool(name, arguments)
                    except MCPError as exc:  # a protocol error: never acceptable here
                        outcomes.append((name, arguments, f"protocol error {exc}"))
                        continue
                    if result.is_error:
                        outcomes.append((name, arguments, tool_error(result)["code"]))
                    else:
                        outcomes.append((name, arguments, "ok"))
        return outcomes

    outcomes = run(walk)
    assert len(outcomes) > 300
    unexpected = [o for o in outcomes if o[2] != "ok" and o[2] not in REFUSALS]
    assert unexpected == []
    by_code = {code for _, _, code in outcomes}
    assert {"ok", "validation_error", "invalid_amount", "not_found"} <= by_code
    assert {"amount_exceeds_unspent", "invalid_idempotency_key"} <= by_code

    def answer(name: str, **arguments: Any) -> str:
        found = [code for n, a, code in outcomes if n == name and a == arguments]
        assert len(found) == 1, (name, arguments, found)
        return found[0]

    assert answer("envelope_get", envelope_id=mine, unexpected=1) == "validation_error"
    assert answer("envelope_get", envelope_id=theirs) == "not_found"
    assert answer("envelope_get", envelope_id="x" * 100_000) == "validation_error"
    assert answer("refund_get", refund_id=their_refund_id) == "not_found"
    assert answer("envelopes_list", limit=101) == "validation_error"
    assert answer("packet_get", dispute_id=dispute.public_id, version=2**31) == "validation_error"
    refund_request = {"envelope_id": mine, "idempotency_key": "k" * 256}
    assert answer("envelope_refund_request", **refund_request, amount_micro=2_000_000) == (
        "invalid_idempotency_key"
    )
    answered = {(name, code) for name, _, code in outcomes}
    assert {(name, "ok") for name in valid} <= answered

    # Nothing moved: the same ledger, balances, journal, refunds, and provider objects.
    assert money_state(sandbox) == before
    # Refund requests were made (alice's, for her envelope only), all waiting for her.
    requests = RefundRequest.objects.filter(owner=user)
    assert requests.count() >= 5
    assert set(requests.values_list("envelope__public_id", flat=True)) == {mine}
    assert set(requests.values_list("status", flat=True)) == {"pending_confirmation"}
    assert requests.filter(refund__isnull=False).count() == 0

    # Money moves when, and only when, the owner confirms one in her browser session.
    request = requests.filter(amount_micro=10_000).get()
    page = f"/escrow/refund-requests/{request.public_id}/"
    confirmed = alice.client.post(
        page,
        {"preview_digest": preview_digest(request.preview), "csrfmiddlewaretoken": alice.csrf},
    )
    assert confirmed.status_code == 302, confirmed.content
    after = money_state(sandbox)
    assert after["refund_operations"] == before["refund_operations"] + 1
    assert after["provider"]["refunds"] == before["provider"]["refunds"] + 1
    assert after["breaches"] == []
