"""The refund request confirmation page (SPEC §16): a logged-in session, CSRF on the form, owner
only (another buyer's request is the same 404 as an unknown id, byte for byte). The view parses,
calls agents.services / agents.selectors, and renders."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from accounts.models import User
from agents import selectors, services
from core.exceptions import NotFound

# What a person is told after pressing Confirm, by outcome (services.Confirmation).
_OUTCOMES = {
    "confirmed": (
        messages.SUCCESS,
        "Confirmed: the refund went to Stripe; its status is below.",
    ),
    "already_confirmed": (messages.INFO, "This request was confirmed before; its refund is below."),
    "changed": (
        messages.WARNING,
        "Nothing was refunded: the envelope changed since this page was shown, so the refund it "
        "would make changed too. Check the refund below and confirm again if it is right.",
    ),
    "expired": (
        messages.ERROR,
        "Nothing was refunded: this request has expired. Ask your assistant for a new one.",
    ),
    "in_progress": (
        messages.WARNING,
        "This request is being confirmed in another window or tab; reload in a moment.",
    ),
    "refused": (messages.ERROR, "Nothing was refunded: this request was refused."),
}


@login_required
@require_http_methods(["GET", "POST"])
def refund_request_page(request: HttpRequest, request_id: str) -> HttpResponse:
    user = request.user
    if not isinstance(user, User):  # login_required lets only a person in
        return redirect_to_login(request.get_full_path())
    try:
        if request.method == "POST":
            confirmation = services.refund_request_confirm(
                user=user,
                request_id=request_id,
                shown_digest=request.POST.get("preview_digest", ""),
            )
            level, text = _OUTCOMES[confirmation.outcome]
            messages.add_message(request, level, text)
            return redirect(reverse("agents:refund-request", args=[request_id]))
        page = selectors.refund_request_page(user=user, request_id=request_id)
    except NotFound:
        return render(request, "agents/not_found.html", status=404)
    return render(request, "agents/refund_request.html", {"page": page})
