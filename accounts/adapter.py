"""allauth's account adapter for Vouch: who may sign up, what a sign-up makes, and where a person
lands after signing in."""

from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse


class AccountAdapter(DefaultAccountAdapter):
    """Sign-up makes buyers only. Staff accounts are made by a person (`createsuperuser`, the
    admin's users page by a superuser), never by the public form, whatever is posted to it."""

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return bool(settings.VOUCH_BUYER_SIGNUP)

    def save_user(self, request: HttpRequest, user: Any, form: Any, commit: bool = True) -> Any:
        user = super().save_user(request, user, form, commit=False)
        user.is_staff = False
        user.is_superuser = False
        if commit:
            user.save()
            # A new row has none; cleared all the same so no form field can ever add one.
            user.groups.clear()
            user.user_permissions.clear()
        return user

    def get_login_redirect_url(self, request: HttpRequest) -> str:
        """Staff land on the ops console, a buyer on their envelopes. Only when the sign-in named
        no page of its own: allauth follows an explicit, safe `next` before it asks here."""
        if getattr(request.user, "is_staff", False):
            return reverse("admin:index")
        return reverse("buyer:envelopes")
