"""Client ID Metadata Documents (SPEC §16; the MCP authorization spec's recommended registration):
a client whose `client_id` is an https URL publishes its metadata there, and Vouch fetches it when
the client first sends someone to /o/authorize/. What the document says is checked as a dynamic
registration's metadata is (agents.oauth.registration.ClientMetadata), and must name its own URL
as `client_id`; the client is then a public client (PKCE, no secret), kept as an Application whose
client id is the URL, marked unverified on the consent page.

The fetch is bounded: https only, no redirects, MCP_CLIENT_DOCUMENT_TIMEOUT_S, at most
MCP_CLIENT_DOCUMENT_MAX_BYTES, cached MCP_CLIENT_DOCUMENT_CACHE_S; and never to a private,
loopback, link-local, multicast, NAT64 or reserved address (address_fetchable) unless
MCP_CLIENT_DOCUMENT_PRIVATE_OK (DEBUG and the tests), so that a client id cannot make Vouch read
its own network."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from oauth2_provider.models import Application

from agents.models import RegisteredClient
from agents.oauth.registration import ClientMetadata, RegistrationRefused

CLIENT_ID_MAX = 100  # django-oauth-toolkit's Application.client_id


class ClientDocumentRefused(Exception):
    """The client id URL, or the document at it, cannot be used: the description says why."""


def is_document_client_id(client_id: str) -> bool:
    return client_id.startswith("https://")


def _check_url(url: str) -> tuple[str, int]:
    if len(url) > CLIENT_ID_MAX:
        raise ClientDocumentRefused(f"A client id URL is at most {CLIENT_ID_MAX} characters.")
    try:
        parts = urlsplit(url)
        port = parts.port or 443
    except ValueError as exc:  # a malformed IPv6 host or port
        raise ClientDocumentRefused("The client id is not a well-formed URL.") from exc
    if (
        parts.scheme != "https"
        or not parts.hostname
        or parts.path in ("", "/")
        or parts.fragment
        or parts.username
        or parts.password
        or "\x00" in url
    ):
        raise ClientDocumentRefused(
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


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
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
        return all(address_fetchable(embedded) for embedded in _embedded_ipv4(address))
    return True


def _check_address(host: str, port: int) -> None:
    if settings.MCP_CLIENT_DOCUMENT_PRIVATE_OK:
        return
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise ClientDocumentRefused(f"The client id's host {host} does not resolve.") from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address_fetchable(address):
            raise ClientDocumentRefused(
                f"The client id's host {host} is a private or local address: not fetched."
            )


def _fetch(url: str) -> Any:
    host, port = _check_url(url)
    _check_address(host, port)
    limit = settings.MCP_CLIENT_DOCUMENT_MAX_BYTES
    try:
        with requests.get(
            url,
            timeout=settings.MCP_CLIENT_DOCUMENT_TIMEOUT_S,
            allow_redirects=False,
            stream=True,
            headers={"Accept": "application/json"},
            verify=settings.MCP_CLIENT_DOCUMENT_CA or True,
        ) as response:
            if response.status_code != 200:
                raise ClientDocumentRefused(
                    f"The client id URL answered {response.status_code}, not 200 with the "
                    "client's metadata document."
                )
            body = b""
            for chunk in response.iter_content(8192):
                body += chunk
                if len(body) > limit:
                    raise ClientDocumentRefused(
                        f"The client's metadata document is over {limit} bytes."
                    )
    except requests.RequestException as exc:
        raise ClientDocumentRefused(
            f"The client's metadata document could not be read ({type(exc).__name__})."
        ) from exc
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ClientDocumentRefused("The client's metadata document is not JSON.") from exc


# Public clients only, unverified, what is not served left out:
# docs/decisions/0017-hosts-as-they-are.md
def client_document(url: str) -> dict[str, Any]:
    """The checked metadata document at `url` (cached), or ClientDocumentRefused. What it lists
    that Vouch does not serve (a jwt-bearer grant, a private-use redirect URI) is left out, as a
    registration's is; it is refused only when nothing usable remains."""
    key = "client-document:" + hashlib.sha256(url.encode("utf-8")).hexdigest()
    cached = cache.get(key)
    if isinstance(cached, dict):
        return cached
    document = _fetch(url)
    if not isinstance(document, dict) or document.get("client_id") != url:
        raise ClientDocumentRefused(
            "The client's metadata document must be a JSON object whose client_id is its own URL."
        )
    try:
        checked = ClientMetadata.checked(document)
    except RegistrationRefused as refused:
        raise ClientDocumentRefused(refused.description) from refused
    metadata = {
        "client_id": url,
        "client_name": checked.client_name,
        "client_uri": checked.client_uri,
        "redirect_uris": checked.redirect_uris,
        "grant_types": checked.grant_types,
        "scope": checked.scope,
        # Shown on the consent page: what the document listed that Vouch does not serve.
        "left_out": checked.left_out,
    }
    cache.set(key, metadata, timeout=settings.MCP_CLIENT_DOCUMENT_CACHE_S)
    return metadata


def client_document_application(url: str) -> Application:
    """The Application of the client whose id is `url`, made or brought up to date from its
    metadata document (name and redirect URIs as the document says now)."""
    metadata = client_document(url)
    name = metadata["client_name"] or urlsplit(url).hostname or url
    redirect_uris = " ".join(metadata["redirect_uris"])
    with transaction.atomic():
        application, _ = Application.objects.select_for_update().get_or_create(
            client_id=url,
            defaults={
                "name": name,
                "client_type": Application.CLIENT_PUBLIC,
                "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
                "redirect_uris": redirect_uris,
                "algorithm": "",
            },
        )
        if (application.name, application.redirect_uris) != (name, redirect_uris):
            application.name, application.redirect_uris = name, redirect_uris
            application.save(update_fields=["name", "redirect_uris", "updated"])
        RegisteredClient.objects.update_or_create(
            application=application,
            defaults={"how": RegisteredClient.How.METADATA_DOCUMENT, "metadata": metadata},
        )
    return application
