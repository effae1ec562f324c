"""Where a /mcp request's Django code runs: on one thread borrowed for the whole request.

Django's own ASGI handler gives each request a fresh thread for its synchronous code (asgiref's
ThreadSensitiveContext) and throws it away afterwards, with whatever database connection it
opened. Here each request borrows one of a few long-lived threads instead: the authentication in
front of the MCP SDK and the tool the SDK then runs (in another task, which inherits the
context) share that thread, hence one database connection per request, and the thread is handed
back with its connection closed if Django would close it at the end of a request
(`close_old_connections`: CONN_MAX_AGE, health checks, or returned to psycopg's pool). No
connection outlives its thread, and there are never more threads (nor connections) per process
than the pool holds.

`GET /mcp` streams borrow no thread once admitted (OpenStreams, below): a thread each for their
whole life let a few open streams starve every POST (issue 39 item 8)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import ParamSpec, TypeVar

import anyio
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import close_old_connections

P = ParamSpec("P")
R = TypeVar("R")

# Requests whose Django code runs at once, per process; a further request waits for a thread.
# Each thread holds at most one database connection.
THREADS = 8


class RequestThreads:
    """A pool of single-thread executors; `borrow()` lends one to the current request."""

    def __init__(self, size: int = THREADS) -> None:
        self.size = size
        self._free: list[ThreadPoolExecutor] = []
        self._made = 0
        self._available: asyncio.Semaphore | None = None

    @asynccontextmanager
    async def borrow(self) -> AsyncIterator[None]:
        """Inside, `in_thread` calls (from this task and the tasks it starts) run on one thread
        of the pool, which is given back afterwards with its connection tidied."""
        if self._available is None:
            self._available = asyncio.Semaphore(self.size)
        async with self._available:
            if self._free:
                executor = self._free.pop()
            else:
                self._made += 1
                executor = ThreadPoolExecutor(1, thread_name_prefix=f"vouch-mcp-{self._made}")
            try:
                async with ThreadSensitiveContext(executor=executor):
                    try:
                        yield
                    finally:
                        # Even when the request is cancelled: the call runs after whatever the
                        # thread is still doing for it, so the thread is handed back idle.
                        with anyio.CancelScope(shield=True):
                            await in_thread(close_old_connections)()
            finally:
                self._free.append(executor)

    def shutdown(self) -> None:
        """Stop the idle threads (at the server's shutdown), closing their connections first."""
        from django.db import connections

        while self._free:
            executor = self._free.pop()
            executor.submit(connections.close_all).result()
            executor.shutdown(wait=True)


def in_thread(function: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`function` as a coroutine function running on the request's borrowed thread."""
    return sync_to_async(function, thread_sensitive=True)


class TooManyStreams(Exception):
    """The person holds as many streams as they may; `retry_after_s`: until the oldest ends."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(retry_after_s)
        self.retry_after_s = retry_after_s


class OpenStreams:
    """The `GET /mcp` streams open in this process, per person (issue 39 item 8). A stream runs on
    no request thread (it only waits for server messages, and a stateless server sends none), so
    what bounds it is this: at most `per_person` at once for one person, each for at most its
    lifetime. Counted per server process: with W worker processes a person holds at most W times
    the cap, still a bound (what the threads of one process need is what this protects)."""

    def __init__(self) -> None:
        self._opened: dict[object, list[float]] = {}

    def open(self, person: object, *, per_person: int, lifetime_s: float) -> float:
        """A ticket (the stream's start time) for a new stream of `person`; TooManyStreams when
        they hold `per_person` already (refused, not the oldest closed: a host that opens streams
        in a loop must not take the one another of the person's assistants is reading)."""
        now = time.monotonic()
        held = self._opened.get(person, [])
        if len(held) >= per_person:
            raise TooManyStreams(max(1, math.ceil(min(held) + lifetime_s - now)))
        self._opened.setdefault(person, []).append(now)
        return now

    def close(self, person: object, ticket: float) -> None:
        held = self._opened.get(person, [])
        if ticket in held:
            held.remove(ticket)
        if not held:
            self._opened.pop(person, None)
