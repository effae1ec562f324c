"""The admin's login address. The admin has no password form of its own: `/admin/login/` sends to
allauth's login, whose limits (`ACCOUNT_RATE_LIMITS`) then apply to staff as to everyone. A
signed-in user who is not staff is told so here, rather than sent back to a login form that would
send them on to the admin again."""

from urllib.parse import urlencode

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme


def _next_url(request: HttpRequest) -> str:
    """Where to go after signing in: the `next` asked for if it stays on this site, else the
    admin's index."""
    wanted = request.GET.get("next", "")
    if wanted and url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return wanted
    return reverse("admin:index")


def admin_login(request: HttpRequest) -> HttpResponse:
    next_url = _next_url(request)
    if request.user.is_authenticated:
        if admin.site.has_permission(request):
            return HttpResponseRedirect(next_url)
        return render(
            request,
            "admin/login_refused.html",
            {**admin.site.each_context(request), "title": "Staff only", "next_url": next_url},
            status=403,
        )
    return HttpResponseRedirect(f"{reverse('account_login')}?{urlencode({'next': next_url})}")
