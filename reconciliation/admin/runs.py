"""Runs and the provider pages they read, in the admin: a run's counts by class, its report and
its signature checked, and each observation as stored (its bytes hashed again)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin_base import ReadOnlyAdmin
from reconciliation.admin.shared import RUN_TONES, _url, badge, span, when
from reconciliation.models import Discrepancy, Observation, Run, RunStatus
from reconciliation.runs import report_verify
from reconciliation.selectors import (
    class_label,
    observation_discrepancies,
    run_class_counts,
    run_discrepancies_cleared,
    run_discrepancies_opened,
    run_kind_label,
    run_observations,
    run_status_label,
    run_totals,
    status_label,
)
from verification.admin import compact_json, pretty_json, worded
from verification.selectors import subject_type_label


def discrepancy_row(discrepancy: Discrepancy, url: str) -> dict[str, Any]:
    """A discrepancy in a run's or a page's table: its class, subject and status in words."""
    return {
        "d": discrepancy,
        "url": url,
        "class_html": worded(class_label(discrepancy.code), discrepancy.code),
        "subject_words": subject_type_label(discrepancy.subject_type),
        "status_words": status_label(discrepancy.status, discrepancy.resolution),
    }


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    """Newest first (the model's ordering)."""

    list_display = (
        "public_id",
        "kind_words",
        "status_badge",
        "window",
        "started",
        "duration",
        "compared_total",
        "provider_calls",
        "opened_total",
        "still_open_total",
        "cleared_total",
        "report_short",
    )
    list_filter = ("kind", "status", "lane")
    search_fields = ("public_id", "report_sha256")
    change_form_template = "admin/reconciliation/run/change_form.html"
    fields = ("public_id",)
    readonly_fields = fields

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Run) -> SafeString:
        label = run_status_label(obj.status)
        label = f"{label} (dry run)" if obj.dry_run else label
        return badge(label, RUN_TONES.get(RunStatus(obj.status), "neutral"))

    @admin.display(description="kind", ordering="kind")
    def kind_words(self, obj: Run) -> str:
        return run_kind_label(obj.kind)

    @admin.display(description="window", ordering="window_start")
    def window(self, obj: Run) -> SafeString:
        return format_html("{}<br>→ {}", when(obj.window_start), when(obj.window_end))

    @admin.display(description="started", ordering="started_at")
    def started(self, obj: Run) -> str:
        return when(obj.started_at)

    @admin.display(description="duration")
    def duration(self, obj: Run) -> str:
        end = obj.finished_at or obj.heartbeat_at
        text = span(end - obj.started_at)
        return text if obj.finished_at else f"{text} so far"

    @admin.display(description="compared")
    def compared_total(self, obj: Run) -> int:
        return run_totals(obj).compared

    @admin.display(description="opened")
    def opened_total(self, obj: Run) -> int:
        return run_totals(obj).opened

    @admin.display(description="still open")
    def still_open_total(self, obj: Run) -> int:
        return run_totals(obj).still_open

    @admin.display(description="cleared")
    def cleared_total(self, obj: Run) -> int:
        return run_totals(obj).cleared

    @admin.display(description="report SHA-256", ordering="report_sha256")
    def report_short(self, obj: Run) -> SafeString | str:
        if not obj.report_sha256:
            return "—"
        return format_html(
            '<span class="vouch-mono" title="{}">{}…</span>',
            obj.report_sha256,
            obj.report_sha256[:12],
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # A wide list: the app sidebar would push its last columns out of a 1366 px screen.
        context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        return super().changelist_view(request, context)

    def page_context(self, request: HttpRequest, obj: Run | None) -> dict[str, Any]:
        if obj is None:
            return {}
        observations = run_observations(obj)
        shown = list(observations[:OBSERVATIONS_SHOWN])
        count = observations.count() if len(shown) == OBSERVATIONS_SHOWN else len(shown)
        totals = run_totals(obj)
        return {
            "run": obj,
            "subtitle": f"{run_kind_label(obj.kind)} {obj.public_id}",
            "kind_html": worded(run_kind_label(obj.kind), obj.kind),
            "status_badge": self.status_badge(obj),
            "duration_text": self.duration(obj),
            "started_text": when(obj.started_at),
            "finished_text": when(obj.finished_at),
            "heartbeat_text": when(obj.heartbeat_at),
            "window_start_text": when(obj.window_start),
            "window_end_text": when(obj.window_end),
            "totals": totals,
            "compared": sorted((obj.compared or {}).items()),
            "class_counts": run_class_counts(obj),
            "observations": [(o, when(o.observed_at), compact_json(o.request)) for o in shown],
            "observations_count": count,
            "observations_url": f"{_url('observation_changelist')}?run__id__exact={obj.pk}",
            "opened": [
                discrepancy_row(d, _url("discrepancy_change", d.pk))
                for d in run_discrepancies_opened(obj, now=timezone.now())
            ],
            "cleared": [
                discrepancy_row(d, _url("discrepancy_change", d.pk))
                for d in run_discrepancies_cleared(obj)
            ],
            "report_check": report_verify(obj) if obj.report else None,
            "checkpoint_json": pretty_json(obj.checkpoint) if obj.checkpoint else "",
            "report_json": pretty_json(obj.report) if obj.report else "",
        }


OBSERVATIONS_SHOWN = 200


@admin.register(Observation)
class ObservationAdmin(ReadOnlyAdmin):
    """The provider pages runs read, each with the SHA-256 of the answer as received."""

    list_display = ("id", "run_link", "kind", "observed", "sha256_short")
    list_filter = ("kind",)
    list_select_related = ("run",)
    search_fields = ("sha256", "run__public_id")
    change_form_template = "admin/reconciliation/observation/change_form.html"
    fields = ("kind",)
    readonly_fields = fields

    @admin.display(description="run", ordering="run__started_at")
    def run_link(self, obj: Observation) -> SafeString:
        return format_html('<a href="{}">{}</a>', _url("run_change", obj.run_id), obj.run.public_id)

    @admin.display(description="observed", ordering="observed_at")
    def observed(self, obj: Observation) -> str:
        return when(obj.observed_at)

    @admin.display(description="SHA-256", ordering="sha256")
    def sha256_short(self, obj: Observation) -> SafeString:
        return format_html(
            '<span class="vouch-mono" title="{}">{}…</span>', obj.sha256, obj.sha256[:16]
        )

    def page_context(self, request: HttpRequest, obj: Observation | None) -> dict[str, Any]:
        if obj is None:
            return {}
        return {
            "observation": obj,
            "observed_text": when(obj.observed_at),
            "run_url": _url("run_change", obj.run_id),
            "request_json": pretty_json(obj.request),
            **observation_shown(obj),
            "discrepancies": [
                discrepancy_row(d, _url("discrepancy_change", d.pk))
                for d in observation_discrepancies(obj)
            ],
        }


def observation_shown(obj: Observation) -> dict[str, Any]:
    """The answer for the page: the stored bytes decompressed (pretty-printed when they are
    JSON), whether they still hash to the recorded SHA-256, and how large they are."""
    raw = obj.body_bytes()
    if raw is None:  # stored before bodies were kept: the parsed JSON is all there is
        return {"legacy": True, "data_json": pretty_json(obj.data), "sha256_matches": None}
    try:
        shown = pretty_json(json.loads(raw))
    except ValueError:
        shown = raw.decode("utf-8", errors="replace")
    return {
        "legacy": False,
        "data_json": shown,
        "sha256_matches": hashlib.sha256(raw).hexdigest() == obj.sha256,
        "body_length": len(raw),
        "stored_length": len(bytes(obj.body or b"")),
    }
