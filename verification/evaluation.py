"""One attempt's verdict from its observations: a pure function of the contract, what was
observed and the time, shared by the engine and `manage.py verification_explain`.

Order (SPEC §6): pre-completion rules, then contradictions, then verification. Inside the
stale-read window a CONTRADICTED or FAILED outcome is held (PENDING, observations recorded);
VERIFIED may be decided at once. Attempts exhausted or the timeout passed: UNVERIFIABLE."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from verification.contracts import LEVELS, Contract, Verdict
from verification.expressions import Context, as_instant, evaluate


@dataclass(frozen=True)
class ConditionResult:
    name: str
    kind: str  # pre_completion | contradicted | verified
    result: bool | None
    actual: Any
    expected: Any

    def as_json(self) -> dict[str, Any]:
        shown = {True: "true", False: "false", None: "unknown"}[self.result]
        return {
            "name": self.name,
            "kind": self.kind,
            "result": shown,
            "actual": _plain(self.actual),
            "expected": _plain(self.expected),
        }


def _plain(value: Any) -> Any:
    """JSON-ready: times as ISO-8601."""
    return value.isoformat() if isinstance(value, datetime) else value


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    class_: str | None
    reason: str
    conditions: list[ConditionResult] = field(default_factory=list)
    # A CONTRADICTED/FAILED outcome held back by the stale-read window: what it would have been.
    held: str | None = None
    counted_channels: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": str(self.verdict),
            "class": self.class_,
            "reason": self.reason,
            "conditions": [c.as_json() for c in self.conditions],
        }


def _seconds(value: Any) -> float | None:
    instant = as_instant(value)
    return None if instant is None else float(instant[0])


def decide(
    contract: Contract,
    context: Context,
    *,
    now: datetime,
    skew_s: float,
    attempt: int | None = None,
) -> Decision:
    """The verdict of one attempt. `attempt` is its number among scheduled attempts (None: do not
    apply the attempt limit)."""
    results: list[ConditionResult] = []
    rule_hits = []
    for rule in contract.pre_completion:
        ev = evaluate(
            rule.match.path, rule.match.operator, rule.match.expected, context, skew_s=skew_s
        )
        results.append(
            ConditionResult(rule.name, "pre_completion", ev.result, ev.actual, ev.expected)
        )
        if ev.result is True:
            rule_hits.append(rule)
    contradiction_hits = []
    for cond in contract.contradicted:
        ev = evaluate(cond.path, cond.operator, cond.expected, context, skew_s=skew_s)
        results.append(
            ConditionResult(cond.name, "contradicted", ev.result, ev.actual, ev.expected)
        )
        if ev.result is True:
            contradiction_hits.append(cond)
    verified_results = []
    for vcond in contract.verified:
        ev = evaluate(vcond.path, vcond.operator, vcond.expected, context, skew_s=skew_s)
        results.append(ConditionResult(vcond.name, "verified", ev.result, ev.actual, ev.expected))
        verified_results.append((vcond, ev.result))

    created = _seconds(context.operation_created_at)
    window_ends = (created or 0) + contract.timing.stale_read_window_ms / 1000
    in_window = created is not None and now.timestamp() < window_ends

    bad: tuple[Verdict, str | None, str] | None = None
    if rule_hits:
        rule = rule_hits[0]
        bad = (Verdict(rule.verdict), rule.class_, rule.reason)
    elif contradiction_hits:
        cond = contradiction_hits[0]
        bad = (Verdict.CONTRADICTED, cond.class_, cond.reason)

    counted = sorted({vcond.channel for vcond, result in verified_results if result is True})
    held: str | None = None
    if bad is not None and not in_window:
        return Decision(bad[0], bad[1], bad[2], results, None, counted)
    if bad is not None:
        held = f"{bad[0]}: {bad[2]}"
    else:
        all_true = all(result is True for _, result in verified_results)
        unmet = _unmet_requirements(contract, counted)
        if all_true and not unmet:
            return Decision(
                Verdict.VERIFIED, None, "All verified conditions hold.", results, None, counted
            )

    if _timed_out(contract, created, now, attempt):
        on_timeout = contract.timing.on_timeout
        return Decision(
            Verdict(on_timeout.verdict), None, on_timeout.reason, results, held, counted
        )
    if held is not None:
        reason = f"Held by the stale-read window until {_iso(window_ends)}: would be {held}"
    else:
        waiting = [vcond.name for vcond, result in verified_results if result is not True]
        unmet = _unmet_requirements(contract, counted)
        reason = "Waiting for: " + ", ".join(waiting or unmet)
    return Decision(Verdict.PENDING, None, reason, results, held, counted)


def _unmet_requirements(contract: Contract, counted: list[str]) -> list[str]:
    """SPEC §6: a channel counts only if a verified condition citing it was true."""
    channels = [contract.channel(name) for name in counted]
    unmet = []
    evidence = contract.evidence
    best = max((LEVELS[c.level] for c in channels), default=-1)
    if best < LEVELS[evidence.min_level]:
        unmet.append(f"evidence at level {evidence.min_level}")
    if evidence.independent_required and not any(c.independent for c in channels):
        unmet.append("an independent channel")
    if len(channels) < evidence.min_channels:
        unmet.append(f"{evidence.min_channels} channel(s)")
    return unmet


def _timed_out(
    contract: Contract, created: float | None, now: datetime, attempt: int | None
) -> bool:
    timing = contract.timing
    if attempt is not None and attempt >= timing.max_attempts:
        return True
    return created is not None and now.timestamp() >= created + timing.timeout_ms / 1000


def _iso(seconds: float) -> str:
    from datetime import UTC

    return datetime.fromtimestamp(seconds, UTC).isoformat()
