"""The REST surface of the idempotency mechanism (core.idempotency.idempotent_run): one call wraps
a mutating view's action."""

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.parsing import request_body
from core.idempotency import (
    SURFACE_REST,
    StoredAnswer,
    idempotent_run,
    operation_name,
    render_json,
)
from core.models import IdempotencyRecord

SURFACE = SURFACE_REST

__all__ = ["SURFACE", "idempotent", "operation_name"]


def idempotent(
    request: Request,
    *,
    operation: str,
    action: Callable[[IdempotencyRecord | None], Response],
    provider_calls: int = 1,
) -> Response | HttpResponse:
    """Run `action` under the request's Idempotency-Key (if any), for `operation` (the action and
    the ids it acts on, e.g. `envelope.refund:env_…`): replay, refuse or run and store. The lease
    covers `provider_calls` calls of the provider adapter (0 for an action that never calls it);
    an action that makes more renews it before each. An error the server catches ends the lease at
    once: the retry resumes what the record names without waiting."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return action(None)
    result = idempotent_run(
        user=request.user,
        key=key,
        operation=operation,
        surface=SURFACE,
        body=_digestible(request_body(request)),
        action=action,
        answer=lambda response: (response.status_code, render_json(response.data)),
        provider_calls=provider_calls,
    )
    if isinstance(result, StoredAnswer):
        stored = HttpResponse(
            result.body.encode(), status=result.status, content_type="application/json"
        )
        if result.replayed:
            stored["Idempotent-Replayed"] = "true"
        return stored
    return result


def _digestible(body: Any) -> dict[str, Any]:
    """What the key's body digest is computed over: the JSON object, or any other JSON value
    wrapped (so `null` and `{}` are different bodies)."""
    return dict(body) if isinstance(body, dict) else {"_": body}
