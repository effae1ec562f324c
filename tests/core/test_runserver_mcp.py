"""`manage.py runserver` serves the WSGI app, where the MCP server does not run (it lives in the
ASGI app, config/asgi.py): /mcp there says so and how to reach it, instead of a bare 404
(issue 41 item 8). The ASGI app keeps handing /mcp to the MCP server."""

import asyncio
from typing import Any

import pytest
from django.test import Client

from config import asgi


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
@pytest.mark.parametrize("method", ["get", "post"])
def test_mcp_under_the_wsgi_app_explains_where_it_runs(db: None, path: str, method: str) -> None:
    response = getattr(Client(), method)(path)
    assert response.status_code == 501
    body: dict[str, Any] = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == "mcp_needs_asgi"
    message = body["error"]["message"]
    assert "make run" in message
    assert "uvicorn config.asgi:application" in message


def _asgi_post(path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    """One POST through the ASGI app (config/asgi.py), as uvicorn would send it."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 50000),
        "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")],
    }  # fmt: skip

    async def serve() -> None:
        async with asgi.mcp_application.running():  # what the ASGI lifespan does
            await asgi.application(scope, receive, send)

    asyncio.run(serve())
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


@pytest.mark.django_db(transaction=True)
def test_the_asgi_app_still_hands_mcp_to_the_mcp_server() -> None:
    status, headers, body = _asgi_post("/mcp")
    # The MCP server's OAuth challenge (agents/mcp), not the WSGI explanation.
    assert status == 401, body
    assert b"resource_metadata" in headers[b"www-authenticate"]
    assert b"mcp_needs_asgi" not in body
