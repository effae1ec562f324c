"""Fixtures of the agent surface's tests (this folder only; shared drivers are in tests/drivers)."""

from __future__ import annotations

import pytest
from oauth2_provider.models import Application

from tests.agents.oauth import client_register


@pytest.fixture
def app(db: None) -> Application:
    """A public client registered by staff, for the authorization code flow with PKCE."""
    return client_register(name="Claude on Alice's laptop")
