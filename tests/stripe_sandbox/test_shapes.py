"""The sandbox's objects carry every top-level field of Stripe's published fixture."""

import json
from pathlib import Path

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

FIELDS = json.loads((Path(__file__).parent / "fixture_fields.json").read_text())


def _objects(client: stripe.StripeClient, sandbox: SandboxControl) -> dict[str, dict]:
    charge_id = paid_charge(client)
    refund = client.v1.refunds.create(params={"charge": charge_id, "amount": 100})
    dispute = sandbox.open_dispute(charge_id)
    charge = client.v1.charges.retrieve(charge_id)
    return {
        "refund": client.v1.refunds.retrieve(refund.id).to_dict(),
        "charge": charge.to_dict(),
        "dispute": client.v1.disputes.retrieve(dispute["id"]).to_dict(),
        "event": client.v1.events.list(params={"limit": 1}).data[0].to_dict(),
        "payment_intent": client.v1.payment_intents.retrieve(str(charge.payment_intent)).to_dict(),
    }


@pytest.mark.parametrize("kind", ["refund", "charge", "dispute", "event", "payment_intent"])
def test_every_fixture_field_is_present(
    client: stripe.StripeClient, sandbox: SandboxControl, kind: str
) -> None:
    obj = _objects(client, sandbox)[kind]
    missing = sorted(set(FIELDS[kind]) - set(obj))
    assert missing == [], f"{kind} lacks {missing}"
    assert obj["object"] == kind


def test_file_fields_are_present(client: stripe.StripeClient) -> None:
    import io

    handle = io.BytesIO(b"%PDF-1.4")
    handle.name = "a.pdf"
    uploaded = client.v1.files.create(
        params={"purpose": "dispute_evidence", "file": handle}
    ).to_dict()
    assert sorted(set(FIELDS["file"]) - set(uploaded)) == []
