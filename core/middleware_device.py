"""The device cookie (core.request_facts): a long-lived random first-party cookie, set on a
response when the request did not bring one, so the funding requests a browser makes later name
its device (SPEC §17, Visa CE 3.0; docs/decisions/0012-ce3-data-elements-in-receipts.md)."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from core.request_facts import DEVICE_COOKIE, DEVICE_COOKIE_MAX_AGE_S, device_token


class DeviceCookieMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # Only on work done: an error's answer stays the same for every caller (SPEC §5: a
        # missing id and another buyer's differ in nothing but Date), as core/timing.py does.
        if (
            response.status_code < 400
            and request.method != "OPTIONS"
            and device_token(request) is None
        ):
            response.set_cookie(
                DEVICE_COOKIE,
                secrets.token_urlsafe(32),
                max_age=DEVICE_COOKIE_MAX_AGE_S,
                httponly=True,
                secure=settings.SESSION_COOKIE_SECURE,
                samesite="Lax",
            )
        return response
