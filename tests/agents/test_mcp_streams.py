"""Issue 39 item 8 (SPEC §19): `GET /mcp` streams against a live server (config.asgi under
uvicorn). Open streams never starve `POST /mcp`, a person holds at most MCP_STREAMS_PER_PERSON of
them at once (the next is 429 with Retry-After), and each ends cleanly after MCP_STREAM_MAX_S."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx2
import pytest

from accounts.models import User
from agents.mcp.threads import THREADS
from tests.agents.oauth import issue_token
from tests.drivers.mcp import post_mcp, tool_call

HEADERS = {"Accept": "text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


async def _hold_stream(
    http: httpx2.AsyncClient, url: str, token: str, opened: list[int], stop: anyio.Event
) -> None:
    """A GET /mcp stream held open until `stop` (or until the server ends it)."""
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    try:
        async with http.stream("GET", f"{url}/mcp", headers=headers) as response:
            opened.append(response.status_code)
            with anyio.move_on_after(60):
                async with anyio.create_task_group() as group:

                    async def drain() -> None:
                        async for _ in response.aiter_bytes():
                            pass
                        group.cancel_scope.cancel()

                    group.start_soon(drain)
                    await stop.wait()
                    group.cancel_scope.cancel()
    except httpx2.TimeoutException:
        opened.append(0)  # not even answered: it waited for a thread


async def _get(url: str, token: str) -> httpx2.Response:
    """A GET /mcp that is expected to be answered at once (a refusal), not to stream."""
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(timeout=10) as http,
        http.stream("GET", f"{url}/mcp", headers=headers) as response,
    ):
        await response.aread()
        return response


def test_open_streams_never_starve_a_post(asgi_server: str, buyer: User, settings: Any) -> None:
    """Issue 39 item 8: each GET stream held one of the THREADS request threads for its whole
    life, so THREADS open streams made every other /mcp call wait (here: time out)."""
    settings.MCP_STREAMS_PER_PERSON = 100  # this test is about threads, not the per-person cap
    token = issue_token(buyer, resource=f"{asgi_server}/mcp")
    answered: list[tuple[int, float]] = []

    async def main() -> None:
        stop, opened = anyio.Event(), []
        limits = httpx2.Limits(max_connections=THREADS + 10)
        async with (
            httpx2.AsyncClient(timeout=30, limits=limits) as http,
            anyio.create_task_group() as group,
        ):
            for _ in range(THREADS + 1):
                group.start_soon(_hold_stream, http, asgi_server, token, opened, stop)
            with anyio.move_on_after(5):
                while len(opened) < THREADS:
                    await anyio.sleep(0.05)
            started = time.monotonic()
            try:
                response = await anyio.to_thread.run_sync(
                    lambda: post_mcp(asgi_server, tool_call("whoami"), token=token)
                )
                answered.append((response.status_code, time.monotonic() - started))
            except httpx2.TimeoutException:
                answered.append((0, time.monotonic() - started))
            finally:
                stop.set()

    anyio.run(main)

    ((status, elapsed),) = answered
    assert status == 200, f"the POST was not answered ({status}) after {elapsed:.1f} s"
    assert elapsed < 5


def test_a_person_holds_at_most_the_cap_of_streams(
    asgi_server: str,
    buyer: User,
    staff: User,
    settings: Any,
) -> None:
    """Issue 39 item 8: one person (any valid token, read scope included) could open streams
    without limit. The one past MCP_STREAMS_PER_PERSON is 429 `rate_limited` with Retry-After;
    another person is not affected; a slot frees when a stream ends."""
    settings.MCP_STREAMS_PER_PERSON = 2
    mine = issue_token(buyer, scopes="escrow:read", resource=f"{asgi_server}/mcp")
    theirs = issue_token(staff, scopes="escrow:read", resource=f"{asgi_server}/mcp")
    seen: dict[str, Any] = {}

    async def main() -> None:
        stop, opened = anyio.Event(), []
        async with httpx2.AsyncClient(timeout=30) as http:
            async with anyio.create_task_group() as group:
                for _ in range(2):
                    group.start_soon(_hold_stream, http, asgi_server, mine, opened, stop)
                with anyio.move_on_after(5):
                    while len(opened) < 2:
                        await anyio.sleep(0.05)
                seen["opened"] = list(opened)
                with anyio.move_on_after(10):
                    seen["third"] = await _get(asgi_server, mine)
                other: list[int] = []
                other_stop = anyio.Event()
                group.start_soon(_hold_stream, http, asgi_server, theirs, other, other_stop)
                with anyio.move_on_after(5):
                    while not other:
                        await anyio.sleep(0.05)
                seen["other"] = list(other)
                other_stop.set()
                stop.set()
            again: list[int] = []
            again_stop = anyio.Event()
            async with anyio.create_task_group() as group:
                group.start_soon(_hold_stream, http, asgi_server, mine, again, again_stop)
                with anyio.move_on_after(5):
                    while not again:
                        await anyio.sleep(0.05)
                seen["again"] = list(again)
                again_stop.set()

    anyio.run(main)

    assert seen["opened"] == [200, 200]
    third = seen.get("third")
    assert third is not None, "the third stream was not refused: it was held open"
    assert third.status_code == 429
    assert int(third.headers["Retry-After"]) >= 1
    assert third.json()["error"]["data"]["code"] == "rate_limited"
    assert seen["other"] == [200]
    assert seen["again"] == [200]


def test_a_stream_ends_cleanly_at_its_lifetime(
    asgi_server: str,
    buyer: User,
    settings: Any,
) -> None:
    """Issue 39 item 8: a stream lived as long as its client kept it (611 s seen). With
    MCP_STREAM_MAX_S it ends then, as a complete response (the client reconnects)."""
    settings.MCP_STREAM_MAX_S = 1
    token = issue_token(buyer, resource=f"{asgi_server}/mcp")
    ended: list[float] = []

    async def main() -> None:
        headers = {**HEADERS, "Authorization": f"Bearer {token}"}
        started = time.monotonic()
        async with httpx2.AsyncClient(timeout=30) as http:
            with anyio.move_on_after(10):
                async with http.stream("GET", f"{asgi_server}/mcp", headers=headers) as response:
                    assert response.status_code == 200
                    async for _ in response.aiter_bytes():  # raises if cut off mid-response
                        pass
                    ended.append(time.monotonic() - started)

    anyio.run(main)

    assert ended, "the stream was still open after 10 s"
    assert 0.8 < ended[0] < 5
    assert post_mcp(asgi_server, tool_call("whoami"), token=token).status_code == 200


@pytest.fixture(autouse=True)
def _fresh_settings(settings: Any) -> None:
    """Each test starts from the default lifetime unless it sets its own."""
    settings.MCP_STREAM_MAX_S = 300
