"""What the verification pages share, and other apps' admin pages borrow: the verdicts' colours,
the evidence levels' meanings, JSON shown to people, durations."""

from __future__ import annotations

import json
from typing import Any

from verification.models import Verdict

LEVEL_MEANINGS = {
    "E0": "a claim",
    "E1": "the action's own response",
    "E2": "an independent provider readback",
    "E3": "a provider-originated event",
}
KINDS = {
    "pre_completion": "pre-completion rule",
    "contradicted": "contradiction",
    "verified": "verification",
}
# A condition's result read for the effect: a verification that holds supports it, a
# contradiction or a pre-completion rule that holds goes against it.
SUPPORTS = {"verified": "true", "contradicted": "false", "pre_completion": "false"}
VERDICT_TONES: dict[str, str] = {
    Verdict.VERIFIED: "good",
    Verdict.CONTRADICTED: "bad",
    Verdict.FAILED: "bad",
    Verdict.UNVERIFIABLE: "warn",
    Verdict.PENDING: "neutral",
}


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def compact_json(value: Any) -> str:
    """A condition's actual or expected value on one line; text as it is, nothing as a dash."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def duration(ms: int) -> str:
    for unit, size in (("days", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms / 1000:g} s"
