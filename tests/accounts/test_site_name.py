"""The Site (django.contrib.sites) that allauth's e-mails speak for is Vouch, never Django's
placeholder: a data migration names it (SITE_NAME, and SITE_DOMAIN or the first ALLOWED_HOSTS),
and `make run` gives it the local address it serves at (issue 41 item 8)."""

import importlib
import io
from typing import Any

from django.apps import apps
from django.contrib.sites.models import Site
from django.core import mail
from django.core.management import call_command
from django.test import Client

naming = importlib.import_module("accounts.migrations.0003_site_name")


def _site(name: str, domain: str, settings: Any) -> None:
    Site.objects.update_or_create(pk=settings.SITE_ID, defaults={"name": name, "domain": domain})
    Site.objects.clear_cache()


def test_the_sign_up_e_mail_says_vouch_not_example_com(db: None, settings: Any) -> None:
    settings.VOUCH_BUYER_SIGNUP = True
    settings.ALLOWED_HOSTS = ["vouch.test", "testserver"]
    _site("example.com", "example.com", settings)  # what Django's sites app creates
    naming.site_name(apps, None)
    Site.objects.clear_cache()
    response = Client().post(
        "/accounts/signup/",
        {
            "username": "newbuyer",
            "email": "newbuyer@mail.test",
            "password1": "a-long-buyer-passphrase-1",
            "password2": "a-long-buyer-passphrase-1",
        },
    )
    assert response.status_code == 302
    (message,) = mail.outbox
    text = message.subject + message.body
    assert "example.com" not in text, text
    assert "Vouch" in text, text
    assert "vouch.test" in text, text


def test_a_site_someone_named_is_kept(db: None, settings: Any) -> None:
    _site("Acme escrow", "pay.acme.test", settings)
    naming.site_name(apps, None)
    site = Site.objects.get(pk=settings.SITE_ID)
    assert (site.name, site.domain) == ("Acme escrow", "pay.acme.test")


def test_the_domain_is_site_domain_or_the_first_real_allowed_host(db: None, settings: Any) -> None:
    settings.SITE_NAME = "Vouch (staging)"
    settings.ALLOWED_HOSTS = ["*", ".vouch.example.org", "other.test"]
    Site.objects.all().delete()  # a fresh database: no Site yet
    naming.site_name(apps, None)
    site = Site.objects.get(pk=settings.SITE_ID)
    assert (site.name, site.domain) == ("Vouch (staging)", "vouch.example.org")
    settings.SITE_DOMAIN = "pay.vouch.test"
    _site("example.com", "example.com", settings)
    naming.site_name(apps, None)
    assert Site.objects.get(pk=settings.SITE_ID).domain == "pay.vouch.test"


def test_make_run_gives_the_site_its_local_address(db: None, settings: Any) -> None:
    settings.DEBUG = True
    settings.VOUCH_DEMO_USERS = {
        "buyer": {"password": "vouch-buyer-demo", "email": "buyer@example.com", "staff": False}
    }
    _site("example.com", "example.com", settings)
    call_command("seed_demo", domain="127.0.0.1:8123", stdout=io.StringIO())
    site = Site.objects.get(pk=settings.SITE_ID)
    assert (site.name, site.domain) == ("Vouch", "127.0.0.1:8123")
