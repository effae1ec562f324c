"""Which permission a refused admin page needed, from its URL (the styled 403, config/urls.py).

The admin's own pages are named `<app>_<model>_<view>` (changelist, change, add, delete, history)
and need the model's `view_`, `add_`, `change_` or `delete_` permission; Vouch's custom admin
views (approve, file, resolve, …) each need the permission their service checks. A path that is
not an admin page needs no permission this module can name."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin
from django.urls import Resolver404, resolve

# The custom admin views and the permission each one's service requires.
CUSTOM_VIEWS: dict[str, str] = {
    "disputes_packet_approve": "disputes.approve_packet",
    "disputes_packet_file": "disputes.file_packet",
    "disputes_packet_edit": "disputes.change_packet",
    "disputes_packet_prepare": "disputes.change_packet",
    "disputes_packet_review": "disputes.view_packet",
    "disputes_dispute_admit": "disputes.add_evidence",
    "disputes_evidence_file": "disputes.view_evidence",
    "verification_escalation_resolve": "verification.resolve_escalation",
    "reconciliation_adjustment_propose": "envelopes.add_adjustment",
    "reconciliation_adjustment_decide": "reconciliation.approve_adjustment",
    "reconciliation_discrepancy_acknowledge": "reconciliation.work_discrepancy",
    "reconciliation_discrepancy_accept": "reconciliation.work_discrepancy",
    "reconciliation_discrepancy_propose": "envelopes.add_adjustment",
    "reconciliation_discrepancy_export": "reconciliation.view_discrepancy",
}
# Django's own admin views, by the suffix of their URL name.
STANDARD_VIEWS = {
    "changelist": "view",
    "change": "view",
    "history": "view",
    "add": "add",
    "delete": "delete",
}


@dataclass(frozen=True)
class Refusal:
    """What a refused page was: an admin page or not, and the permission it needed if known."""

    admin: bool
    permission: str = ""
    model: str = ""  # the model's verbose name, for the sentence


def refusal_of(path: str) -> Refusal:
    try:
        match = resolve(path)
    except Resolver404:
        return Refusal(admin=path.startswith("/admin/"))
    if "admin" not in match.namespaces:
        return Refusal(admin=path.startswith("/admin/"))
    name = match.url_name or ""
    for model in admin.site._registry:
        opts = model._meta
        prefix = f"{opts.app_label}_{opts.model_name}_"
        if not name.startswith(prefix):
            continue
        view = name.removeprefix(prefix)
        if name in CUSTOM_VIEWS:
            permission = CUSTOM_VIEWS[name]
        elif view in STANDARD_VIEWS:
            permission = f"{opts.app_label}.{STANDARD_VIEWS[view]}_{opts.model_name}"
        else:
            continue
        return Refusal(admin=True, permission=permission, model=str(opts.verbose_name))
    return Refusal(admin=True)
