"""An MCP client nobody registered beforehand (issue 26, acceptance 1): the official SDK's
`OAuthClientProvider` with no stored client information, against the live ASGI server, with a
person in Chromium. It reads the metadata, registers itself (RFC 7591), the buyer signs in and
allows on a consent page that marks the client unverified, and the session lists only the buyer's
tools and calls them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata
from oauth2_provider.models import AccessToken, Application
from pydantic import AnyUrl

from agents.models import RegisteredClient
from tests.agents.oauth import REDIRECT_URI
from tests.drivers.api import Api
from tests.drivers.https_documents import DocumentServer
from tests.drivers.mcp import BUYER_TOOLS
from tests.drivers.oauth_browser import Person, SdkStorage, chromium


def connect(
    base: str, artifacts: Path, width: int, envelope_id: str, **provider: Any
) -> dict[str, Any]:
    """Alice at Chromium `width` px wide, and the SDK's client with `provider`'s options: it
    connects (consent included), lists the tools, calls whoami and envelope_get."""
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with chromium() as browser:
            context = await browser.new_context(viewport={"width": width, "height": 900})
            person = await Person(context, "alice", artifacts).start()
            auth = OAuthClientProvider(
                server_url=f"{base}/mcp",
                redirect_handler=person.consent,
                callback_handler=person.callback,
                **provider,
            )
            async with (
                httpx2.AsyncClient(auth=auth, timeout=60) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as mcp,
            ):
                seen["tools"] = {tool.name for tool in (await mcp.list_tools()).tools}
                seen["whoami"] = (await mcp.call_tool("whoami", {})).structured_content
                got = await mcp.call_tool("envelope_get", {"envelope_id": envelope_id})
                seen["envelope"] = got.structured_content
                seen["consent_urls"] = list(person.authorize_urls)
                seen["consent_pages"] = list(person.consent_pages)

    asyncio.run(scenario())
    return seen


@pytest.mark.django_db(transaction=True)
def test_the_sdk_registers_itself_and_a_buyer_connects_with_no_client_id_handed_over(
    asgi_server: str, alice: Api, artifacts: Path
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    storage = SdkStorage()

    seen = connect(
        asgi_server,
        artifacts,
        390,
        envelope_id,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[AnyUrl(REDIRECT_URI)],
            client_name="A generic MCP host",
            # A host registers for every scope the metadata lists (it then asks for what the
            # 401's challenge names).
            scope="escrow:read escrow:refund_request ops:read",
        ),
        storage=storage,
    )

    assert storage.client is not None
    client_id = storage.client.client_id
    registration = RegisteredClient.objects.get(application__client_id=client_id)
    assert registration.how == RegisteredClient.How.DYNAMIC
    assert Application.objects.get(client_id=client_id).name == "A generic MCP host"
    assert len(seen["consent_urls"]) == 1
    (consent_page,) = seen["consent_pages"]
    assert 'id="consent-unverified"' in consent_page
    assert seen["tools"] == BUYER_TOOLS
    assert seen["whoami"]["username"] == "alice"
    assert set(seen["whoami"]["scopes"]) == {"escrow:read", "escrow:refund_request"}
    assert seen["envelope"]["envelope_id"] == envelope_id
    token = AccessToken.objects.get(application__client_id=client_id)
    assert token.user == alice.user
    assert token.resource == [f"{asgi_server}/mcp"]
    registration.refresh_from_db()
    assert registration.last_used_at is not None


@pytest.mark.django_db(transaction=True)
def test_the_sdk_presents_a_client_id_metadata_document_and_a_buyer_connects(
    asgi_server: str, alice: Api, artifacts: Path, document_server: DocumentServer
) -> None:
    """The SDK's `client_metadata_url`: with the server advertising
    client_id_metadata_document_supported, the URL is the client id; Vouch fetches the document
    from the test's HTTPS server. No registration request is made."""
    envelope_id = alice.create(3_000_000)["envelope_id"]
    url = document_server.url("/assistant/client.json")
    document_server.serve(
        "/assistant/client.json",
        {
            "client_id": url,
            "client_name": "An assistant that publishes its metadata",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    seen = connect(
        asgi_server,
        artifacts,
        1366,
        envelope_id,
        client_metadata=OAuthClientMetadata(redirect_uris=[AnyUrl(REDIRECT_URI)]),
        storage=SdkStorage(),
        client_metadata_url=url,
    )

    assert document_server.hits["/assistant/client.json"] >= 1
    registration = RegisteredClient.objects.get(application__client_id=url)
    assert registration.how == RegisteredClient.How.METADATA_DOCUMENT
    assert not RegisteredClient.objects.filter(how=RegisteredClient.How.DYNAMIC).exists()
    (consent_page,) = seen["consent_pages"]
    assert "An assistant that publishes its metadata" in consent_page
    assert 'id="consent-unverified"' in consent_page
    assert seen["tools"] == BUYER_TOOLS
    assert seen["envelope"]["envelope_id"] == envelope_id
    assert AccessToken.objects.get(application__client_id=url).user == alice.user
