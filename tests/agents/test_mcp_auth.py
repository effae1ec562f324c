"""Who may call /mcp (SPEC §16, issue 14 acceptance 3), against a live ASGI server: only an OAuth
access token Vouch issued for this resource. Anything else is 401 with the challenge that tells
the client where the protected-resource metadata is; a token without a tool's scope is 403
`insufficient_scope` naming it; ops:read held by someone who is not (or no longer) staff is
refused at every call; another buyer's envelope answers exactly as a missing one."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import Permission
from django.core.cache import cache
from oauth2_provider.models import AccessToken

from accounts.models import User
from accounts.services import api_token_issue
from agents.mcp.limits import SCOPE as RATE_SCOPE
from core.api.throttling import throttle_cache_key
from stripe_sandbox.client import SandboxControl
from tests.agents.oauth import issue_token
from tests.drivers.api import Api
from tests.drivers.mcp import mcp_session, post_mcp, run, tool_call, tool_error

pytestmark = pytest.mark.django_db(transaction=True)

BUYER = "escrow:read escrow:refund_request"
OPS_TOOLS = {
    "escalations_list": {},
    "dispute_get": {"dispute_id": "dsp_none"},
    "packet_get": {"dispute_id": "dsp_none"},
    "discrepancies_list": {},
}


def metadata_url(url: str) -> str:
    return f"{url}/.well-known/oauth-protected-resource/mcp"


def refused(response: Any, status: int, code: str) -> dict[str, Any]:
    """The refusal's JSON-RPC error body, checked: its data is {code, message, details}."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    data = body["error"]["data"]
    assert set(data) == {"code", "message", "details"}
    assert data["code"] == code, data
    return dict(data)


def test_no_token_is_401_with_the_resource_metadata(asgi_server: str) -> None:
    response = post_mcp(asgi_server, tool_call("whoami"))
    refused(response, 401, "not_authenticated")
    assert response.headers["www-authenticate"] == (
        'Bearer scope="escrow:read escrow:refund_request", '
        f'resource_metadata="{metadata_url(asgi_server)}"'
    )
    # A GET (the SSE stream) and a DELETE (end of session) are refused the same way.
    for method in ("GET", "DELETE"):
        other = httpx2.request(method, f"{asgi_server}/mcp")
        refused(other, 401, "not_authenticated")


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("expired", "expired"),
        ("other_resource", "wrong_resource"),
        ("no_resource", "wrong_resource"),
        ("personal_api_token", "unknown"),
        ("made_up", "unknown"),
        ("empty", "missing"),
    ],
)
def test_a_token_not_for_this_resource_is_401_invalid_token(
    asgi_server: str, alice: Api, case: str, reason: str
) -> None:
    user = alice.user
    token = {
        "expired": lambda: issue_token(user, resource=f"{asgi_server}/mcp", expires_in=-1),
        "other_resource": lambda: issue_token(user, resource="https://elsewhere.example/mcp"),
        "no_resource": lambda: issue_token(user, resource=""),
        "personal_api_token": lambda: api_token_issue(user=user, name="cli")[1],
        "made_up": lambda: "not-a-token-of-ours",
        "empty": lambda: "",
    }[case]()
    # `Authorization: Bearer` with nothing after it is a token sent, and an invalid one.
    response = post_mcp(asgi_server, tool_call("whoami"), Authorization=f"Bearer {token}".strip())
    data = refused(response, 401, "authentication_failed")
    assert data["details"] == {"reason": reason}
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"')
    assert f'resource_metadata="{metadata_url(asgi_server)}"' in challenge


def test_a_session_cookie_is_not_a_credential_here(asgi_server: str, alice: Api) -> None:
    cookies = f"sessionid={alice.client.cookies['sessionid'].value}; csrftoken={alice.csrf}"
    response = post_mcp(
        asgi_server, tool_call("whoami"), Cookie=cookies, **{"X-CSRFToken": alice.csrf}
    )
    refused(response, 401, "not_authenticated")
    assert "error=" not in response.headers["www-authenticate"]


def test_a_tool_outside_the_tokens_scopes_is_403_insufficient_scope(
    asgi_server: str, alice: Api
) -> None:
    read_only = issue_token(alice.user, scopes="escrow:read", resource=f"{asgi_server}/mcp")
    body = tool_call("envelope_refund_request", {"envelope_id": "env_x", "idempotency_key": "k"}, 7)
    response = post_mcp(asgi_server, body, token=read_only)
    data = refused(response, 403, "insufficient_scope")
    assert data["details"] == {"scope": "escrow:refund_request", "tool": "envelope_refund_request"}
    assert response.json()["id"] == 7
    assert response.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", scope="escrow:refund_request", '
        f'resource_metadata="{metadata_url(asgi_server)}"'
    )
    # Reads need escrow:read; a token with only escrow:refund_request may still follow its
    # requests (refund_request_get takes either).
    propose_only = issue_token(
        alice.user, scopes="escrow:refund_request", resource=f"{asgi_server}/mcp"
    )
    response = post_mcp(asgi_server, tool_call("envelopes_list", {}), token=propose_only)
    assert refused(response, 403, "insufficient_scope")["details"]["scope"] == "escrow:read"
    response = post_mcp(
        asgi_server, tool_call("refund_request_get", {"request_id": "rrq_x"}), token=propose_only
    )
    assert response.status_code == 200
    assert tool_error(response.json()["result"])["code"] == "not_found"
    # Listing tools and whoami need no scope.
    for scopes in ("escrow:read", "escrow:refund_request"):
        token = issue_token(alice.user, scopes=scopes, resource=f"{asgi_server}/mcp")
        assert post_mcp(asgi_server, tool_call("whoami", {}), token=token).status_code == 200


def test_ops_read_is_refused_to_a_buyer_and_to_staff_no_longer_staff(
    asgi_server: str, alice: Api
) -> None:
    buyer_ops = issue_token(
        alice.user, scopes="escrow:read ops:read", resource=f"{asgi_server}/mcp"
    )
    for name, arguments in OPS_TOOLS.items():
        response = post_mcp(asgi_server, tool_call(name, arguments), token=buyer_ops)
        assert refused(response, 403, "permission_denied")["details"] == {"tool": name}
        assert "www-authenticate" not in response.headers  # asking again cannot help

    staff = User.objects.create_user("olga", "olga@example.com", "pw-olga-123", is_staff=True)
    staff.user_permissions.add(
        Permission.objects.get(codename="view_escalation"),
        Permission.objects.get(codename="view_discrepancy"),
    )
    staff_token = issue_token(staff, scopes="ops:read", resource=f"{asgi_server}/mcp")
    response = post_mcp(asgi_server, tool_call("escalations_list", {}), token=staff_token)
    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"]["results"] == []
    # Staff without ops:read in the token: insufficient_scope, which re-consent can fix.
    staff_reader = issue_token(staff, scopes="escrow:read", resource=f"{asgi_server}/mcp")
    response = post_mcp(asgi_server, tool_call("escalations_list", {}), token=staff_reader)
    assert refused(response, 403, "insufficient_scope")["details"]["scope"] == "ops:read"
    # Checked at every call, not at consent only: no longer staff, no longer allowed.
    User.objects.filter(pk=staff.pk).update(is_staff=False)
    response = post_mcp(asgi_server, tool_call("escalations_list", {}), token=staff_token)
    refused(response, 403, "permission_denied")


def test_staff_without_the_admins_permission_reads_no_queue(asgi_server: str) -> None:
    staff = User.objects.create_user("sven", "sven@example.com", "pw-sven-123", is_staff=True)
    token = issue_token(staff, scopes="ops:read", resource=f"{asgi_server}/mcp")
    for name, permission in (
        ("escalations_list", "verification.view_escalation"),
        ("discrepancies_list", "reconciliation.view_discrepancy"),
    ):
        response = post_mcp(asgi_server, tool_call(name, {}), token=token)
        result = response.json()["result"]
        refusal = tool_error(result)
        assert refusal["code"] == "permission_denied"
        assert refusal["details"] == {"permission": permission}


def test_another_buyers_ids_answer_exactly_as_missing_ones(
    asgi_server: str, alice: Api, bob: Api, sandbox: SandboxControl, settings: Any
) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""
    bobs = bob.create(10_000_000)["envelope_id"]
    bobs_refund = bob.post(f"/api/v1/escrow/envelopes/{bobs}/refund", {"amount_micro": 1_000_000})
    bobs_refund_id = bobs_refund.json()["data"]["refund_id"]
    bob_token = issue_token(bob.user, resource=f"{asgi_server}/mcp")
    token = issue_token(alice.user, resource=f"{asgi_server}/mcp")

    async def bobs_request() -> Any:
        async with mcp_session(asgi_server, bob_token) as client:
            made = await client.call_tool(
                "envelope_refund_request", {"envelope_id": bobs, "idempotency_key": "bob-1"}
            )
            return made.structured_content["request_id"]

    bobs_request_id = run(bobs_request)
    pairs = {
        "envelope_get": ({"envelope_id": bobs}, {"envelope_id": "env_missing"}),
        "refunds_list": ({"envelope_id": bobs}, {"envelope_id": "env_missing"}),
        "refund_get": ({"refund_id": bobs_refund_id}, {"refund_id": "erf_missing"}),
        "envelope_refund_request": (
            {"envelope_id": bobs, "idempotency_key": "a-1"},
            {"envelope_id": "env_missing", "idempotency_key": "a-2"},
        ),
        "refund_request_get": ({"request_id": bobs_request_id}, {"request_id": "rrq_missing"}),
    }

    async def answers() -> dict[str, tuple[Any, Any]]:
        async with mcp_session(asgi_server, token) as client:
            found = {}
            for name, (theirs, missing) in pairs.items():
                found[name] = (
                    await client.call_tool(name, theirs),
                    await client.call_tool(name, missing),
                )
            return found

    for name, (theirs, missing) in run(answers).items():
        assert theirs.is_error, name
        assert missing.is_error, name
        assert tool_error(theirs)["code"] == "not_found", name
        assert tool_error(theirs) == tool_error(missing), name
        assert theirs.content == missing.content, name
    assert bob.get(f"/api/v1/escrow/envelopes/{bobs}").json()["data"]["unspent_micro"] == 9_000_000


def test_tool_calls_are_limited_per_token(asgi_server: str, alice: Api, settings: Any) -> None:
    settings.MCP_TOOL_CALL_RATE = "3/hour"  # an hour's window: no edge within this test
    token = issue_token(alice.user, resource=f"{asgi_server}/mcp")
    other = issue_token(alice.user, resource=f"{asgi_server}/mcp")
    answers = [post_mcp(asgi_server, tool_call("whoami", {}), token=token) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    data = refused(answers[3], 429, "rate_limited")
    wait = int(answers[3].headers["retry-after"])
    assert 1 <= wait <= 3600
    assert data["details"] == {"retry_after_s": wait}
    # Listing tools is not a tool call; another token of the same person counts apart.
    listed = post_mcp(asgi_server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, token=token)
    assert listed.status_code == 200
    assert post_mcp(asgi_server, tool_call("whoami", {}), token=other).status_code == 200
    # Counted in the shared cache (every worker process sees one count), refused calls too.
    token_id = AccessToken.objects.get(token_checksum=hashlib.sha256(token.encode()).hexdigest()).pk
    assert cache.get(throttle_cache_key(RATE_SCOPE, token_id, int(time.time() // 3600))) == 4
