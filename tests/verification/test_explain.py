"""Every condition, rule and timing member of the reference contract, through the explain
command: each produces its verdict, class and reason (SPEC §6, acceptance 1)."""

import copy
import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

CONTRACT = "stripe.refund.created"
START = datetime(2026, 11, 29, 10, 0, 0, 500_000, tzinfo=UTC)
CREATED = int(START.timestamp())  # the provider writes whole seconds


def base_case(**changes: Any) -> dict[str, Any]:
    case: dict[str, Any] = {
        "input": {"charge": "ch_1", "amount": 876},
        "action": {"result": {"id": "re_1", "metadata": {"vouch_leg": "leg_1"}}},
        "operation": {"id": "erf_1:leg_1", "created_at": START.isoformat()},
        "observed": {
            "refund_readback": {
                "id": "re_1",
                "status": "succeeded",
                "charge": "ch_1",
                "amount": 876,
                "created": CREATED,
            },
            "refund_created_events": {"count": 1, "events": [], "types": ["refund.created"]},
        },
        "now": (START + timedelta(seconds=30)).isoformat(),  # after the stale-read window
    }
    for path, value in changes.items():
        node = case
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
    return case


_DELETE = object()


def run_explain(tmp_path: Path, case: Any, contract: str = CONTRACT) -> dict[str, Any]:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    out = StringIO()
    call_command("verification_explain", contract, str(path), stdout=out)
    return json.loads(out.getvalue())


def conditions(result: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["result"] for c in result["conditions"]}


def test_verified(tmp_path: Path) -> None:
    result = run_explain(tmp_path, base_case())
    assert (result["verdict"], result["class"]) == ("VERIFIED", None)
    assert set(conditions(result).values()) == {"true", "false"}
    assert conditions(result)["refund_present"] == "true"
    assert {c["kind"] for c in result["conditions"]} == {
        "pre_completion",
        "contradicted",
        "verified",
    }


@pytest.mark.parametrize(
    ("changes", "verdict", "klass", "reason", "condition"),
    [
        (
            {"observed.refund_readback.status": "failed"},
            "FAILED", None, "The provider reports a failed refund.", "terminal_failure",
        ),
        (
            {"observed.refund_readback.status": "canceled"},
            "CONTRADICTED", "reversed", "The refund was canceled. No funds will move.", "canceled",
        ),
        (
            {"observed.refund_readback.charge": "ch_other"},
            "CONTRADICTED", "wrong subject", "The refund belongs to a different charge.",
            "refund_on_wrong_charge",
        ),
        (
            {"observed.refund_readback.amount": 877},
            "CONTRADICTED", "wrong amount", "The provider refunded a different amount.",
            "refund_amount_mismatch",
        ),
        (
            {"observed.refund_readback.created": CREATED - 3600},
            "CONTRADICTED", "pre existing state",
            "The refund is older than the operation. It proves nothing.",
            "refund_predates_operation",
        ),
        (
            {"observed.refund_created_events.count": 2},
            "CONTRADICTED", "duplicate side effect",
            "Stripe created more than one refund for the charge since the operation started. "
            "Do not retry.",
            "duplicate_refund_present",
        ),
    ],
)  # fmt: skip
def test_each_rule_and_contradiction(
    tmp_path: Path, changes: dict, verdict: str, klass: str | None, reason: str, condition: str
) -> None:
    result = run_explain(tmp_path, base_case(**changes))
    assert (result["verdict"], result["class"], result["reason"]) == (verdict, klass, reason)
    assert conditions(result)[condition] == "true"


def test_rules_come_before_contradictions(tmp_path: Path) -> None:
    result = run_explain(
        tmp_path,
        base_case(
            **{"observed.refund_readback.status": "canceled", "observed.refund_readback.amount": 1}
        ),
    )
    assert (result["verdict"], result["class"]) == ("CONTRADICTED", "reversed")


@pytest.mark.parametrize(
    ("changes", "waiting"),
    [
        ({"observed.refund_readback.id": "re_other"}, "refund_present"),
        ({"observed.refund_readback.status": "mystery"}, "refund_state_known"),
        ({"observed.refund_readback.created": _DELETE}, "refund_created_in_window"),
        (
            {"observed.refund_readback": {"found": False, "error": "resource_missing"}},
            "refund_present",
        ),
        ({"observed.refund_readback": _DELETE}, "refund_present"),
    ],
)
def test_each_verified_condition_is_needed(tmp_path: Path, changes: dict, waiting: str) -> None:
    result = run_explain(tmp_path, base_case(**changes))
    assert result["verdict"] == "PENDING"
    assert waiting in result["reason"]
    assert conditions(result)[waiting] in ("false", "unknown")


def test_unresolved_paths_are_unknown_and_never_contradict(tmp_path: Path) -> None:
    result = run_explain(tmp_path, base_case(**{"observed": {}}))
    assert result["verdict"] == "PENDING"
    assert set(conditions(result).values()) == {"unknown"}


def test_pending_readback_state_still_verifies(tmp_path: Path) -> None:
    for status in ("pending", "requires_action"):
        result = run_explain(tmp_path, base_case(**{"observed.refund_readback.status": status}))
        assert result["verdict"] == "VERIFIED"


def test_stale_read_window_holds_bad_verdicts_but_not_verified(tmp_path: Path) -> None:
    inside = (START + timedelta(seconds=19)).isoformat()
    after = (START + timedelta(seconds=20)).isoformat()
    held = run_explain(
        tmp_path, base_case(now=inside, **{"observed.refund_readback.status": "failed"})
    )
    assert held["verdict"] == "PENDING"
    assert "stale-read window" in held["reason"]
    assert "FAILED" in held["reason"]
    decided = run_explain(
        tmp_path, base_case(now=after, **{"observed.refund_readback.status": "failed"})
    )
    assert decided["verdict"] == "FAILED"
    assert run_explain(tmp_path, base_case(now=inside))["verdict"] == "VERIFIED"


def test_timeout_and_max_attempts_give_unverifiable(tmp_path: Path) -> None:
    waiting = {"observed.refund_readback": {"found": False}}
    late = (START + timedelta(milliseconds=604_800_000)).isoformat()
    timed_out = run_explain(tmp_path, base_case(now=late, **waiting))
    assert (timed_out["verdict"], timed_out["reason"]) == (
        "UNVERIFIABLE",
        "evidence_unavailable_before_timeout",
    )
    almost = (START + timedelta(milliseconds=604_799_000)).isoformat()
    assert run_explain(tmp_path, base_case(now=almost, **waiting))["verdict"] == "PENDING"
    assert run_explain(tmp_path, base_case(attempt=40, **waiting))["verdict"] == "UNVERIFIABLE"
    assert run_explain(tmp_path, base_case(attempt=39, **waiting))["verdict"] == "PENDING"
    # Evidence in hand on the last attempt still verifies.
    assert run_explain(tmp_path, base_case(attempt=40))["verdict"] == "VERIFIED"


def test_dispute_contract(tmp_path: Path) -> None:
    case = {
        "input": {"dispute": "dp_1", "packet_digest": "abc"},
        "action": {"result": {"id": "dp_1"}},
        "operation": {"id": "pkt_1:abc", "created_at": START.isoformat()},
        "observed": {
            "dispute_readback": {
                "id": "dp_1",
                "status": "under_review",
                "evidence_details": {"submission_count": 1},
                "metadata": {"vouch_packet_digest": "abc"},
            }
        },
        "now": (START + timedelta(seconds=30)).isoformat(),
    }
    assert run_explain(tmp_path, case, "stripe.dispute.filed")["verdict"] == "VERIFIED"
    not_yet = copy.deepcopy(case)
    not_yet["observed"]["dispute_readback"]["status"] = "needs_response"
    assert run_explain(tmp_path, not_yet, "stripe.dispute.filed")["verdict"] == "PENDING"
    other = copy.deepcopy(case)
    other["observed"]["dispute_readback"]["metadata"]["vouch_packet_digest"] = "zzz"
    result = run_explain(tmp_path, other, "stripe.dispute.filed")
    assert (result["verdict"], result["class"]) == ("CONTRADICTED", "wrong subject")


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ([], "must be a JSON object"),
        ({**base_case(), "surprise": 1}, "unknown keys ['surprise']"),
        (base_case(**{"action": _DELETE}), "action: missing"),
        (base_case(**{"action.result": "x"}), "action.result"),
        (base_case(**{"operation.id": 5}), "operation.id"),
        (base_case(**{"operation.created_at": "yesterday"}), "operation.created_at"),
        (base_case(**{"observed.mystery": {}}), "observed.mystery"),
        (base_case(**{"now": _DELETE}), "now: missing"),
        (base_case(attempt=0), "attempt"),
    ],
)
def test_bad_case_files_get_clear_errors(tmp_path: Path, case: Any, message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("[", r"\[").replace("]", r"\]")):
        run_explain(tmp_path, case)


def test_bad_invocations(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no contract 'nope'"):
        run_explain(tmp_path, base_case(), contract="nope")
    with pytest.raises(CommandError, match="cannot read"):
        call_command(
            "verification_explain", CONTRACT, str(tmp_path / "missing.json"), stdout=StringIO()
        )
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(CommandError, match="is not JSON"):
        call_command(
            "verification_explain", CONTRACT, str(tmp_path / "bad.json"), stdout=StringIO()
        )
