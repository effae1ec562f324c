"""`manage.py verification_explain`: one attempt of a contract evaluated on a case file, touching
no database and no provider."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from verification.contracts import Contract
from verification.evaluation import Decision, decide
from verification.expressions import Context

CASE_KEYS = {"input", "action", "operation", "observed", "now", "attempt"}


class CaseError(ValueError):
    """A case file that cannot be evaluated; the message names what is wrong."""


def _instant(value: Any, where: str) -> datetime:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise CaseError(f"{where}: {value!r} is not an ISO-8601 time") from None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    raise CaseError(f"{where}: expected an ISO-8601 string or epoch seconds")


def _object(case: dict[str, Any], key: str, *, required: bool) -> dict[str, Any]:
    if key not in case:
        if required:
            raise CaseError(f"{key}: missing")
        return {}
    value = case[key]
    if not isinstance(value, dict):
        raise CaseError(f"{key}: must be an object")
    return value


def explain(contract: Contract, case: Any, *, skew_s: float = 2.0) -> Decision:
    if not isinstance(case, dict):
        raise CaseError("the case must be a JSON object")
    unknown = sorted(set(case) - CASE_KEYS)
    if unknown:
        raise CaseError(f"unknown keys {unknown}; a case has {sorted(CASE_KEYS)}")
    inputs = _object(case, "input", required=False)
    action = _object(case, "action", required=True)
    if "result" not in action or not isinstance(action["result"], dict):
        raise CaseError("action.result: missing or not an object")
    operation = _object(case, "operation", required=True)
    if not isinstance(operation.get("id"), str) or not operation["id"]:
        raise CaseError("operation.id: missing or not a string")
    if "created_at" not in operation:
        raise CaseError("operation.created_at: missing")
    created_at = _instant(operation["created_at"], "operation.created_at")
    observed = _object(case, "observed", required=False)
    channels = {c.name for c in contract.channels}
    for name in observed:
        if name not in channels:
            raise CaseError(
                f"observed.{name}: {contract.id} has no channel {name} (it has {sorted(channels)})"
            )
    if "now" not in case:
        raise CaseError("now: missing")
    now = _instant(case["now"], "now")
    attempt = case.get("attempt")
    if attempt is not None and (
        not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1
    ):
        raise CaseError("attempt: must be a positive integer")
    context = Context(
        observed=observed,
        action_result=action["result"],
        input=inputs,
        operation_id=operation["id"],
        operation_created_at=created_at,
    )
    return decide(contract, context, now=now, skew_s=skew_s, attempt=attempt)
