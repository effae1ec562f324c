"""Issue 39 items 7 and 10 (SPEC §19, "Nothing an outsider sends holds a worker"): a client id
metadata document is fetched within one total deadline, with no database connection held, a few
at a time, from the address that was checked, and every failure to read it says the same words.
The documents come from tests/drivers/https_documents.py's local HTTPS server; the only part
replaced is the operating system's resolver (socket.getaddrinfo), to play a rebinding name."""

from __future__ import annotations

import html
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import connection

from accounts.models import User
from agents.oauth import client_documents
from agents.oauth.client_documents import ClientDocumentRefused
from tests.agents.oauth import (
    DocumentClient,
    authorize_query,
    browser_as,
    consent,
    document_body,
    pkce_pair,
)
from tests.drivers.https_documents import NAME, DocumentServer

pytestmark = pytest.mark.django_db


def _authorize(buyer: User, url: str) -> Any:
    _, challenge = pkce_pair()
    return consent(browser_as(buyer), authorize_query(DocumentClient(url), challenge))


def _refusal(page: Any) -> str:
    assert page.status_code == 400, page.content
    found = re.search(r'<li class="error">(.*?)</li>', page.content.decode(), re.S)
    assert found, page.content
    return html.unescape(found.group(1)).strip()


def test_a_dripping_document_is_refused_within_one_deadline(
    document_server: DocumentServer, buyer: User, settings: Any
) -> None:
    """Issue 39 item 7: the timeout was per read, so a document sent one byte every 0.5 s (well
    within a 1 s read timeout) held the request for as long as it dripped."""
    settings.MCP_CLIENT_DOCUMENT_TIMEOUT_S = 1.0
    url = document_server.drip("/drip.json", {}, interval=0.5)

    started = time.monotonic()
    page = _authorize(buyer, url)
    elapsed = time.monotonic() - started

    assert elapsed < 1.0 + 0.75, f"the fetch took {elapsed:.1f} s past a 1 s deadline"
    assert "could not be read" in _refusal(page)


@pytest.mark.django_db(transaction=True)
def test_no_database_connection_is_held_while_the_document_is_fetched(
    document_server: DocumentServer, buyer: User
) -> None:
    """Issue 39 item 7: the fetch ran while the request held its database connection (a pooled
    one in production), so slow documents emptied the pool for everyone. Counted from
    PostgreSQL itself, while the document server is answering."""
    database = connection.settings_dict
    sessions: list[int] = []

    def count_sessions() -> None:
        with psycopg.connect(
            host=database["HOST"] or None,
            port=database["PORT"] or None,
            user=database["USER"] or None,
            password=database["PASSWORD"] or None,
            dbname=database["NAME"],
        ) as watcher:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                [database["NAME"]],
            ).fetchone()
            sessions.append(row[0] if row else -1)

    url = document_server.serve("/c.json", document_body(document_server.url("/c.json")))
    document_server.on_request = count_sessions

    page = _authorize(buyer, url)

    assert page.status_code == 200, page.content
    assert sessions == [0], f"{sessions} database sessions open during the fetch"


def test_fetches_over_the_cap_are_refused_at_once(
    document_server: DocumentServer, settings: Any
) -> None:
    """Issue 39 item 7: nothing limited how many fetches ran at once; each held a worker. With
    MCP_CLIENT_DOCUMENT_FETCHES slow fetches under way, one more is refused straight away."""
    settings.MCP_CLIENT_DOCUMENT_FETCHES = 2
    settings.MCP_CLIENT_DOCUMENT_TIMEOUT_S = 3.0
    slow = [document_server.drip(f"/slow-{n}.json", {}, interval=0.5) for n in range(2)]
    outcomes: list[str] = []

    def fetch(url: str) -> None:
        try:
            client_documents.client_document(url)
            outcomes.append("read")
        except ClientDocumentRefused as refused:
            outcomes.append(str(refused))

    threads = [threading.Thread(target=fetch, args=(url,)) for url in slow]
    for thread in threads:
        thread.start()
    waited = time.monotonic() + 2
    while sum(document_server.hits.get(urlsplit(u).path, 0) for u in slow) < 2:
        assert time.monotonic() < waited, "the slow fetches never reached the server"
        time.sleep(0.02)
    url = document_server.serve("/c.json", document_body(document_server.url("/c.json")))

    started = time.monotonic()
    with pytest.raises(ClientDocumentRefused, match="try again"):
        client_documents.client_document(url)
    assert time.monotonic() - started < 0.5
    assert document_server.hits.get("/c.json", 0) == 0
    for thread in threads:
        thread.join(timeout=10)
    assert len(outcomes) == 2


@pytest.fixture
def rebinding_resolver(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The OS resolver, for NAME only: a public address the first time, then 127.0.0.1 (a
    rebinding name with a zero TTL). Yields the hosts asked for."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != NAME:
            return real(host, port, *args, **kwargs)
        asked.append(host)
        address = "8.8.8.8" if len(asked) == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_rebinding_name_is_fetched_from_the_checked_address_only(
    document_server: DocumentServer,
    buyer: User,
    settings: Any,
    rebinding_resolver: list[str],
) -> None:
    """Issue 39 item 10: the host was resolved for the address check, then again to connect,
    so a name answering a public address and then 127.0.0.1 had Vouch read its own network."""
    settings.MCP_CLIENT_DOCUMENT_PRIVATE_OK = False
    settings.MCP_CLIENT_DOCUMENT_TIMEOUT_S = 1.0
    port = document_server.httpd.server_port
    url = f"https://{NAME}:{port}/c.json"
    document_server.serve("/c.json", document_body(url))

    page = _authorize(buyer, url)

    assert page.status_code == 400
    assert document_server.hits.get("/c.json", 0) == 0, "fetched from 127.0.0.1"
    assert rebinding_resolver == [NAME], "resolved more than once"


def test_a_name_is_verified_against_the_certificate_at_the_address_resolved(
    document_server: DocumentServer, buyer: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fetch connects to an address but speaks TLS to the name: SNI, Host and the
    certificate check are the URL's name (the server's certificate holds NAME, not OTHER)."""
    real = socket.getaddrinfo
    other = "other.vouch.test"

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in (NAME, other):
            return [
                (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", port))
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    port = document_server.httpd.server_port
    named = f"https://{NAME}:{port}/c.json"
    document_server.serve("/c.json", document_body(named))

    assert _authorize(buyer, named).status_code == 200
    assert "could not be read" in _refusal(_authorize(buyer, f"https://{other}:{port}/c.json"))


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_every_failure_to_read_a_document_says_the_same_words(
    document_server: DocumentServer, buyer: User, settings: Any, tmp_path: Path
) -> None:
    """Issue 39 item 10: the refusal named the exception, which told loopback ports apart (a
    TLS-less service said SSLError, a closed port ConnectionError, a silent one ReadTimeout):
    a port scanner for anyone who can name a client id. One text for all, the detail logged."""
    settings.MCP_CLIENT_DOCUMENT_TIMEOUT_S = 1.0
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nothing ever answers
    (tmp_path / "untrusted").mkdir()
    untrusted = DocumentServer(tmp_path / "untrusted")  # its certificate is trusted by no one
    database = django_settings.DATABASES["default"]
    cache = urlsplit(str(django_settings.CACHES["default"].get("LOCATION", "")))
    ports = {
        "closed": _closed_port(),
        "silent": silent.getsockname()[1],
        "postgresql": int(database.get("PORT") or 5432),
        "untrusted TLS": untrusted.httpd.server_port,
    }
    if cache.scheme.startswith("redis") and cache.port:
        ports["redis"] = cache.port
    try:
        said = {
            name: _refusal(_authorize(buyer, f"https://127.0.0.1:{port}/c.json"))
            for name, port in ports.items()
        }
    finally:
        silent.close()
        untrusted.stop()

    assert len(set(said.values())) == 1, said
