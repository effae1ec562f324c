"""Reads of refund requests (SPEC §16): what the MCP tools answer and what the confirmation page
shows. Owner only: another buyer's request answers exactly as a missing one."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.urls import reverse
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

from accounts.exceptions import EmailUnverified
from accounts.models import User
from accounts.selectors import user_email_verified
from agents.models import RefundRequest, RegisteredClient
from core.exceptions import NotFound, VouchError
from disputes.selectors import charges_stripe_will_not_refund
from envelopes.models import Envelope, RefundOperation
from envelopes.selectors import refund_data, refund_preview
from envelopes.selectors.buyer import RefundRow, buyer_refund_row, funding_label
from verification import clock

PENDING = "pending_confirmation"
CONFIRMED = "confirmed"
EXPIRED = "expired"
REFUSED = "refused"


def refund_request_get_owned(*, user: User, request_id: str) -> RefundRequest:
    """The caller's refund request, or the very same NotFound as a missing one (SPEC §5)."""
    request_id = str(request_id)
    if "\x00" in request_id:  # names nothing that can exist
        raise NotFound()
    request = (
        RefundRequest.objects.select_related("envelope", "idempotency", "refund")
        .filter(public_id=request_id, owner=user)
        .first()
    )
    if request is None:
        raise NotFound()
    return request


def confirm_url(*, origin: str, request_id: str) -> str:
    """Where the owner confirms: `origin` (scheme://host[:port]) + the page's path."""
    return origin.rstrip("/") + reverse("agents:refund-request", args=[request_id])


def refund_request_refund(request: RefundRequest) -> RefundOperation | None:
    """The refund a confirmation made, or began: the request's idempotency record names the
    refund in the transaction that reserves it, so a confirmation that died before marking the
    request still has its refund."""
    if request.refund_id is not None:
        return request.refund
    record = request.idempotency
    if record is None or not record.resource:
        return None
    return RefundOperation.objects.filter(
        public_id=record.resource, envelope_id=request.envelope_id
    ).first()


def refund_request_status(
    request: RefundRequest, *, refund: RefundOperation | None, now: datetime
) -> str:
    """pending_confirmation | confirmed | expired | refused. Confirmed as soon as a refund exists
    (its owner confirmed; a confirmation that died after reserving is finished by the next one, or
    by the stranded-refund job); expired is a pending request past `expires_at` (not stored)."""
    if request.status == RefundRequest.Status.CONFIRMED or refund is not None:
        return CONFIRMED
    if request.status == RefundRequest.Status.REFUSED:
        return REFUSED
    if now >= request.expires_at:
        return EXPIRED
    return PENDING


def refund_request_data(
    request: RefundRequest, *, origin: str, detail: bool = False
) -> dict[str, Any]:
    """The tool result: `{request_id, status, envelope_id, preview, confirm_url, expires_at}`;
    with `detail`, also `created_at`, `confirmed_at`, `refusal_code` and `refund` (the refund
    resource, as the REST API shows it, once confirmed; else null). JSON values only, so that a
    replay (the stored rendering, parsed) equals the first answer."""
    refund = refund_request_refund(request)
    data: dict[str, Any] = {
        "request_id": request.public_id,
        "status": refund_request_status(request, refund=refund, now=clock.now()),
        "envelope_id": request.envelope.public_id,
        "preview": request.preview,
        "confirm_url": confirm_url(origin=origin, request_id=request.public_id),
        "expires_at": request.expires_at.isoformat(),
    }
    if detail:
        data.update(
            {
                "created_at": request.created_at.isoformat(),
                "confirmed_at": request.confirmed_at.isoformat() if request.confirmed_at else None,
                "refusal_code": request.refusal_code or None,
                "refund": refund_data(refund) if refund is not None else None,
            }
        )
    return data


def preview_digest(preview: dict[str, Any]) -> str:
    """SHA-256 of the preview as canonical JSON: what the page shows is what confirming checks."""
    canonical = json.dumps(preview, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def preview_now(request: RefundRequest) -> dict[str, Any]:
    """The refund confirming would make now (no lock, nothing reserved); refuses as the refund
    would (`amount_exceeds_unspent`, `nothing_to_refund`)."""
    envelope = Envelope.objects.get(pk=request.envelope_id)
    return refund_preview(envelope=envelope, amount_micro=request.amount_micro)


# --- the confirmation page -----------------------------------------------------------------------


def usd_text(micro: int) -> str:
    """Dollars for people: at least two decimals, more only where a sub-cent amount has them
    ($13.00, $0.005), exact (from the integer, never through a float's rounding)."""
    amount = Decimal(micro).scaleb(-6).normalize()
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and exponent > -2:
        amount = amount.quantize(Decimal("0.01"))
    sign = "-" if amount < 0 else ""
    return f"{sign}${abs(amount):,}"


# Why a request was refused (its stored code, which the MCP tools answer), in the person's words.
_REFUSAL_TEXT = {
    "declined_by_person": "you declined it when your assistant asked",
    "email_unverified": "moving money needs a verified e-mail address",
    "amount_exceeds_unspent": "it asked for more than the envelope's unspent balance",
    "nothing_to_refund": "the envelope had no unspent money left to refund",
}

_STATUS_TEXT = {
    PENDING: "waiting for your confirmation",
    CONFIRMED: "confirmed",
    EXPIRED: "expired",
    REFUSED: "refused",
}


@dataclass(frozen=True)
class PageLeg:
    label: str
    charge: str
    amount_micro: int
    amount_text: str
    # Stripe said of a dispute on its charge that the charge can no longer be refunded
    # (`is_charge_refundable: false`, a chargeback): Stripe will refuse this part. An inquiry,
    # which Stripe refunds, is not marked.
    disputed: bool = False


@dataclass(frozen=True)
class ConfirmPage:
    """What the confirmation page shows."""

    request: RefundRequest
    status: str
    asked_text: str  # what the assistant asked for, in words
    client_name: str  # the OAuth client's name, as registered in the admin ("" if unknown)
    preview: dict[str, Any] | None  # recomputed now; None when confirming would be refused
    legs: list[PageLeg]
    total_text: str
    remainder_micro: int
    remainder_text: str
    unspent_text: str
    digest: str
    changed: bool  # the preview now differs from the one the assistant was given
    refusal_now: VouchError | None  # why confirming would be refused now
    refund: dict[str, Any] | None  # the refund, once confirmed (or begun)
    begun: bool  # a confirmation began the refund and did not finish: confirming finishes it
    # The refund as the envelope's page shows it: its status and each leg's state in the
    # buyer's words (issue 41: no verdict enum, no leg id in the page's prose).
    refund_row: RefundRow | None = None

    @property
    def refusal_text(self) -> str:
        """Why the request was refused, in words ("" unless refused)."""
        code = self.request.refusal_code
        return _REFUSAL_TEXT.get(code, "Vouch could not make this refund") if code else ""

    @property
    def disputed_text(self) -> str:
        """The amount of the preview on disputed charges, in dollars ("" when none)."""
        total = sum(leg.amount_micro for leg in self.legs if leg.disputed)
        return usd_text(total) if total else ""

    @property
    def status_text(self) -> str:
        return _STATUS_TEXT[self.status]

    @property
    def can_confirm(self) -> bool:
        return self.begun or (
            self.status == PENDING and self.preview is not None and self.refusal_now is None
        )


def _page_legs(preview: dict[str, Any]) -> list[PageLeg]:
    legs = []
    # What Stripe said of each charge's dispute decides, never a rule of ours (issue 36): a
    # charge whose dispute Stripe reported not refundable will be refused; an inquiry will not.
    disputed = charges_stripe_will_not_refund(
        charge_ids=[leg["charge"] for leg in preview["legs"] if leg["charge"]]
    )
    for leg in preview["legs"]:
        legs.append(
            PageLeg(
                label=funding_label(kind=leg["kind"], sequence=leg["sequence"]),
                charge=str(leg["charge"]),  # a succeeded funding leg always has its charge
                amount_micro=leg["amount_micro"],
                amount_text=usd_text(leg["amount_micro"]),
                disputed=bool(leg["charge"]) and leg["charge"] in disputed,
            )
        )
    return legs


def _client_name(client_id: str) -> str:
    """The name staff gave the client in the admin, which the person saw on the consent page."""
    if not client_id:
        return ""
    name = Application.objects.filter(client_id=client_id).values_list("name", flat=True).first()
    return name or ""


def refund_request_page(*, user: User, request_id: str) -> ConfirmPage:
    """The page of the caller's request: the preview recomputed now (and whether it differs from
    the request's), the digest the Confirm form carries, or the refund once there is one."""
    request = refund_request_get_owned(user=user, request_id=request_id)
    refund = refund_request_refund(request)
    status = refund_request_status(request, refund=refund, now=clock.now())
    begun = refund is not None and request.status == RefundRequest.Status.PENDING
    amount = request.amount_micro
    asked = "the whole unspent balance" if amount is None else usd_text(amount)
    preview: dict[str, Any] | None = None
    refusal: VouchError | None = None
    if status == PENDING:
        try:
            if not user_email_verified(user=user):
                raise EmailUnverified()
            preview = preview_now(request)
        except VouchError as exc:
            refusal = exc
    shown = preview if preview is not None else request.preview
    return ConfirmPage(
        request=request,
        status=status,
        asked_text=asked,
        client_name=_client_name(request.client_id),
        preview=preview,
        legs=_page_legs(shown),
        total_text=usd_text(shown["total_micro"]),
        remainder_micro=shown["remainder_micro"],
        remainder_text=usd_text(shown["remainder_micro"]),
        unspent_text=usd_text(shown["unspent_micro"]),
        digest=preview_digest(preview) if preview is not None else "",
        changed=preview is not None and preview_digest(preview) != preview_digest(request.preview),
        refusal_now=refusal,
        refund=refund_data(refund) if refund is not None else None,
        begun=begun,
        refund_row=buyer_refund_row(refund=refund) if refund is not None else None,
    )


def client_acted_for(application_id: int) -> list[str]:
    """The usernames an OAuth client was given access for (any code or token it holds or held
    that is still stored), alphabetically."""
    names: set[str] = set()
    for model in (AccessToken, RefreshToken, Grant):
        names.update(
            model.objects.filter(application_id=application_id, user__isnull=False)
            .values_list("user__username", flat=True)
            .distinct()
        )
    return sorted(names)


def confirmation_message(outcome: str, refund: RefundOperation | None) -> tuple[str, str]:
    """What a person is told after pressing Confirm: a level (success, info, warning, error) and
    the words. A confirmed refund is told by what Stripe answered: never a success for a refund
    that moved nothing, and a refused part is said to be back in the envelope."""
    if outcome != "confirmed" or refund is None:
        return _OUTCOME_MESSAGES[outcome]
    data = refund_data(refund)
    back = data["failed_micro"]
    if data["status"] == "failed":
        return (
            "error",
            f"Nothing was refunded: Stripe refused every part of this refund. The money "
            f"({usd_text(back)}) is back in your envelope; the reason is below.",
        )
    if data["status"] == "partially_refunded":
        return (
            "warning",
            f"Part of the refund was refused by Stripe: {usd_text(back)} is back in your "
            f"envelope (the reason is below); {usd_text(data['refunded_micro'])} went back to "
            "the card.",
        )
    if data["status"] == "pending" and any(leg.get("queued") for leg in data.get("legs") or []):
        return (
            "info",
            "Confirmed: the refund is queued for Stripe, which takes a limited number of refunds "
            "a second; Vouch sends it within moments, in turn.",
        )
    if data["status"] == "pending":
        return ("info", "Confirmed: the refund went to Stripe; its answer is not in yet.")
    return ("success", "Confirmed: the refund went to Stripe; its status is below.")


_OUTCOME_MESSAGES = {
    "already_confirmed": ("info", "This request was confirmed before; its refund is below."),
    "changed": (
        "warning",
        "Nothing was refunded: the envelope changed since this page was shown, so the refund it "
        "would make changed too. Check the refund below and confirm again if it is right.",
    ),
    "expired": (
        "error",
        "Nothing was refunded: this request has expired. Ask your assistant for a new one.",
    ),
    "in_progress": (
        "warning",
        "This request is being confirmed in another window or tab; reload in a moment.",
    ),
    "refused": ("error", "Nothing was refunded: this request was refused."),
    "confirmed": ("success", "Confirmed: the refund went to Stripe; its status is below."),
}


@dataclass(frozen=True)
class ConnectedAssistant:
    client_id: str
    name: str
    scopes: list[str]
    last_used: datetime | None  # the latest token issued to it for this person
    unverified: bool  # it registered itself

    @property
    def scope_words(self) -> list[tuple[str, str]]:
        """Each scope with what it lets the assistant do, in words (settings.AGENT_SCOPES)."""
        return [(scope, settings.AGENT_SCOPES[scope]) for scope in self.scopes]


def assistant_connected(*, user: User, client_id: str) -> ConnectedAssistant:
    """One of the assistants `user` authorized that still holds access, or NotFound, the same for
    another person's and an unknown one (SPEC §5)."""
    for assistant in assistants_connected(user=user):
        if assistant.client_id == client_id:
            return assistant
    raise NotFound()


def assistants_connected(*, user: User) -> list[ConnectedAssistant]:
    """The assistants `user` authorized that still hold access (an unexpired access token or a
    live refresh token), latest used first."""
    now = clock.now()
    access = AccessToken.objects.filter(user=user, expires__gt=now).select_related("application")
    refresh = RefreshToken.objects.filter(user=user, revoked__isnull=True).select_related(
        "application", "access_token"
    )
    found: dict[int, dict[str, Any]] = {}
    for token in access:
        if token.application is None:
            continue
        entry = found.setdefault(
            token.application_id, {"app": token.application, "scopes": set(), "last": None}
        )
        entry["scopes"].update(token.scope.split())
        entry["last"] = max(filter(None, [entry["last"], token.created]))
    for token in refresh:
        if token.application is None:
            continue
        entry = found.setdefault(
            token.application_id, {"app": token.application, "scopes": set(), "last": None}
        )
        if token.access_token is not None:
            entry["scopes"].update(token.access_token.scope.split())
        entry["last"] = max(filter(None, [entry["last"], token.created]))
    self_registered = set(
        RegisteredClient.objects.filter(application_id__in=found).values_list(
            "application_id", flat=True
        )
    )
    assistants = [
        ConnectedAssistant(
            client_id=entry["app"].client_id,
            name=entry["app"].name,
            scopes=[s for s in settings.AGENT_SCOPES if s in entry["scopes"]],
            last_used=entry["last"],
            unverified=app_id in self_registered,
        )
        for app_id, entry in found.items()
    ]
    return sorted(assistants, key=lambda a: a.last_used or now, reverse=True)
