"""Per-request timing: how long the request took, and how much of it was spent waiting for the
provider. Exposed as `Server-Timing: app;dur=…, provider;dur=…` (milliseconds), so benchmarks and
people can see Vouch's own cost apart from the provider's."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

from django.http import HttpRequest, HttpResponse

_provider_seconds: ContextVar[float | None] = ContextVar("provider_seconds", default=None)


@contextmanager
def provider_wait() -> Iterator[None]:
    """Count the time inside as time spent waiting for the provider (if a request is timed)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        spent = _provider_seconds.get()
        if spent is not None:
            _provider_seconds.set(spent + time.perf_counter() - started)


def provider_seconds() -> float | None:
    """The time spent waiting for the provider so far in this request or job run (None: not
    timed here)."""
    return _provider_seconds.get()


def provider_timing_start() -> Token[float | None]:
    """Start counting provider time in this context (a job run); reset with the token."""
    return _provider_seconds.set(0.0)


def provider_timing_reset(token: Token[float | None]) -> None:
    _provider_seconds.reset(token)


class ServerTimingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _provider_seconds.set(0.0)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            # Only on work done: an error's (or an OPTIONS answer's) timing could tell a missing id
            # from another buyer's (SPEC §5: the two answers differ in nothing but Date).
            if response.status_code < 400 and request.method != "OPTIONS":
                total = time.perf_counter() - started
                provider = _provider_seconds.get() or 0.0
                response["Server-Timing"] = (
                    f"app;dur={(total - provider) * 1000:.2f}, provider;dur={provider * 1000:.2f}"
                )
            return response
        finally:
            _provider_seconds.reset(token)
