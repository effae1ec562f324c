"""A person at their browser for an MCP client's OAuth flow (tests/browser): signs in when asked,
allows on the consent page, and the client's loopback callback is caught."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull
from playwright.async_api import Browser, BrowserContext, Page, Route, async_playwright, expect

from agents.example_session import MemoryStorage
from tests.agents.oauth import REDIRECT_URI

CHROMIUM = Path("/usr/bin/chromium")
PASSWORDS = {"alice": "pw-alice-123", "olga": "pw-olga-123"}  # alice: tests/drivers/api.py


class Person:
    """Someone at their browser: signs in when asked, allows on the consent page, and the
    client's loopback callback (nothing listens there) is caught, its query kept."""

    def __init__(self, context: BrowserContext, username: str, shots: Path) -> None:
        self.context = context
        self.username = username
        self.shots = shots
        self.page: Page | None = None
        self.authorize_urls: list[str] = []
        self.consent_pages: list[str] = []  # the consent pages' HTML, as shown
        self.callbacks: asyncio.Queue[str] = asyncio.Queue()

    async def start(self) -> Person:
        await self.context.route(f"{REDIRECT_URI}*", self._callback)
        self.page = await self.context.new_page()
        return self

    async def _callback(self, route: Route) -> None:
        await self.callbacks.put(route.request.url)
        await route.fulfill(status=200, content_type="text/plain", body="You may close this.")

    async def consent(self, authorize_url: str) -> None:
        """The SDK's redirect_handler: the person opens the authorization URL and allows."""
        assert self.page is not None
        self.authorize_urls.append(authorize_url)
        page = self.page
        await page.goto(authorize_url)
        if "/accounts/login/" in page.url:
            await page.get_by_label("Login").fill(self.username)
            await page.get_by_label("Password").fill(PASSWORDS[self.username])
            await page.get_by_role("button", name="Sign In").click()
        allow = page.get_by_role("button", name="Allow")
        await expect(allow).to_be_visible()
        self.consent_pages.append(await page.content())
        number = len(self.authorize_urls)
        await page.screenshot(
            path=str(self.shots / f"mcp-e2e-{self.username}-consent-{number}.png")
        )
        await allow.click()

    async def callback(self) -> AuthorizationCodeResult:
        """The SDK's callback_handler: the code, state and issuer the callback URL carried."""
        url = await asyncio.wait_for(self.callbacks.get(), timeout=30)
        query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
        assert "error" not in query, query
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )


class SdkStorage(MemoryStorage):
    """The SDK's token storage, in memory (the example session's): a client registered beforehand
    (`client_id`), or none (the SDK then registers itself and keeps what it got here).
    `may_register=False` fails the test if the SDK tries to register although it holds a client."""

    def __init__(self, client_id: str | None = None, *, may_register: bool = True) -> None:
        super().__init__(client_id, REDIRECT_URI)
        self.may_register = may_register

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if not self.may_register:
            raise AssertionError("the SDK tried to register a client dynamically")
        await super().set_client_info(client_info)


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless, through Playwright (never `playwright install`)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (never `playwright install`)")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage"],
        )
        try:
            yield browser
        finally:
            await browser.close()
