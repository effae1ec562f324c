"""Objects every resource shares: files and events, and the API version the sandbox speaks."""

from __future__ import annotations

from typing import Any

from stripe_sandbox.ids import new_id

API_VERSION = "2026-10-28.endive"


def file(
    *, purpose: str, filename: str, size: int, file_type: str, created: int, base_url: str
) -> dict[str, Any]:
    file_id = new_id("file")
    return {
        "id": file_id,
        "object": "file",
        "created": created,
        "expires_at": None,
        "filename": filename,
        "links": {
            "object": "list",
            "data": [],
            "has_more": False,
            "url": f"/v1/file_links?file={file_id}",
        },
        "purpose": purpose,
        "size": size,
        "title": None,
        "type": file_type,
        "url": f"{base_url}/v1/files/{file_id}/contents",
    }


def event(
    *,
    type: str,
    data_object: dict[str, Any],
    previous_attributes: dict[str, Any] | None,
    created: int,
    request_id: str | None,
    idempotency_key: str | None,
    pending_webhooks: int,
) -> dict[str, Any]:
    data: dict[str, Any] = {"object": data_object}
    if previous_attributes is not None:
        data["previous_attributes"] = previous_attributes
    return {
        "id": new_id("evt"),
        "object": "event",
        "api_version": API_VERSION,
        "created": created,
        "data": data,
        "livemode": False,
        "pending_webhooks": pending_webhooks,
        "request": {"id": request_id, "idempotency_key": idempotency_key},
        "type": type,
    }
