"""The buyer's pages of the agent surface (SPEC §16): their connected assistants (each revocable,
after a confirmation page: issue 41), and the refund request confirmation page: a logged-in
session, CSRF on the form, owner only (another buyer's request is the same 404 as an unknown id,
byte for byte). The view parses, calls agents.services / agents.selectors, and renders."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from accounts.models import User
from agents import selectors, services
from agents.oauth.services import oauth_client_access_revoke
from core.exceptions import NotFound

_LEVELS = {
    "success": messages.SUCCESS,
    "info": messages.INFO,
    "warning": messages.WARNING,
    "error": messages.ERROR,
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
            level, text = selectors.confirmation_message(confirmation.outcome, confirmation.refund)
            messages.add_message(request, _LEVELS[level], text)
            return redirect(reverse("agents:refund-request", args=[request_id]))
        page = selectors.refund_request_page(user=user, request_id=request_id)
    except NotFound:
        return render(request, "agents/not_found.html", status=404)
    return render(request, "agents/refund_request.html", {"page": page})


@login_required
@require_http_methods(["GET"])
def assistants_page(request: HttpRequest) -> HttpResponse:
    """The assistants the person authorized, each with a Revoke button."""
    user = request.user
    if not isinstance(user, User):
        return redirect_to_login(request.get_full_path())
    assistants = selectors.assistants_connected(user=user)
    return render(request, "agents/assistants.html", {"assistants": assistants})


@login_required
@require_http_methods(["GET", "POST"])
def assistant_revoke(request: HttpRequest) -> HttpResponse:
    """GET: the confirmation page for revoking the assistant named by `client_id` (nothing
    changes; Cancel goes back). POST: revoke it (any client id, a metadata document's URL
    included). Another person's assistant, an unknown id and a missing one answer the same 404
    (SPEC §5)."""
    user = request.user
    if not isinstance(user, User):
        return redirect_to_login(request.get_full_path())
    if request.method == "GET":
        try:
            assistant = selectors.assistant_connected(
                user=user, client_id=request.GET.get("client_id", "")
            )
        except NotFound:
            return render(request, "agents/assistants_not_found.html", status=404)
        return render(request, "agents/assistant_revoke.html", {"assistant": assistant})
    try:
        name = oauth_client_access_revoke(user=user, client_id=request.POST.get("client_id", ""))
    except NotFound:
        return render(request, "agents/assistants_not_found.html", status=404)
    messages.success(request, f"Revoked: {name} can no longer reach your Vouch account.")
    return redirect(reverse("agents:assistants"))
