"""A dispute as the pinned SDK declares it (stripe 16.1.0, API 2026-10-28.endive): every field
the resource class declares, at every level the sandbox fills, and no other; one dispute per
charge; a dispute the bank allows no response to (`due_by: 0`)."""

from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

ONE_DISPUTE = (
    "https://docs.stripe.com/changelog/2017-02-14/charges-specify-dispute-associated-transaction"
)
DUE_BY = "https://docs.stripe.com/api/disputes/object#dispute_object-evidence_details-due_by"


def declared(cls: type) -> set[str]:
    """The fields a resource class of the pinned SDK declares."""
    return {name for name in cls.__annotations__ if name != "OBJECT_NAME"}


# Each nested object the sandbox fills, with the SDK class declaring its fields.
NESTED: list[tuple[tuple[str, ...], type]] = [
    ((), stripe.Dispute),
    (("evidence",), stripe.Dispute.Evidence),
    (("evidence_details",), stripe.Dispute.EvidenceDetails),
    (("payment_method_details",), stripe.Dispute.PaymentMethodDetails),
    (("payment_method_details", "card"), stripe.Dispute.PaymentMethodDetails.Card),
]


def _at(obj: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for name in path:
        obj = obj[name]
    return obj


def _states(client: stripe.StripeClient, sandbox: SandboxControl) -> list[dict[str, Any]]:
    """Disputes in the states the tests reach: new, inquiry, submitted, won, lost, appealing."""
    new = sandbox.open_dispute(paid_charge(client, 5000), reason="fraudulent")["id"]
    inquiry = sandbox.open_dispute(paid_charge(client, 5000), case_type="inquiry")["id"]
    won = sandbox.open_dispute(paid_charge(client, 5000))["id"]
    client.v1.disputes.update(won, params={"evidence": {"uncategorized_text": "Ours."}})
    sandbox.set_dispute_status(won, "won")
    appealing = sandbox.open_dispute(paid_charge(client, 5000))["id"]
    sandbox.set_dispute_status(appealing, "lost", appeal_eligible=True)
    sandbox.appeal_dispute(appealing)
    lost = sandbox.open_dispute(paid_charge(client, 5000))["id"]
    client.v1.disputes.close(lost)
    return [client.v1.disputes.retrieve(d).to_dict() for d in (new, inquiry, won, appealing, lost)]


@pytest.mark.stripe_behaviour(
    "A dispute carries every field stripe.Dispute declares (top-level network_reason_code "
    "included), nested objects too, and none it does not declare",
    source="https://docs.stripe.com/api/disputes/object",
)
def test_a_dispute_has_exactly_the_fields_the_sdk_declares(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    for dispute in _states(client, sandbox):
        for path, cls in NESTED:
            fields = set(_at(dispute, path))
            if path == ("payment_method_details",):
                # Stripe shows the hash of the payment method's own type only (fixtures3.json).
                assert fields == {"card", "type"}
                continue
            assert fields == declared(cls), (dispute["status"], path)
        assert (
            dispute["network_reason_code"]
            == (dispute["payment_method_details"]["card"]["network_reason_code"])
        )
        for txn in dispute["balance_transactions"]:
            assert set(txn) == declared(stripe.BalanceTransaction), dispute["status"]


@pytest.mark.stripe_behaviour(
    "A charge has at most one dispute (Charge.dispute names one): a second is refused, whether "
    "the first is open or closed",
    source=ONE_DISPUTE,
)
@pytest.mark.parametrize("first", ["needs_response", "lost", "won"])
def test_a_second_dispute_on_a_charge_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, first: str
) -> None:
    charge_id = paid_charge(client, 5000)
    dispute_id = sandbox.open_dispute(charge_id)["id"]
    if first != "needs_response":
        sandbox.set_dispute_status(dispute_id, first)
    with pytest.raises(Exception, match="400"):
        sandbox.open_dispute(charge_id)
    assert [d.id for d in client.v1.disputes.list(params={"charge": charge_id}).data] == [
        dispute_id
    ]


@pytest.mark.stripe_behaviour(
    "evidence_details.due_by is 0 when the customer's bank allows no response to the dispute",
    source=DUE_BY,
)
def test_a_dispute_allowing_no_response_is_due_by_zero(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    opened = sandbox.open_dispute(paid_charge(client, 5000), response_allowed=False)
    dispute = client.v1.disputes.retrieve(opened["id"])
    assert dispute.evidence_details.due_by == 0
    # Stripe documents no refusal for evidence sent to such a dispute: none is invented.
    submitted = client.v1.disputes.update(
        opened["id"], params={"evidence": {"uncategorized_text": "Ours."}}
    )
    assert (submitted.status, submitted.evidence_details.due_by) == ("under_review", 0)
