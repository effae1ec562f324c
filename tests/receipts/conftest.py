"""Receipts against the sandbox, built the way they happen: envelopes funded and refunded through
the API, their verification runs driven to verdicts by the engine's own functions."""

from __future__ import annotations

from typing import Any

import pytest

from envelopes.models import RefundLeg
from receipts import keys
from receipts.models import Receipt
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs


class Shop:
    """A buyer's envelope at the sandbox, and its refunds, with every run settled on request."""

    def __init__(self, buyer: Api, sandbox: SandboxControl) -> None:
        self.buyer = buyer
        self.sandbox = sandbox
        self.envelope_id = ""

    def fund(self, amount_micro: int = 10_000_000, *, settle: bool = True) -> str:
        """A new envelope; returns its charge id."""
        data = self.buyer.create(amount_micro)
        self.envelope_id = data["envelope_id"]
        if settle:
            settle_runs()
        return str(data["funding_legs"][0]["charge"])

    def top_up(self, amount_micro: int, *, settle: bool = True) -> str:
        data = self.buyer.top_up(self.envelope_id, amount_micro)
        if settle:
            settle_runs()
        newest = max(data["funding_legs"], key=lambda leg: leg["sequence"])
        return str(newest["charge"])

    def refund(self, amount_micro: int | None = None, *, settle: bool = True) -> dict[str, Any]:
        body = {} if amount_micro is None else {"amount_micro": amount_micro}
        response = self.buyer.post(f"/api/v1/escrow/envelopes/{self.envelope_id}/refund", body)
        assert response.status_code in (200, 202), response.content
        if settle:
            settle_runs()
        return dict(response.json()["data"])


@pytest.fixture
def shop(alice: Api, stripe_at_sandbox: SandboxControl) -> Shop:
    return Shop(alice, stripe_at_sandbox)


def charge_receipt(charge_id: str) -> Receipt:
    return Receipt.objects.get(kind="charge", provider_object_id=charge_id)


def refund_receipt(leg: RefundLeg) -> Receipt:
    return Receipt.objects.get(kind="refund", provider_object_id=leg.provider_refund_id)


def sign_with(settings: Any, *, key_id: str, environment: str, trusted_as: str | None) -> str:
    """Make the deployment sign with a new key of `environment`, trusted (configured) as
    `trusted_as`, or not configured at all (None). Returns the key's public key."""
    key = keys.key_generate(environment)
    settings.RECEIPT_SIGNING_KEY = key["seed"]
    settings.RECEIPT_SIGNING_KEY_ID = key_id
    settings.RECEIPT_SIGNING_ENVIRONMENT = environment
    if trusted_as is not None:
        settings.RECEIPT_TRUSTED_KEYS = {
            **settings.RECEIPT_TRUSTED_KEYS,
            key_id: {"public_key": key["public_key"], "environment": trusted_as},
        }
    return key["public_key"]
