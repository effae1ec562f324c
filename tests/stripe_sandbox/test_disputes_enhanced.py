"""Network reason codes and enhanced evidence (Stripe API 2026-10-28.endive) through the official
SDK: Visa Compelling Evidence 3.0, its qualification at the rules' edges, and Visa compliance's
network fee acknowledgement."""

from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from stripe_sandbox.resources import dispute_evidence as rules
from tests.helpers import CARD_ONLY, paid_charge

DAY = 24 * 60 * 60
CE3 = "evidence[enhanced_evidence][visa_compelling_evidence_3]"
PRIORS = f"{CE3}[prior_undisputed_transactions]"
COMPLIANCE = "evidence[enhanced_evidence][visa_compliance]"
FEE = f"{COMPLIANCE}[fee_acknowledged]"

ADDRESS = {
    "line1": "1 Main St",
    "city": "Springfield",
    "state": "IL",
    "postal_code": "62701",
    "country": "US",
}
IDENTITY = {
    "customer_account_id": "acct-42",
    "customer_purchase_ip": "203.0.113.7",
    "customer_device_id": "device-1",
    "customer_email_address": "buyer@example.com",
    "shipping_address": ADDRESS,
}
DISPUTED = {
    **IDENTITY,
    "product_description": "A blue kettle",
    "merchandise_or_services": "merchandise",
}
ALL_MISSING = [
    "missing_customer_identifiers",
    "missing_disputed_transaction_description",
    "missing_merchandise_or_services",
    "missing_prior_undisputed_transactions",
]


def _prior(charge: str, **changes: Any) -> dict[str, Any]:
    prior = {"charge": charge, **IDENTITY, "product_description": "A red kettle", **changes}
    return {name: value for name, value in prior.items() if value is not None}


def _fraud_dispute(
    client: stripe.StripeClient, sandbox: SandboxControl, pm: str = "pm_card_visa"
) -> tuple[str, str]:
    charge = paid_charge(client, 5000, pm=pm)
    return charge, str(sandbox.open_dispute(charge, reason="fraudulent")["id"])


def _ce3_world(
    client: stripe.StripeClient,
    sandbox: SandboxControl,
    advance_s: int = 200 * DAY,
    prior_pms: tuple[str, str] = ("pm_card_visa", "pm_card_visa"),
) -> tuple[list[str], str]:
    """Two prior charges, then `advance_s` later a disputed one (Visa 10.4): (priors, dispute)."""
    priors = [paid_charge(client, 1000, pm=pm) for pm in prior_pms]
    sandbox.advance_clock(advance_s)
    _, dispute_id = _fraud_dispute(client, sandbox)
    return priors, dispute_id


def _stage(client: stripe.StripeClient, dispute_id: str, ce3: dict[str, Any]) -> Any:
    return client.v1.disputes.update(
        dispute_id,
        params={
            "evidence": {"enhanced_evidence": {"visa_compelling_evidence_3": ce3}},
            "submit": False,
        },
    )


def _qualification(client: stripe.StripeClient, dispute_id: str) -> dict[str, Any]:
    dispute = client.v1.disputes.retrieve(dispute_id).to_dict()
    eligibility: dict[str, Any] = dispute["evidence_details"]["enhanced_eligibility"]
    return dict(eligibility["visa_compelling_evidence_3"])


def _refused(
    client: stripe.StripeClient, dispute_id: str, params: dict[str, Any]
) -> stripe.InvalidRequestError:
    before = client.v1.disputes.retrieve(dispute_id).to_dict()
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.disputes.update(dispute_id, params=params)
    assert raised.value.http_status == 400
    assert client.v1.disputes.retrieve(dispute_id).to_dict() == before  # nothing changed
    return raised.value


# --- network reason codes and eligibility ------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "code", "eligible"),
    [
        ("fraudulent", "10.4", ["visa_compelling_evidence_3"]),
        ("noncompliant", None, ["visa_compliance"]),  # no published code: none invented
        ("product_not_received", "13.1", []),
        ("duplicate", "12.6.1", []),
        ("credit_not_processed", "13.7", []),
        ("general", "13.3", []),
        ("subscription_canceled", "13.2", []),
        ("product_unacceptable", "13.3", []),
        ("bank_cannot_process", None, []),
    ],
)
def test_a_visa_dispute_carries_its_network_reason_code(
    client: stripe.StripeClient,
    sandbox: SandboxControl,
    reason: str,
    code: str | None,
    eligible: list[str],
) -> None:
    opened = sandbox.open_dispute(paid_charge(client, 5000), reason=reason)
    dispute = client.v1.disputes.retrieve(opened["id"]).to_dict()
    assert dispute["payment_method_details"]["card"]["network_reason_code"] == code
    assert dispute["payment_method_details"]["card"]["brand"] == "visa"
    assert dispute["enhanced_eligibility_types"] == eligible


def test_eligibility_starts_with_what_is_required(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    _, fraud = _fraud_dispute(client, sandbox)
    compliance = sandbox.open_dispute(paid_charge(client, 5000), reason="noncompliant")["id"]
    plain = sandbox.open_dispute(paid_charge(client, 5000), reason="general")["id"]
    details = {
        d: client.v1.disputes.retrieve(d).to_dict()["evidence_details"]
        for d in (fraud, compliance, plain)
    }
    assert details[fraud]["enhanced_eligibility"] == {
        "visa_compelling_evidence_3": {"required_actions": ALL_MISSING, "status": "requires_action"}
    }
    assert details[compliance]["enhanced_eligibility"] == {
        "visa_compliance": {"status": "requires_fee_acknowledgement"}
    }
    assert details[plain]["enhanced_eligibility"] == {}
    assert client.v1.disputes.retrieve(fraud).evidence.enhanced_evidence.to_dict() == {}


def test_other_brands_have_no_code_and_no_visa_programs(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    """Mastercard's reason codes are not assumed (null); a noncompliant Mastercard dispute is
    Mastercard compliance (test_disputes_mastercard.py), never a Visa program."""
    for pm in ("pm_card_mastercard", "pm_card_amex"):
        opened = sandbox.open_dispute(paid_charge(client, 5000, pm=pm), "fraudulent")
        dispute = client.v1.disputes.retrieve(opened["id"]).to_dict()
        assert dispute["payment_method_details"]["card"]["brand"] == pm.removeprefix("pm_card_")
        assert dispute["payment_method_details"]["card"]["network_reason_code"] is None
        assert dispute["network_reason_code"] is None
        assert dispute["enhanced_eligibility_types"] == []
        assert dispute["evidence_details"]["enhanced_eligibility"] == {}


def test_the_control_api_sets_the_network_reason_code(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    general = sandbox.open_dispute(paid_charge(client, 5000), "general", network_reason_code="10.4")
    assert general["payment_method_details"]["card"]["network_reason_code"] == "10.4"
    assert general["enhanced_eligibility_types"] == ["visa_compelling_evidence_3"]
    fraud = sandbox.open_dispute(paid_charge(client, 5000), "fraudulent", network_reason_code=None)
    assert fraud["payment_method_details"]["card"]["network_reason_code"] is None
    assert fraud["enhanced_eligibility_types"] == []
    master = sandbox.open_dispute(
        paid_charge(client, 5000, pm="pm_card_mastercard"), "fraudulent", network_reason_code="4837"
    )
    assert master["payment_method_details"]["card"]["network_reason_code"] == "4837"
    with pytest.raises(RuntimeError, match="400"):
        sandbox.open_dispute(paid_charge(client, 5000), "general", network_reason_code=10.4)


# --- Visa Compelling Evidence 3.0: qualification -----------------------------------------------


def test_two_matching_priors_qualify_and_are_kept_in_stripes_shape(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox)
    updated = _stage(
        client,
        dispute_id,
        {
            "disputed_transaction": DISPUTED,
            "prior_undisputed_transactions": [_prior(p) for p in priors],
        },
    ).to_dict()
    assert updated["evidence_details"]["enhanced_eligibility"]["visa_compelling_evidence_3"] == {
        "required_actions": [],
        "status": "qualified",
    }
    ce3 = updated["evidence"]["enhanced_evidence"]["visa_compelling_evidence_3"]
    assert ce3["disputed_transaction"] == {
        "customer_account_id": "acct-42",
        "customer_device_fingerprint": None,
        "customer_device_id": "device-1",
        "customer_email_address": "buyer@example.com",
        "customer_purchase_ip": "203.0.113.7",
        "merchandise_or_services": "merchandise",
        "product_description": "A blue kettle",
        "shipping_address": {**ADDRESS, "line2": None},
    }
    assert [p["charge"] for p in ce3["prior_undisputed_transactions"]] == priors
    assert set(ce3["prior_undisputed_transactions"][0]) == {
        "charge",
        "customer_account_id",
        "customer_device_fingerprint",
        "customer_device_id",
        "customer_email_address",
        "customer_purchase_ip",
        "product_description",
        "shipping_address",
    }
    assert updated["status"] == "needs_response"
    assert updated["evidence_details"]["has_evidence"] is False  # enhanced evidence aside
    event = client.v1.events.list(params={"type": "charge.dispute.updated", "limit": 1}).data[0]
    previous = event.data.previous_attributes.to_dict()
    assert previous["evidence"] == {"enhanced_evidence": {}}
    assert previous["evidence_details"]["enhanced_eligibility"]["visa_compelling_evidence_3"] == {
        "required_actions": ALL_MISSING,
        "status": "requires_action",
    }


@pytest.mark.parametrize(
    ("advance_s", "status"),
    [
        (120 * DAY - 5, "not_qualified"),  # 119 whole days
        (120 * DAY, "qualified"),
        (365 * DAY, "qualified"),
        (366 * DAY, "not_qualified"),
    ],
)
def test_priors_must_be_120_to_365_days_old(
    client: stripe.StripeClient, sandbox: SandboxControl, advance_s: int, status: str
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox, advance_s)
    _stage(
        client,
        dispute_id,
        {
            "disputed_transaction": DISPUTED,
            "prior_undisputed_transactions": [_prior(p) for p in priors],
        },
    )
    assert _qualification(client, dispute_id)["status"] == status


@pytest.mark.parametrize(
    "changes",
    [
        # the IP address and the device (by fingerprint) shared; account and address not
        {
            "customer_account_id": "someone-else",
            "customer_device_id": None,
            "customer_device_fingerprint": "fp-9",
            "shipping_address": {**ADDRESS, "line1": "9 Elm St"},
        },
        # the IP address and the account (compared without case or surrounding spaces)
        {
            "customer_account_id": " ACCT-42 ",
            "customer_device_id": "other",
            "shipping_address": {**ADDRESS, "line1": "9 Elm St"},
        },
    ],
)
def test_a_prior_sharing_two_elements_one_of_them_ip_or_device_qualifies(
    client: stripe.StripeClient, sandbox: SandboxControl, changes: dict[str, Any]
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox)
    _stage(
        client,
        dispute_id,
        {
            "disputed_transaction": {**DISPUTED, "customer_device_fingerprint": "fp-9"},
            "prior_undisputed_transactions": [_prior(priors[0]), _prior(priors[1], **changes)],
        },
    )
    assert _qualification(client, dispute_id) == {"required_actions": [], "status": "qualified"}


def test_a_prior_sharing_account_and_address_but_no_ip_or_device_does_not_qualify(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox)
    second = _prior(priors[1], customer_purchase_ip="198.51.100.1", customer_device_id="other")
    _stage(
        client,
        dispute_id,
        {
            "disputed_transaction": DISPUTED,
            "prior_undisputed_transactions": [_prior(priors[0]), second],
        },
    )
    assert _qualification(client, dispute_id)["status"] == "not_qualified"


def test_a_prior_sharing_one_element_does_not_qualify(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox)
    second = _prior(
        priors[1],
        customer_account_id="someone-else",
        customer_device_id="other",
        shipping_address={**ADDRESS, "line1": "9 Elm St"},
    )  # only the IP address is shared
    _stage(
        client,
        dispute_id,
        {
            "disputed_transaction": DISPUTED,
            "prior_undisputed_transactions": [_prior(priors[0]), second],
        },
    )
    assert _qualification(client, dispute_id)["status"] == "not_qualified"
    _stage(
        client,
        dispute_id,
        {
            "prior_undisputed_transactions": [
                _prior(priors[0]),
                {**second, "customer_device_id": "device-1"},  # now the device too
            ]
        },
    )
    assert _qualification(client, dispute_id)["status"] == "qualified"


def test_a_prior_on_another_card_does_not_qualify(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    priors, dispute_id = _ce3_world(
        client, sandbox, prior_pms=("pm_card_visa", "pm_card_visa_debit")
    )
    _stage(
        client,
        dispute_id,
        {
            "disputed_transaction": DISPUTED,
            "prior_undisputed_transactions": [_prior(p) for p in priors],
        },
    )
    assert _qualification(client, dispute_id)["status"] == "not_qualified"


def test_the_same_card_by_another_payment_method_qualifies(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox, prior_pms=("pm_card_visa", "pm_card_us"))
    _stage(
        client,
        dispute_id,
        {
            "disputed_transaction": DISPUTED,
            "prior_undisputed_transactions": [_prior(p) for p in priors],
        },
    )
    assert _qualification(client, dispute_id)["status"] == "qualified"


def test_a_disputed_prior_does_not_qualify(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox)
    sandbox.open_dispute(priors[1], reason="general")
    _stage(
        client,
        dispute_id,
        {
            "disputed_transaction": DISPUTED,
            "prior_undisputed_transactions": [_prior(p) for p in priors],
        },
    )
    assert _qualification(client, dispute_id)["status"] == "not_qualified"


def test_a_failed_charge_is_no_prior_transaction(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    with pytest.raises(stripe.CardError):
        client.v1.payment_intents.create(
            params={
                "amount": 1000,
                "currency": "usd",
                "payment_method": "pm_card_chargeDeclined",
                "confirm": True,
                **CARD_ONLY,
            }
        )
    [failed] = client.v1.charges.list().data
    priors, dispute_id = _ce3_world(client, sandbox)
    _stage(
        client,
        dispute_id,
        {
            "disputed_transaction": DISPUTED,
            "prior_undisputed_transactions": [_prior(priors[0]), _prior(failed.id)],
        },
    )
    assert _qualification(client, dispute_id)["status"] == "not_qualified"


@pytest.mark.parametrize(
    ("disputed", "prior_changes", "priors_given", "actions"),
    [
        (DISPUTED, {}, 1, ["missing_prior_undisputed_transactions"]),
        (DISPUTED, {}, 0, ["missing_prior_undisputed_transactions"]),
        (
            {**DISPUTED, "product_description": None},
            {},
            2,
            ["missing_disputed_transaction_description"],
        ),
        ({**DISPUTED, "merchandise_or_services": None}, {}, 2, ["missing_merchandise_or_services"]),
        (
            DISPUTED,
            {"product_description": None},
            2,
            ["missing_prior_undisputed_transaction_description"],
        ),
        # the disputed transaction carries only its IP address: nothing can be compared
        (
            {
                "customer_purchase_ip": "203.0.113.7",
                "product_description": "A blue kettle",
                "merchandise_or_services": "services",
            },
            {},
            2,
            ["missing_customer_identifiers"],
        ),
        # a prior carries only its account id
        (
            DISPUTED,
            {
                "customer_purchase_ip": None,
                "customer_device_id": None,
                "shipping_address": None,
                "customer_email_address": None,
            },
            2,
            ["missing_customer_identifiers"],
        ),
    ],
)
def test_what_is_missing_is_named_in_stripes_vocabulary(
    client: stripe.StripeClient,
    sandbox: SandboxControl,
    disputed: dict[str, Any],
    prior_changes: dict[str, Any],
    priors_given: int,
    actions: list[str],
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox)
    ce3: dict[str, Any] = {
        "disputed_transaction": {k: v for k, v in disputed.items() if v is not None}
    }
    if priors_given:  # the SDK's type has no '' to unset the priors: none given is none sent
        ce3["prior_undisputed_transactions"] = [
            _prior(p, **prior_changes) for p in priors[:priors_given]
        ]
    _stage(client, dispute_id, ce3)
    assert _qualification(client, dispute_id) == {
        "required_actions": actions,
        "status": "requires_action",
    }


def test_ce3_parts_are_staged_separately_and_submitted_with_the_dispute(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox)
    _stage(client, dispute_id, {"disputed_transaction": DISPUTED})
    assert _qualification(client, dispute_id)["required_actions"] == [
        "missing_prior_undisputed_transactions"
    ]
    _stage(client, dispute_id, {"prior_undisputed_transactions": [_prior(p) for p in priors]})
    dispute = client.v1.disputes.retrieve(dispute_id).to_dict()
    ce3 = dispute["evidence"]["enhanced_evidence"]["visa_compelling_evidence_3"]
    assert ce3["disputed_transaction"]["product_description"] == "A blue kettle"  # kept
    assert _qualification(client, dispute_id)["status"] == "qualified"
    submitted = client.v1.disputes.update(
        dispute_id, params={"evidence": {"product_description": "A blue kettle"}, "submit": True}
    )
    assert submitted.status == "under_review"
    assert submitted.evidence_details.submission_count == 1
    assert _qualification(client, dispute_id)["status"] == "qualified"
    _refused(
        client,
        dispute_id,
        {
            "evidence": {
                "enhanced_evidence": {
                    "visa_compelling_evidence_3": {"disputed_transaction": DISPUTED}
                }
            }
        },
    )


# --- Visa Compelling Evidence 3.0: refusals -------------------------------------------------------


def test_ce3_evidence_on_a_dispute_not_eligible_for_it_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    for pm, reason in (
        ("pm_card_visa", "product_not_received"),
        ("pm_card_mastercard", "fraudulent"),
    ):
        dispute_id = sandbox.open_dispute(paid_charge(client, 5000, pm=pm), reason=reason)["id"]
        error = _refused(
            client,
            dispute_id,
            {
                "evidence": {
                    "enhanced_evidence": {
                        "visa_compelling_evidence_3": {"disputed_transaction": DISPUTED}
                    }
                },
                "submit": False,
            },
        )
        assert error.param == CE3
        assert "not eligible for visa_compelling_evidence_3" in str(error.user_message)


def test_a_third_prior_transaction_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox)
    third = paid_charge(client, 1000)
    error = _refused(
        client,
        dispute_id,
        {
            "evidence": {
                "enhanced_evidence": {
                    "visa_compelling_evidence_3": {
                        "prior_undisputed_transactions": [_prior(p) for p in [*priors, third]]
                    }
                }
            },
            "submit": False,
        },
    )
    assert error.param == PRIORS
    assert "a third prior transaction" in str(error.user_message)


def test_a_prior_charge_that_does_not_exist_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    priors, dispute_id = _ce3_world(client, sandbox)
    error = _refused(
        client,
        dispute_id,
        {
            "evidence": {
                "enhanced_evidence": {
                    "visa_compelling_evidence_3": {
                        "prior_undisputed_transactions": [_prior(priors[0]), _prior("ch_nope")]
                    }
                }
            },
            "submit": False,
        },
    )
    assert (error.code, error.param) == ("resource_missing", f"{PRIORS}[1][charge]")
    assert "No such charge: 'ch_nope'" in str(error.user_message)


@pytest.mark.parametrize("which", ["itself", "twice"])
def test_the_disputed_charge_or_a_repeated_prior_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, which: str
) -> None:
    priors = [paid_charge(client, 1000)]
    sandbox.advance_clock(200 * DAY)
    disputed, dispute_id = _fraud_dispute(client, sandbox)
    second = disputed if which == "itself" else priors[0]
    error = _refused(
        client,
        dispute_id,
        {
            "evidence": {
                "enhanced_evidence": {
                    "visa_compelling_evidence_3": {
                        "prior_undisputed_transactions": [_prior(priors[0]), _prior(second)]
                    }
                }
            },
            "submit": False,
        },
    )
    assert error.param == f"{PRIORS}[1][charge]"
    assert ("disputed charge itself" if which == "itself" else "given twice") in str(
        error.user_message
    )


@pytest.mark.parametrize(
    ("ce3", "param", "code"),
    [
        (
            {"disputed_transaction": {"favourite_colour": "blue"}},
            f"{CE3}[disputed_transaction][favourite_colour]",
            "parameter_unknown",
        ),
        (
            {"prior_transactions": [{"charge": "ch_x"}]},
            f"{CE3}[prior_transactions]",
            "parameter_unknown",
        ),
        (
            {"disputed_transaction": {"shipping_address": {"planet": "Mars"}}},
            f"{CE3}[disputed_transaction][shipping_address][planet]",
            "parameter_unknown",
        ),
        (
            {
                "prior_undisputed_transactions": [
                    {"charge": "ch_x", "merchandise_or_services": "merchandise"}
                ]
            },
            f"{PRIORS}[0][merchandise_or_services]",
            "parameter_unknown",
        ),
    ],
)
def test_unknown_ce3_fields_are_refused(
    client: stripe.StripeClient,
    sandbox: SandboxControl,
    ce3: dict[str, Any],
    param: str,
    code: str,
) -> None:
    _, dispute_id = _fraud_dispute(client, sandbox)
    error = _refused(
        client,
        dispute_id,
        {"evidence": {"enhanced_evidence": {"visa_compelling_evidence_3": ce3}}, "submit": False},
    )
    assert (error.param, error.code) == (param, code)


def test_an_unknown_enhanced_evidence_program_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    _, dispute_id = _fraud_dispute(client, sandbox)
    error = _refused(
        client,
        dispute_id,
        {"evidence": {"enhanced_evidence": {"mastercard_magic": {"x": "y"}}}, "submit": False},
    )
    assert (error.param, error.code) == (
        "evidence[enhanced_evidence][mastercard_magic]",
        "parameter_unknown",
    )


@pytest.mark.parametrize(
    ("ce3", "param"),
    [
        ({"disputed_transaction": "kettle"}, f"{CE3}[disputed_transaction]"),
        (
            {"disputed_transaction": {"merchandise_or_services": "goods"}},
            f"{CE3}[disputed_transaction][merchandise_or_services]",
        ),
        (
            {"disputed_transaction": {"customer_account_id": {"a": "b"}}},
            f"{CE3}[disputed_transaction][customer_account_id]",
        ),
        (
            {"disputed_transaction": {"shipping_address": "1 Main St"}},
            f"{CE3}[disputed_transaction][shipping_address]",
        ),
        ({"prior_undisputed_transactions": "ch_1"}, PRIORS),
        ({"prior_undisputed_transactions": ["ch_1"]}, f"{PRIORS}[0]"),
        ({"prior_undisputed_transactions": [{"customer_account_id": "a"}]}, f"{PRIORS}[0][charge]"),
        (
            {"disputed_transaction": {"customer_account_id": "x" * 5001}},
            f"{CE3}[disputed_transaction][customer_account_id]",
        ),
    ],
)
def test_ce3_fields_of_the_wrong_type_are_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, ce3: dict[str, Any], param: str
) -> None:
    _, dispute_id = _fraud_dispute(client, sandbox)
    error = _refused(
        client,
        dispute_id,
        {"evidence": {"enhanced_evidence": {"visa_compelling_evidence_3": ce3}}, "submit": False},
    )
    assert error.param == param


def test_enhanced_evidence_that_is_not_a_hash_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    _, dispute_id = _fraud_dispute(client, sandbox)
    error = _refused(
        client, dispute_id, {"evidence": {"enhanced_evidence": "yes"}, "submit": False}
    )
    assert error.param == "evidence[enhanced_evidence]"


# --- Visa compliance -------------------------------------------------------------------------


def _compliance_dispute(client: stripe.StripeClient, sandbox: SandboxControl) -> str:
    return str(sandbox.open_dispute(paid_charge(client, 5000), reason="noncompliant")["id"])


def _compliance_status(client: stripe.StripeClient, dispute_id: str) -> str:
    details = client.v1.disputes.retrieve(dispute_id).to_dict()["evidence_details"]
    return str(details["enhanced_eligibility"]["visa_compliance"]["status"])


def test_contesting_a_compliance_dispute_needs_the_fee_acknowledged(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _compliance_dispute(client, sandbox)
    error = _refused(
        client, dispute_id, {"evidence": {"uncategorized_text": "We complied."}, "submit": True}
    )
    assert error.param == FEE
    assert "USD 500 network fee" in str(error.user_message)
    assert "must be acknowledged" in str(error.user_message)
    # Stripe's default, submit=true, is refused the same way.
    assert _refused(client, dispute_id, {"metadata": {"k": "v"}}).param == FEE
    assert _compliance_status(client, dispute_id) == "requires_fee_acknowledgement"


def test_an_acknowledgement_of_false_does_not_acknowledge(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _compliance_dispute(client, sandbox)
    staged = client.v1.disputes.update(
        dispute_id,
        params={
            "evidence": {"enhanced_evidence": {"visa_compliance": {"fee_acknowledged": False}}},
            "submit": False,
        },
    ).to_dict()
    assert staged["evidence"]["enhanced_evidence"] == {
        "visa_compliance": {"fee_acknowledged": False}
    }
    assert _compliance_status(client, dispute_id) == "requires_fee_acknowledgement"
    error = _refused(
        client,
        dispute_id,
        {
            "evidence": {"enhanced_evidence": {"visa_compliance": {"fee_acknowledged": False}}},
            "submit": True,
        },
    )
    assert error.param == FEE


def test_an_acknowledged_fee_lets_the_dispute_be_submitted(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    staged_first = _compliance_dispute(client, sandbox)
    client.v1.disputes.update(
        staged_first,
        params={
            "evidence": {"enhanced_evidence": {"visa_compliance": {"fee_acknowledged": True}}},
            "submit": False,
        },
    )
    assert _compliance_status(client, staged_first) == "fee_acknowledged"
    event = client.v1.events.list(params={"limit": 1}).data[0].to_dict()
    assert event["data"]["previous_attributes"]["evidence_details"] == {
        "enhanced_eligibility": {"visa_compliance": {"status": "requires_fee_acknowledgement"}}
    }
    submitted = client.v1.disputes.update(
        staged_first, params={"evidence": {"uncategorized_text": "We complied."}}
    )
    assert (submitted.status, submitted.evidence_details.submission_count) == ("under_review", 1)

    at_once = _compliance_dispute(client, sandbox)
    submitted = client.v1.disputes.update(
        at_once,
        params={
            "evidence": {"enhanced_evidence": {"visa_compliance": {"fee_acknowledged": True}}},
            "submit": True,
        },
    )
    assert submitted.status == "under_review"
    assert _compliance_status(client, at_once) == "fee_acknowledged"


def test_an_unacknowledged_compliance_dispute_can_still_be_accepted(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _compliance_dispute(client, sandbox)
    assert client.v1.disputes.close(dispute_id).status == "lost"


def test_smart_disputes_does_not_submit_an_unacknowledged_compliance_dispute(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _compliance_dispute(client, sandbox)
    with pytest.raises(RuntimeError, match="USD 500 network fee"):
        sandbox.smart_submit_dispute(dispute_id)
    assert client.v1.disputes.retrieve(dispute_id).status == "needs_response"


@pytest.mark.parametrize(
    ("compliance", "param", "code"),
    [
        ({"fee_acknowledged": "yes"}, FEE, None),
        ({"fee": True}, f"{COMPLIANCE}[fee]", "parameter_unknown"),
        ("true", COMPLIANCE, None),
    ],
)
def test_bad_compliance_evidence_is_refused(
    client: stripe.StripeClient,
    sandbox: SandboxControl,
    compliance: Any,
    param: str,
    code: str | None,
) -> None:
    dispute_id = _compliance_dispute(client, sandbox)
    error = _refused(
        client,
        dispute_id,
        {"evidence": {"enhanced_evidence": {"visa_compliance": compliance}}, "submit": False},
    )
    assert (error.param, error.code) == (param, code)


def test_compliance_evidence_on_a_dispute_not_eligible_for_it_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    _, dispute_id = _fraud_dispute(client, sandbox)
    error = _refused(
        client,
        dispute_id,
        {
            "evidence": {"enhanced_evidence": {"visa_compliance": {"fee_acknowledged": True}}},
            "submit": False,
        },
    )
    assert error.param == COMPLIANCE
    assert "not eligible for visa_compliance" in str(error.user_message)


# --- the rules, each a pure function ---------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "days", "inside"),
    [
        (120 * DAY - 1, 119, False),
        (120 * DAY, 120, True),
        (365 * DAY + DAY - 1, 365, True),
        (366 * DAY, 366, False),
        (-DAY, -1, False),
    ],
)
def test_age_in_whole_days_and_its_window(seconds: int, days: int, inside: bool) -> None:
    assert rules.age_days(1_000_000_000 + seconds, 1_000_000_000) == days
    assert rules.in_age_window(days) is inside


@pytest.mark.parametrize(
    ("elements", "enough"),
    [
        (set(), False),
        ({"device"}, False),
        ({"customer_account_id", "shipping_address"}, False),
        ({"customer_account_id", "device"}, True),
        ({"customer_purchase_ip", "shipping_address"}, True),
    ],
)
def test_elements_suffice(elements: set[str], enough: bool) -> None:
    assert rules.elements_suffice(elements) is enough


def test_matching_elements_compare_device_by_id_or_fingerprint() -> None:
    disputed = {"customer_device_id": "d1", "customer_device_fingerprint": "f1"}
    assert rules.matching_elements(disputed, {"customer_device_fingerprint": "F1"}) == {"device"}
    assert rules.matching_elements(disputed, {"customer_device_id": "d2"}) == set()
    assert rules.carried_elements({"customer_device_fingerprint": "f1"}) == {"device"}
    assert rules.carried_elements(None) == set()
