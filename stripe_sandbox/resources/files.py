"""Files: uploads (dispute evidence), retrieve, list."""

from __future__ import annotations

from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import invalid, unknown_parameter
from stripe_sandbox.params import Params
from stripe_sandbox.resources.common import Result, _page, retriever
from stripe_sandbox.state import RequestContext, State

file_retrieve = retriever("files", "file")


FILE_PURPOSES = {
    "account_requirement", "additional_verification", "business_icon", "business_logo",
    "customer_signature", "dispute_evidence", "identity_document", "issuing_regulatory_reporting",
    "pci_document", "platform_terms_of_service", "tax_document_user_upload",
    "terminal_android_apk", "terminal_reader_splashscreen",
}  # fmt: skip
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
    for name in fields:
        if name not in {"purpose", "file_link_data", "expand"} and not name.startswith(
            "file_link_data["
        ):
            raise unknown_parameter(name)
    purpose = fields.get("purpose")
    if not purpose:
        raise invalid("Missing required param: purpose.", param="purpose", code="parameter_missing")
    if purpose not in FILE_PURPOSES:
        raise invalid(
            f"Invalid purpose: {purpose}", param="purpose", code="parameter_invalid_string"
        )
    if "file" not in uploads:
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
    params = Params(data, {"purpose", "created", "limit", "starting_after", "ending_before"})
    purpose = params.string("purpose")
    return _page(
        state,
        "file",
        params,
        "/v1/files",
        keep=None if purpose is None else lambda f: f["purpose"] == purpose,
    )
