"""The REST surface of the idempotency mechanism: one call wraps a mutating view's action."""

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.parsing import request_body
from core.api.responses import error_body
from core.crash import crash_point
from core.exceptions import VouchError
from core.idempotency import (
    idempotency_claim,
    idempotency_drop,
    idempotency_lease_end,
    idempotency_store,
    operation_bounded,
    render_json,
    validate_key,
)
from core.models import IdempotencyRecord

SURFACE = "rest"


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
    validate_key(key)
    claim = idempotency_claim(
        user=request.user,
        key=key,
        operation=operation,
        surface=SURFACE,
        body=_digestible(request_body(request)),
        provider_calls=provider_calls,
    )
    if claim.replay:
        replay = _stored_response(claim.record)
        replay["Idempotent-Replayed"] = "true"
        return replay
    try:
        response = action(claim.record)
    except VouchError as exc:
        settled = IdempotencyRecord.objects.filter(pk=claim.record.pk, running=False).first()
        if settled is not None and settled.response_status is not None:
            # Another observer (a provider event, the resumption job) recorded how this very
            # operation ended, and kept it as this request's answer: that answer is the truth.
            return _stored_response(settled)
        if exc.stores_idempotent_response:
            rendered = render_json(error_body(exc.code, exc.message, exc.details))
            idempotency_store(claim.record, status=exc.status_code, body=rendered)
        elif claim.record.resource:
            # Something was created before the refusal: the record must keep naming it.
            idempotency_lease_end(claim.record)
        else:
            idempotency_drop(claim.record)
        raise
    except BaseException:
        idempotency_lease_end(claim.record)
        raise
    crash_point("idempotent_before_store")
    idempotency_store(claim.record, status=response.status_code, body=render_json(response.data))
    return response


def _stored_response(record: IdempotencyRecord) -> HttpResponse:
    return HttpResponse(
        record.response_body.encode(),
        status=record.response_status,
        content_type="application/json",
    )


def _digestible(body: Any) -> dict[str, Any]:
    """What the key's body digest is computed over: the JSON object, or any other JSON value
    wrapped (so `null` and `{}` are different bodies)."""
    return dict(body) if isinstance(body, dict) else {"_": body}


def operation_name(action: str, *ids: Any) -> str:
    """`action:id:…`, as stored (core.idempotency.operation_bounded: a name too long for its
    column is digested, one that fits is unchanged)."""
    return operation_bounded(":".join([action, *(str(i) for i in ids)]))
