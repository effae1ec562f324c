"""What the verification pages share, and other apps' admin pages borrow: the verdicts' colours,
the evidence levels' meanings, words with their code as details, JSON shown to people,
durations."""

from __future__ import annotations

import json
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

from verification.models import Verdict
from verification.selectors import code_is_words, verdict_class_label, verdict_label

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


def worded(text: str, code: str | None) -> SafeString:
    """Words for a person, the code beside them as a quiet details line (issue 41: codes stay for
    whoever needs them, out of the sentence); no details when the code already reads as words."""
    if not code or (code_is_words(code) and code.lower() == text.lower()):
        return format_html("{}", text)
    return format_html(
        '{} <span class="vouch-quiet">(details: <span class="vouch-mono">{}</span>)</span>',
        text,
        code,
    )


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def verdict_html(verdict: str, verdict_class: str = "", *, tone: str = "") -> SafeString:
    """A verdict and its class as a person reads them (in a badge of `tone` when given), the
    codes after them as one details line."""
    label = verdict_label(verdict)
    head = (
        format_html('<span class="vouch-badge vouch-{}">{}</span>', tone, label) if tone else label
    )
    said = format_html("{}: {}", head, _lower_first(verdict_class_label(verdict_class)))
    said = said if verdict_class else format_html("{}", head)
    codes = " · ".join(c for c in (verdict, verdict_class) if c and not code_is_words(c))
    if not codes:
        return format_html("{}", said)
    return format_html(
        '{} <span class="vouch-quiet">(details: <span class="vouch-mono">{}</span>)</span>',
        said,
        codes,
    )


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
