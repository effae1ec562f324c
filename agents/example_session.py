"""An example MCP session against Vouch, with the official SDK's client (README, "The agent
surface"): what an assistant does, runnable by hand.

    .venv/bin/python -m agents.example_session [--server URL] [--client-id <client id>]
        [--port N] [--refund env_… [--amount N]]

`--server` is Vouch's address (default http://127.0.0.1:8000, where `make run` serves; `make run
PORT=8001` needs `--server http://127.0.0.1:8001`).

With no `--client-id` the SDK registers the script itself (RFC 7591), as a generic MCP host does,
and the consent page marks it unverified; with one, the client registered in the admin is used
(Applications: public, authorization code, redirect URI `http://127.0.0.1/callback`; any port on
the loopback address is accepted). The script listens on http://127.0.0.1:<port>/callback (a
free port unless `--port` names one), prints the authorization URL (and opens it in a browser if
there is one): sign in, read the scopes (the ones /mcp's 401 names: escrow:read and
escrow:refund_request), Allow. Then it lists the tools, calls
`whoami` and `envelopes_list`, and with `--refund` asks for a refund of that envelope: it prints
the `confirm_url`, which moves no money until you open it signed in and confirm, and waits for
`refund_request_get` to say how it ended. Tokens live in memory only."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import uuid
import webbrowser
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

WAIT_FOR_CONFIRMATION_S = 15 * 60


class MemoryStorage:
    """The SDK's token storage, in memory: the client registered in the admin, or none (the SDK
    then registers one and keeps it here)."""

    def __init__(self, client_id: str | None, redirect_uri: str) -> None:
        self.tokens: OAuthToken | None = None
        self.client = (
            OAuthClientInformationFull(
                client_id=client_id,
                redirect_uris=[AnyUrl(redirect_uri)],
                token_endpoint_auth_method="none",  # noqa: S106 - a public client
            )
            if client_id
            else None
        )

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Callback:
    """A one-page HTTP server on the loopback address: the authorization server redirects the
    browser here with the code, the state and the issuer."""

    def __init__(self, port: int) -> None:
        self.queries: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self.loop = asyncio.get_running_loop()
        callback = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path != "/callback":
                    self.send_error(404)
                    return
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                callback.loop.call_soon_threadsafe(callback.queries.put_nowait, query)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.end_headers()
                self.wfile.write(b"Vouch: the assistant is connected. You may close this tab.\n")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        try:
            self.server = HTTPServer(("127.0.0.1", port), Handler)
        except OSError as exc:
            raise SystemExit(
                f"Cannot listen on 127.0.0.1:{port} for the callback ({exc.strerror}): pass "
                "another --port, or none for a free one."
            ) from exc
        self.uri = f"http://127.0.0.1:{self.server.server_port}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    async def redirect(self, authorization_url: str) -> None:
        print(f"\nOpen this address, sign in and allow:\n  {authorization_url}\n", flush=True)
        webbrowser.open(authorization_url)

    async def result(self) -> AuthorizationCodeResult:
        query = await self.queries.get()
        if "error" in query:
            raise SystemExit(
                f"Authorization refused: {query['error']} {query.get('error_description', '')}"
            )
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )


def content_of(result: Any) -> dict[str, Any]:
    """A tool result's content: its structured content, or for an error (which carries none) the
    JSON of its text, `{code, message, details}`."""
    if result.structured_content:
        return dict(result.structured_content)
    for part in result.content:
        if getattr(part, "type", None) == "text":
            try:
                parsed = json.loads(part.text)
            except ValueError:
                return {"text": part.text}
            return dict(parsed) if isinstance(parsed, dict) else {"value": parsed}
    return {}


def show(title: str, result: Any) -> dict[str, Any]:
    content = content_of(result)
    label = "ERROR " if result.is_error else ""
    print(f"--> {label}{title}\n{json.dumps(content, indent=2)}\n", flush=True)
    return content


async def session(args: argparse.Namespace) -> int:
    callback = Callback(args.port)
    auth = OAuthClientProvider(
        server_url=f"{args.server}/mcp",
        client_metadata=OAuthClientMetadata(
            redirect_uris=[AnyUrl(callback.uri)],
            token_endpoint_auth_method="none",  # noqa: S106 - a public client
            grant_types=["authorization_code", "refresh_token"],
            client_name="Vouch example session",
        ),
        storage=MemoryStorage(args.client_id, callback.uri),
        redirect_handler=callback.redirect,
        callback_handler=callback.result,
    )
    try:
        return await _converse(args, auth)
    except* httpx2.ConnectError:
        print(
            f"Cannot reach Vouch at {args.server}: is `make run` going? "
            "(--server names another address)",
            file=sys.stderr,
            flush=True,
        )
    return 1


async def _converse(args: argparse.Namespace, auth: OAuthClientProvider) -> int:
    """Tools, `whoami`, `envelopes_list`, and with `--refund` a refund request followed to its
    end."""
    async with (
        httpx2.AsyncClient(auth=auth, timeout=60) as http,
        Client(streamable_http_client(f"{args.server}/mcp", http_client=http)) as client,
    ):
        tools = (await client.list_tools()).tools
        print("--> tools: " + ", ".join(sorted(tool.name for tool in tools)) + "\n", flush=True)
        show("whoami", await client.call_tool("whoami", {}))
        show("envelopes_list", await client.call_tool("envelopes_list", {"limit": 5}))
        if not args.refund:
            return 0
        arguments: dict[str, Any] = {
            "envelope_id": args.refund,
            "idempotency_key": f"example-{uuid.uuid4()}",
        }
        if args.amount is not None:
            arguments["amount_micro"] = args.amount
        result = await client.call_tool("envelope_refund_request", arguments)
        request = show("envelope_refund_request", result)
        if result.is_error:
            return 1
        print(f"Nothing has moved. To refund, open and confirm:\n  {request['confirm_url']}\n")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_FOR_CONFIRMATION_S
        while loop.time() < deadline:
            now = await client.call_tool(
                "refund_request_get", {"request_id": request["request_id"]}
            )
            state = content_of(now)
            refund = state.get("refund") or {}
            settled = state.get("status") in ("expired", "refused") or (
                state.get("status") == "confirmed"
                and refund.get("verification_status") not in (None, "pending")
            )
            if settled:
                show("refund_request_get", now)
                return 0 if state.get("status") == "confirmed" else 1
            await asyncio.sleep(2)
    return 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--server",
        default="http://127.0.0.1:8000",
        help="Vouch's address (default: http://127.0.0.1:8000, make run's)",
    )
    parser.add_argument(
        "--client-id",
        help="from the admin's Applications page (default: the script registers itself)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=0,
        help="the loopback callback's port (default: a free one)",
    )
    parser.add_argument("--refund", metavar="ENVELOPE_ID", help="ask for a refund of it")
    parser.add_argument("--amount", type=int, help="micro-dollars (default: all unspent)")
    args = parser.parse_args()
    args.server = args.server.rstrip("/")
    raise SystemExit(asyncio.run(session(args)))


if __name__ == "__main__":
    main()
