"""bench/mcp_vs_rest.py --profile prints where a read's CPU goes (issue 39 item 11)."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from bench.mcp_profile import GROUPS, profile_surfaces, scope


@asynccontextmanager
async def nothing_running() -> AsyncIterator[None]:
    yield


async def json_app(request: dict[str, Any], receive: Any, send: Any) -> None:
    """A server whose answer costs CPU in json and on another thread, as a sync view's does."""
    await receive()
    done = threading.Event()
    payload: list[bytes] = []

    def work() -> None:
        payload.append(json.dumps([{"n": n, "s": str(n) * 5} for n in range(300)]).encode())
        done.set()

    threading.Thread(target=work).start()
    done.wait()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": payload[0]})


def test_profile_prints_cpu_per_answer_and_split_by_group() -> None:
    """Issue 39 item 11: the bench printed no split of a read's CPU; --profile prints the bare CPU
    per answer and the profiled self time by group, in shares that add up, work done on other
    threads (Django's sync views, the MCP tools) included."""
    surfaces = {"JSON": (scope("GET", "/x", {"Host": "127.0.0.1"}), b"")}
    lines = profile_surfaces(surfaces, nothing_running, json_app, calls=30)
    labels = [label for label, _ in lines]
    assert labels[0] == "JSON, in process, bare:"
    assert lines[0][1].endswith(" ms CPU per answer")
    assert float(lines[0][1].split()[0]) > 0
    groups = {name for name, _ in GROUPS}
    shares = {
        label.strip().rstrip(":"): float(value.rstrip(" %"))
        for label, value in lines
        if label.strip().rstrip(":") in groups
    }
    assert 95 <= sum(shares.values()) <= 100.1
    # json.dumps runs on the worker thread only: its time is seen, so threads are profiled.
    assert any("json" in where or "dumps" in where for _, where in lines if where)
