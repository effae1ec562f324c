"""A live ASGI server for the agent surface: Vouch's own entry point (config/asgi.py: Django and
/mcp, its lifespan starting the MCP SDK's session manager) under uvicorn, in a thread of this
process on a free port, against the test database (so the test needs transactional_db: rows it
writes are committed where the server's threads see them, and flushed afterwards). Settings the
test changes (`settings` fixture) apply to the server too: it is the same process.

`mcp_session(url, token)` opens the MCP SDK's own client (streamable HTTP, a plain bearer header
on an httpx2 client) for `async` code; `run(coroutine_function)` runs one from a test."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
import uvicorn
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AsgiServer:
    """uvicorn serving config.asgi:application in a thread; `url` is its base URL. Static files
    are served too, from the apps' folders, as pytest-django's live server does (DEBUG is off in
    tests, so config.asgi does not), for pages that look as they do in production."""

    def __init__(self) -> None:
        from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

        from config.asgi import application

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            ASGIStaticFilesHandler(application),
            host="127.0.0.1",
            port=self.port,
            lifespan="on",
            log_level="warning",
            access_log=False,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="asgi-server", daemon=True)

    def start(self) -> AsgiServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the ASGI server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@pytest.fixture
def asgi_server(transactional_db: None) -> Iterator[str]:
    """The base URL (http://127.0.0.1:<port>) of a live Vouch ASGI server for this test."""
    server = AsgiServer().start()
    try:
        yield server.url
    finally:
        server.stop()


@asynccontextmanager
async def mcp_session(url: str, token: str | None) -> AsyncIterator[Client]:
    """The SDK's client connected to `url` + /mcp, sending `Authorization: Bearer <token>`."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


def run(function: Callable[[], Awaitable[T]]) -> T:
    """Run async test code (the SDK's client) to completion from a sync test."""
    result: list[T] = []

    async def main() -> None:
        result.append(await function())

    anyio.run(main)
    return result[0]


def post_mcp(url: str, body: Any, *, token: str | None = None, **headers: str) -> httpx2.Response:
    """One raw JSON-RPC POST to /mcp, as a streamable-HTTP client sends it."""
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
        **headers,
    }
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return httpx2.post(f"{url}/mcp", json=body, headers=sent, timeout=30)


def tool_call(name: str, arguments: Any = None, request_id: int = 1) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


# The tools a buyer's token lists (tools.callable_by); those only active staff with ops:read see.
BUYER_TOOLS = frozenset(
    {
        "whoami",
        "envelopes_list",
        "envelope_get",
        "refunds_list",
        "refund_get",
        "envelope_refund_request",
        "refund_request_get",
    }
)
OPS_TOOLS = frozenset({"escalations_list", "dispute_get", "packet_get", "discrepancies_list"})


def tool_error(result: Any) -> dict[str, Any]:
    """A tool's error result, as every client can read it (SPEC §16): `isError`, no structured
    content (which a client would check against the tool's success `outputSchema`), and the REST
    API's `{code, message, details}` as the JSON of its text content. `result` is the SDK's
    CallToolResult or the raw JSON-RPC result."""
    if isinstance(result, dict):
        is_error, structured = result.get("isError"), result.get("structuredContent")
        texts = [c["text"] for c in result.get("content", []) if c.get("type") == "text"]
    else:
        is_error, structured = result.is_error, result.structured_content
        texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    assert is_error is True, result
    assert structured is None, structured
    (text,) = texts
    body = json.loads(text)
    assert set(body) == {"code", "message", "details"}, body
    return dict(body)


def error_code(result: Any) -> str | None:
    """The error code of a tool result (None when it is no error), in either form."""
    failed = result.get("isError") if isinstance(result, dict) else result.is_error
    return tool_error(result)["code"] if failed else None


@asynccontextmanager
async def eliciting_mcp_session(
    url: str, token: str | None, elicitation_callback: Any
) -> AsyncIterator[Client]:
    """As `mcp_session`, for a host that can show elicitations: the SDK's client declares the
    `elicitation` capability (form and url) and calls `elicitation_callback(ctx, params)` for each
    one the server asks, as a host shows it to the person and returns their answer."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, elicitation_callback=elicitation_callback) as client:
            yield client
