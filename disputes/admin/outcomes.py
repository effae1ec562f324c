"""The "Dispute outcomes" console page (SPEC §17): per reason and month, what was decided, won,
lost and accepted without a fight, the win rate with its 95% Wilson interval, and the net recovery
after fees; and the same figures as CSV. For staff who may view disputes.

Views only: the figures come from `disputes.outcomes`; this module parses the month bounds, checks
the permission, and renders. config/urls.py includes `urlpatterns` under /admin/disputes/outcomes/
(before the stock admin's own), each view wrapped by `admin_view`: staff only."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils import timezone

from core.exceptions import VouchError
from disputes.fees import percent_text
from disputes.models import Dispute
from disputes.outcomes import OutcomeRow, Outcomes, dispute_outcomes, outcomes_csv

PERMISSION_NEEDED = (
    "Dispute outcomes are shown to staff who may view disputes (disputes.view_dispute)."
)


@dataclass(frozen=True)
class ShownRow:
    """A row of figures with its rate and interval as percentages (`—` when nothing decided)."""

    row: OutcomeRow
    rate: str
    interval: str


def _shown(row: OutcomeRow) -> ShownRow:
    rate, interval = row.win_rate, row.interval
    return ShownRow(
        row=row,
        rate="—" if rate is None else f"{percent_text(rate)}%",
        interval="—"
        if interval is None
        else f"{percent_text(interval[0])}\u2013{percent_text(interval[1])}%",
    )


def _checked(request: HttpRequest) -> tuple[str, str]:
    """The month bounds asked for (`from`, `to`: YYYY-MM or empty), once the person is allowed."""
    if not admin.site.get_model_admin(Dispute).has_view_permission(request):
        raise PermissionDenied(PERMISSION_NEEDED)
    return request.GET.get("from", "").strip(), request.GET.get("to", "").strip()


def _figures(from_month: str, to_month: str) -> tuple[Outcomes | None, str]:
    try:
        return dispute_outcomes(from_month=from_month or None, to_month=to_month or None), ""
    except VouchError as exc:
        return None, f"{exc.code}: {exc.message}"


def outcomes_view(request: HttpRequest) -> HttpResponse:
    """The figures per reason and month, each reason's total, and the overall total."""
    from_month, to_month = _checked(request)
    outcomes, error = _figures(from_month, to_month)
    # Each reason's months, then its total; the overall total last.
    lines: list[tuple[str, ShownRow]] = []
    if outcomes is not None:
        for total in outcomes.reasons:
            lines += [("month", _shown(r)) for r in outcomes.rows if r.reason == total.reason]
            lines.append(("reason", _shown(total)))
        if lines:
            lines.append(("total", _shown(outcomes.total)))
    query = request.GET.urlencode()
    context: dict[str, object] = {
        **admin.site.each_context(request),
        "title": "Dispute outcomes",
        "lines": lines,
        "error": error,
        "from_month": from_month,
        "to_month": to_month,
        "csv_query": f"?{query}" if query else "",
        "disputes_opts": Dispute._meta,
        # A wide table: the app sidebar would take the room its columns need.
        "is_nav_sidebar_enabled": False,
    }
    return render(request, "admin/disputes/outcomes.html", context, status=400 if error else 200)


def outcomes_csv_view(request: HttpRequest) -> HttpResponse:
    """The same figures as CSV, to download."""
    from_month, to_month = _checked(request)
    outcomes, error = _figures(from_month, to_month)
    if outcomes is None:
        return HttpResponse(error, status=400, content_type="text/plain; charset=utf-8")
    response = HttpResponse(outcomes_csv(outcomes), content_type="text/csv; charset=utf-8")
    name = f"dispute-outcomes-{timezone.now():%Y%m%dT%H%M%SZ}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


urlpatterns = [
    path("", admin.site.admin_view(outcomes_view), name="admin-dispute-outcomes"),
    path("csv/", admin.site.admin_view(outcomes_csv_view), name="admin-dispute-outcomes-csv"),
]
