"""A lost dispute's appeal (Stripe API 2026-10-28.endive): an eligible `lost` dispute enters
`appeal_needs_response` (the control API stands in for the network), the merchant answers with
`evidence[appeal]` alone (`reason_for_filing`, `supporting_files`), the rest of the evidence
frozen, and submitting moves it to `appeal_under_review`, where the network decides."""

from __future__ import annotations

from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing, unknown_parameter
from stripe_sandbox.state import RequestContext, State

APPEAL_PARAM = "evidence[appeal]"
REASON_PARAM = f"{APPEAL_PARAM}[reason_for_filing]"
FILES_PARAM = f"{APPEAL_PARAM}[supporting_files]"
REASON_MAX = 20_000
MAX_SUPPORTING_FILES = 5
APPEAL_DUE_S = 7 * 24 * 60 * 60


def appeal_evidence_parse(
    evidence: dict[str, Any], *, dispute: dict[str, Any], files: dict[str, Any]
) -> dict[str, Any]:
    """In `appeal_needs_response`, the dispute's `evidence.appeal` as it would be after this
    update: any other evidence field is refused (frozen); `reason_for_filing` (the empty string
    unsets it) and `supporting_files` (existing file ids, at most 5; the empty string empties
    the list) each replace what was staged when given."""
    for name in evidence:
        if name != "appeal":
            raise invalid(
                f"This dispute is in its appeal stage: only evidence[appeal] may change, the "
                f"rest of the evidence is frozen (evidence[{name}] was given).",
                param=f"evidence[{name}]",
            )
    appeal = dict(dispute["evidence"]["appeal"] or {"reason_for_filing": None})
    appeal["supporting_files"] = list(appeal.get("supporting_files") or [])
    given = evidence.get("appeal")
    if given is None or given == "":
        return appeal
    if not isinstance(given, dict):
        raise invalid(f"Invalid {APPEAL_PARAM}: must be a hash", param=APPEAL_PARAM)
    for name in given:
        if name not in ("reason_for_filing", "supporting_files"):
            raise unknown_parameter(f"{APPEAL_PARAM}[{name}]")
    if "reason_for_filing" in given:
        reason = given["reason_for_filing"]
        if not isinstance(reason, str):
            raise invalid(
                f"Invalid string: {REASON_PARAM}",
                param=REASON_PARAM,
                code="parameter_invalid_string",
            )
        if len(reason) > REASON_MAX:
            raise invalid(
                f"Invalid {REASON_PARAM}: must be at most {REASON_MAX} characters",
                param=REASON_PARAM,
            )
        appeal["reason_for_filing"] = reason or None
    if "supporting_files" in given:
        appeal["supporting_files"] = _supporting_files(given["supporting_files"], files)
    return appeal


def _supporting_files(value: Any, files: dict[str, Any]) -> list[str]:
    if value == "":
        return []
    if not isinstance(value, list):
        raise invalid(f"Invalid {FILES_PARAM}: must be an array of file ids", param=FILES_PARAM)
    if len(value) > MAX_SUPPORTING_FILES:
        raise invalid(
            f"Invalid {FILES_PARAM}: at most {MAX_SUPPORTING_FILES} supporting files",
            param=FILES_PARAM,
        )
    for index, file_id in enumerate(value):
        at = f"{FILES_PARAM}[{index}]"
        if not isinstance(file_id, str) or not file_id:
            raise invalid(f"Invalid string: {at}", param=at, code="parameter_invalid_string")
        if file_id not in files:
            raise resource_missing("file", file_id, param=at)
    return list(value)


def appeal_outside_stage(dispute: dict[str, Any]) -> StripeError:
    return invalid(
        f"evidence[appeal] may be given only while the dispute is in appeal_needs_response "
        f"(it is {dispute['status']}).",
        param=APPEAL_PARAM,
    )


def appeal_missing_reason() -> StripeError:
    return invalid(
        "An appeal cannot be submitted without evidence[appeal][reason_for_filing].",
        param=REASON_PARAM,
        code="parameter_missing",
    )


def appeal_open(state: State, ctx: RequestContext | None, dispute: dict[str, Any]) -> None:
    """The network opening an appeal: an appeal-eligible `lost` dispute, never appealed before,
    enters `appeal_needs_response` with an empty `evidence.appeal` and a new response deadline
    (`evidence_details.due_by`, in 7 days); `charge.dispute.updated`."""
    if dispute["evidence"]["appeal"] is not None:
        raise invalid(f"Dispute {dispute['id']} has already been appealed.", param="status")
    if dispute["status"] != "lost":
        raise invalid(
            f"Only a lost dispute can be appealed; dispute {dispute['id']} is {dispute['status']}.",
            param="status",
        )
    details = dispute["evidence_details"]
    if not details["appeal_eligible"]:
        raise invalid(
            f"Dispute {dispute['id']} is not eligible for an appeal "
            f"(evidence_details.appeal_eligible is false).",
            param="appeal_eligible",
        )
    previous = {
        "status": dispute["status"],
        "evidence": {"appeal": None},
        "evidence_details": {"due_by": details["due_by"]},
    }
    dispute["status"] = "appeal_needs_response"
    dispute["evidence"]["appeal"] = {"reason_for_filing": None, "supporting_files": []}
    details["due_by"] = state.clock.now_int() + APPEAL_DUE_S
    state.emit("charge.dispute.updated", dispute, ctx, previous)


def appeal_decision_check(dispute: dict[str, Any], status: str, appeal_eligible: bool) -> None:
    """What the network may decide in the appeal stage: `won`, or `lost` (final: never
    appeal-eligible again)."""
    if dispute["status"] in objects.DISPUTE_APPEAL_STAGES:
        if status not in ("won", "lost"):
            raise invalid(
                f"Dispute {dispute['id']} is in {dispute['status']}: the appeal is decided "
                f"won or lost.",
                param="status",
            )
        if appeal_eligible:
            raise invalid(
                "A lost appeal is final: the dispute cannot be appeal-eligible again.",
                param="appeal_eligible",
            )
