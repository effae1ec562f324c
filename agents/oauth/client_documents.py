"""Client ID Metadata Documents (SPEC §16; the MCP authorization spec's recommended registration):
a client whose `client_id` is an https URL publishes its metadata there, and Vouch fetches it when
the client first sends someone to /o/authorize/. What the document says is checked as a dynamic
registration's metadata is (agents.oauth.registration.ClientMetadata), and must name its own URL
as `client_id`; the client is then a public client (PKCE, no secret), kept as an Application whose
client id is the URL, marked unverified on the consent page.

The fetch (agents/oauth/document_fetch.py) is bounded: https only, no redirects, one total
deadline MCP_CLIENT_DOCUMENT_TIMEOUT_S, at most MCP_CLIENT_DOCUMENT_MAX_BYTES, at most
MCP_CLIENT_DOCUMENT_FETCHES at once, no database connection held, cached
MCP_CLIENT_DOCUMENT_CACHE_S; and never to a private, loopback, link-local, multicast, NAT64 or
reserved address (address_fetchable), resolved once, unless MCP_CLIENT_DOCUMENT_PRIVATE_OK (DEBUG
and the tests), so that a client id cannot make Vouch read its own network."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from oauth2_provider.models import Application

from agents.models import RegisteredClient

# The fetch and its address check live in document_fetch (issue 39); address_fetchable is named
# here still, for the callers and tests that know it from this module.
from agents.oauth.document_fetch import DocumentRefused, document_fetched
from agents.oauth.document_fetch import address_fetchable as address_fetchable
from agents.oauth.registration import ClientMetadata, RegistrationRefused

CLIENT_ID_MAX = 100  # django-oauth-toolkit's Application.client_id


class ClientDocumentRefused(Exception):
    """The client id URL, or the document at it, cannot be used: the description says why."""


def is_document_client_id(client_id: str) -> bool:
    return client_id.startswith("https://")


def _fetch(url: str) -> Any:
    """The JSON at `url`, read as agents.oauth.document_fetch reads it (one deadline, no database
    connection held, a few at a time, from the address that was checked)."""
    try:
        body = document_fetched(url)
    except DocumentRefused as refused:
        raise ClientDocumentRefused(str(refused)) from refused
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
