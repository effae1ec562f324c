"""Mastercard compliance disputes (changelog 2026-06-24.dahlia) through the official SDK: a
`noncompliant` Mastercard dispute is a compliance case, eligible for `mastercard_compliance`,
and is contested only with the network fee acknowledged, as a Visa compliance dispute is."""

from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

CHANGELOG = "https://docs.stripe.com/changelog/dahlia/2026-06-24/mastercard-compliance-disputes"
GUIDE = "https://docs.stripe.com/disputes/api/mastercard-compliance"
FEE = "evidence[enhanced_evidence][mastercard_compliance][fee_acknowledged]"


def _compliance(client: stripe.StripeClient, sandbox: SandboxControl) -> str:
    charge_id = paid_charge(client, 5000, pm="pm_card_mastercard")
    return str(sandbox.open_dispute(charge_id, reason="noncompliant")["id"])


def _acknowledge(value: str | bool) -> dict[str, Any]:
    return {"enhanced_evidence": {"mastercard_compliance": {"fee_acknowledged": value}}}


@pytest.mark.stripe_behaviour(
    "A noncompliant Mastercard dispute is a compliance case: case_type compliance, "
    "enhanced_eligibility_types [mastercard_compliance], eligibility requires_fee_acknowledgement",
    source=CHANGELOG,
)
def test_a_noncompliant_mastercard_dispute_is_a_compliance_case(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute = client.v1.disputes.retrieve(_compliance(client, sandbox)).to_dict()
    assert dispute["reason"] == "noncompliant"
    assert dispute["payment_method_details"]["card"]["case_type"] == "compliance"
    assert dispute["enhanced_eligibility_types"] == ["mastercard_compliance"]
    assert dispute["evidence_details"]["enhanced_eligibility"]["mastercard_compliance"] == {
        "status": "requires_fee_acknowledgement"
    }


@pytest.mark.stripe_behaviour(
    "To contest a Mastercard compliance dispute, fee_acknowledged must be true when evidence is "
    "submitted",
    source=GUIDE,
)
def test_contesting_needs_the_mastercard_fee_acknowledged(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _compliance(client, sandbox)
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.disputes.update(dispute_id, params={"evidence": {"uncategorized_text": "Ours."}})
    assert raised.value.param == FEE
    assert client.v1.disputes.retrieve(dispute_id).status == "needs_response"


@pytest.mark.stripe_behaviour(
    "After the fee is acknowledged and evidence submitted, evidence_details.enhanced_eligibility"
    ".mastercard_compliance.status is fee_acknowledged",
    source=CHANGELOG,
)
def test_an_acknowledged_mastercard_fee_lets_the_dispute_be_submitted(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _compliance(client, sandbox)
    staged = client.v1.disputes.update(
        dispute_id, params={"evidence": _acknowledge(True), "submit": False}
    ).to_dict()
    assert staged["evidence"]["enhanced_evidence"]["mastercard_compliance"] == {
        "fee_acknowledged": True
    }
    submitted = client.v1.disputes.update(dispute_id).to_dict()
    assert submitted["status"] == "under_review"
    assert submitted["evidence_details"]["enhanced_eligibility"]["mastercard_compliance"] == {
        "status": "fee_acknowledged"
    }


def test_mastercard_compliance_evidence_on_another_dispute_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    opened = sandbox.open_dispute(
        paid_charge(client, 5000, pm="pm_card_visa"), reason="noncompliant"
    )
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.disputes.update(
            opened["id"], params={"evidence": _acknowledge(True), "submit": False}
        )
    assert raised.value.param == "evidence[enhanced_evidence][mastercard_compliance]"


@pytest.mark.stripe_behaviour(
    "A Visa compliance dispute is a compliance case too (case_type compliance)",
    source="https://docs.stripe.com/disputes/api/visa-compliance",
)
def test_a_visa_compliance_dispute_is_a_compliance_case(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    opened = sandbox.open_dispute(
        paid_charge(client, 5000, pm="pm_card_visa"), reason="noncompliant"
    )
    dispute = client.v1.disputes.retrieve(opened["id"])
    assert dispute.payment_method_details.card.case_type == "compliance"
    assert dispute.enhanced_eligibility_types == ["visa_compliance"]


@pytest.mark.stripe_behaviour(
    "evidence[enhanced_evidence]='' unsets the enhanced evidence (Literal[''] in the SDK's "
    "DisputeUpdateParamsEvidence): the fee is unacknowledged again",
    source="https://docs.stripe.com/api/disputes/update",
)
def test_the_empty_string_unsets_the_enhanced_evidence(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _compliance(client, sandbox)
    client.v1.disputes.update(dispute_id, params={"evidence": _acknowledge(True), "submit": False})
    unset = client.v1.disputes.update(
        dispute_id, params={"evidence": {"enhanced_evidence": ""}, "submit": False}
    ).to_dict()
    assert unset["evidence"]["enhanced_evidence"] == {}
    assert unset["evidence_details"]["enhanced_eligibility"] == {
        "mastercard_compliance": {"status": "requires_fee_acknowledgement"}
    }
