"""The per-token limit on MCP tool calls (MCP_TOOL_CALL_RATE, `"<n>/<s|min|hour|day>"`; empty:
none), counted in the shared cache per fixed window exactly as the REST throttles count
(core/api/throttling.py): every worker process sees one count, refused calls count too, and the
wait is the time to the window's end."""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.core.cache import cache

from core.api.throttling import parse_rate, throttle_cache_key

SCOPE = "mcp_tool_call"


def tool_calls_wait(*, token_id: int, calls: int) -> int | None:
    """Count `calls` tool calls for the token; None if they are within its limit, else the whole
    seconds to wait (at least 1) before the window starts again."""
    rate = settings.MCP_TOOL_CALL_RATE
    if not rate or calls <= 0:
        return None
    allowed, window_s = parse_rate(rate)
    now = time.time()
    window = int(now // window_s)
    key = throttle_cache_key(SCOPE, token_id, window)
    cache.add(key, 0, timeout=window_s + 1)
    try:
        count = cache.incr(key, calls)
    except ValueError:  # expired between add and incr
        cache.add(key, calls, timeout=window_s + 1)
        count = calls
    if count <= allowed:
        return None
    return max(1, math.ceil((window + 1) * window_s - now))
