"""The admin's home page as the ops console (SPEC §10), its search box's results, and the styled
403 of every page.

Views only: the console's numbers come from `ops.console`, its charts from `ops.charts`, what
carries a searched id from `ops.search`, the permission a refused page needed from
`ops.forbidden`."""

from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from ops import charts
from ops.console import ops_console
from ops.forbidden import refusal_of
from ops.search import KINDS, search


def _can_view(request: HttpRequest, label: str) -> bool:
    """Whether the user may open the admin list of `app_label.model_name` (as its admin says)."""
    model = apps.get_model(label)
    model_admin = admin.site._registry.get(model)
    return model_admin is not None and bool(model_admin.has_view_permission(request))


def console_index(request: HttpRequest) -> HttpResponse:
    """The admin index with the console above the app list (wrapped by `admin_view` in
    config/urls.py, so only staff reach it). Each part shows only to someone who may open the
    list behind it."""
    console = ops_console()
    allowed = {
        label: _can_view(request, label)
        for label in {
            *(tile.model for tile in (*console.tiles, *console.discrepancies)),
            "verification.verificationrun",
            "verification.escalation",
            "disputes.dispute",
        }
    }
    return admin.site.index(
        request,
        extra_context={
            "console": console,
            "tiles": [tile for tile in console.tiles if allowed[tile.model]],
            "discrepancy_tiles": [t for t in console.discrepancies if allowed[t.model]],
            "show_disputes": allowed["disputes.dispute"],
            "show_verdicts": allowed["verification.verificationrun"],
            "show_escalations": allowed["verification.escalation"],
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


def console_search(request: HttpRequest) -> HttpResponse:
    """The console's search box (wrapped by `admin_view` in ops/admin_urls.py: staff only): the
    one object carrying the id opens straight away; several are listed, the id's own object
    first; none (or none this person may see) says so. Only lists the person may open are
    asked."""
    query = request.GET.get("q", "")
    if not query.strip():
        return redirect("admin:index")
    result = search(query, can_view=lambda label: _can_view(request, label))
    if result.single is not None:
        return redirect(result.single.url)
    context: dict[str, object] = {
        **admin.site.each_context(request),
        "title": f"Search: {result.term}",
        "result": result,
        "query": query,
        "prefixes": [(kind.prefix, kind.label) for kind in KINDS],
    }
    return render(request, "admin/search.html", context)


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: a styled page. In the admin it wears the admin's look and names the
    permission the page needs (and the refusal's own message when it has one); elsewhere a plain
    page."""
    refusal = refusal_of(request.path)
    message = str(exception) if exception is not None and str(exception) else ""
    context: dict[str, object] = {
        "refusal": refusal,
        "message": message,
        "layout": "admin/base_site.html" if refusal.admin else "admin/vouch_plain.html",
        "title": "Permission needed" if refusal.admin else "Forbidden",
        # A read-only page refuses even who holds the permission: say so rather than ask for it.
        "held": bool(refusal.permission) and request.user.has_perm(refusal.permission),
    }
    if refusal.admin:
        context.update(admin.site.each_context(request))
    return render(request, "403.html", context, status=403)
