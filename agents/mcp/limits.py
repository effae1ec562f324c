"""The per-token limit on MCP tool calls (MCP_TOOL_CALL_RATE, `"<n>/<s|min|hour|day>"`; empty:
none), counted in the shared cache per fixed window exactly as the REST throttles count
(core/api/throttling.py): every worker process sees one count, refused calls count too, and the
wait is the time to the window's end."""

from __future__ import annotations

import math

from django.conf import settings

from core.api.throttling import window_count

SCOPE = "mcp_tool_call"


def tool_calls_wait(*, token_id: int, calls: int) -> int | None:
    """Count `calls` tool calls for the token; None if they are within its limit, else the whole
    seconds to wait (at least 1) before the window starts again."""
    rate = settings.MCP_TOOL_CALL_RATE
    if not rate or calls <= 0:
        return None
    wait = window_count(scope=SCOPE, ident=token_id, rate=rate, count=calls)
    return None if wait is None else max(1, math.ceil(wait))
