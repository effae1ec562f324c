"""Files: uploads (dispute evidence), retrieve, list."""

from __future__ import annotations

from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import invalid
from stripe_sandbox.params import Params
from stripe_sandbox.resources.common import Result, _page, retriever
from stripe_sandbox.state import RequestContext, State

file_retrieve = retriever("files", "file")


FILE_TYPES = {
    "pdf": "pdf",
    "png": "png",
    "jpg": "jpg",
    "jpeg": "jpg",
    "gif": "gif",
    "csv": "csv",
    "txt": "txt",
}
DISPUTE_FILE_TYPES = {"pdf", "png", "jpg"}
MAX_FILE_BYTES = 5 * 1024 * 1024


def file_create(
    state: State, ctx: RequestContext, fields: dict[str, str], uploads: dict[str, tuple[str, bytes]]
) -> Result:
    # The fields were checked against FileCreateParams before (contract_checks.py): `purpose` is
    # one of Stripe's, `file` is there.
    purpose = fields["purpose"]
    if "file" not in uploads:  # a `file` sent as a plain field, not an upload
        raise invalid("Missing required param: file.", param="file", code="parameter_missing")
    filename, content = uploads["file"]
    extension = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    file_type = FILE_TYPES.get(extension)
    if file_type is None or (purpose == "dispute_evidence" and file_type not in DISPUTE_FILE_TYPES):
        raise invalid(
            f"Invalid file type for purpose {purpose}: {filename!r} (use PDF, PNG or JPEG).",
            param="file",
        )
    if len(content) > MAX_FILE_BYTES:
        raise invalid(
            f"The file may be at most {MAX_FILE_BYTES} bytes.", param="file", code="file_too_large"
        )
    file_obj = objects.file(
        purpose=purpose,
        filename=filename,
        size=len(content),
        file_type=file_type,
        created=state.clock.now_int(),
        base_url=ctx.base_url,
    )
    state.store(file_obj)
    state.world.file_contents[file_obj["id"]] = content
    return 200, state.render(file_obj)


def file_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(data)
    purpose = params.string("purpose")
    return _page(
        state,
        "file",
        params,
        "/v1/files",
        keep=None if purpose is None else lambda f: f["purpose"] == purpose,
    )
