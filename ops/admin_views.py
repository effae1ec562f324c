"""The admin's home page as the ops console (SPEC §10), and the styled 403 of every page.

Views only: the console's numbers come from `ops.console`, its charts from `ops.charts`, the
permission a refused page needed from `ops.forbidden`."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from ops import charts
from ops.console import ops_console


def console_index(request: HttpRequest) -> HttpResponse:
    """The admin index with the console above the app list (wrapped by `admin_view` in
    config/urls.py, so only staff reach it)."""
    console = ops_console()
    return admin.site.index(
        request,
        extra_context={
            "console": console,
            "verdicts_svg": charts.bar_chart(
                console.verdicts, label="Verification verdicts per day, last 30 days"
            ),
            "verdicts_legend": charts.legend(console.verdicts),
            "escalations_svg": charts.line_chart(
                console.escalations, label="Escalations opened and resolved per day, last 30 days"
            ),
            "escalations_legend": charts.legend(console.escalations),
        },
    )
