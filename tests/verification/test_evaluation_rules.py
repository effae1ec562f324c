"""One attempt's verdict (SPEC §6, `verification.evaluation.decide`) on test contracts beside the
shipped ones (tests/verification/contracts_strength/): the evidence requirements, the order in
which rules and contradictions decide, the stale-read window and the timeout at their exact
ends, and what the verdict shows (reasons, conditions with their actual and expected values)."""

import json
from datetime import UTC, datetime, timedelta
from functools import cache
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from verification.contracts import Contract, Verdict, load_contract
from verification.evaluation import Decision, decide
from verification.expressions import Context

STRENGTH = Path(__file__).resolve().parent / "contracts_strength"
SKEW = 2.0
START = datetime(2026, 11, 29, 10, 0, 0, 500_000, tzinfo=UTC)
WINDOW = timedelta(seconds=10)  # the test contracts' stale-read window
TIMEOUT = timedelta(seconds=60)  # and their timeout (5 attempts at most)
LATER = START + timedelta(seconds=30)  # after the window, before the timeout
MICROSECOND = timedelta(microseconds=1)


@cache
def contract(name: str) -> Contract:
    return load_contract(STRENGTH / f"test.strength.{name}.yaml")


def context(observed: dict[str, Any], created_at: Any = START) -> Context:
    return Context(
        observed=observed,
        action_result={"id": "re_1"},
        input={"charge": "ch_1", "amount": 876},
        operation_id="erf_1:leg_1",
        operation_created_at=created_at,
    )


def refund(**changes: Any) -> dict[str, Any]:
    """What the rules_overlap contract's readback sees for a good refund, with changes."""
    return {"id": "re_1", "status": "succeeded", "charge": "ch_1", "amount": 876, **changes}


def run(
    name: str,
    observed: dict[str, Any],
    *,
    now: datetime = LATER,
    attempt: int | None = None,
    created_at: Any = START,
) -> Decision:
    return decide(
        contract(name), context(observed, created_at), now=now, skew_s=SKEW, attempt=attempt
    )


def results(decision: Decision) -> dict[str, bool | None]:
    return {c.name: c.result for c in decision.conditions}


GOOD = {"amount": 876}


# --- evidence requirements ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "observed", "unmet"),
    [
        # Only the action's own response (E1, claiming to be a readback): too weak and never
        # independent, however true its conditions.
        ("claim_only", {"echo": GOOD}, "evidence at level E2, an independent channel"),
        # An E2 read that is not independent.
        ("copy_only", {"mirror": GOOD}, "an independent channel"),
        # An E2 readback where E3 is required.
        ("readback_below_e3", {"readback": GOOD}, "evidence at level E3"),
        # Two channels where three are required.
        ("three_channels_required", {"echo": GOOD, "readback": GOOD}, "3 channel(s)"),
    ],
)
def test_true_conditions_on_too_weak_evidence_are_not_verified_and_name_what_is_missing(
    name: str, observed: dict[str, Any], unmet: str
) -> None:
    decision = run(name, observed)
    assert all(result is True for result in results(decision).values())
    assert decision.verdict is Verdict.PENDING
    assert decision.reason == f"Waiting for: {unmet}"
    assert decision.counted_channels == sorted(observed)


def test_too_weak_evidence_ends_unverifiable_at_the_timeout_and_after_the_last_attempt() -> None:
    observed = {"echo": GOOD}
    timed_out = run("claim_only", observed, now=START + TIMEOUT)
    assert (timed_out.verdict, timed_out.reason) == (
        Verdict.UNVERIFIABLE,
        "evidence_unavailable_before_timeout",
    )
    assert run("claim_only", observed, attempt=5).verdict is Verdict.UNVERIFIABLE


@pytest.mark.parametrize(
    ("name", "observed"),
    [
        # Best level E2 (the readback) meets E2 though the claim is E1; one independent channel
        # is enough; two channels are exactly the two required.
        ("claim_and_readback", {"echo": GOOD, "readback": GOOD}),
        # The best level (E3) meets E3 though the readback is E2.
        ("readback_and_event", {"readback": GOOD, "events": GOOD}),
    ],
)
def test_evidence_that_just_meets_every_requirement_verifies(
    name: str, observed: dict[str, Any]
) -> None:
    decision = run(name, observed)
    assert (decision.verdict, decision.class_, decision.reason) == (
        Verdict.VERIFIED,
        None,
        "All verified conditions hold.",
    )
    assert decision.counted_channels == sorted(observed)
    assert decision.held is None


def test_a_channel_counts_only_when_a_condition_citing_it_was_true() -> None:
    decision = run("claim_and_readback", {"echo": GOOD, "readback": {"amount": 877}})
    assert decision.verdict is Verdict.PENDING
    assert decision.counted_channels == ["echo"]
    # The condition still waited for is named, not the requirements it would meet.
    assert decision.reason == "Waiting for: readback_amount"
    unresolved = run("claim_and_readback", {"echo": GOOD})
    assert unresolved.counted_channels == ["echo"]
    assert results(unresolved)["readback_amount"] is None


def test_every_condition_waited_for_is_named_in_contract_order() -> None:
    decision = run("rules_overlap", {"readback": {"charge": "ch_1", "amount": 876}})
    assert decision.verdict is Verdict.PENDING
    assert decision.reason == "Waiting for: refund_present, refund_succeeded"
    assert decision.counted_channels == []


# --- order: pre-completion rules, contradictions, verification -------------------------------


def test_two_pre_completion_rules_true_at_once_the_first_in_contract_order_decides() -> None:
    observed = {"readback": refund(status="canceled", failure_reason="lost_or_stolen_card")}
    decision = run("rules_overlap", observed)
    assert results(decision)["failure_reported"] is True
    assert results(decision)["canceled"] is True
    assert (decision.verdict, decision.class_, decision.reason) == (
        Verdict.FAILED,
        None,
        "The provider reports a failure reason.",
    )
    swapped = contract("rules_overlap").model_copy(
        update={"pre_completion": list(reversed(contract("rules_overlap").pre_completion))}
    )
    decision = decide(swapped, context(observed), now=LATER, skew_s=SKEW)
    assert (decision.verdict, decision.class_, decision.reason) == (
        Verdict.CONTRADICTED,
        "reversed",
        "The refund was canceled. No funds will move.",
    )


def test_two_contradictions_true_at_once_the_first_in_contract_order_decides() -> None:
    observed = {"readback": refund(charge="ch_other", amount=877)}
    decision = run("rules_overlap", observed)
    assert results(decision)["refund_on_wrong_charge"] is True
    assert results(decision)["refund_amount_mismatch"] is True
    assert (decision.verdict, decision.class_, decision.reason) == (
        Verdict.CONTRADICTED,
        "wrong subject",
        "The refund belongs to a different charge.",
    )
    swapped = contract("rules_overlap").model_copy(
        update={"contradicted": list(reversed(contract("rules_overlap").contradicted))}
    )
    decision = decide(swapped, context(observed), now=LATER, skew_s=SKEW)
    assert (decision.verdict, decision.class_) == (Verdict.CONTRADICTED, "wrong amount")


def test_a_rule_decides_before_a_contradiction_and_both_before_verification() -> None:
    # Every verified condition holds, yet the contradiction decides.
    contradicted = run("rules_overlap", {"readback": refund(amount=877)})
    assert all(results(contradicted)[c] for c in ("refund_present", "refund_succeeded"))
    assert (contradicted.verdict, contradicted.class_) == (Verdict.CONTRADICTED, "wrong amount")
    failed = run("rules_overlap", {"readback": refund(amount=877, failure_reason="x")})
    assert (failed.verdict, failed.class_) == (Verdict.FAILED, None)


def test_conditions_are_listed_rules_first_then_contradictions_then_verified() -> None:
    decision = run("rules_overlap", {"readback": refund()})
    assert [(c.kind, c.name) for c in decision.conditions] == [
        ("pre_completion", "failure_reported"),
        ("pre_completion", "canceled"),
        ("contradicted", "refund_on_wrong_charge"),
        ("contradicted", "refund_amount_mismatch"),
        ("verified", "refund_present"),
        ("verified", "refund_succeeded"),
    ]
    assert decision.verdict is Verdict.VERIFIED
    assert decision.counted_channels == ["readback"]


# --- the stale-read window -------------------------------------------------------------------

FAILURE = {"readback": refund(failure_reason="expired_or_canceled_card")}


def test_the_stale_read_window_ends_exactly_at_created_at_plus_the_window() -> None:
    held = run("rules_overlap", FAILURE, now=START + WINDOW - MICROSECOND)
    assert held.verdict is Verdict.PENDING
    decided = run("rules_overlap", FAILURE, now=START + WINDOW)
    assert (decided.verdict, decided.reason, decided.held) == (
        Verdict.FAILED,
        "The provider reports a failure reason.",
        None,
    )


def test_a_held_verdict_says_until_when_and_what_it_would_be() -> None:
    held = run("rules_overlap", FAILURE, now=START + timedelta(seconds=1))
    assert (held.verdict, held.class_) == (Verdict.PENDING, None)
    assert held.reason == (
        "Held by the stale-read window until 2026-11-29T10:00:10.500000+00:00: "
        "would be FAILED: The provider reports a failure reason."
    )
    assert held.held == "FAILED: The provider reports a failure reason."
    contradiction = run(
        "rules_overlap", {"readback": refund(charge="ch_2")}, now=START + timedelta(seconds=1)
    )
    assert contradiction.held == "CONTRADICTED: The refund belongs to a different charge."
    assert contradiction.reason.endswith(
        "would be CONTRADICTED: The refund belongs to a different charge."
    )


def test_verified_is_decided_at_once_inside_the_window() -> None:
    decision = run("rules_overlap", {"readback": refund()}, now=START)
    assert decision.verdict is Verdict.VERIFIED


def test_a_verdict_held_on_the_last_attempt_ends_unverifiable_and_keeps_what_was_held() -> None:
    decision = run("rules_overlap", FAILURE, now=START + timedelta(seconds=1), attempt=5)
    assert (decision.verdict, decision.reason) == (
        Verdict.UNVERIFIABLE,
        "evidence_unavailable_before_timeout",
    )
    assert decision.held == "FAILED: The provider reports a failure reason."


@pytest.mark.parametrize(
    ("created_at", "window_end"),
    [
        # Epoch seconds (whole): the window ends ten seconds after that second.
        (int(START.timestamp()) - 1, datetime(2026, 11, 29, 10, 0, 9, tzinfo=UTC)),
        # Float epoch seconds and ISO-8601 strings are times too.
        (START.timestamp(), START + WINDOW),
        ("2026-11-29T10:00:00.500Z", START + WINDOW),
        ("2026-11-29T10:00:02+00:00", datetime(2026, 11, 29, 10, 0, 12, tzinfo=UTC)),
    ],
)
def test_the_window_starts_at_the_operation_time_in_any_time_format(
    created_at: Any, window_end: datetime
) -> None:
    held = run("rules_overlap", FAILURE, now=window_end - MICROSECOND, created_at=created_at)
    assert held.verdict is Verdict.PENDING
    assert f"until {window_end.isoformat()}:" in held.reason
    decided = run("rules_overlap", FAILURE, now=window_end, created_at=created_at)
    assert decided.verdict is Verdict.FAILED


def test_an_operation_created_at_the_epoch_still_has_its_window() -> None:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    held = run("rules_overlap", FAILURE, now=epoch + WINDOW - MICROSECOND, created_at=0)
    assert held.verdict is Verdict.PENDING
    assert "until 1970-01-01T00:00:10+00:00:" in held.reason
    assert run("rules_overlap", FAILURE, now=epoch + WINDOW, created_at=0).verdict is (
        Verdict.FAILED
    )


def test_without_a_known_start_nothing_is_held_and_only_attempts_time_out() -> None:
    decided = run("rules_overlap", FAILURE, now=START, created_at=None)
    assert decided.verdict is Verdict.FAILED
    waiting = run("rules_overlap", {}, now=START + 100 * TIMEOUT, created_at=None)
    assert waiting.verdict is Verdict.PENDING
    assert run("rules_overlap", {}, created_at=None, attempt=5).verdict is Verdict.UNVERIFIABLE


# --- timeout and attempts --------------------------------------------------------------------


def test_the_timeout_is_reached_exactly_at_created_at_plus_the_timeout() -> None:
    assert run("rules_overlap", {}, now=START + TIMEOUT - MICROSECOND).verdict is (Verdict.PENDING)
    timed_out = run("rules_overlap", {}, now=START + TIMEOUT)
    assert (timed_out.verdict, timed_out.class_, timed_out.held) == (
        Verdict.UNVERIFIABLE,
        None,
        None,
    )


def test_the_attempt_limit_is_the_contracts_maximum() -> None:
    assert run("rules_overlap", {}, attempt=4).verdict is Verdict.PENDING
    assert run("rules_overlap", {}, attempt=5).verdict is Verdict.UNVERIFIABLE
    assert run("rules_overlap", {}, attempt=None).verdict is Verdict.PENDING


def test_evidence_or_a_decided_failure_on_the_last_attempt_wins_over_the_timeout() -> None:
    late = START + TIMEOUT
    assert run("rules_overlap", {"readback": refund()}, now=late).verdict is Verdict.VERIFIED
    assert run("rules_overlap", FAILURE, now=late, attempt=5).verdict is Verdict.FAILED


# --- what a verdict shows --------------------------------------------------------------------


def test_the_verdict_as_json_shows_each_condition_with_its_actual_and_expected_values() -> None:
    decision = run("rules_overlap", {"readback": refund(amount=877, status=None)})
    shown = decision.as_json()
    assert set(shown) == {"verdict", "class", "reason", "conditions"}
    assert (shown["verdict"], shown["class"], shown["reason"]) == (
        "CONTRADICTED",
        "wrong amount",
        "The provider refunded a different amount.",
    )
    by_name = {c["name"]: c for c in shown["conditions"]}
    assert by_name["refund_amount_mismatch"] == {
        "name": "refund_amount_mismatch",
        "kind": "contradicted",
        "result": "true",
        "actual": 877,
        "expected": 876,
    }
    assert by_name["refund_on_wrong_charge"]["result"] == "false"
    # An unresolved path: unknown, with nothing to show as its actual value.
    assert by_name["failure_reported"] == {
        "name": "failure_reported",
        "kind": "pre_completion",
        "result": "false",
        "actual": None,
        "expected": None,
    }
    assert by_name["refund_succeeded"]["actual"] is None
    json.dumps(shown)  # JSON-ready as it is


def test_an_unknown_condition_shows_unknown_and_a_time_shows_as_iso_8601() -> None:
    refund_contract = load_contract(
        Path(__file__).resolve().parents[2] / "verification/contracts/stripe.refund.created.yaml"
    )
    decision = decide(refund_contract, context({}), now=LATER, skew_s=SKEW)
    by_name = {c["name"]: c for c in decision.as_json()["conditions"]}
    assert by_name["refund_created_in_window"] == {
        "name": "refund_created_in_window",
        "kind": "verified",
        "result": "unknown",
        "actual": None,
        "expected": "2026-11-29T10:00:00.500000+00:00",
    }


def test_the_explain_command_prints_actual_and_expected_values(tmp_path: Path) -> None:
    created = int(START.timestamp())
    case = {
        "input": {"charge": "ch_1", "amount": 876},
        "action": {"result": {"id": "re_1"}},
        "operation": {"id": "erf_1:leg_1", "created_at": START.isoformat()},
        "observed": {
            "refund_readback": {
                "id": "re_1",
                "status": "succeeded",
                "charge": "ch_9",
                "amount": 876,
                "created": created,
            }
        },
        "now": (START + timedelta(seconds=1)).isoformat(),
    }
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    out = StringIO()
    call_command("verification_explain", "stripe.refund.created", str(path), stdout=out)
    shown = json.loads(out.getvalue())
    assert shown["verdict"] == "PENDING"
    assert shown["reason"] == (
        "Held by the stale-read window until 2026-11-29T10:00:20.500000+00:00: "
        "would be CONTRADICTED: The refund belongs to a different charge."
    )
    by_name = {c["name"]: c for c in shown["conditions"]}
    wrong_charge = by_name["refund_on_wrong_charge"]
    assert (wrong_charge["actual"], wrong_charge["expected"]) == ("ch_9", "ch_1")
    assert by_name["refund_created_in_window"]["actual"] == created
    assert by_name["refund_created_in_window"]["expected"] == START.isoformat()
    assert by_name["refund_state_known"]["expected"] == ["pending", "requires_action", "succeeded"]
    assert by_name["duplicate_refund_present"] == {
        "name": "duplicate_refund_present",
        "kind": "contradicted",
        "result": "unknown",
        "actual": None,
        "expected": 1,
    }


def test_a_decision_and_what_it_rests_on_cannot_be_changed_once_made() -> None:
    import dataclasses

    decision = run("rules_overlap", {"readback": refund()})
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.verdict = Verdict.FAILED  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.conditions[0].result = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        context({}).observed = {"readback": refund()}  # type: ignore[misc]
