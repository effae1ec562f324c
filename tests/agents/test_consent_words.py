"""The consent page in the buyer's words (issue 41, item 8): it said "ask Vouch's operations staff"
to revoke an assistant, while the buyer can revoke it themselves on their Connected assistants
page; and it led with the scopes' codes. It now says what the buyer can do, with a link, and each
scope in words, its code only in a quiet line."""

from __future__ import annotations

import re

import pytest

from accounts.models import User
from tests.agents.oauth import authorize_query, browser_as, client_register, consent, pkce_pair

pytestmark = pytest.mark.django_db


def test_the_consent_page_says_the_buyer_can_revoke_it_themselves(buyer: User) -> None:
    app = client_register(name="Claude on my laptop")
    _, challenge = pkce_pair()

    page = consent(browser_as(buyer), authorize_query(app, challenge))

    assert page.status_code == 200
    html = page.content.decode()
    assert "operations staff" not in html
    assert "ask them" not in html
    said = re.search(r'<p id="consent-revoke">(.*?)</p>', html, flags=re.DOTALL)
    assert said is not None, html
    assert "revoke its access yourself" in said.group(1)
    assert 'href="/escrow/assistants/"' in said.group(1)
    # Each scope in words first; its code never leads the item.
    scopes = re.search(r'<ul class="consent-scopes" id="consent-scopes">(.*?)</ul>', html, re.S)
    assert scopes is not None
    assert "See your envelopes, their balances and your refunds." in scopes.group(1)
    assert "<code>" not in scopes.group(1)
