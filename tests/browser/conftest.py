"""Real Chromium (Debian's /usr/bin/chromium) driven by Playwright against pytest-django's live
server, and the people and sandbox-backed disputes of tests/disputes/conftest.py.

Screenshots go to `$VOUCH_TEST_ARTIFACTS/browser/` (default `var/test-artifacts/browser/`).
Playwright is never asked to download a browser: without /usr/bin/chromium the tests fail and say
what to install."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def artifacts() -> Path:
    base = Path(os.environ.get("VOUCH_TEST_ARTIFACTS") or ROOT / "var" / "test-artifacts")
    directory = base / "browser"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    """One headless Chromium per test. Playwright's sync API runs an event loop in this thread,
    so Django refuses ORM calls from it unless told they are safe: they are, as the test's own
    ORM calls never run concurrently with the loop (the documented pytest-django workaround).
    Set for this test only, so that no other test loses the check.

    While the loop runs, Django keeps this thread's database connections apart (per context, not
    per thread): they are closed here, before the loop stops, or they would outlive the test and
    keep the test database from being dropped."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (never `playwright install`)")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=[*args, "--disable-dev-shm-usage"],
        )
        try:
            yield chromium
        finally:
            chromium.close()
            connections.close_all()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()
