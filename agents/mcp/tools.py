"""The MCP tools (SPEC §16). Each is a few lines, as an API view is: check the scope (and, for
staff, the permission the admin asks for), parse, call a selector or a service, render. None
approves, files, resolves or debits; the one that writes (`envelope_refund_request`) stores a
request that moves no money until the envelope's owner confirms it in the browser.

They run on the request's thread (agents/mcp/threads.py) with the caller (`Call`) that the ASGI
layer in front of the SDK authenticated (agents/mcp/asgi.py). Owner-only reads answer another
buyer's id exactly as a missing one (`not_found`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from pydantic import BaseModel

from agents import services as refund_requests
from agents.mcp import schemas as s
from agents.mcp.paging import Page, page
from agents.oauth.tokens import AgentPrincipal
from core.exceptions import NotFound, PermissionDenied, VouchError
from disputes import selectors as disputes
from disputes.permissions import READ_DISPUTES, READ_PACKETS
from envelopes import selectors as envelopes
from envelopes.models import RefundOperation
from envelopes.money import with_usd
from reconciliation.models import Discrepancy, DiscrepancyStatus
from reconciliation.selectors import QUEUE_ORDER, discrepancy_queue
from verification.models import Escalation

ESCROW_READ = "escrow:read"
ESCROW_REFUND_REQUEST = "escrow:refund_request"
OPS_READ = "ops:read"


class InsufficientScope(VouchError):
    code = "insufficient_scope"
    status_code = 403
    default_message = "This token was not granted the scope this tool needs."


class UnknownTool(VouchError):
    code = "unknown_tool"
    status_code = 404
    default_message = "There is no tool of that name."


@dataclass(frozen=True)
class Call:
    """Who calls, as authenticated at /mcp for this request, and the origin it came to (confirm
    URLs are made on it)."""

    principal: AgentPrincipal
    origin: str

    @property
    def user(self) -> Any:
        return self.principal.user


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _paged(result: Page[Any], render: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    return {
        "results": [render(row) for row in result.rows],
        "has_more": result.has_more,
        "next_cursor": result.next_cursor,
    }


def _plain_id(value: str) -> str:
    """An id holding NUL names nothing that can exist: the same `not_found` as any unknown id,
    as a REST path's (core.api.parsing.path_id)."""
    if "\x00" in value:
        raise NotFound()
    return value


def _need_permission(call: Call, permission: str, what: str) -> None:
    """What the admin asks to open a model's list: its view permission, or its change one
    (Django's ModelAdmin.has_view_permission), so a tool never refuses whom the admin lets read
    nor answers whom it refuses (issue 38 item 1)."""
    change = permission.replace(".view_", ".change_", 1)
    if not (call.user.has_perm(permission) or call.user.has_perm(change)):
        raise PermissionDenied(
            f"Reading {what} needs the permission {permission}, as in the admin.",
            details={"permission": permission},
        )


# --- buyers -------------------------------------------------------------------------------------


def whoami(call: Call, args: s.WhoamiInput) -> dict[str, Any]:
    principal = call.principal
    return {
        "username": principal.user.get_username(),
        "email": principal.user.email,
        "is_staff": bool(principal.user.is_staff),
        "scopes": sorted(principal.scopes),
        "client_id": principal.client_id,
        "token_expires_at": principal.expires.isoformat(),
    }


def envelopes_list(call: Call, args: s.EnvelopesListInput) -> dict[str, Any]:
    result = page(
        envelopes.envelopes_of(user=call.user),
        order=("-created_at", "-id"),
        limit=args.limit,
        cursor=args.cursor,
        scope="envelopes_list",
        bound_to={"user": call.user.pk},
    )
    return _paged(result, lambda e: envelopes.envelope_data(e, detail=False))


def envelope_get(call: Call, args: s.EnvelopeGetInput) -> dict[str, Any]:
    envelope = envelopes.envelope_get_owned(user=call.user, envelope_id=_plain_id(args.envelope_id))
    return envelopes.envelope_data(envelope)


def refunds_list(call: Call, args: s.RefundsListInput) -> dict[str, Any]:
    if args.envelope_id is not None:
        envelope = envelopes.envelope_get_owned(
            user=call.user, envelope_id=_plain_id(args.envelope_id)
        )
        operations = envelope.refunds.all()
    else:
        operations = RefundOperation.objects.filter(envelope__owner=call.user)
    result = page(
        operations,
        order=("-created_at", "-id"),
        limit=args.limit,
        cursor=args.cursor,
        scope="refunds_list",
        bound_to={"user": call.user.pk, "envelope_id": args.envelope_id},
    )
    return _paged(result, envelopes.refund_data)


def refund_get(call: Call, args: s.RefundGetInput) -> dict[str, Any]:
    operation = envelopes.refund_get_owned(user=call.user, refund_id=_plain_id(args.refund_id))
    return envelopes.refund_data(operation)


def envelope_refund_request(call: Call, args: s.EnvelopeRefundRequestInput) -> dict[str, Any]:
    return refund_requests.refund_request_create(
        user=call.user,
        envelope_id=args.envelope_id,
        amount_micro=args.amount_micro,
        idempotency_key=args.idempotency_key,
        client_id=call.principal.client_id,
        origin=call.origin,
    )


def refund_request_decline(call: Call, request_id: str) -> dict[str, Any]:
    """The person declined the host's offer of the confirmation page: the request is refused."""
    return refund_requests.refund_request_decline(
        user=call.user, request_id=request_id, origin=call.origin
    )


def refund_request_get(call: Call, args: s.RefundRequestGetInput) -> dict[str, Any]:
    return refund_requests.refund_request_get(
        user=call.user, request_id=args.request_id, origin=call.origin
    )


# --- staff (ops:read) ---------------------------------------------------------------------------


def _escalation(escalation: Escalation) -> dict[str, Any]:
    return {
        "escalation_id": escalation.pk,
        "status": escalation.status,
        "money": escalation.money,
        "verdict": escalation.verdict,
        "verdict_class": escalation.verdict_class or None,
        "reason": escalation.reason,
        "subject_type": escalation.subject_type or None,
        "subject_id": escalation.subject_id or None,
        "verification_run": escalation.run.public_id if escalation.run else None,
        "created_at": escalation.created_at.isoformat(),
        "resolved_at": _iso(escalation.resolved_at),
        "resolved_by": escalation.resolved_by.get_username() if escalation.resolved_by else None,
        "resolution": escalation.resolution or None,
        "resolution_note": escalation.resolution_note or None,
    }


def escalations_list(call: Call, args: s.EscalationsListInput) -> dict[str, Any]:
    _need_permission(call, "verification.view_escalation", "escalations")
    rows = Escalation.objects.filter(status=args.status).select_related("run", "resolved_by")
    result = page(
        rows,
        order=("created_at", "id"),
        limit=args.limit,
        cursor=args.cursor,
        scope="escalations_list",
        bound_to={"user": call.user.pk, "status": args.status},
    )
    return _paged(result, _escalation)


def dispute_get(call: Call, args: s.DisputeGetInput) -> dict[str, Any]:
    READ_DISPUTES.require(call.user)  # the admin's own rule (disputes/permissions.py)
    return disputes.dispute_data(disputes.dispute_named(_plain_id(args.dispute_id)))


def packet_get(call: Call, args: s.PacketGetInput) -> dict[str, Any]:
    READ_PACKETS.require(call.user)  # the admin's packet review page's rule
    dispute = disputes.dispute_named(_plain_id(args.dispute_id))
    if args.version is None:
        packet = disputes.packet_current(dispute)
    else:
        packet = dispute.packets.filter(version=args.version).first()
    if packet is None:
        raise NotFound("No such packet for this dispute.")
    return disputes.packet_data(packet)


def _discrepancy(row: Discrepancy) -> dict[str, Any]:
    data: Any = row
    return with_usd(
        {
            "discrepancy_id": row.public_id,
            "discrepancy_class": row.code,
            "severity": row.severity,
            "status": row.status,
            "resolution": row.resolution or None,
            "subject_type": row.subject_type,
            "subject_id": row.subject_id,
            "charge_id": row.charge_id or None,
            "envelope_id": row.envelope_public_id or None,
            "amount_micro": row.amount_micro,
            "summary": row.summary,
            "differing": [str(name) for name in row.differing or []],
            "first_seen_at": row.first_seen_at.isoformat(),
            "last_seen_at": row.last_seen_at.isoformat(),
            "seen_count": row.seen_count,
            "due_at": row.due_at.isoformat(),
            "overdue": bool(data.overdue),
        }
    )


def discrepancies_list(call: Call, args: s.DiscrepanciesListInput) -> dict[str, Any]:
    _need_permission(call, "reconciliation.view_discrepancy", "discrepancies")
    rows = Discrepancy.objects.all()
    if args.status == "open":
        rows = rows.unresolved()
    elif args.status == "resolved":
        rows = rows.filter(status=DiscrepancyStatus.RESOLVED)
    result = page(
        discrepancy_queue(rows, now=timezone.now()),
        order=QUEUE_ORDER,
        limit=args.limit,
        cursor=args.cursor,
        scope="discrepancies_list",
        bound_to={"user": call.user.pk, "status": args.status},
    )
    return _paged(result, _discrepancy)


# --- the registry -------------------------------------------------------------------------------

_LIST = (
    " Paged: `has_more` says whether rows follow; pass `next_cursor` as `cursor` for the next page "
    "(never cut short silently)."
)
_MONEY = (
    " Amounts are integer micro-dollars in `_micro` fields (1 USD = 1,000,000; $12.34 = "
    "12340000), each with a `_usd` twin for reading."
)
_ERRORS = (
    " Errors come back as a result with isError and {code, message, details}, with the REST "
    "API's codes (e.g. not_found, validation_error)."
)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    scopes: tuple[str, ...]  # any one of them suffices; the first is the one to ask for
    input: type[s.ToolInput]
    output: type[BaseModel]
    run: Callable[[Call, Any], dict[str, Any]]
    read_only: bool = True
    # Its result is a refund request the owner confirms in the browser: offered to hosts that can
    # show it as a URL-mode elicitation (agents/mcp/server.py, confirmation_offered).
    confirms_in_browser: bool = False


SPECS = (
    ToolSpec(
        "whoami",
        "Who am I",
        "Who this token acts for: username, e-mail, whether staff, the scopes granted, the "
        "client and when the token expires. Needs no scope.",
        (),
        s.WhoamiInput,
        s.Whoami,
        whoami,
    ),
    ToolSpec(
        "envelopes_list",
        "My envelopes",
        "Your envelopes (escrow balances), newest first: balances total_funded, total_debited, "
        "total_refunded, reserved, unspent, held (a dispute's money Stripe withdrew while the "
        "bank reviews it: never refunded) and charged_back (what a lost dispute took)."
        + _MONEY
        + _LIST
        + _ERRORS,
        (ESCROW_READ,),
        s.EnvelopesListInput,
        s.EnvelopesPage,
        envelopes_list,
    ),
    ToolSpec(
        "envelope_get",
        "An envelope",
        "One of your envelopes with its balances, funding charges (legs), debits, refunds and "
        "disputes (why money is held or charged back). "
        "Another person's envelope answers not_found, as a missing one." + _MONEY + _ERRORS,
        (ESCROW_READ,),
        s.EnvelopeGetInput,
        s.Envelope,
        envelope_get,
    ),
    ToolSpec(
        "refunds_list",
        "My refunds",
        "Your refunds (of one envelope, or all), newest first, each with its legs, the "
        "provider's answers and the independent verification verdicts." + _MONEY + _LIST + _ERRORS,
        (ESCROW_READ,),
        s.RefundsListInput,
        s.RefundsPage,
        refunds_list,
    ),
    ToolSpec(
        "refund_get",
        "A refund",
        "One of your refunds: status (what the provider last said of every leg: a leg accepted "
        "then failed later counts as failed, its money back in the envelope) and "
        "verification_status (verified once an independent readback proves every leg; attention "
        "when one is not proven or failed later)." + _MONEY + _ERRORS,
        (ESCROW_READ,),
        s.RefundGetInput,
        s.Refund,
        refund_get,
    ),
    ToolSpec(
        "envelope_refund_request",
        "Request a refund (you confirm it)",
        "Propose returning unspent money of one of your envelopes to the cards that funded it. "
        "Moves NO money: it validates as the refund itself would (invalid_amount, "
        "amount_exceeds_unspent, nothing_to_refund, not_found), previews the refund (last in, "
        "first out; each leg rounded down to a cent; money a dispute holds is not refunded, and "
        "preview.held_note says why) and answers a confirm_url. The envelope's "
        "owner opens it in the browser, logged in, and confirms within 15 minutes (expires_at); "
        "only then is the refund made. amount_micro: micro-dollars (1 USD = 1,000,000; $12.34 = "
        "12340000), omit for the whole unspent balance. idempotency_key: required; re-sending a "
        "call (e.g. after a broken connection) with the same key and arguments answers the same "
        "request, never a second one. A host that declares the elicitation capability with url "
        "mode is sent the confirm_url as a URL-mode elicitation (an input request keyed by the "
        "request_id) to show the person: accepting opens the page and still moves no money until "
        "the owner confirms there; declining or cancelling refuses the request "
        "(refusal_code declined_by_person). Other hosts show the person confirm_url themselves."
        + _ERRORS,
        (ESCROW_REFUND_REQUEST,),
        s.EnvelopeRefundRequestInput,
        s.RefundRequest,
        envelope_refund_request,
        read_only=False,
        confirms_in_browser=True,
    ),
    ToolSpec(
        "refund_request_get",
        "A refund request",
        "A refund request you made: pending_confirmation, confirmed (with the refund), expired "
        "or refused (refusal_code says why). Needs escrow:read or escrow:refund_request."
        + _MONEY
        + _ERRORS,
        (ESCROW_READ, ESCROW_REFUND_REQUEST),
        s.RefundRequestGetInput,
        s.RefundRequestDetail,
        refund_request_get,
    ),
    ToolSpec(
        "escalations_list",
        "Escalations (staff)",
        "Staff: verification escalations waiting for a person (or resolved ones), oldest first. "
        "Read only: resolving happens in the admin. Needs the permission "
        "verification.view_escalation." + _LIST + _ERRORS,
        (OPS_READ,),
        s.EscalationsListInput,
        s.EscalationsPage,
        escalations_list,
    ),
    ToolSpec(
        "dispute_get",
        "A dispute (staff)",
        "Staff: a dispute with its admitted evidence and current packet. Read only: approving "
        "and filing happen in the admin. Needs the permission disputes.view_dispute (or any "
        "that reads packets), as the admin asks." + _MONEY + _ERRORS,
        (OPS_READ,),
        s.DisputeGetInput,
        s.Dispute,
        dispute_get,
    ),
    ToolSpec(
        "packet_get",
        "A dispute's evidence packet (staff)",
        "Staff: a dispute's evidence packet (the latest, or one version): posture, citations, "
        "validation, approval and filing state, and the exact filing request for review. Read "
        "only. Needs the permission disputes.view_packet (or change_packet, approve_packet, "
        "file_packet), as the admin's review page asks." + _ERRORS,
        (OPS_READ,),
        s.PacketGetInput,
        s.Packet,
        packet_get,
    ),
    ToolSpec(
        "discrepancies_list",
        "Reconciliation discrepancies (staff)",
        "Staff: differences between Vouch's ledger and the provider, in the queue's order (open "
        "first, money before evidence before hygiene, oldest first), with the target to resolve "
        "each by. Read only. Needs the permission reconciliation.view_discrepancy."
        + _MONEY
        + _LIST
        + _ERRORS,
        (OPS_READ,),
        s.DiscrepanciesListInput,
        s.DiscrepanciesPage,
        discrepancies_list,
    ),
)
TOOLS = {spec.name: spec for spec in SPECS}


def callable_by(principal: AgentPrincipal) -> frozenset[str]:
    """The tools `principal` may call now, which are the ones `tools/list` shows it: those that
    need no scope, and those one of whose scopes the token holds and the person's role allows
    (a staff scope needs active staff, AgentPrincipal.allows)."""
    return frozenset(
        spec.name
        for spec in SPECS
        if not spec.scopes or any(principal.allows(scope) for scope in spec.scopes)
    )


def run(spec: ToolSpec, call: Call, args: Any) -> dict[str, Any]:
    """Run a tool for `call`: its scope checked again now (ops:read also needs the person to be
    active staff at this moment), then the tool."""
    if spec.scopes and not any(call.principal.allows(scope) for scope in spec.scopes):
        raise InsufficientScope(details={"scope": spec.scopes[0]})
    return spec.run(call, args)
