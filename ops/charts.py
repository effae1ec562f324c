"""Small charts drawn on the server as inline SVG (SPEC §10: no script, no request leaving
Vouch). Presentation only: the numbers come from `ops.console`. Every day of the span has its
own element (`vouch-bar` in a bar chart, a `vouch-point` per series in a line chart), so a day
with nothing is drawn as nothing rather than skipped."""

from __future__ import annotations

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ops.console import ChartData
from verification.models import Verdict

WIDTH = 620
HEIGHT = 150
LEFT = 34  # room for the axis labels
BOTTOM = 18
TOP = 8
COLOURS = {
    Verdict.VERIFIED: "#2e7d32",
    Verdict.CONTRADICTED: "#c62828",
    Verdict.FAILED: "#ef6c00",
    Verdict.UNVERIFIABLE: "#6a1b9a",
    "opened": "#c62828",
    "resolved": "#2e7d32",
}


def _join(parts: list[SafeString]) -> SafeString:
    return format_html_join("", "{}", ((part,) for part in parts))


def _scale(chart: ChartData, stacked: bool) -> int:
    if stacked:
        peak = max(
            (sum(s.values[i] for s in chart.series) for i in range(len(chart.days))), default=0
        )
    else:
        peak = max((max(s.values, default=0) for s in chart.series), default=0)
    return max(peak, 1)


def _frame(peak: int, chart: ChartData, label: str) -> SafeString:
    plot_h = HEIGHT - TOP - BOTTOM
    first, last = chart.days[0], chart.days[-1]
    return format_html(
        '<line class="vouch-axis" x1="{l}" y1="{b}" x2="{r}" y2="{b}" stroke="currentColor" '
        'stroke-opacity="0.4"/>'
        '<text x="{lt}" y="{top}" font-size="10" text-anchor="end" fill="currentColor">'
        "{peak}</text>"
        '<text x="{lt}" y="{b}" font-size="10" text-anchor="end" fill="currentColor">0</text>'
        '<text x="{l}" y="{h}" font-size="10" fill="currentColor">{first}</text>'
        '<text x="{r}" y="{h}" font-size="10" text-anchor="end" fill="currentColor">{last}</text>'
        "<title>{label}</title>",
        l=LEFT,
        r=WIDTH,
        b=TOP + plot_h,
        lt=LEFT - 4,
        top=TOP + 8,
        h=HEIGHT - 4,
        peak=peak,
        first=first.isoformat(),
        last=last.isoformat(),
        label=label,
    )


def bar_chart(chart: ChartData, *, label: str) -> SafeString:
    """Stacked bars: one `vouch-bar` group per day, one rectangle per non-zero series."""
    days = len(chart.days)
    plot_h = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT) / days
    peak = _scale(chart, stacked=True)
    bars = []
    for i, day in enumerate(chart.days):
        x = LEFT + i * slot + 1
        y = float(TOP + plot_h)
        parts = []
        for series in chart.series:
            value = series.values[i]
            if not value:
                continue
            h = plot_h * value / peak
            y -= h
            parts.append(
                format_html(
                    '<rect x="{}" y="{}" width="{}" height="{}" fill="{}" '
                    'data-series="{}" data-value="{}"/>',
                    f"{x:.1f}",
                    f"{y:.1f}",
                    f"{max(slot - 2, 1):.1f}",
                    f"{h:.1f}",
                    COLOURS.get(series.name, "#607d8b"),
                    series.name,
                    value,
                )
            )
        tip = ", ".join(f"{s.values[i]} {s.name}" for s in chart.series if s.values[i]) or "none"
        bars.append(
            format_html(
                '<g class="vouch-bar" data-day="{}"><title>{}: {}</title>{}</g>',
                day.isoformat(),
                day.isoformat(),
                tip,
                _join(parts),
            )
        )
    return _svg(chart, label, _join(bars), peak)


def line_chart(chart: ChartData, *, label: str) -> SafeString:
    """One polyline per series, and one `vouch-point` circle per day of each series."""
    days = len(chart.days)
    plot_h = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT) / days
    peak = _scale(chart, stacked=False)
    drawn = []
    for series in chart.series:
        colour = COLOURS.get(series.name, "#607d8b")
        points = [
            (LEFT + (i + 0.5) * slot, TOP + plot_h - plot_h * value / peak)
            for i, value in enumerate(series.values)
        ]
        drawn.append(
            format_html(
                '<polyline class="vouch-line" data-series="{}" fill="none" stroke="{}" '
                'stroke-width="1.5" points="{}"/>',
                series.name,
                colour,
                " ".join(f"{x:.1f},{y:.1f}" for x, y in points),
            )
        )
        drawn.append(
            format_html_join(
                "",
                '<circle class="vouch-point" data-series="{}" data-day="{}" data-value="{}" '
                'cx="{}" cy="{}" r="2.5" fill="{}"><title>{}: {} {}</title></circle>',
                (
                    (
                        series.name,
                        day.isoformat(),
                        value,
                        f"{x:.1f}",
                        f"{y:.1f}",
                        colour,
                        day.isoformat(),
                        value,
                        series.name,
                    )
                    for day, value, (x, y) in zip(chart.days, series.values, points, strict=True)
                ),
            )
        )
    return _svg(chart, label, _join(drawn), peak)


def _svg(chart: ChartData, label: str, body: SafeString, peak: int) -> SafeString:
    return format_html(
        '<svg class="vouch-chart" role="img" aria-label="{}" viewBox="0 0 {} {}" '
        'width="100%" preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">'
        "{}{}</svg>",
        label,
        WIDTH,
        HEIGHT,
        _frame(peak, chart, label),
        body,
    )


def legend(chart: ChartData) -> list[tuple[str, str, int]]:
    """(series, colour, total over the span) for the key under a chart."""
    return [(s.name, COLOURS.get(s.name, "#607d8b"), s.total) for s in chart.series]
