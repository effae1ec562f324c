"""The REST surface of the idempotency mechanism: one call wraps a mutating view's action."""

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.responses import error_body
from core.exceptions import VouchError
from core.idempotency import (
    idempotency_claim,
    idempotency_drop,
    idempotency_store,
    validate_key,
)
from core.models import IdempotencyRecord

SURFACE = "rest"


def idempotent(
    request: Request, *, operation: str, action: Callable[[IdempotencyRecord | None], Response]
) -> Response | HttpResponse:
    """Run `action` under the request's Idempotency-Key (if any), for `operation` (the action and
    the ids it acts on, e.g. `envelope.refund:env_…`): replay, refuse or run and store."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return action(None)
    validate_key(key)
    body = request.data if isinstance(request.data, dict) else {"_": request.data}
    claim = idempotency_claim(
        user=request.user, key=key, operation=operation, surface=SURFACE, body=dict(body)
    )
    if claim.replay:
        record = claim.record
        replay = HttpResponse(
            record.response_body.encode(),
            status=record.response_status,
            content_type="application/json",
        )
        replay["Idempotent-Replayed"] = "true"
        return replay
    try:
        response = action(claim.record)
    except VouchError as exc:
        if exc.stores_idempotent_response:
            rendered = _render(error_body(exc.code, exc.message, exc.details))
            idempotency_store(claim.record, status=exc.status_code, body=rendered)
        else:
            idempotency_drop(claim.record)
        raise
    idempotency_store(claim.record, status=response.status_code, body=_render(response.data))
    return response


def _render(data: Any) -> str:
    """What DRF's JSON renderer will send: the same bytes a replay must send."""
    return JSONRenderer().render(data).decode()


def operation_name(action: str, *ids: Any) -> str:
    return ":".join([action, *(str(i) for i in ids)])
