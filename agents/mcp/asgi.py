"""/mcp as an ASGI application: authentication, scopes and the rate limit in front of the MCP
SDK's streamable-HTTP handler (agents/mcp/server.py), and the SDK's session manager run by the
ASGI lifespan (config/asgi.py).

Per request, in order:
1. The Host header, by Django's rule (ALLOWED_HOSTS): else 421 `invalid_host`.
2. `Authorization: Bearer <OAuth access token>` issued by Vouch for this resource
   (agents.oauth.tokens.bearer_authenticate). None, or a session cookie only: 401
   `not_authenticated`; a token that is unknown (a personal API token is one), expired, revoked
   or for another resource: 401 `authentication_failed` with `error="invalid_token"`. Both carry
   `WWW-Authenticate: Bearer scope="escrow:read escrow:refund_request", resource_metadata="…"`
   (RFC 9728: where the client finds the authorization server; the scopes to ask for, which are
   not the staff's).
3. The body (at most 4 MiB, else 413 `payload_too_large`) is read and, for each `tools/call`,
   the tool's scope checked: missing, 403 `insufficient_scope` with
   `WWW-Authenticate: Bearer error="insufficient_scope", scope="<scope>", resource_metadata="…"`
   (the client may ask the person for it); ops:read held by someone who is not active staff
   (now): 403 `permission_denied`, no challenge (asking again cannot help).
4. Tool calls are counted per token (agents/mcp/limits.py): over the limit, 429 `rate_limited`
   with Retry-After.
5. The request, its body replayed, goes to the SDK with the caller in the ASGI scope, where the
   tools find it.

These refusals are HTTP answers with a JSON-RPC error body whose `error.data` is the REST API's
`{code, message, details}` (the SDK client surfaces it as the error's data). Steps 2-5 and the
tool itself run on one thread borrowed for the request (agents/mcp/threads.py); a `GET` stream
gives its thread back once admitted, and is bounded by MCP_STREAMS_PER_PERSON (the next is 429
`rate_limited` with Retry-After) and MCP_STREAM_MAX_S (then its response ends, complete, and the
client opens another): issue 39 item 8."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import structlog
from django.conf import settings
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from agents.mcp import tools
from agents.mcp.limits import tool_calls_wait
from agents.mcp.server import CALL_SCOPE_KEY, build_server, host_allowed, session_manager
from agents.mcp.threads import OpenStreams, RequestThreads, TooManyStreams, in_thread
from agents.oauth.limits import BEARER_FAILURES, bearer_caller, failure_count, failures_wait
from agents.oauth.tokens import (
    STAFF_SCOPES,
    AgentPrincipal,
    TokenRefused,
    bearer_authenticate,
    mcp_resource_url,
    resource_metadata_url,
)
from core.client_address import scope_client_address
from core.exceptions import (
    AuthenticationFailed,
    NotAuthenticated,
    PayloadTooLarge,
    PermissionDenied,
    Throttled,
    VouchError,
)

log = structlog.get_logger("vouch.mcp")

JSONRPC_REFUSED = -32001  # a server-defined JSON-RPC error code: refused before the method ran


class InvalidHost(VouchError):
    code = "invalid_host"
    status_code = 421
    default_message = "This server does not answer for that host name."


class McpNotStarted(VouchError):
    code = "unavailable"
    status_code = 503
    default_message = "The MCP server is not running (its ASGI lifespan has not started it)."


@dataclass(frozen=True)
class Refusal:
    error: VouchError
    headers: tuple[tuple[str, str], ...] = ()


def _challenge(resource: str, **params: str) -> tuple[str, str]:
    """A WWW-Authenticate header: Bearer with `params` and the resource metadata's URL."""
    fields = [f'{name}="{value}"' for name, value in params.items()]
    fields.append(f'resource_metadata="{resource_metadata_url(resource)}"')
    return ("WWW-Authenticate", "Bearer " + ", ".join(fields))


def _bearer(headers: Headers) -> str | None:
    """The bearer token sent, "" for a Bearer header without one, None for no Bearer header."""
    scheme, _, token = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip()


def _tool_calls(body: bytes) -> list[tuple[Any, str]]:
    """(id, tool name) of each tools/call in a JSON-RPC body (a message or a batch)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return []  # the SDK answers a parse error
    messages = parsed if isinstance(parsed, list) else [parsed]
    return [
        (message.get("id"), str(message["params"].get("name")))
        for message in messages
        if isinstance(message, dict)
        and message.get("method") == "tools/call"
        and isinstance(message.get("params"), dict)
    ]


def _scopes_to_ask() -> str:
    """What a 401 tells the client to ask for: every scope but the staff ones (a buyer's consent
    to ops:read is refused; staff are asked for it by the 403 of the first ops tool they call)."""
    return " ".join(scope for scope in settings.AGENT_SCOPES if scope not in STAFF_SCOPES)


def _bearer_slow_down(wait: int) -> Refusal:
    return Refusal(
        Throttled("Too many refused access tokens.", details={"retry_after_s": wait}),
        (("Retry-After", str(wait)),),
    )


def admit(
    *, raw: str | None, resource: str, calls: list[tuple[Any, str]], address: str = ""
) -> AgentPrincipal | Refusal:
    """Steps 2-4: the caller, or why they are refused. Refused tokens are counted per client
    address and token fingerprint (agents/oauth/limits.py): a token that failed its limit, or a
    refused one once its address is past its limit, waits; a valid token never does."""
    caller = bearer_caller(address=address, raw=raw)
    wait = failures_wait(scope=BEARER_FAILURES, caller=caller) if raw is not None else None
    if wait is not None:
        return _bearer_slow_down(wait)
    if raw is None:
        return Refusal(
            NotAuthenticated("Send Authorization: Bearer <an OAuth access token for this server>."),
            (_challenge(resource, scope=_scopes_to_ask()),),
        )
    try:
        principal = bearer_authenticate(raw=raw, resource=resource)
    except TokenRefused as refused:
        wait = failure_count(scope=BEARER_FAILURES, caller=caller)
        if wait is not None:
            return _bearer_slow_down(wait)
        return Refusal(
            AuthenticationFailed(
                "The access token is not valid here (unknown, expired, revoked, or issued for "
                "another resource).",
                details={"reason": refused.reason},
            ),
            (
                _challenge(
                    resource,
                    error="invalid_token",
                    error_description="The access token is not valid for this resource.",
                    scope=_scopes_to_ask(),
                ),
            ),
        )
    for _, name in calls:
        spec = tools.TOOLS.get(name)
        if spec is None or not spec.scopes:
            continue
        if any(principal.allows(scope) for scope in spec.scopes):
            continue
        if any(scope in principal.scopes for scope in spec.scopes):  # held, but not staff now
            return Refusal(
                PermissionDenied(f"{name} is for active staff only.", details={"tool": name})
            )
        needed = spec.scopes[0]
        return Refusal(
            tools.InsufficientScope(
                f"{name} needs the scope {needed}, which this token was not granted.",
                details={"scope": needed, "tool": name},
            ),
            (_challenge(resource, error="insufficient_scope", scope=needed),),
        )
    wait = tool_calls_wait(token_id=principal.token_id, calls=len(calls))
    if wait is not None:
        return Refusal(Throttled(details={"retry_after_s": wait}), (("Retry-After", str(wait)),))
    return principal


async def _answer(send: Send, refusal: Refusal, request_id: Any = None) -> None:
    error = refusal.error
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {
                "code": JSONRPC_REFUSED,
                "message": error.message,
                "data": {"code": error.code, "message": error.message, "details": error.details},
            },
        }
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((name.lower().encode(), value.encode("latin-1")) for name, value in refusal.headers),
    ]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive, headers: Headers) -> tuple[bytes, Message | None] | None:
    """The whole request body and the message that came after it (a disconnect), or None if it
    is over the limit."""
    declared = headers.get("content-length")
    if (
        declared is not None
        and declared.isdigit()
        and int(declared) > DEFAULT_MAX_REQUEST_BODY_SIZE
    ):
        return None
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), message
        body.extend(message.get("body", b""))
        if len(body) > DEFAULT_MAX_REQUEST_BODY_SIZE:
            return None
        if not message.get("more_body", False):
            return bytes(body), None


class McpApplication:
    """The /mcp endpoint. `running()` (entered by the ASGI lifespan) starts the SDK's session
    manager and the request threads; requests before that are answered 503."""

    def __init__(self, server: MCPServer[Any] | None = None) -> None:
        self.server = server or build_server()
        self._manager: StreamableHTTPSessionManager | None = None
        self._threads: RequestThreads | None = None
        self._streams = OpenStreams()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        manager = session_manager(self.server)
        threads = RequestThreads()
        async with manager.run():
            self._manager, self._threads = manager, threads
            try:
                yield
            finally:
                self._manager = self._threads = None
                await anyio.to_thread.run_sync(threads.shutdown)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        line = RequestLine(http_method=scope["method"], address=_address(scope))
        try:
            await self._handle(scope, receive, line.watching(send), line)
        finally:
            line.write()

    async def _handle(self, scope: Scope, receive: Receive, send: Send, line: RequestLine) -> None:
        manager, threads = self._manager, self._threads
        if manager is None or threads is None:
            await _answer(send, Refusal(McpNotStarted()))
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not host_allowed(host):
            await _answer(send, Refusal(InvalidHost()))
            return
        resource = mcp_resource_url(scheme=scope.get("scheme", "http"), host=host)
        parts = urlsplit(resource)
        origin = f"{parts.scheme}://{parts.netloc}"

        read = await _read_body(receive, headers) if scope["method"] == "POST" else (b"", None)
        if read is None:
            await _answer(send, Refusal(PayloadTooLarge()))
            return
        body, after = read
        line.rpc_methods = _rpc_methods(body) if body else []
        calls = _tool_calls(body) if body else []
        line.tools = [name for _, name in calls]

        async with threads.borrow():
            admitted = await in_thread(admit)(
                raw=_bearer(headers),
                resource=resource,
                calls=calls,
                address=scope_client_address(scope),  # behind a proxy, the client's
            )
            if isinstance(admitted, Refusal):
                await _answer(send, admitted, calls[0][0] if len(calls) == 1 else None)
                return
            line.user_id, line.client_id = admitted.user.pk, admitted.client_id
            scope[CALL_SCOPE_KEY] = tools.Call(principal=admitted, origin=origin)
            if scope["method"] != "GET":
                if scope["method"] == "POST":
                    receive = _replay(body, after, receive)
                await manager.handle_request(scope, receive, send)
                return
        await self._stream(manager, admitted.user.pk, scope, receive, send)

    async def _stream(
        self,
        manager: StreamableHTTPSessionManager,
        person: object,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """A GET stream, on no request thread: the person's cap, then the SDK for at most the
        lifetime, after which the response is ended as a complete one (the client reconnects)."""
        lifetime_s = float(settings.MCP_STREAM_MAX_S)
        try:
            ticket = self._streams.open(
                person, per_person=int(settings.MCP_STREAMS_PER_PERSON), lifetime_s=lifetime_s
            )
        except TooManyStreams as full:
            wait = full.retry_after_s
            refused = Throttled(
                "Too many open streams for this person; close one or retry after Retry-After.",
                details={
                    "retry_after_s": wait,
                    "streams_per_person": settings.MCP_STREAMS_PER_PERSON,
                },
            )
            await _answer(send, Refusal(refused, (("Retry-After", str(wait)),)))
            return
        started = completed = False

        async def watched(message: Message) -> None:
            nonlocal started, completed
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                completed = True
            await send(message)

        try:
            with anyio.move_on_after(lifetime_s):
                await manager.handle_request(scope, receive, watched)
            if started and not completed:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._streams.close(person, ticket)


def _address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


def _rpc_methods(body: bytes) -> list[str]:
    """The JSON-RPC method of each message in a body (a message or a batch)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return []
    messages = parsed if isinstance(parsed, list) else [parsed]
    return [
        str(message["method"])
        for message in messages
        if isinstance(message, dict) and isinstance(message.get("method"), str)
    ]


@dataclass
class RequestLine:
    """The one log line of a /mcp request (SPEC §16): HTTP and JSON-RPC methods, the tool(s)
    called, the status answered, the duration, and who called (client and user ids), never the
    token. Written when the request ends, however it ends; a 4xx or 5xx is a warning."""

    http_method: str
    address: str
    rpc_methods: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    status: int | None = None
    user_id: int | None = None
    client_id: str | None = None
    started: float = field(default_factory=time.monotonic)

    def watching(self, send: Send) -> Send:
        async def sent(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.status = int(message["status"])
            await send(message)

        return sent

    def write(self) -> None:
        status = self.status if self.status is not None else 500
        fields = {
            "http_method": self.http_method,
            "rpc_method": ",".join(self.rpc_methods) or None,
            "tool": ",".join(self.tools) or None,
            "status": status,
            "duration_ms": round((time.monotonic() - self.started) * 1000, 2),
            "client_id": self.client_id,
            "user_id": self.user_id,
            "ip": self.address,
        }
        if status >= 400:
            log.warning("mcp_request", **fields)
        else:
            log.info("mcp_request", **fields)


def _replay(body: bytes, after: Message | None, receive: Receive) -> Receive:
    """`receive` as if the body had not been read yet."""
    pending: deque[Message] = deque([{"type": "http.request", "body": body, "more_body": False}])
    if after is not None:
        pending.append(after)

    async def replayed() -> Message:
        if pending:
            return pending.popleft()
        return await receive()

    return replayed
