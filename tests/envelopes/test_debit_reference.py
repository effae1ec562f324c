"""A debit's `reference` is at most 200 characters, counted as the schema counts them (found by
schemathesis in CI: a reference of 205 characters whose first was U+0085 was accepted, 201)."""

import pytest

from envelopes.models import Debit, Envelope
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db


def _debit(api: Api, envelope_id: str, reference: str) -> tuple[int, str | None]:
    response = api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": 1_000_000, "reference": reference},
    )
    body = response.json()
    return response.status_code, (body.get("error") or {}).get("code")


def test_a_reference_of_200_characters_is_taken(
    alice: Api, staff_api: Api, sandbox: SandboxControl
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    assert _debit(staff_api, envelope_id, "r" * 200) == (201, None)


@pytest.mark.parametrize(
    "reference",
    [
        "r" * 201,
        "\u0085\u000f\u0086.\u0105" + "*" * 200,  # schemathesis's case: U+0085 is whitespace
        "\u0085" + "r" * 200,  # 201 characters as sent, 200 once whitespace is trimmed
        " " + "r" * 200,
    ],
)
def test_a_longer_reference_is_refused_and_debits_nothing(
    alice: Api, staff_api: Api, sandbox: SandboxControl, reference: str
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    assert _debit(staff_api, envelope_id, reference) == (400, "validation_error")
    assert not Debit.objects.exists()
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 5_000_000
