"""The buyer's own pages (SPEC §10.1): their envelopes, one envelope, and the refund form. A signed
in session, CSRF on every form, owner only: another buyer's envelope is the same 404 page as an
unknown id. Views parse, authorize, call a selector or the refund service, render.

The refund form carries an idempotency key made when the form is rendered (SPEC §4): the refund
runs under core.idempotency on surface `web`, for the operation the REST refund of that envelope is
named by, so a form sent twice refunds once (the second sending replays the first's answer)."""

from __future__ import annotations

import math
import secrets
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from accounts.exceptions import EmailUnverified
from accounts.models import User
from accounts.selectors import user_email_verified
from core.api.throttling import window_count
from core.exceptions import NotFound, Throttled, VouchError
from core.idempotency import (
    IdempotencyKeyInUse,
    StoredAnswer,
    idempotent_run,
    operation_name,
    render_json,
)
from core.models import IdempotencyRecord
from envelopes import selectors, services
from envelopes.models import Envelope, RefundOperation
from envelopes.selectors import buyer

SURFACE = "web"  # a key made by a page's form: never replayed to REST or MCP, nor theirs here
REFUND_OPERATION = "envelope.refund"  # the REST refund's action: one operation on every surface
EVERYTHING = "everything"
AMOUNT = "amount"

_LEVELS = {
    "success": messages.SUCCESS,
    "info": messages.INFO,
    "warning": messages.WARNING,
    "error": messages.ERROR,
}


def _person(request: HttpRequest) -> User | None:
    user = request.user
    return user if isinstance(user, User) else None


def _not_found(request: HttpRequest) -> HttpResponse:
    return render(request, "envelopes/not_found.html", status=404)


def _owned(user: User, envelope_id: str) -> Envelope:
    if "\x00" in envelope_id:  # names nothing that can exist (as a REST path's id)
        raise NotFound()
    return selectors.envelope_get_owned(user=user, envelope_id=envelope_id)


@login_required
@require_http_methods(["GET"])
def envelope_list(request: HttpRequest) -> HttpResponse:
    """The caller's envelopes, newest first, paged."""
    user = _person(request)
    if user is None:
        return redirect_to_login(request.get_full_path())
    page = selectors.buyer_envelopes_page(user=user, number=request.GET.get("page"))
    return render(request, "envelopes/list.html", {"page": page})


@login_required
@require_http_methods(["GET"])
def envelope_detail(request: HttpRequest, envelope_id: str) -> HttpResponse:
    """One of the caller's envelopes: balances, funding legs, debits, refunds."""
    user = _person(request)
    if user is None:
        return redirect_to_login(request.get_full_path())
    try:
        _owned(user, envelope_id)
        page = selectors.buyer_envelope_page(user=user, envelope_id=envelope_id)
    except NotFound:
        return _not_found(request)
    return render(request, "envelopes/detail.html", {"page": page})


def _form(request: HttpRequest, envelope: Envelope, **context: Any) -> HttpResponse:
    """The refund form, with its key (made here, once per form, unless the form carried one)."""
    data = {
        "envelope": envelope,
        "key": context.pop("key", "") or secrets.token_urlsafe(24),
        "choice": context.pop("choice", EVERYTHING),
        "amount_text": context.pop("amount_text", ""),
        # Why money a dispute holds is not refundable (SPEC §18); None when nothing is held.
        "held_note": selectors.held_note(envelope),
        **context,
    }
    status = (
        200 if not data.get("error") else 429 if data.get("error_code") == "rate_limited" else 422
    )
    return render(request, "envelopes/refund.html", data, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def refund_form(request: HttpRequest, envelope_id: str) -> HttpResponse:
    """GET: the form (everything unspent, or an amount in dollars). POST `step=preview`: the
    last-in-first-out refund confirming would make now; `step=confirm`: the refund, once per
    form, then back to the envelope with what Stripe answered, in words."""
    user = _person(request)
    if user is None:
        return redirect_to_login(request.get_full_path())
    try:
        envelope = _owned(user, envelope_id)
    except NotFound:
        return _not_found(request)
    if request.method == "GET":
        return _form(request, envelope)

    key = request.POST.get("key", "")
    choice = AMOUNT if request.POST.get("choice") == AMOUNT else EVERYTHING
    amount_text = request.POST.get("amount", "")
    shown = {"key": key, "choice": choice, "amount_text": amount_text}
    try:
        amount = buyer.dollars_to_micro(amount_text) if choice == AMOUNT else None
        if not user_email_verified(user=user):
            raise EmailUnverified()
        if request.POST.get("step") != "confirm":
            preview = selectors.buyer_refund_preview(envelope=envelope, amount_micro=amount)
            return _form(request, envelope, preview=preview, **shown)
        # Money under review (refunded outside Vouch) is refused here, in words, not sent to
        # Stripe to be refused there (issue 37, item 8).
        buyer.refund_review_check(envelope=envelope, amount_micro=amount)
        _money_window(user)
        return _refund(request, user, envelope, amount, key=key)
    except VouchError as exc:
        envelope.refresh_from_db()
        preview = None
        if exc.code == "refund_changed":  # show what confirming would do now
            try:
                preview = selectors.buyer_refund_preview(envelope=envelope, amount_micro=amount)
            except VouchError:
                preview = None
        return _form(
            request,
            envelope,
            error=buyer.refusal_text(exc, envelope=envelope),
            error_code=exc.code,
            preview=preview,
            **shown,
        )


def _money_window(user: User) -> None:
    """The refund counts in the person's `money` window, as the REST refund does (one budget
    for every surface that moves their money): over it, `rate_limited` and nothing runs."""
    rate = dict(settings.VOUCH_THROTTLE_RATES).get("money")
    wait_s = window_count(scope="money", ident=user.pk, rate=rate) if rate else None
    if wait_s is not None:
        raise Throttled(details={"retry_after_s": math.ceil(wait_s)})


def _refund(
    request: HttpRequest, user: User, envelope: Envelope, amount: int | None, *, key: str
) -> HttpResponse:
    """The refund confirmed on the form, under the form's key: run once, replayed after."""
    expected = buyer.expected_shape(request.POST.get("expected", ""))
    body: dict[str, Any] = {"amount_micro": amount, "expected": request.POST.get("expected", "")}
    detail = reverse("buyer:envelope", args=[envelope.public_id])

    def action(record: IdempotencyRecord) -> RefundOperation:
        return services.envelope_refund(
            envelope_id=envelope.public_id,
            actor=user,
            amount_micro=amount,
            idempotency=record,
            expected=expected,
        )

    def answer(operation: RefundOperation) -> tuple[int, str]:
        data = selectors.refund_data(operation)
        return (202 if data["status"] == "pending" else 200), render_json(data)

    try:
        result = idempotent_run(
            user=user,
            key=key,
            operation=operation_name(REFUND_OPERATION, envelope.public_id),
            surface=SURFACE,
            body=body,
            action=action,
            answer=answer,
        )
    except IdempotencyKeyInUse:
        # The same form, sent twice: its first sending is still at Stripe. Its refund (reserved
        # already) is on the envelope's page.
        messages.info(
            request,
            "This form was sent twice: the first is still at Stripe, and only it refunds. Its "
            "refund is below; reload in a moment for Stripe's answer.",
        )
        return redirect(detail)
    if isinstance(result, StoredAnswer):
        data = buyer.stored_refund(result.body)
        if data is None:  # what was kept is a refusal that ended the refund: say it as kept
            messages.error(request, "This form was sent already; its answer is below.")
            return redirect(detail)
        level, text = buyer.refund_outcome_message(data, replayed=result.replayed)
    else:
        data = selectors.refund_data(result)
        level, text = buyer.refund_outcome_message(data, replayed=False)
    messages.add_message(request, _LEVELS[level], text)
    return redirect(f"{detail}#refund-{data['refund_id']}")
