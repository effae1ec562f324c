"""A funding leg's idempotency key names that leg alone. Found by bench/soak.py: a declined top-up's
leg is removed, the next top-up took the same sequence number and with it the same key
(`env_…:fund:N`), and the provider answered `idempotency_error` (the key was first used with other
parameters) on every try: the leg stayed pending forever and the buyer was never charged. With the
same card and amount the provider would instead have replayed the old decline to the new top-up."""

from typing import Any

from envelopes.models import FundingLeg
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

DECLINED = "pm_card_chargeDeclinedInsufficientFunds"


def _top_up(alice: Api, envelope_id: str, amount_micro: int, pm: str) -> Any:
    return alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/top-ups",
        {"amount_micro": amount_micro, "payment_method": pm},
    )


def test_a_top_up_after_a_declined_one_is_charged(alice: Api, sandbox: SandboxControl) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    declined = _top_up(alice, envelope_id, 3_000_000, DECLINED)
    assert declined.status_code == 402, declined.content
    retried = _top_up(alice, envelope_id, 2_000_000, "pm_card_visa")
    assert retried.status_code == 201, retried.content
    assert retried.json()["data"]["total_funded_micro"] == 7_000_000
    assert sorted(FundingLeg.objects.values_list("status", flat=True)) == ["succeeded"] * 2
    assert ledger_breaches() == []


def test_a_declined_top_up_is_not_replayed_to_the_next_one(
    alice: Api, sandbox: SandboxControl
) -> None:
    """Same amount, a card that declines, then a card that pays: the second is a new request."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    assert _top_up(alice, envelope_id, 2_000_000, DECLINED).status_code == 402
    assert _top_up(alice, envelope_id, 2_000_000, DECLINED).status_code == 402
    paid = _top_up(alice, envelope_id, 2_000_000, "pm_card_visa")
    assert paid.status_code == 201, paid.content
    keys = list(FundingLeg.objects.values_list("idempotency_key", flat=True))
    assert len(keys) == 2


def test_every_funding_leg_key_names_its_own_leg(alice: Api, sandbox: SandboxControl) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    _top_up(alice, envelope_id, 1_000_000, DECLINED)
    alice.top_up(envelope_id, 1_000_000)
    for leg in FundingLeg.objects.all():
        assert leg.public_id in leg.idempotency_key
