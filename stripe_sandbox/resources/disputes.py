"""Disputes: opened by a disputed charge, evidence updated and submitted (manual or Smart
Disputes), closed."""

from __future__ import annotations

from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing, unknown_parameter
from stripe_sandbox.params import Params, merge_metadata
from stripe_sandbox.resources.common import Result, _get, _page, retriever
from stripe_sandbox.state import RequestContext, State

dispute_retrieve = retriever("disputes", "dispute")


DISPUTE_DUE_S = 7 * 24 * 60 * 60


def dispute_open(
    state: State, ctx: RequestContext | None, charge: dict[str, Any], *, reason: str, amount: int
) -> dict[str, Any]:
    now = state.clock.now_int()
    dispute = objects.dispute(
        charge=charge, amount=amount, reason=reason, created=now, due_by=now + DISPUTE_DUE_S
    )
    state.store(dispute)
    state.world.disputes_by_charge.setdefault(charge["id"], []).append(dispute["id"])
    charge["disputed"] = True
    state.emit("charge.dispute.created", dispute, ctx)
    return dispute


def dispute_set_status(
    state: State, ctx: RequestContext | None, dispute: dict[str, Any], status: str
) -> None:
    if status not in objects.DISPUTE_STATUSES:
        raise invalid(f"Invalid status: {status}", param="status")
    if dispute["status"] in objects.DISPUTE_CLOSED:
        raise invalid(
            f"Dispute {dispute['id']} is already closed ({dispute['status']}).", param="status"
        )
    previous = {"status": dispute["status"]}
    dispute["status"] = status
    if status in objects.DISPUTE_CLOSED:
        state.emit("charge.dispute.closed", dispute, ctx, previous)
    else:
        state.emit("charge.dispute.updated", dispute, ctx, previous)


def dispute_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(
        data, {"charge", "payment_intent", "created", "limit", "starting_after", "ending_before"}
    )
    charge_id = params.string("charge")
    pi_id = params.string("payment_intent")
    keys = None
    if charge_id is not None:
        keys = state.world.timelines["dispute"].keys_of(
            state.world.disputes_by_charge.get(charge_id, [])
        )

    def keep(dispute: dict[str, Any]) -> bool:
        return (charge_id is None or dispute["charge"] == charge_id) and (
            pi_id is None or dispute["payment_intent"] == pi_id
        )

    return _page(state, "dispute", params, "/v1/disputes", keys, keep)


MAX_EVIDENCE_CHARS = 150_000


def dispute_update(
    state: State, ctx: RequestContext, data: dict[str, Any], dispute_id: str
) -> Result:
    """Stage evidence and metadata; `submit` (Stripe's default: true) sends the evidence to the
    bank, which moves `needs_response` to `under_review`. Evidence cannot change after
    submission."""
    params = Params(data, {"evidence", "metadata", "submit", "intended_submission_method"})
    dispute = _get(state, state.world.disputes, "dispute", dispute_id)
    evidence = params.raw("evidence")
    submit = params.boolean("submit", default=True)
    metadata = params.metadata()
    method = params.string("intended_submission_method", choices=SUBMISSION_METHODS)
    if evidence is not None and not isinstance(evidence, dict):
        raise invalid("Invalid evidence: must be a hash", param="evidence")
    staged: dict[str, Any] = {}
    for name, value in (evidence or {}).items():
        param = f"evidence[{name}]"
        if name == "enhanced_evidence":
            if not isinstance(value, dict):
                raise invalid("Invalid enhanced_evidence: must be a hash", param=param)
            staged[name] = value
        elif name in objects.EVIDENCE_TEXT_FIELDS:
            if not isinstance(value, str):
                raise invalid(f"Invalid string: {param}", param=param)
            limit = objects.EVIDENCE_TEXT_MAX.get(name, objects.EVIDENCE_TEXT_MAX_DEFAULT)
            if len(value) > limit:
                raise invalid(f"Invalid {param}: must be at most {limit} characters", param=param)
            staged[name] = value or None
        elif name in objects.EVIDENCE_FILE_FIELDS:
            if not isinstance(value, str):
                raise invalid(f"Invalid string: {param}", param=param)
            if value and value not in state.world.files:
                raise resource_missing("file", value, param=param)
            staged[name] = value or None
        else:
            raise unknown_parameter(param)
    text_total = sum(
        len(v)
        for k, v in {**dispute["evidence"], **staged}.items()
        if k in objects.EVIDENCE_TEXT_FIELDS and v
    )
    if text_total > MAX_EVIDENCE_CHARS:
        raise invalid(
            f"Evidence text may total at most {MAX_EVIDENCE_CHARS} characters.", param="evidence"
        )
    if (staged or submit) and dispute["status"] not in objects.DISPUTE_RESPONDABLE:
        if dispute["status"] in objects.DISPUTE_CLOSED:
            message = f"This dispute is already closed ({dispute['status']})."
        else:
            message = (
                "This dispute's evidence has already been submitted; "
                "it cannot be updated or submitted again."
            )
        raise StripeError(400, message, param="submit" if submit and not staged else "evidence")
    previous: dict[str, Any] = {}
    if method is not None and method != dispute["intended_submission_method"]:
        previous["intended_submission_method"] = dispute["intended_submission_method"]
        dispute["intended_submission_method"] = method
    if staged:
        previous["evidence"] = {k: dispute["evidence"].get(k) for k in staged}
        dispute["evidence"].update(staged)
        details = dispute["evidence_details"]
        details["has_evidence"] = any(
            v for k, v in dispute["evidence"].items() if k != "enhanced_evidence"
        )
    if metadata is not None:
        merged = merge_metadata(dispute["metadata"], metadata)
        if merged != dispute["metadata"]:
            previous["metadata"] = dict(dispute["metadata"])
            dispute["metadata"] = merged
    if submit:
        _submit(dispute, previous, method="manual")
    if previous:
        state.emit("charge.dispute.updated", dispute, ctx, previous)
    return 200, state.render(dispute)


SUBMISSION_METHODS = {"manual", "prefer_manual", "prefer_smart_disputes", "smart_disputes"}


def _submit(dispute: dict[str, Any], previous: dict[str, Any], *, method: str) -> None:
    details = dispute["evidence_details"]
    previous["status"] = dispute["status"]
    previous["evidence_details"] = {
        "submission_count": details["submission_count"],
        "submission_method": details["submission_method"],
    }
    dispute["status"] = (
        "under_review" if dispute["status"] == "needs_response" else "warning_under_review"
    )
    details["submission_count"] += 1
    details["submission_method"] = method


def dispute_smart_submit(state: State, ctx: RequestContext | None, dispute: dict[str, Any]) -> None:
    """Stripe's Smart Disputes submitting on the account's behalf: refused when the dispute says
    `intended_submission_method=manual`, or when it is no longer open for a response."""
    if dispute["intended_submission_method"] == "manual":
        raise invalid(
            f"Dispute {dispute['id']} is to be submitted manually; Smart Disputes may not submit.",
            param="intended_submission_method",
        )
    if dispute["status"] not in objects.DISPUTE_RESPONDABLE:
        raise invalid(f"Dispute {dispute['id']} cannot be submitted ({dispute['status']}).")
    previous: dict[str, Any] = {}
    dispute["evidence"]["uncategorized_text"] = "Submitted by Smart Disputes."
    dispute["evidence_details"]["has_evidence"] = True
    _submit(dispute, previous, method="smart_disputes")
    state.emit("charge.dispute.updated", dispute, ctx, previous)


def dispute_close(
    state: State, ctx: RequestContext, data: dict[str, Any], dispute_id: str
) -> Result:
    Params(data, set())
    dispute = _get(state, state.world.disputes, "dispute", dispute_id)
    if dispute["status"] not in objects.DISPUTE_RESPONDABLE | {
        "under_review",
        "warning_under_review",
    }:
        raise StripeError(400, f"This dispute is already closed ({dispute['status']}).")
    closed = "warning_closed" if dispute["status"].startswith("warning") else "lost"
    dispute_set_status(state, ctx, dispute, closed)
    return 200, state.render(dispute)
