"""The docs site as the README says to read it: built by `make docs`, opened from files
(`var/site/index.html`), with no server and no network (issue 41). Chromium opens index.html,
follows every link of every page it reaches (each opens a page of the site, never a folder's
listing, and each `#anchor` is on its page), searches, and no request leaves the files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest
from playwright.sync_api import Browser, Page, Route

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site `make docs` builds, into a temporary folder."""
    site = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run(
        [str(Path(sys.prefix) / "bin" / "mkdocs"), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return site


def _links_and_ids(page: Page) -> tuple[list[str], set[str]]:
    """Every link's resolved address on the page, and every id an `#anchor` can name."""
    links: list[str] = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    ids: list[str] = page.eval_on_selector_all("[id]", "nodes => nodes.map(node => node.id)")
    return links, set(ids)


def test_the_site_works_from_files(browser: Browser, site: Path) -> None:
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    left_the_files: list[str] = []
    errors: list[str] = []

    def refuse(route: Route) -> None:
        left_the_files.append(route.request.url)
        route.abort()

    # Anything but file:// is refused and recorded (the machine may have no network at all).
    context.route(lambda url: not url.startswith("file:"), refuse)
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))

    start = (site / "index.html").as_uri()
    to_open = [start]
    seen: dict[str, set[str]] = {}  # page address -> the ids on it
    wanted: list[tuple[str, str, str]] = []  # (linking page, target page, anchor)
    not_pages: list[str] = []
    while to_open:
        address = to_open.pop()
        if address in seen:
            continue
        page.goto(address)
        assert page.locator("article.md-content__inner").count() == 1, (
            f"{address} is not a page of the site: {page.title()!r}"
        )
        links, seen[address] = _links_and_ids(page)
        for link in links:
            target, anchor = urldefrag(link)
            if urlparse(target).scheme != "file":
                continue  # a link out (GitHub, Stripe's docs): followed by the reader, not here
            path = Path(unquote(urlparse(target).path))
            if not path.is_file() or path.suffix != ".html" or site not in path.parents:
                not_pages.append(f"{address} -> {link}")
                continue
            if anchor:
                wanted.append((address, target, unquote(anchor)))
            to_open.append(target)

    assert not not_pages, "links that open no page of the site:\n" + "\n".join(not_pages)
    assert len(seen) >= len(list(site.rglob("*.html"))) - 1  # all but 404.html
    missing = [
        f"{at} -> {target}#{anchor}" for at, target, anchor in wanted if anchor not in seen[target]
    ]
    assert not missing, "anchors missing on their page:\n" + "\n".join(missing)

    assert not left_the_files, f"requests that left the files: {sorted(set(left_the_files))}"

    # Search, from files: the index is inlined into search/search_index.js.
    page.goto(start)
    search = page.locator("input.md-search__input")
    results = page.locator(".md-search-result__item")
    search.click()
    for _ in range(30):  # a query typed before the index has loaded is answered by nothing
        search.fill("")
        search.press_sequentially("idempotency")
        page.wait_for_timeout(500)
        if results.count():
            break
    assert results.count() > 0, page.locator(".md-search-result").inner_text()
    assert "idempotency" in results.first.inner_text().lower()

    context.close()
    assert not left_the_files, f"requests that left the files: {sorted(set(left_the_files))}"
    assert not errors, errors
