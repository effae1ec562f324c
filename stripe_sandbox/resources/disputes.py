"""Disputes: opened by a disputed charge (an inquiry or a chargeback, which withdraws the funds:
dispute_funds.py), evidence updated and submitted (manual or Smart Disputes), closed."""

from __future__ import annotations

import enum
from typing import Any

from stripe_sandbox import objects
from stripe_sandbox.errors import StripeError, invalid, resource_missing
from stripe_sandbox.params import Params, merge_metadata
from stripe_sandbox.resources.common import Result, _get, _page, retriever
from stripe_sandbox.resources.dispute_appeals import (
    appeal_decision_check,
    appeal_evidence_parse,
    appeal_outside_stage,
)
from stripe_sandbox.resources.dispute_evidence import (
    compliance_fee_refusal,
    compliance_fee_unacknowledged,
    enhanced_eligibility,
    enhanced_evidence_parse,
)
from stripe_sandbox.resources.dispute_funds import (
    dispute_refresh,
    funds_follow_status,
    funds_reinstate,
    funds_withdraw,
)
from stripe_sandbox.state import RequestContext, State

_retrieve = retriever("disputes", "dispute")


def dispute_retrieve(
    state: State, ctx: RequestContext, data: dict[str, Any], dispute_id: str
) -> Result:
    dispute = state.world.disputes.get(dispute_id)
    if dispute is not None:
        dispute_refresh(state, dispute)
    return _retrieve(state, ctx, data, dispute_id)


DISPUTE_DUE_S = 7 * 24 * 60 * 60


class By(enum.Enum):
    BRAND = "brand"  # the card network's reason code its brand gives the dispute's reason


def dispute_open(
    state: State,
    ctx: RequestContext | None,
    charge: dict[str, Any],
    *,
    reason: str,
    amount: int,
    network_reason_code: str | By | None = By.BRAND,
    case_type: str | None = None,
    response_allowed: bool = True,
) -> dict[str, Any]:
    """A dispute on `charge`, with the card network's reason code (by default the one its brand
    gives `reason`) and the enhanced evidence programs it is eligible for; `charge.dispute.created`.
    A chargeback (or compliance case) withdraws the disputed amount and the dispute fee at once
    (`charge.dispute.funds_withdrawn`); an inquiry withdraws nothing. `due_by` is 0 when the
    bank allows no response (SDK: `Dispute.EvidenceDetails.due_by`)."""
    now = state.clock.now_int()
    if network_reason_code is By.BRAND:
        brand = charge["payment_method_details"]["card"]["brand"]
        network_reason_code = objects.default_network_reason_code(brand, reason)
    dispute = objects.dispute(
        charge=charge,
        amount=amount,
        reason=reason,
        created=now,
        due_by=now + DISPUTE_DUE_S if response_allowed else 0,
        network_reason_code=network_reason_code,
        case_type=case_type,
    )
    state.store(dispute)
    state.world.disputes_by_charge.setdefault(charge["id"], []).append(dispute["id"])
    charge["disputed"] = True
    funds_event = None
    if dispute["payment_method_details"]["card"]["case_type"] != "inquiry":
        funds_event = funds_withdraw(state, dispute)
    dispute_refresh(state, dispute)
    state.emit("charge.dispute.created", dispute, ctx)
    if funds_event is not None:
        state.emit(funds_event, dispute, ctx)
    return dispute


def dispute_seeded(
    state: State, charge: dict[str, Any], *, amount: int, reason: str, status: str, created: int
) -> dict[str, Any]:
    """A dispute made directly in `status` for POST /_sandbox/seed, as the API would have left it
    and without events: a `warning_*` status is an inquiry; a chargeback has withdrawn its funds
    (and a won one had them reinstated), on balance transactions dated now on the sandbox clock;
    an appeal stage has its `evidence.appeal`."""
    brand = charge["payment_method_details"]["card"]["brand"]
    dispute = objects.dispute(
        charge=charge,
        amount=amount,
        reason=reason,
        created=created,
        due_by=created + DISPUTE_DUE_S,
        network_reason_code=objects.default_network_reason_code(brand, reason),
        case_type="inquiry" if status in objects.INQUIRY_STATUSES else None,
    )
    dispute["status"] = status
    if status in objects.DISPUTE_APPEAL_STAGES:
        dispute["evidence"]["appeal"] = objects.appeal_response()
    state.store(dispute)
    state.world.disputes_by_charge.setdefault(charge["id"], []).append(dispute["id"])
    charge["disputed"] = True
    if status not in objects.INQUIRY_STATUSES:
        funds_withdraw(state, dispute)
        if status == "won":
            funds_reinstate(state, dispute)
    dispute_refresh(state, dispute)
    return dispute


def dispute_set_status(
    state: State, ctx: RequestContext | None, dispute: dict[str, Any], status: str
) -> None:
    """The network moving a dispute (the control API). An inquiry moved to a chargeback status
    withdraws the funds then; `won` reinstates them (dispute_funds.py). The appeal stages are
    entered by `appeal_open` and by submitting the appeal, and left only by a decision, `won`
    or `lost`."""
    if status not in objects.DISPUTE_STATUSES:
        raise invalid(f"Invalid status: {status}", param="status")
    if status in objects.DISPUTE_APPEAL_STAGES:
        raise invalid(
            "A dispute enters appeal_needs_response by POST /_sandbox/disputes/{id}/appeal, "
            "and appeal_under_review when its appeal is submitted.",
            param="status",
        )
    if dispute["status"] in objects.DISPUTE_CLOSED:
        raise invalid(
            f"Dispute {dispute['id']} is already closed ({dispute['status']}).", param="status"
        )
    appeal_decision_check(dispute, status)
    previous: dict[str, Any] = {"status": dispute["status"]}
    dispute["status"] = status
    funds_event = funds_follow_status(state, dispute, previous)
    if status in objects.DISPUTE_CLOSED:
        state.emit("charge.dispute.closed", dispute, ctx, previous)
    else:
        state.emit("charge.dispute.updated", dispute, ctx, previous)
    if funds_event is not None:
        state.emit(funds_event, dispute, ctx)


def dispute_list(state: State, ctx: RequestContext, data: dict[str, Any]) -> Result:
    params = Params(data)
    charge_id = params.string("charge")
    pi_id = params.string("payment_intent")
    keys = None
    if charge_id is not None:
        keys = state.world.timelines["dispute"].keys_of(
            state.world.disputes_by_charge.get(charge_id, [])
        )

    def keep(dispute: dict[str, Any]) -> bool:
        dispute_refresh(state, dispute)  # what it shows of its charge's refunds, as of now
        return (charge_id is None or dispute["charge"] == charge_id) and (
            pi_id is None or dispute["payment_intent"] == pi_id
        )

    return _page(state, "dispute", params, "/v1/disputes", keys, keep)


MAX_EVIDENCE_CHARS = 150_000
APPEAL_RESPONDABLE = "appeal_needs_response"
# What a submission moves each respondable status to.
SUBMITTED = {
    "needs_response": "under_review",
    "warning_needs_response": "warning_under_review",
    APPEAL_RESPONDABLE: "appeal_under_review",
}


def _evidence_staged(
    state: State, dispute: dict[str, Any], evidence: dict[str, Any]
) -> dict[str, Any]:
    """The evidence fields this update sets, checked (outside the appeal stage)."""
    staged: dict[str, Any] = {}
    for name, value in evidence.items():
        param = f"evidence[{name}]"
        if name == "appeal":
            raise appeal_outside_stage(dispute)
        if name == "enhanced_evidence":
            staged[name] = enhanced_evidence_parse(
                value,
                dispute=dispute,
                disputed_charge=state.world.charges[dispute["charge"]],
                charges=state.world.charges,
            )
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
    text_total = sum(
        len(v)
        for k, v in {**dispute["evidence"], **staged}.items()
        if k in objects.EVIDENCE_TEXT_FIELDS and v
    )
    if text_total > MAX_EVIDENCE_CHARS:
        raise invalid(
            f"Evidence text may total at most {MAX_EVIDENCE_CHARS} characters.", param="evidence"
        )
    return staged


def dispute_update(
    state: State, ctx: RequestContext, data: dict[str, Any], dispute_id: str
) -> Result:
    """Stage evidence and metadata; `submit` (Stripe's default: true) sends the evidence to the
    bank, which moves `needs_response` to `under_review`. Evidence cannot change after
    submission. In `appeal_needs_response` only `evidence[appeal]` may change, and submitting
    moves the dispute to `appeal_under_review`. A Visa or Mastercard compliance dispute is not
    submitted until its network fee is acknowledged."""
    params = Params(data)
    dispute = _get(state, state.world.disputes, "dispute", dispute_id)
    evidence = params.raw("evidence")
    submit = params.boolean("submit", default=True)
    metadata = params.metadata()
    method = params.string("intended_submission_method", choices=SUBMISSION_METHODS)
    if evidence is not None and not isinstance(evidence, dict):
        raise invalid("Invalid evidence: must be a hash", param="evidence")
    appeal_stage = dispute["status"] == APPEAL_RESPONDABLE
    staged: dict[str, Any] = {}
    if appeal_stage and evidence:
        staged["appeal"] = appeal_evidence_parse(evidence, dispute=dispute, files=state.world.files)
    elif evidence:
        staged = _evidence_staged(state, dispute, evidence)
    if (staged or submit) and dispute["status"] not in SUBMITTED:
        if dispute["status"] in objects.DISPUTE_CLOSED:
            message = f"This dispute is already closed ({dispute['status']})."
        else:
            message = (
                "This dispute's evidence has already been submitted; "
                "it cannot be updated or submitted again."
            )
        raise StripeError(400, message, param="submit" if submit and not staged else "evidence")
    enhanced = staged.get("enhanced_evidence", dispute["evidence"]["enhanced_evidence"])
    unacknowledged = compliance_fee_unacknowledged(dispute["enhanced_eligibility_types"], enhanced)
    # The appeal answers a decision; the network fee was settled before it.
    if submit and not appeal_stage and unacknowledged is not None:
        raise compliance_fee_refusal(unacknowledged)
    previous: dict[str, Any] = {}
    if method is not None and method != dispute["intended_submission_method"]:
        previous["intended_submission_method"] = dispute["intended_submission_method"]
        dispute["intended_submission_method"] = method
    if staged:
        previous["evidence"] = {k: dispute["evidence"].get(k) for k in staged}
        dispute["evidence"].update(staged)
        details = dispute["evidence_details"]
        details["has_evidence"] = any(
            v for k, v in dispute["evidence"].items() if k not in ("enhanced_evidence", "appeal")
        )
        if "enhanced_evidence" in staged:
            eligibility = enhanced_eligibility(
                dispute,
                enhanced,
                disputed_charge=state.world.charges[dispute["charge"]],
                charges=state.world.charges,
            )
            if eligibility != details["enhanced_eligibility"]:
                previous["evidence_details"] = {
                    "enhanced_eligibility": details["enhanced_eligibility"]
                }
                details["enhanced_eligibility"] = eligibility
    if metadata is not None:
        merged = merge_metadata(dispute["metadata"], metadata)
        if merged != dispute["metadata"]:
            previous["metadata"] = dict(dispute["metadata"])
            dispute["metadata"] = merged
    if submit:
        _submit(dispute, previous, method="manual")
    dispute_refresh(state, dispute)
    if previous:
        state.emit("charge.dispute.updated", dispute, ctx, previous)
    return 200, state.render(dispute)


SUBMISSION_METHODS = {"manual", "prefer_manual", "prefer_smart_disputes", "smart_disputes"}


def _submit(dispute: dict[str, Any], previous: dict[str, Any], *, method: str) -> None:
    details = dispute["evidence_details"]
    previous["status"] = dispute["status"]
    previous.setdefault("evidence_details", {}).update(
        {
            "submission_count": details["submission_count"],
            "submission_method": details["submission_method"],
        }
    )
    dispute["status"] = SUBMITTED[dispute["status"]]
    details["submission_count"] += 1
    details["submission_method"] = method


def dispute_smart_submit(state: State, ctx: RequestContext | None, dispute: dict[str, Any]) -> None:
    """Stripe's Smart Disputes submitting on the account's behalf (control API): refused when the
    dispute says `intended_submission_method=manual`, when it is not open for a first response
    (`needs_response`, `warning_needs_response`) and for a Visa or Mastercard compliance dispute
    whose network fee is not acknowledged."""
    if dispute["intended_submission_method"] == "manual":
        raise invalid(
            f"Dispute {dispute['id']} is to be submitted manually; Smart Disputes may not submit.",
            param="intended_submission_method",
        )
    if dispute["status"] not in objects.DISPUTE_RESPONDABLE:
        raise invalid(f"Dispute {dispute['id']} cannot be submitted ({dispute['status']}).")
    unacknowledged = compliance_fee_unacknowledged(
        dispute["enhanced_eligibility_types"], dispute["evidence"]["enhanced_evidence"]
    )
    if unacknowledged is not None:
        raise compliance_fee_refusal(unacknowledged)
    previous: dict[str, Any] = {}
    dispute["evidence"]["uncategorized_text"] = "Submitted by Smart Disputes."
    dispute["evidence_details"]["has_evidence"] = True
    _submit(dispute, previous, method="smart_disputes")
    state.emit("charge.dispute.updated", dispute, ctx, previous)


def dispute_close(
    state: State, ctx: RequestContext, data: dict[str, Any], dispute_id: str
) -> Result:
    dispute = _get(state, state.world.disputes, "dispute", dispute_id)
    if dispute["status"] in objects.DISPUTE_CLOSED:
        raise StripeError(400, f"This dispute is already closed ({dispute['status']}).")
    closed = "warning_closed" if dispute["status"].startswith("warning") else "lost"
    dispute_set_status(state, ctx, dispute, closed)
    return 200, state.render(dispute)
