"""The run page: what was checked, what was decided and on what evidence, with the timeline of
the attempts (read-only: the engine alone writes runs)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.contrib import admin
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin_base import AmountSearchAdmin, ReadOnlyAdmin, short_id, two_lines
from core.dashboard import stripe_link
from core.display import MICRO_PER_CENT, as_moment, dollars, moment
from verification.admin.shared import (
    KINDS,
    LEVEL_MEANINGS,
    SUPPORTS,
    VERDICT_TONES,
    compact_json,
    duration,
    pretty_json,
    verdict_html,
    worded,
)
from verification.contracts import Contract, Operator, get_contract, registry
from verification.models import (
    Attempt,
    Observation,
    VerificationRun,
)
from verification.selectors import (
    code_words,
    condition_result_label,
    contract_label,
    trigger_label,
    verdict_class_label,
    verdict_label,
    verdict_words_in,
)

# An ISO 8601 time as the engine writes it (`2026-11-29T10:00:00+00:00`), not any text with digits.
ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


@dataclass(frozen=True)
class ConditionRow:
    name: str
    kind: str
    meaning: str
    result: str
    result_label: str
    name_words: str
    tone: str  # good | bad | unknown
    actual: str
    expected: str


@dataclass(frozen=True)
class ObservationRow:
    observation: Observation
    level_meaning: str
    channel_description: str
    data: str
    channel_label: str = ""


@dataclass(frozen=True)
class AttemptRow:
    attempt: Attempt
    label: str
    tone: str
    decided_run: bool
    verdict_html: SafeString | str = ""
    reason: str = ""
    held: str = ""
    conditions: list[ConditionRow] = field(default_factory=list)
    observations: list[ObservationRow] = field(default_factory=list)


def _meanings(contract: Contract | None) -> dict[str, str]:
    """What each of the contract's conditions means, by name, in the contract's own words."""
    if contract is None:
        return {}
    meanings = {c.name: c.meaning for c in contract.verified}
    meanings |= {c.name: f"{c.reason} (class: {c.class_})" for c in contract.contradicted}
    meanings |= {r.name: f"{r.reason} (would be {r.verdict})" for r in contract.pre_completion}
    return meanings


def _condition_units(contract: Contract | None) -> dict[str, str]:
    """What the contract's conditions compare, by name, where the page reads it otherwise than
    as it is: `time` (`time_after`, `time_before`) or `cents` (the provider's `amount`)."""
    if contract is None:
        return {}
    named = [
        *((c.name, c) for c in contract.verified),
        *((c.name, c) for c in contract.contradicted),
        *((r.name, r.match) for r in contract.pre_completion),
    ]
    units: dict[str, str] = {}
    for name, condition in named:
        if condition.operator in (Operator.TIME_AFTER, Operator.TIME_BEFORE):
            units[name] = "time"
        elif condition.path.rsplit(".", 1)[-1] == "amount":
            units[name] = "cents"
    return units


def _is_iso_time(value: Any) -> bool:
    return (
        isinstance(value, str)
        and ISO_TIME.match(value) is not None
        and as_moment(value) is not None
    )


def _condition_value(value: Any, *, unit: str) -> str:
    """A condition's value as the page shows it: a time as `2026-12-01 22:18:10 UTC`, whether the
    provider wrote it in seconds since the epoch or the engine as ISO 8601; the provider's amount
    as `$5.00 · 500 cents`; the rest as is."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if _is_iso_time(value) or (unit == "time" and number):
        return moment(value)
    if unit == "cents" and isinstance(value, int) and not isinstance(value, bool):
        return f"{dollars(value * MICRO_PER_CENT)} · {value:,} cents"
    return compact_json(value)


def _condition_row(
    raw: Any, meanings: dict[str, str], units: dict[str, str] | None = None
) -> ConditionRow:
    item = raw if isinstance(raw, dict) else {"name": str(raw)}
    kind = str(item.get("kind", ""))
    result = str(item.get("result", "unknown"))
    if result not in ("true", "false"):
        tone = "unknown"
    else:
        tone = "good" if SUPPORTS.get(kind) == result else "bad"
    name = str(item.get("name", ""))
    actual, expected = item.get("actual"), item.get("expected")
    # A time compared with a time: the contract says so, or (its contract not loaded) one side
    # is an ISO time, so the other, a number, is the provider's epoch.
    unit = (units or {}).get(name, "")
    if _is_iso_time(actual) or _is_iso_time(expected):
        unit = "time"
    return ConditionRow(
        name=name,
        kind=KINDS.get(kind, kind),
        meaning=meanings.get(name, ""),
        result=result,
        result_label=condition_result_label(result),
        name_words=code_words(name),
        tone=tone,
        actual=_condition_value(actual, unit=unit),
        expected=_condition_value(expected, unit=unit),
    )


# An attempt no schedule numbered, by what started it.
UNNUMBERED_ATTEMPTS = {
    "event": "Attempt on a provider event",
    "monitor": "Look again after the verdict",
    "poll": "Scheduled attempt",
}


def _attempt_label(attempt: Attempt) -> str:
    if attempt.number:
        return f"Attempt #{attempt.number} ({trigger_label(attempt.trigger)})"
    return UNNUMBERED_ATTEMPTS.get(attempt.trigger) or f"Attempt ({trigger_label(attempt.trigger)})"


def provider_objects(run: VerificationRun) -> list[tuple[str, str]]:
    """The provider objects a run is about, as (label, id): the object the action returned and
    the charge of its input."""
    result = run.action_result if isinstance(run.action_result, dict) else {}
    inputs = run.input if isinstance(run.input, dict) else {}
    found: list[tuple[str, str]] = []
    for label, value in (
        ("object", result.get("id")),
        ("charge", inputs.get("charge") or result.get("charge")),
        ("PaymentIntent", result.get("payment_intent")),
    ):
        if isinstance(value, str) and value and all(value != seen for _, seen in found):
            found.append((label, value))
    return found


def run_page_context(run: VerificationRun) -> dict[str, Any]:
    try:
        contract: Contract | None = get_contract(run.contract_id)
    except LookupError:
        contract = None
    channels = {c.name: c.description for c in contract.channels} if contract else {}
    meanings = _meanings(contract)
    units = _condition_units(contract)
    attempts = run.attempts.order_by("started_at", "id").prefetch_related("observations")
    timeline = [
        AttemptRow(
            attempt=attempt,
            label=_attempt_label(attempt),
            tone=VERDICT_TONES.get(attempt.verdict, "neutral"),
            decided_run=attempt.pk == run.decided_by_id,
            reason=verdict_words_in(attempt.reason),
            held=verdict_words_in(attempt.held),
            verdict_html=verdict_html(
                attempt.verdict,
                attempt.verdict_class,
                tone=VERDICT_TONES.get(attempt.verdict, "neutral"),
            ),
            conditions=[_condition_row(c, meanings, units) for c in attempt.conditions or []],
            observations=[
                ObservationRow(
                    observation=o,
                    level_meaning=LEVEL_MEANINGS.get(o.level, ""),
                    channel_description=channels.get(o.channel, ""),
                    data=pretty_json(o.data),
                    channel_label=code_words(o.channel),
                )
                for o in attempt.observations.all()
            ],
        )
        for attempt in attempts
    ]
    return {
        "run": run,
        "contract": contract,
        "contract_outdated": contract is not None and contract.version != run.contract_version,
        "max_attempts": contract.timing.max_attempts if contract else None,
        "stale_read_window": duration(contract.timing.stale_read_window_ms) if contract else "",
        "verdict_tone": VERDICT_TONES.get(run.verdict, "neutral"),
        "verdict_label": verdict_label(run.verdict),
        "verdict_reason": verdict_words_in(run.verdict_reason),
        "subtitle": f"{contract.title if contract else contract_label(run.contract_id)}: "
        f"{verdict_label(run.verdict).lower()}",
        "verdict_class_html": worded(verdict_class_label(run.verdict_class), run.verdict_class)
        if run.verdict_class
        else "",
        "contract_title": contract.title if contract else contract_label(run.contract_id),
        "input_json": pretty_json(run.input),
        "provider_objects": provider_objects(run),
        "action_result_json": pretty_json(run.action_result),
        "correlation": [
            (key, compact_json(value)) for key, value in sorted((run.correlation or {}).items())
        ],
        "timeline": timeline,
        "decided_by_label": next((row.label for row in timeline if row.decided_run), ""),
        "escalations": [
            (escalation, verdict_html(escalation.verdict, escalation.verdict_class))
            for escalation in run.escalations.select_related("resolved_by").order_by(
                "created_at", "id"
            )
        ],
    }


class ContractFilter(admin.SimpleListFilter):
    """By contract, named by its title (the filter's value stays the contract's id)."""

    title = "contract"
    parameter_name = "contract_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return sorted(((cid, c.title) for cid, c in registry().items()), key=lambda x: x[1])

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(contract_id=self.value()) if self.value() else queryset


@admin.register(VerificationRun)
class VerificationRunAdmin(AmountSearchAdmin, ReadOnlyAdmin):
    """Verdict first: it is what a person decides by; then what the run is about (the provider
    object, linked to the Stripe Dashboard) and its amount."""

    list_display = (
        "verdict_badge",
        "run",
        "about",
        "tries",
        "created",
        "decided",
    )
    list_display_links = ("run",)
    list_filter = ("verdict", ContractFilter)
    # Provider ids (refund, charge, PaymentIntent) match a resolved correlation key exactly, or
    # the run's input charge or the provider object it verifies.
    search_fields = ("public_id", "operation_id", "=keys__value")
    search_help_text = (
        "Run id, operation (idempotency key), refund (re_…), charge (ch_…) or PaymentIntent "
        "(pi_…) id, or an amount in dollars (12.50)."
    )
    date_hierarchy = "created_at"
    change_form_template = "admin/verification/verificationrun/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[VerificationRun]:
        return super().get_queryset(request).annotate(attempt_count=Count("attempts"))

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[VerificationRun], search_term: str
    ) -> tuple[QuerySet[VerificationRun], bool]:
        results, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip()
        if term and " " not in term:
            results = results | queryset.filter(
                Q(input__charge=term)
                | Q(action_result__id=term)
                | Q(action_result__payment_intent=term)
                | Q(action_result__charge=term)
            )
            may_have_duplicates = True
        return results, may_have_duplicates

    def rows_with_amount(self, queryset: QuerySet[Any], amount_micro: int) -> QuerySet[Any]:
        # Runs hold the amount as the provider took it: whole cents.
        if amount_micro % 10_000:
            return queryset.none()
        return queryset.filter(input__amount=amount_micro // 10_000)

    @admin.display(description="verdict", ordering="verdict")
    def verdict_badge(self, obj: VerificationRun) -> SafeString:
        return format_html(
            '<span class="vouch-badge vouch-{}" title="{}">{}</span>{}',
            VERDICT_TONES.get(obj.verdict, "neutral"),
            obj.verdict,
            verdict_label(obj.verdict),
            format_html(
                '<br><span title="{}">{}</span>',
                obj.verdict_class,
                verdict_class_label(obj.verdict_class),
            )
            if obj.verdict_class
            else "",
        )

    @admin.display(description="attempts", ordering="attempt_count")
    def tries(self, obj: VerificationRun) -> int:
        """Attempts made, of every trigger: `attempts_made` counts only the scheduled polls, 0 for
        a run an event or the first look decided."""
        return int(getattr(obj, "attempt_count", obj.attempts.count()))

    @admin.display(description="run", ordering="public_id")
    def run(self, obj: VerificationRun) -> SafeString:
        return format_html(
            '{}<span class="vouch-sub" title="{}">{}</span>',
            short_id(obj.public_id),
            obj.contract_id,
            contract_label(obj.contract_id),
        )

    @admin.display(description="about")
    def about(self, obj: VerificationRun) -> SafeString | str:
        """The provider object (linked to the Dashboard) and the amount asked, in dollars."""
        result = obj.action_result if isinstance(obj.action_result, dict) else {}
        inputs = obj.input if isinstance(obj.input, dict) else {}
        subject = str(result.get("id") or inputs.get("charge") or "")
        cents = inputs.get("amount")
        amount = (
            f"${cents // 100:,}.{cents % 100:02d}"
            if isinstance(cents, int) and not isinstance(cents, bool)
            else ""
        )
        return format_html(
            '{}<span class="vouch-sub">{}</span>', stripe_link(subject) if subject else "—", amount
        )

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: VerificationRun) -> SafeString:
        return two_lines(obj.created_at)

    @admin.display(description="decided", ordering="decided_at")
    def decided(self, obj: VerificationRun) -> SafeString | str:
        return two_lines(obj.decided_at) if obj.decided_at else "—"

    def page_context(self, request: HttpRequest, obj: VerificationRun | None) -> dict[str, Any]:
        return run_page_context(obj) if obj is not None else {}
