"""Reading a client id metadata document (agents/oauth/client_documents.py) so that nothing an
outsider publishes can hold a Vouch worker or reach Vouch's own network (SPEC §19, issue 39):

- one total deadline, MCP_CLIENT_DOCUMENT_TIMEOUT_S, for connect, TLS and every read: a watchdog
  shuts the socket down when it passes, however slowly the other end drips (a per-read timeout,
  as requests has, restarts with every byte). Name resolution is the operating system's and
  bounded by its resolver's own timeout; what it takes counts against the deadline;
- no database connection held while fetching: the request's connection goes back to the pool
  (or is closed) first, when no transaction needs it, and the request opens one again after;
- at most MCP_CLIENT_DOCUMENT_FETCHES fetches at once per process; one more is refused at once
  ("try again") rather than queued, since a queue would hold the worker the cap protects;
- the host is resolved once; every address is checked (address_fetchable) unless
  MCP_CLIENT_DOCUMENT_PRIVATE_OK, and the connection goes to a checked address, with SNI, Host and
  the certificate check against the URL's name: a name that answers differently the second time
  (DNS rebinding) is never asked twice;
- every failure to read the document answers the same words (UNREADABLE), the detail logged: the
  exception's name told a closed port from a TLS-less service from a silent one."""

from __future__ import annotations

import http.client
import ipaddress
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connections

logger = logging.getLogger("vouch.oauth.documents")

URL_MAX = 100  # django-oauth-toolkit's Application.client_id: the URL is the client id

UNREADABLE = (
    "The client's metadata document could not be read: its URL did not answer over https, with "
    "a certificate for its host, within the time allowed."
)
BUSY = "Vouch is reading other clients' metadata documents right now: try again in a few seconds."


class DocumentRefused(Exception):
    """The document's URL, its address or what it answered cannot be used: the text says why
    (client_documents turns it into ClientDocumentRefused)."""


def checked_url(url: str) -> tuple[str, int]:
    """The host and port of a client id URL that may be fetched, or DocumentRefused."""
    if len(url) > URL_MAX:
        raise DocumentRefused(f"A client id URL is at most {URL_MAX} characters.")
    try:
        parts = urlsplit(url)
        port = parts.port or 443
    except ValueError as exc:  # a malformed IPv6 host or port
        raise DocumentRefused("The client id is not a well-formed URL.") from exc
    if (
        parts.scheme != "https"
        or not parts.hostname
        or parts.path in ("", "/")
        or parts.fragment
        or parts.username
        or parts.password
        or "\x00" in url
    ):
        raise DocumentRefused(
            "A client id URL is an https URL with a path, no fragment and no credentials."
        )
    return parts.hostname, port


Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# NAT64 prefixes (RFC 6052's well-known one, RFC 8215's local-use one): ipaddress calls their
# addresses global, yet a NAT64 gateway turns them into IPv4 addresses of whatever network it
# sits in. Refused whole, whatever IPv4 address they embed.
NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
# RFC 2765's IPv4-translated addresses (::ffff:0:a.b.c.d), which ipaddress does not unwrap.
IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, translated, 6to4, Teredo server and
    client), each of which a relay or the stack may reach instead."""
    found = [address.ipv4_mapped, address.sixtofour, *(address.teredo or ())]
    if address in IPV4_TRANSLATED:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [embedded for embedded in found if embedded is not None]


def address_fetchable(address: Address) -> bool:
    """Whether a client id document may be fetched from `address`: a global unicast address,
    not multicast, reserved, unspecified, link-local, loopback or private (ipaddress's
    `is_global` alone lets multicast and NAT64 through), and for IPv6 neither NAT64 nor carrying
    an IPv4 address that is refused itself."""
    if (
        not address.is_global
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or address.is_link_local
        or address.is_loopback
        or address.is_private
    ):
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_site_local or any(address in network for network in NAT64):
            return False
        return all(address_fetchable(embedded) for embedded in embedded_ipv4(address))
    return True


Target = tuple[socket.AddressFamily, Any]  # a family and a sockaddr, as getaddrinfo gives them


def checked_addresses(host: str, port: int) -> list[Target]:
    """`host` resolved once, every address checked (unless MCP_CLIENT_DOCUMENT_PRIVATE_OK): the
    addresses the fetch may connect to, in the resolver's order."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise DocumentRefused(f"The client id's host {host} does not resolve.") from exc
    targets: list[Target] = []
    for family, _, _, _, sockaddr in infos:
        if not settings.MCP_CLIENT_DOCUMENT_PRIVATE_OK and not address_fetchable(
            ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        ):
            # One refused address refuses the name: the resolver may hand any of them out.
            raise DocumentRefused(
                f"The client id's host {host} is a private or local address: not fetched."
            )
        if (family, sockaddr) not in targets:
            targets.append((family, sockaddr))
    if not targets:
        raise DocumentRefused(f"The client id's host {host} does not resolve.")
    return targets


class _Slots:
    """Fetches under way in this process, at most MCP_CLIENT_DOCUMENT_FETCHES (read at each
    fetch, so a changed setting applies at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = 0

    @contextmanager
    def slot(self) -> Iterator[None]:
        with self._lock:
            if self._taken >= settings.MCP_CLIENT_DOCUMENT_FETCHES:
                raise DocumentRefused(BUSY)
            self._taken += 1
        try:
            yield
        finally:
            with self._lock:
                self._taken -= 1


_slots = _Slots()


def _release_database() -> None:
    """Give this thread's database connections back (to the pool, or closed) before waiting on
    the network; Django opens one again at the next query. A connection inside a transaction
    stays: closing it would end the transaction (the tests' own, for one)."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close()


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to the URL's name (SNI, Host, certificate check) over a connection to one address
    given, never resolving the name again. `live` is the socket in use, for the watchdog."""

    def __init__(self, host: str, port: int, target: Target, context: ssl.SSLContext) -> None:
        super().__init__(host, port, context=context)
        self._target = target
        self._tls = context
        self.live: socket.socket | None = None

    def connect_before(self, deadline: float) -> None:
        family, sockaddr = self._target
        raw = socket.socket(family, socket.SOCK_STREAM)
        self.live = raw
        raw.settimeout(max(deadline - time.monotonic(), 0.001))
        raw.connect(sockaddr)
        tls = self._tls.wrap_socket(raw, server_hostname=self.host, do_handshake_on_connect=False)
        self.live = self.sock = tls
        tls.do_handshake()

    def connect(self) -> None:  # pragma: no cover - document_fetched connects first, always
        raise RuntimeError("a pinned connection is connected by connect_before")

    def expire(self) -> None:
        """The deadline passed: wake whatever read or handshake is blocked, from another thread
        (the plain socket's shutdown: the TLS object is the reading thread's)."""
        if self.live is not None:
            with suppress(OSError):  # not connected yet, or already closed
                socket.socket.shutdown(self.live, socket.SHUT_RDWR)


def _read(url: str, host: str, port: int, target: Target, deadline: float) -> bytes:
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    context = ssl.create_default_context(cafile=settings.MCP_CLIENT_DOCUMENT_CA or None)
    connection = _PinnedHTTPSConnection(host, port, target, context)
    watchdog = threading.Timer(max(deadline - time.monotonic(), 0), connection.expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.connect_before(deadline)
        connection.request(
            "GET", path, headers={"Accept": "application/json", "Connection": "close"}
        )
        response = connection.getresponse()
        if response.status != 200:
            raise DocumentRefused(
                f"The client id URL answered {response.status}, not 200 with the client's "
                "metadata document."
            )
        limit = settings.MCP_CLIENT_DOCUMENT_MAX_BYTES
        body = response.read(limit + 1)
        if time.monotonic() >= deadline:
            raise TimeoutError("the deadline passed while reading")
        if len(body) > limit:
            raise DocumentRefused(f"The client's metadata document is over {limit} bytes.")
        return body
    finally:
        watchdog.cancel()
        connection.close()
        if connection.live is not None:  # a socket whose connect or handshake failed
            connection.live.close()


def document_fetched(url: str) -> bytes:
    """The body of the client id metadata document at `url` (200, at most
    MCP_CLIENT_DOCUMENT_MAX_BYTES), or DocumentRefused."""
    host, port = checked_url(url)
    with _slots.slot():
        _release_database()
        deadline = time.monotonic() + settings.MCP_CLIENT_DOCUMENT_TIMEOUT_S
        targets = checked_addresses(host, port)
        failures: list[str] = []
        for target in targets:
            if time.monotonic() >= deadline:
                failures.append("deadline passed")
                break
            try:
                return _read(url, host, port, target, deadline)
            except (OSError, http.client.HTTPException) as exc:
                failures.append(f"{target[1][0]}: {type(exc).__name__}: {exc}")
        logger.info(
            "client id document unreadable",
            extra={"client_id_url": url, "failures": failures},
        )
        raise DocumentRefused(UNREADABLE)
