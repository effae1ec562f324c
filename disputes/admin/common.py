"""What the disputes admin pages share: the labels that never claim more than the readback proved,
links to receipts, reviews and evidence files, and who may read or act."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from accounts.models import User
from core.admin_base import ReadOnlyAdmin
from disputes.models import (
    ApprovalStatus,
    Evidence,
    FilingStatus,
    Packet,
    PacketStatus,
    ProviderStatus,
)
from disputes.permissions import (
    PERM_ADMIT,
    PERM_APPROVE,
    PERM_EDIT,
    PERM_FILE,
    READ_BY_MODEL,
    READ_EVIDENCE,
    READ_PACKETS,
    REVIEW_PERMISSIONS,
    rule_for_permission,
)
from disputes.selectors import (
    disputes_awaiting_response,
    packets_awaiting_approval,
    packets_awaiting_filing,
)

__all__ = ["PERM_ADMIT", "PERM_APPROVE", "PERM_EDIT", "PERM_FILE", "REVIEW_PERMISSIONS"]

# Labels that claim no more than Vouch can prove: the provider's answer is a claim, and only the
# readback run makes a filing `filed`. Never "accepted", "won" or "closed".
FILING_LABELS: dict[str, str] = {
    FilingStatus.NOT_FILED: "not filed",
    FilingStatus.SUBMITTING: "submitting (the provider is being called, or its answer is unknown)",
    FilingStatus.AWAITING_READBACK: "awaiting readback (the provider answered; not yet proven)",
    FilingStatus.FILED: "filed (readback verified)",
    FilingStatus.READBACK_FAILED: (
        "readback failed (not proven filed; the provider shows a submission: a person resolves it)"
    ),
    FilingStatus.NOT_SUBMITTED: (
        "not submitted (the readback shows nothing submitted: prepare and approve a new version)"
    ),
}
FILING_TONES: dict[str, str] = {
    FilingStatus.NOT_FILED: "neutral",
    FilingStatus.SUBMITTING: "warn",
    FilingStatus.AWAITING_READBACK: "warn",
    FilingStatus.FILED: "good",
    FilingStatus.READBACK_FAILED: "bad",
    FilingStatus.NOT_SUBMITTED: "bad",
}
PROVIDER_LABELS: dict[str, str] = {
    ProviderStatus.NOT_CALLED: "not called",
    ProviderStatus.ANSWERED: "answered with the dispute (a claim: the readback decides)",
    ProviderStatus.REFUSED: "refused the request (the readback decides what was filed)",
    ProviderStatus.UNKNOWN: "no answer (unknown: the readback decides)",
}
STATUS_TONES: dict[str, str] = {
    PacketStatus.READY_FOR_REVIEW: "good",
    PacketStatus.INCOMPLETE: "warn",
    PacketStatus.INVALID: "bad",
    PacketStatus.SUPERSEDED: "neutral",
    PacketStatus.FILED: "good",
}


def receipt_url(receipt_id: str) -> str:
    """The receipt's admin page, or "" where the receipts admin is not installed. The id is
    quoted as the admin quotes keys: unquoted, `rcpt_22…` would be read back as `rcpt"…`."""
    try:
        return reverse("admin:receipts_receipt_change", args=[quote(receipt_id)])
    except NoReverseMatch:
        return ""


def review_url(packet: Packet) -> str:
    return reverse("admin:disputes_packet_review", args=[packet.pk])


def filing_label(status: str) -> str:
    return FILING_LABELS.get(status, status)


def approval_label(status: str, digest: str, approved_digest: str) -> str:
    if status != ApprovalStatus.APPROVED:
        return "not approved"
    return "approved" if approved_digest == digest else "approved, DRIFTED since"


# Who may read or act is one rule per act, shared with the staff API and the MCP tools
# (disputes/permissions.py): the admin asks it here and nowhere else.


def _can_review(user: Any) -> bool:
    return READ_PACKETS.allows(user)


def _can_read_evidence(user: Any) -> bool:
    """Evidence files are served to whoever may read evidence: its view (or change) permission
    or any permission that reads packets."""
    return READ_EVIDENCE.allows(user)


def evidence_file_url(evidence: Evidence) -> str:
    """The admin view that streams an evidence file, or "" for evidence without one."""
    if not evidence.file:
        return ""
    return reverse("admin:disputes_evidence_file", args=[evidence.pk])


def _acting_user(request: HttpRequest, permission: str | None) -> User:
    """The staff member asking, if they hold `permission`: checked before anything is looked up."""
    user = request.user
    if not isinstance(user, User) or not user.is_staff:
        raise PermissionDenied
    if permission is not None and not rule_for_permission(permission).allows(user):
        raise PermissionDenied
    return user


class _DisputesAdmin(ReadOnlyAdmin):
    """Readable as the shared rule for its model says (disputes.permissions.READ_BY_MODEL)."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        rule = READ_BY_MODEL.get(self.opts.model_name or "")
        if rule is None:
            return super().has_view_permission(request, obj)
        return rule.allows(request.user)


# --- the queues: the console's counts link to these filters, which call the same selectors -------


class DisputeQueueFilter(admin.SimpleListFilter):
    """Disputes Stripe takes a response or an appeal from Vouch for now (the console's count)."""

    title = "needs a person"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("awaiting_response", "Awaiting our response or appeal")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "awaiting_response":
            return queryset.filter(pk__in=disputes_awaiting_response().values("pk"))
        return queryset


class PacketQueueFilter(admin.SimpleListFilter):
    """Versions someone can approve, or file, now (the console's counts)."""

    title = "needs a person"
    parameter_name = "queue"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("awaiting_approval", "Awaiting approval"),
            ("awaiting_filing", "Awaiting filing"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "awaiting_approval":
            return queryset.filter(pk__in=packets_awaiting_approval().values("pk"))
        if self.value() == "awaiting_filing":
            return queryset.filter(pk__in=packets_awaiting_filing().values("pk"))
        return queryset
