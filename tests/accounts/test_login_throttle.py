"""Issue 12, finding 3: the admin has no login form of its own. `/admin/login/` sends the visitor
to allauth's login (keeping `next`), whose failed-login limit (`ACCOUNT_RATE_LIMITS`,
`login_failed`) then refuses even the right password until its window has passed; the admin
stays for staff only."""

import itertools
from datetime import timedelta
from urllib.parse import urlencode

import pytest
import time_machine
from allauth.account import app_settings as account_settings
from allauth.core.internal.ratelimit import Rate, parse_rates
from django.test import Client
from django.utils import timezone

from accounts.models import User

pytestmark = pytest.mark.django_db

PASSWORD = "throttle-password-1"
WRONG = "not-the-password-1"
TOO_MANY = "Too many failed login attempts"
_addresses = itertools.count(1)


def per_login_rate() -> Rate:
    """The configured failed-login limit per login name (e.g. 5 in 5 minutes)."""
    rates = parse_rates(account_settings.RATE_LIMITS["login_failed"])
    return next(rate for rate in rates if rate.per == "key")


def client() -> Client:
    """A browser at an address of its own: the per-address limits (failures a minute, logins a
    minute) that one test spends never reach another's."""
    return Client(REMOTE_ADDR=f"198.51.100.{next(_addresses)}")


def staff_user(username: str) -> User:
    # A name no other test logs in with: its failures stay counted for the whole window.
    return User.objects.create_user(username, f"{username}@example.com", PASSWORD, is_staff=True)


def credentials(username: str, password: str) -> dict[str, str]:
    # allauth's form names the field `login`; Django's admin form named it `username`.
    return {"login": username, "username": username, "password": password}


def test_the_admin_login_sends_to_allauth_keeping_next() -> None:
    browser = client()
    response = browser.get("/admin/login/?next=/admin/envelopes/envelope/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?" + urlencode(
        {"next": "/admin/envelopes/envelope/"}
    )
    # Without a `next`, or with one that leaves the site, the admin's index.
    for query in ("", "?next=https://evil.example/admin/"):
        response = browser.get(f"/admin/login/{query}")
        assert response["Location"] == "/accounts/login/?next=%2Fadmin%2F", query
    # An anonymous visit to an admin page ends on allauth's form, which sends back there.
    response = browser.get("/admin/envelopes/envelope/", follow=True)
    assert response.request["PATH_INFO"] == "/accounts/login/"
    assert response.request["QUERY_STRING"] == urlencode({"next": "/admin/envelopes/envelope/"})
    assert b'name="login"' in response.content


def test_the_admin_login_checks_no_password() -> None:
    staff_user("thr-direct")
    browser = client()
    response = browser.post("/admin/login/?next=/admin/", credentials("thr-direct", PASSWORD))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert "_auth_user_id" not in browser.session
    assert browser.get("/admin/").status_code == 302


def test_failed_admin_logins_refuse_the_right_password_until_the_window_passes() -> None:
    """The probe's attack, through the admin's login address: after the configured number of
    wrong passwords the right one is refused within the window and accepted after it."""
    rate = per_login_rate()
    user = staff_user("thr-ada")
    browser = client()
    started = timezone.now()
    form = browser.get("/admin/login/?next=/admin/", follow=True)
    form_url = f"{form.request['PATH_INFO']}?{form.request['QUERY_STRING']}"
    for attempt in range(1, rate.amount + 1):
        response = browser.post(form_url, credentials("thr-ada", WRONG))
        assert response.status_code == 200, attempt
        assert TOO_MANY not in response.content.decode(), f"limited early, at attempt {attempt}"
        assert "_auth_user_id" not in browser.session

    response = browser.post(form_url, credentials("thr-ada", PASSWORD))
    assert "_auth_user_id" not in browser.session, (
        f"the right password logged in after {rate.amount} wrong ones at {form_url}"
    )
    assert response.status_code == 200
    assert TOO_MANY in response.content.decode()

    # Still refused a few seconds before the window ends.
    with time_machine.travel(started + timedelta(seconds=rate.duration - 5), tick=False):
        response = browser.post(form_url, credentials("thr-ada", PASSWORD))
        assert TOO_MANY in response.content.decode()
        assert "_auth_user_id" not in browser.session

    with time_machine.travel(started + timedelta(seconds=rate.duration + 5), tick=False):
        response = browser.post(form_url, credentials("thr-ada", PASSWORD))
        assert response.status_code == 302
        assert response["Location"] == "/admin/"
        assert browser.session["_auth_user_id"] == str(user.pk)
        index = browser.get("/admin/")
        assert index.status_code == 200
        assert b"Operations" in index.content


def test_a_signed_in_user_who_is_not_staff_is_refused_the_admin() -> None:
    buyer = User.objects.create_user("thr-buyer", "thr-buyer@example.com", PASSWORD)
    browser = client()
    browser.force_login(buyer)
    response = browser.get("/admin/", follow=True)
    assert response.status_code == 403
    assert response.request["PATH_INFO"] == "/admin/login/"
    assert b"thr-buyer" in response.content
    assert b"not a staff account" in response.content
    assert len(response.redirect_chain) == 1  # no loop between the admin and allauth


def test_a_signed_in_staff_user_goes_on_to_next() -> None:
    browser = client()
    browser.force_login(staff_user("thr-olga"))
    response = browser.get("/admin/login/?next=/admin/envelopes/envelope/")
    assert response.status_code == 302
    assert response["Location"] == "/admin/envelopes/envelope/"
