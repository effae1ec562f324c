"""A lost dispute's appeal (Stripe API 2026-10-28.endive,
https://docs.stripe.com/changelog/endive/2026-10-28/evidence-submission-appeal-dispute-decisions):
a `lost` dispute enters `appeal_needs_response` (the control API stands in for the network), the
merchant answers with `evidence[appeal][card]` (`reason_for_filing`, `supporting_files`) alone,
the rest of the evidence frozen, and submitting moves it to `appeal_under_review`, where the
network decides."""

from __future__ import annotations

import copy
from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing
from stripe_sandbox.state import RequestContext, State

APPEAL_PARAM = "evidence[appeal]"
CARD_PARAM = f"{APPEAL_PARAM}[card]"
REASON_PARAM = f"{CARD_PARAM}[reason_for_filing]"
FILES_PARAM = f"{CARD_PARAM}[supporting_files]"
APPEAL_DUE_S = 7 * 24 * 60 * 60


def appeal_evidence_parse(
    evidence: dict[str, Any], *, dispute: dict[str, Any], files: dict[str, Any]
) -> dict[str, Any]:
    """In `appeal_needs_response`, the dispute's `evidence.appeal` as it would be after this
    update: any other evidence field is refused ("You can't update other dispute evidence during
    the appeal stage"); `card[reason_for_filing]` and `card[supporting_files]` (existing file
    ids) each replace what was staged when given, the empty string unsetting either, `card` or
    the whole appeal (`Literal['']` in the SDK's DisputeUpdateParamsEvidenceAppeal)."""
    for name in evidence:
        if name != "appeal":
            raise invalid(
                f"This dispute is in its appeal stage: only evidence[appeal] may change, the "
                f"rest of the evidence is frozen (evidence[{name}] was given).",
                param=f"evidence[{name}]",
            )
    appeal = copy.deepcopy(dispute["evidence"]["appeal"]) or objects.appeal_response()
    given = evidence.get("appeal")
    if given == "":
        return objects.appeal_response()
    if not isinstance(given, dict):
        raise invalid(f"Invalid {APPEAL_PARAM}: must be a hash", param=APPEAL_PARAM)
    if "card" not in given:
        return appeal
    card = given["card"]
    if card == "":
        return objects.appeal_response()
    if not isinstance(card, dict):
        raise invalid(f"Invalid {CARD_PARAM}: must be a hash", param=CARD_PARAM)
    current = appeal["card"] or objects.appeal_response()["card"]
    if "reason_for_filing" in card:
        reason = card["reason_for_filing"]
        if not isinstance(reason, str):
            raise invalid(
                f"Invalid string: {REASON_PARAM}",
                param=REASON_PARAM,
                code="parameter_invalid_string",
            )
        current["reason_for_filing"] = reason or None
    if "supporting_files" in card:
        current["supporting_files"] = _supporting_files(card["supporting_files"], files)
    return {"card": current}


def _supporting_files(value: Any, files: dict[str, Any]) -> list[str]:
    if value == "":
        return []
    if not isinstance(value, list):
        raise invalid(f"Invalid {FILES_PARAM}: must be an array of file ids", param=FILES_PARAM)
    for index, file_id in enumerate(value):
        at = f"{FILES_PARAM}[{index}]"
        if not isinstance(file_id, str) or not file_id:
            raise invalid(f"Invalid string: {at}", param=at, code="parameter_invalid_string")
        if file_id not in files:
            raise resource_missing("file", file_id, param=at)
    return list(value)


def appeal_outside_stage(dispute: dict[str, Any]) -> StripeError:
    """ "You can submit appeal evidence only for eligible disputes with a status of
    appeal_needs_response" (changelog 2026-10-28.endive)."""
    return invalid(
        f"evidence[appeal] may be given only while the dispute is in appeal_needs_response "
        f"(it is {dispute['status']}).",
        param=APPEAL_PARAM,
    )


def appeal_open(state: State, ctx: RequestContext | None, dispute: dict[str, Any]) -> None:
    """The network opening an appeal (control API): a `lost` dispute, never appealed before,
    enters `appeal_needs_response` with an empty `evidence.appeal.card` and a new response
    deadline (`evidence_details.due_by`, in 7 days); `charge.dispute.updated`."""
    if dispute["evidence"]["appeal"] is not None:
        raise invalid(f"Dispute {dispute['id']} has already been appealed.", param="status")
    if dispute["status"] != "lost":
        raise invalid(
            f"Only a lost dispute can be appealed; dispute {dispute['id']} is {dispute['status']}.",
            param="status",
        )
    details = dispute["evidence_details"]
    previous = {
        "status": dispute["status"],
        "evidence": {"appeal": None},
        "evidence_details": {"due_by": details["due_by"]},
    }
    dispute["status"] = "appeal_needs_response"
    dispute["evidence"]["appeal"] = objects.appeal_response()
    details["due_by"] = state.clock.now_int() + APPEAL_DUE_S
    state.emit("charge.dispute.updated", dispute, ctx, previous)


def appeal_decision_check(dispute: dict[str, Any], status: str) -> None:
    """What the network may decide in the appeal stage (control API): `won` or `lost`."""
    if dispute["status"] in objects.DISPUTE_APPEAL_STAGES and status not in ("won", "lost"):
        raise invalid(
            f"Dispute {dispute['id']} is in {dispute['status']}: the appeal is decided "
            f"won or lost.",
            param="status",
        )
