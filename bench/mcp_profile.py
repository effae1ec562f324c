"""`bench/mcp_vs_rest.py --profile`: where a read's CPU goes, in this process.

The server's ASGI application (config.asgi: /mcp and Django, as gunicorn's uvicorn workers serve
it) is called directly, one request at a time, without a network: first `calls` times bare, timed
with this process's CPU clock (CPU ms per answer), then as many times again under cProfile on
every thread that runs (each thread's own CPU clock), whose self time is grouped by where the code
lives: the split. Profiling slows code down unevenly, so the split is a share of the profiled
time, and the CPU per answer is the bare figure."""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

# Groups of the split, by the code's file (the first that matches wins).
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("logging: ops/logs.py, structlog, logging", ("/ops/logs.py", "structlog", "/logging/")),
    ("metrics: prometheus_client", ("/prometheus_client/",)),
    ("database: psycopg, django.db", ("/psycopg", "/django/db/")),
    ("MCP SDK, pydantic, starlette", ("/mcp/", "pydantic", "/starlette/", "/jsonschema")),
    ("DRF", ("/rest_framework/",)),
    ("oauth2_provider, allauth", ("/oauth2_provider/", "/allauth/", "/oauthlib/")),
    ("sync/async bridge: asgiref, asyncio, threads", (
        "/asgiref/", "/asyncio/", "/concurrent/", "threading.py", "/anyio/", "/queue.py",
    )),
    ("Django: handler, middleware, urls, http", ("/django/",)),
    ("Vouch's own code", ("/agents/", "/envelopes/", "/core/", "/accounts/", "/config/")),
    ("json, re, other stdlib / builtins", ("",)),
)  # fmt: skip


def _group(filename: str) -> str:
    for name, needles in GROUPS:
        if any(needle in filename for needle in needles):
            return name
    return GROUPS[-1][0]


def scope(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    """An ASGI HTTP scope as uvicorn builds it."""
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
        "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
        "query_string": b"", "root_path": "", "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
    }  # fmt: skip


async def asgi_call(app: Any, request: dict[str, Any], body: bytes) -> tuple[int, bytes]:
    """One request to an ASGI application: its status and body."""
    sent: list[dict[str, Any]] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await asyncio.sleep(3600)  # the client stays until the answer is sent
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(request, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def split_lines(name: str, profiles: list[cProfile.Profile], top: int) -> list[tuple[str, str]]:
    """The profiled self time by group, in shares, and the `top` costliest functions of ours."""
    stats = pstats.Stats(profiles[0])
    for profile in profiles[1:]:
        stats.add(profile)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    by_group: dict[str, float] = {}
    ours: dict[str, float] = {}
    own: dict[str, float] = {}
    total = 0.0
    for (filename, line, function), (_, _, self_s, cumulative_s, _) in raw.items():
        total += self_s
        group = _group(filename)
        by_group[group] = by_group.get(group, 0.0) + self_s
        short = filename.rsplit("site-packages/", 1)[-1].split("/work/main/")[-1]
        own[f"{short}:{line} {function}"] = own.get(f"{short}:{line} {function}", 0.0) + self_s
        if "/work/" in filename and "site-packages" not in filename:
            where = f"{filename.split('/work/main/')[-1]}:{line} {function}"
            ours[where] = max(ours.get(where, 0.0), cumulative_s)
    total = total or 1.0
    lines = [
        (f"  {group}:", f"{share / total * 100:5.1f} %")
        for group, share in sorted(by_group.items(), key=lambda item: -item[1])
        if share / total >= 0.005
    ]
    costly = sorted(ours.items(), key=lambda item: -item[1])[:top]
    lines += [(f"  cumulative {value / total * 100:5.1f} %:", where) for where, value in costly]
    heavy = sorted(own.items(), key=lambda item: -item[1])[:top]
    lines += [(f"  self {value / total * 100:5.1f} %:", where) for where, value in heavy]
    return [(f"{name}, split of the profiled CPU (self time by code):", ""), *lines]


def profile_surfaces(
    surfaces: dict[str, tuple[dict[str, Any], bytes]],
    running: Callable[[], Any],
    app: Callable[..., Awaitable[None]],
    calls: int,
    top: int = 8,
) -> list[tuple[str, str]]:
    """Each surface (name: scope and body) `calls` times bare, then profiled: the lines to print.
    `running()` is the MCP server's lifespan (config.asgi.mcp_application.running)."""
    lines: list[tuple[str, str]] = []

    async def run() -> None:
        for name, (request, body) in surfaces.items():
            async with running():
                for _ in range(max(20, calls // 10)):  # warm-up: imports, caches, a connection
                    status, answer = await asgi_call(app, request, body)
                    if status != 200:
                        raise RuntimeError(f"{name} answered {status}: {answer[:300]!r}")
                started = time.process_time()
                for _ in range(calls):
                    await asgi_call(app, request, body)
                cpu_ms = (time.process_time() - started) / calls * 1000
            lines.append((f"{name}, in process, bare:", f"{cpu_ms:.2f} ms CPU per answer"))
            profiles: list[cProfile.Profile] = []

            def per_thread(*args: Any, profiles: list[cProfile.Profile] = profiles) -> None:
                """A thread started from now on profiles itself, on its own CPU clock."""
                profile = cProfile.Profile(time.thread_time)
                profiles.append(profile)
                profile.enable()

            threading.setprofile(per_thread)
            main = cProfile.Profile(time.thread_time)
            profiles.append(main)
            try:
                async with running():  # its threads are new: profiled from their start
                    main.enable()
                    for _ in range(calls):
                        await asgi_call(app, request, body)
                    main.disable()
            finally:
                threading.setprofile(None)  # type: ignore[arg-type]
            lines.extend(split_lines(name, profiles, top))

    asyncio.run(run())
    return lines
