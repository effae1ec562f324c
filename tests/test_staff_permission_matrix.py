"""One permission rule on every surface (issue 38 item 1, SPEC §5 and §19's last point): for every
staff route of the API and every staff MCP tool, and a matrix of people (staff with no
permission, one read permission, the write permissions, envelope permissions only, superuser…),
the API and the tool allow exactly whom the admin allows for the same thing, and refuse the rest
with 403 `permission_denied` naming the permission.

Data-driven: the disputes API's URL patterns and the MCP tools needing `ops:read` are enumerated,
and each must have an entry here (a new staff route or tool without one fails)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from accounts.models import User
from agents.mcp.tools import OPS_READ, SPECS
from config.api_urls import urlpatterns as api_urls
from disputes.models import Packet
from tests.agents.oauth import issue_token
from tests.drivers.api import Api
from tests.drivers.disputes import Ops, World, contest_ready
from tests.drivers.mcp import error_code, mcp_session, run, tool_error

pytestmark = pytest.mark.django_db(transaction=True)

PEOPLE: dict[str, tuple[str, ...]] = {
    "staff only": (),
    "view_dispute": ("view_dispute",),
    "change_dispute": ("change_dispute",),
    "view_packet": ("view_packet",),
    "view_evidence": ("view_evidence",),
    "change_packet": ("change_packet",),
    "approve_packet": ("approve_packet",),
    "file_packet": ("file_packet",),
    "add_evidence": ("add_evidence",),
    "add_evidence+view_dispute": ("add_evidence", "view_dispute"),
    "add_dispute": ("add_dispute",),
    "add_dispute+view_dispute": ("add_dispute", "view_dispute"),
    "envelopes only": ("view_envelope", "view_refundoperation", "view_disputefunds"),
    "view_escalation": ("view_escalation",),
    "change_escalation": ("change_escalation",),
    "view_discrepancy": ("view_discrepancy",),
    "add_debit": ("add_debit",),
    "superuser": (),
}


def person(label: str, index: int) -> User:
    name = f"p{index}"
    if label == "superuser":
        return User.objects.create_superuser(name, f"{name}@example.com", "pw-p-123456")
    user = User.objects.create_user(name, f"{name}@example.com", "pw-p-123456", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=PEOPLE[label]))
    return User.objects.get(pk=user.pk)


# --- the admin's answer for each thing -------------------------------------------------------


def _admin(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _allowed(status: int) -> bool:
    return status != 403


AdminAsk = Callable[[User, Packet], bool]

ADMIN: dict[str, AdminAsk] = {
    "read disputes": lambda u, p: _allowed(
        _admin(u).get(reverse("admin:disputes_dispute_change", args=[p.dispute.pk])).status_code
    ),
    "read packets": lambda u, p: _allowed(
        _admin(u).get(reverse("admin:disputes_packet_review", args=[p.pk])).status_code
    ),
    # The admin has no page to enter a dispute (ReadOnlyAdmin): it would ask the model's add
    # permission (ops/forbidden.STANDARD_VIEWS) and the answer shows the dispute (its page).
    "enter a dispute": lambda u, p: (
        u.has_perm("disputes.add_dispute") and ADMIN["read disputes"](u, p)
    ),
    "admit evidence": lambda u, p: _allowed(
        _admin(u).post(reverse("admin:disputes_dispute_admit", args=[p.dispute.pk]), {}).status_code
    ),
    "ask for a packet": lambda u, p: _allowed(
        _admin(u).post(reverse("admin:disputes_packet_prepare", args=[p.pk])).status_code
    ),
    "read escalations": lambda u, p: _allowed(
        _admin(u).get(reverse("admin:verification_escalation_changelist")).status_code
    ),
    "read discrepancies": lambda u, p: _allowed(
        _admin(u).get(reverse("admin:reconciliation_discrepancy_changelist")).status_code
    ),
    # The admin records no debit (debits come from the API, staff or a trusted service): the
    # permission SPEC §5 names is the whole rule.
    "record a debit": lambda u, p: u.has_perm("envelopes.add_debit"),
}

# --- the API's staff routes: (URL name, method) -> the admin's thing, and a harmless call ------

API: dict[tuple[str, str], tuple[str, Callable[[Api, Packet], Any]]] = {
    ("disputes", "GET"): ("read disputes", lambda a, p: a.get("/api/v1/disputes")),
    ("disputes", "POST"): (
        "enter a dispute",
        lambda a, p: a.post("/api/v1/disputes", {}, key="k1"),
    ),
    ("dispute", "GET"): (
        "read disputes",
        lambda a, p: a.get(f"/api/v1/disputes/{p.dispute.public_id}"),
    ),
    ("dispute-evidence", "POST"): (
        "admit evidence",
        lambda a, p: a.post(f"/api/v1/disputes/{p.dispute.public_id}/evidence", {}, key="k2"),
    ),
    # An envelope nobody has: the permission is asked before the lookup (SPEC §5), so who may
    # debit gets 404 and who may not 403; nothing is debited.
    ("envelope-debits", "POST"): (
        "record a debit",
        lambda a, p: a.post("/api/v1/escrow/envelopes/env_none/debits", {}, key="k4"),
    ),
    # A body naming a receipt is refused before anything is prepared: nothing changes.
    ("dispute-packet", "POST"): (
        "ask for a packet",
        lambda a, p: a.post(
            f"/api/v1/disputes/{p.dispute.public_id}/packet", {"receipts": []}, key="k3"
        ),
    ),
}

MCP: dict[str, tuple[str, Callable[[Packet], dict[str, Any]]]] = {
    "dispute_get": ("read disputes", lambda p: {"dispute_id": p.dispute.public_id}),
    "packet_get": ("read packets", lambda p: {"dispute_id": p.dispute.public_id}),
    "escalations_list": ("read escalations", lambda p: {}),
    "discrepancies_list": ("read discrepancies", lambda p: {}),
}


# The API's other routes are the buyer's own (owner only: SPEC §5), asked of no staff permission.
BUYER_ROUTES = {
    ("me", "GET"),
    ("envelopes", "GET"),
    ("envelopes", "POST"),
    ("envelope", "GET"),
    ("envelope-top-ups", "POST"),
    ("envelope-refund", "POST"),
    ("envelope-refunds", "GET"),
    ("refund", "GET"),
}


def _api_routes(patterns: list[Any]) -> set[tuple[str, str]]:
    routes = set()
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):
            routes |= _api_routes(pattern.url_patterns)
            continue
        view = pattern.callback.view_class
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            if hasattr(view, method.lower()):
                routes.add((pattern.name, method))
    return routes


def test_every_staff_route_and_tool_is_in_the_matrix() -> None:
    """A route of the API or a staff tool added without an entry here fails: every route is the
    buyer's own or in the matrix."""
    routes = _api_routes(api_urls)
    assert routes - BUYER_ROUTES == set(API)
    assert routes >= BUYER_ROUTES
    assert {spec.name for spec in SPECS if OPS_READ in spec.scopes} == set(MCP)


def test_the_api_and_the_tools_allow_exactly_whom_the_admin_allows(
    asgi_server: str, world: World, ops: Ops
) -> None:
    """Issue 38 item 1: staff with the staff flag only got 403 in the disputes admin, yet the
    API answered GET /api/v1/disputes and /{id} with data, POST …/evidence, …/packet and
    /api/v1/disputes with 201, and the MCP tools dispute_get and packet_get with data."""
    packet = contest_ready(world, ops)
    disagreements: list[tuple[str, str, bool, bool]] = []
    for index, label in enumerate(PEOPLE):
        user = person(label, index)
        admin = {thing: ask(user, packet) for thing, ask in ADMIN.items()}
        api = Api(user)
        for (name, method), (thing, send) in API.items():
            response = send(api, packet)
            allowed = response.status_code != 403
            if not allowed:
                error = response.json()["error"]
                assert error["code"] == "permission_denied", error
                assert error["details"]["permission"] in error["message"]
            if allowed != admin[thing]:
                disagreements.append((label, f"{method} {name}", allowed, admin[thing]))
        token = issue_token(user, scopes=OPS_READ, resource=f"{asgi_server}/mcp")

        async def calls(token: str = token) -> dict[str, Any]:
            async with mcp_session(asgi_server, token) as client:
                return {
                    tool: await client.call_tool(tool, arguments(packet))
                    for tool, (_, arguments) in MCP.items()
                }

        for tool, result in run(calls).items():
            thing = MCP[tool][0]
            refused = error_code(result) == "permission_denied"
            if refused:
                assert "permission" in tool_error(result)["details"]
            if (not refused) != admin[thing]:
                disagreements.append((label, f"mcp {tool}", not refused, admin[thing]))
    assert disagreements == [], "\n".join(map(str, disagreements))
