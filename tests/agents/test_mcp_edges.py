"""/mcp's edges (issue 26, SPEC §16), against a live ASGI server: one log line per request (never
the token), and bearer guessing limited per client address."""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx2
import pytest

from accounts.models import User
from agents.oauth.limits import BEARER_FAILURES
from tests.agents.oauth import forget_counts, issue_token
from tests.drivers.logs import LogTap
from tests.drivers.mcp import BUYER_TOOLS, OPS_TOOLS, post_mcp, tool_call, tool_error
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def _mcp_lines(tap: LogTap) -> list[dict[str, Any]]:
    """The /mcp request lines, once there is one: the server writes a request's line when the
    request ends, which may be just after the client has read the answer."""
    wait_until(
        lambda: any(r.get("event") == "mcp_request" for r in tap.records()),
        timeout=10,
        what="the /mcp request line",
    )
    time.sleep(0.2)  # and nothing more comes for that request
    return [r for r in tap.records() if r.get("event") == "mcp_request"]


def test_each_mcp_request_writes_one_line_naming_tool_status_client_and_user_never_the_token(
    asgi_server: str, buyer: User, log_tap: LogTap
) -> None:
    token = issue_token(buyer, resource=f"{asgi_server}/mcp")

    answered = post_mcp(asgi_server, tool_call("whoami"), token=token)

    assert answered.status_code == 200, answered.text
    (line,) = _mcp_lines(log_tap)
    assert line["rpc_method"] == "tools/call"
    assert line["tool"] == "whoami"
    assert line["status"] == 200
    assert line["user_id"] == buyer.pk
    assert line["client_id"]
    assert isinstance(line["duration_ms"], float)
    assert line["level"] == "info"
    assert token not in log_tap.text()


def test_a_refused_mcp_request_writes_its_line_too(
    asgi_server: str, buyer: User, log_tap: LogTap
) -> None:
    post_mcp(asgi_server, tool_call("envelopes_list"), token="not-a-token-of-ours")

    (line,) = _mcp_lines(log_tap)
    assert line["status"] == 401
    assert line["tool"] == "envelopes_list"
    assert line["user_id"] is None
    assert line["level"] == "warning"
    assert "not-a-token-of-ours" not in log_tap.text()


def test_bearer_guessing_at_mcp_is_limited_per_address(
    asgi_server: str, buyer: User, settings: Any
) -> None:
    forget_counts(BEARER_FAILURES)
    settings.MCP_BEARER_FAILURE_RATE = "3/min"
    for guess in range(3):
        assert post_mcp(asgi_server, tool_call("whoami"), token=f"guess-{guess}").status_code == 401

    limited = post_mcp(asgi_server, tool_call("whoami"), token="guess-4")

    assert limited.status_code == 429, limited.text
    assert limited.json()["error"]["data"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    # A good token from the same address goes through: another identity's failures never refuse
    # a valid credential (issue 39 item 9, docs/decisions/0016-limits-by-identity.md).
    good = issue_token(buyer, resource=f"{asgi_server}/mcp")
    assert post_mcp(asgi_server, tool_call("whoami"), token=good).status_code == 200


def test_good_tokens_do_not_count_toward_the_guessing_limit(
    asgi_server: str, buyer: User, settings: Any
) -> None:
    forget_counts(BEARER_FAILURES)
    settings.MCP_BEARER_FAILURE_RATE = "2/min"
    good = issue_token(buyer, resource=f"{asgi_server}/mcp")
    for _ in range(4):
        assert post_mcp(asgi_server, tool_call("whoami"), token=good).status_code == 200


# --- errors every client can read ----------------------------------------------------------------


def _result(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


def test_an_error_result_never_breaks_the_tools_output_schema(
    asgi_server: str, buyer: User
) -> None:
    """The Inspector checks an error result's structured content against the tool's success
    schema: an error carries none, and says {code, message, details} as JSON text."""
    token = issue_token(buyer, resource=f"{asgi_server}/mcp")
    listed = post_mcp(
        asgi_server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token=token
    ).json()["result"]["tools"]
    schema = next(t for t in listed if t["name"] == "envelopes_list")["outputSchema"]
    assert "has_more" in schema["required"]

    result = _result(
        post_mcp(asgi_server, tool_call("envelopes_list", {"cursor": "not-a-cursor"}), token=token)
    )

    assert "structuredContent" not in result or result["structuredContent"] is None
    assert tool_error(result)["code"] == "validation_error"


def test_an_unknown_tool_answers_the_same_error_shape(asgi_server: str, buyer: User) -> None:
    token = issue_token(buyer, resource=f"{asgi_server}/mcp")

    result = _result(post_mcp(asgi_server, tool_call("envelope_delete", {}), token=token))

    refusal = tool_error(result)
    assert refusal["code"] == "unknown_tool"
    assert refusal["details"] == {"tool": "envelope_delete"}
    assert "tools/list" in refusal["message"]


def test_the_server_names_vouchs_version(asgi_server: str, buyer: User) -> None:
    token = issue_token(buyer, resource=f"{asgi_server}/mcp")
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }

    info = _result(post_mcp(asgi_server, initialize, token=token))["serverInfo"]

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert info["name"] == "vouch"
    assert info["version"] == pyproject["project"]["version"] != ""


# --- tools a token may call ----------------------------------------------------------------------


def _listed(url: str, token: str) -> dict[str, dict[str, Any]]:
    response = post_mcp(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token=token)
    return {tool["name"]: tool for tool in _result(response)["tools"]}


@pytest.mark.parametrize(
    ("scopes", "expected"),
    [
        ("escrow:read escrow:refund_request", BUYER_TOOLS),
        ("escrow:read", BUYER_TOOLS - {"envelope_refund_request"}),
        ("escrow:refund_request", {"whoami", "envelope_refund_request", "refund_request_get"}),
    ],
)
def test_tools_list_shows_only_what_the_tokens_scopes_allow(
    asgi_server: str, buyer: User, scopes: str, expected: set[str]
) -> None:
    token = issue_token(buyer, scopes=scopes, resource=f"{asgi_server}/mcp")
    assert set(_listed(asgi_server, token)) == expected


def test_staff_tools_are_listed_only_for_active_staff_holding_ops_read(
    asgi_server: str, buyer: User, staff: User
) -> None:
    everything = "escrow:read escrow:refund_request ops:read"
    staff_token = issue_token(staff, scopes=everything, resource=f"{asgi_server}/mcp")
    assert set(_listed(asgi_server, staff_token)) == BUYER_TOOLS | OPS_TOOLS
    # Staff whose token lacks ops:read, and a buyer holding it (staff no longer), see none.
    staff_buyer_token = issue_token(staff, resource=f"{asgi_server}/mcp")
    assert set(_listed(asgi_server, staff_buyer_token)) == BUYER_TOOLS
    former = issue_token(buyer, scopes=everything, resource=f"{asgi_server}/mcp")
    assert set(_listed(asgi_server, former)) == BUYER_TOOLS


def test_every_tool_has_a_title_and_its_annotations(asgi_server: str, staff: User) -> None:
    token = issue_token(
        staff, scopes="escrow:read escrow:refund_request ops:read", resource=f"{asgi_server}/mcp"
    )
    for name, tool in _listed(asgi_server, token).items():
        assert tool["title"], name
        hints = tool["annotations"]
        assert hints["readOnlyHint"] is (name != "envelope_refund_request"), name
        assert hints["destructiveHint"] is False, name
        assert hints["idempotentHint"] is True, name
        assert hints["openWorldHint"] is False, name


@pytest.mark.parametrize(
    "arguments",
    [
        {"\ud800": 1},
        {"envelope_id": "env_\ud800", "idempotency_key": "k1"},
        {"envelope_id": "env_x", "idempotency_key": "k\ud800"},
        {"envelope_id": "env_x", "idempotency_key": "k1", "nested": {"\udfff": "\ud800"}},
    ],
    ids=["key", "envelope id", "idempotency key", "nested"],
)
def test_a_lone_surrogate_in_a_tools_arguments_is_a_refusal_not_a_500(
    asgi_server: str, buyer: User, arguments: dict[str, Any]
) -> None:
    """As on the REST API (issue 28): text no UTF-8 encodes is refused with the usual shape, and
    nothing is stored."""
    from agents.models import RefundRequest
    from core.models import AuditEvent

    token = issue_token(buyer, resource=f"{asgi_server}/mcp")
    body = json.dumps(tool_call("envelope_refund_request", arguments))  # "\ud800", as JSON text
    response = httpx2.post(
        f"{asgi_server}/mcp",
        content=body.encode("ascii"),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18",
            "Authorization": f"Bearer {token}",
        },
        timeout=30,
    )
    assert response.status_code in (200, 400), response.text
    answer = response.json()
    if "error" in answer:  # refused by the JSON-RPC layer (the SDK: -32700, a parse error)
        assert answer["error"]["code"] in (-32700, -32600, -32602), answer
    else:
        assert tool_error(answer["result"])["code"] in ("validation_error", "not_found"), answer
    assert RefundRequest.objects.count() == 0
    assert AuditEvent.objects.filter(action="refund_request.create").count() == 0
