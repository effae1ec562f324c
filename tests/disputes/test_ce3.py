"""Visa Compelling Evidence 3.0 from Vouch's own signed receipts (SPEC §17; disputes/ce3.py), on
PostgreSQL. Charge receipts are written by the real path (receipts.services.receipt_for_run, from
a VERIFIED run's charge readback) with the charge's `created` chosen to the second, so each
prior's age is exact."""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from disputes.ce3 import (
    ELEMENT_KEYS,
    NEEDS_IP_OR_DEVICE,
    TOO_FEW_ELEMENTS,
    ce3_evidence,
    ce3_qualification,
    elements_rule,
)
from disputes.models import Dispute
from receipts import keys
from receipts.canonical import canonical_bytes, receipt_id_of
from receipts.models import Receipt
from receipts.services import receipt_for_run
from verification.models import Attempt, Observation, VerificationRun

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ACCOUNT = "acct_" + "a" * 24
IP = "203.0.113.7"
DEVICE = "d" * 32
CARD = "fpCard1"
_numbers = itertools.count(1)


def days(n: float) -> datetime:
    return NOW - timedelta(days=n)


def receipt(
    *,
    at: datetime = NOW,
    card: str | None = CARD,
    account: str | None = ACCOUNT,
    ip: str | None = IP,
    device: str | None = DEVICE,
    disputed: bool = False,
) -> Receipt:
    """A charge receipt written as a VERIFIED `stripe.charge.succeeded` run writes it, from a
    readback holding the provider's whole charge (personal fields too: redaction drops them)."""
    n = next(_numbers)
    metadata = {"vouch_envelope": f"env_{n}", "vouch_funding": f"fnd_{n}", "note": "not ours"}
    for key, value in (("vouch_account", account), ("vouch_ip", ip), ("vouch_device", device)):
        if value is not None:
            metadata[key] = value
    card_detail: dict[str, Any] = {"brand": "visa", "last4": "4242", "exp_month": 12}
    if card is not None:
        card_detail["fingerprint"] = card
    charge = {
        "id": f"ch_ce3_{n}",
        "object": "charge",
        "amount": 1000,
        "amount_captured": 1000,
        "captured": True,
        "created": int(at.timestamp()),
        "currency": "usd",
        "status": "succeeded",
        "paid": True,
        "disputed": disputed,
        "livemode": False,
        "payment_intent": f"pi_ce3_{n}",
        "billing_details": {"email": "buyer@example.com", "name": "Buyer"},
        "payment_method_details": {"type": "card", "card": card_detail},
        "metadata": metadata,
    }
    run = VerificationRun.objects.create(
        contract_id="stripe.charge.succeeded",
        contract_version=1,
        operation_id=f"env_{n}:fnd_{n}",
        operation_created_at=at,
        input={"charge": charge["id"], "amount": 1000},
        verdict="VERIFIED",
        decided_at=at,
        deadline_at=at + timedelta(days=7),
    )
    attempt = Attempt.objects.create(
        run=run, number=1, trigger="poll", started_at=at, finished_at=at, verdict="VERIFIED"
    )
    Observation.objects.create(
        attempt=attempt,
        channel="charge_readback",
        level="E2",
        verifier="http",
        observed_at=at,
        data=charge,
        digest="0" * 64,
    )
    run.decided_by = attempt
    run.save(update_fields=["decided_by"])
    written = receipt_for_run(run=run)
    assert written is not None
    return written


def dispute_on(charge: Receipt, eligible: Any = ("visa_compelling_evidence_3",)) -> Dispute:
    return Dispute.objects.create(
        provider_dispute_id=f"dp_{charge.provider_object_id}",
        charge_id=charge.provider_object_id,
        amount_micro=10_000_000,
        reason="fraudulent",
        network_reason_code="10.4",
        card_brand="visa",
        enhanced_eligibility_types=list(eligible) if isinstance(eligible, tuple) else eligible,
        source="provider",
    )


def forged(original: Receipt, edit: Any, *, resign: bool) -> Receipt:
    """A receipt row whose body was edited after signing (resign=False: its signature no longer
    verifies), or edited and signed again with the deployment's own trusted key (resign=True)."""
    body = copy.deepcopy(original.body)
    edit(body)
    canonical = canonical_bytes(body)
    row = Receipt(
        id=receipt_id_of(canonical),
        kind=body["kind"],
        provider=body["provider"],
        provider_object_id=body["provider_object_id"],
        charge_id=body["charge_id"],
        amount_micro=body["amount_micro"],
        currency=body["currency"],
        occurred_at=original.occurred_at,
        verification_run=original.verification_run,
        verdict=original.verdict,
        body=body,
        canonical=canonical.decode(),
        signature=keys.signing_key().sign(canonical) if resign else original.signature,
        key_id=original.key_id,
        key_environment=original.key_environment,
    )
    row.save()
    return row


def entry(r: Receipt, age: int, matched: list[str], reason: str | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "receipt_id": r.id,
        "charge": r.provider_object_id,
        "occurred_at": r.body["time"],
        "age_days": age,
        "matched": matched,
    }
    return shown if reason is None else {**shown, "reason": reason}


ALL3 = ["customer_account_id", "customer_device_id", "customer_purchase_ip"]
ELEMENTS = {
    "customer_account_id": ACCOUNT,
    "customer_device_id": DEVICE,
    "customer_purchase_ip": IP,
}


# --- qualified -----------------------------------------------------------------------------------


def test_two_priors_at_the_edges_of_the_window_qualify_and_give_the_evidence() -> None:
    oldest = receipt(at=days(365) - timedelta(hours=23))  # 365 days 23 hours: 365 whole days
    youngest = receipt(at=days(120))
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed))

    assert result.as_dict() == {
        "status": "qualified",
        "disputed": {
            "receipt_id": disputed.id,
            "charge": disputed.provider_object_id,
            "occurred_at": "2026-11-20T12:00:00Z",
            "elements": ELEMENTS,
        },
        "priors": [entry(youngest, 120, ALL3), entry(oldest, 365, ALL3)],
        "considered": [],
        "reasons": [],
    }
    assert result.receipt_ids == [disputed.id, youngest.id, oldest.id]
    product = "Escrow envelope funding (Vouch)"
    assert ce3_evidence(result) == {
        "disputed_transaction": {
            "customer_account_id": ACCOUNT,
            "customer_device_id": DEVICE,
            "customer_purchase_ip": IP,
            "merchandise_or_services": "services",
            "product_description": product,
        },
        "prior_undisputed_transactions": [
            {
                "charge": youngest.provider_object_id,
                "customer_account_id": ACCOUNT,
                "customer_device_id": DEVICE,
                "customer_purchase_ip": IP,
                "product_description": product,
            },
            {
                "charge": oldest.provider_object_id,
                "customer_account_id": ACCOUNT,
                "customer_device_id": DEVICE,
                "customer_purchase_ip": IP,
                "product_description": product,
            },
        ],
    }


def test_the_evidence_holds_only_the_elements_the_receipts_hold() -> None:
    by_ip = receipt(at=days(200), device=None)
    by_device = receipt(at=days(300), ip="198.51.100.1")
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.status == "qualified"
    evidence = ce3_evidence(result)
    assert evidence is not None
    assert evidence["prior_undisputed_transactions"] == [
        {
            "charge": by_ip.provider_object_id,
            "customer_account_id": ACCOUNT,
            "customer_purchase_ip": IP,
            "product_description": "Escrow envelope funding (Vouch)",
        },
        {
            "charge": by_device.provider_object_id,
            "customer_account_id": ACCOUNT,
            "customer_device_id": DEVICE,
            "customer_purchase_ip": "198.51.100.1",  # held by its receipt, though not shared
            "product_description": "Escrow envelope funding (Vouch)",
        },
    ]


# --- the window ----------------------------------------------------------------------------------


def test_the_window_is_120_to_365_whole_days() -> None:
    too_recent = receipt(at=days(120) + timedelta(seconds=1))  # 119 days 23:59:59
    at_120 = receipt(at=days(120))
    at_365 = receipt(at=days(366) + timedelta(seconds=1))  # 365 days 23:59:59
    too_old = receipt(at=days(366))
    later = receipt(at=NOW + timedelta(days=3))  # after the disputed charge
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.status == "qualified"
    assert result.as_dict()["priors"] == [entry(at_120, 120, ALL3), entry(at_365, 365, ALL3)]
    assert result.as_dict()["considered"] == [
        entry(too_old, 366, ALL3, "too_old"),
        entry(too_recent, 119, ALL3, "too_recent"),
        entry(later, -3, ALL3, "too_recent"),
    ]


# --- the data elements ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ip", "device", "matched"),
    [
        (IP, "e" * 32, ["customer_account_id", "customer_purchase_ip"]),
        ("198.51.100.1", DEVICE, ["customer_account_id", "customer_device_id"]),
        (IP, DEVICE, ALL3),
    ],
    ids=["account+ip", "account+device", "account+ip+device"],
)
def test_two_shared_elements_with_ip_or_device_qualify(
    ip: str, device: str, matched: list[str]
) -> None:
    first = receipt(at=days(150), ip=ip, device=device)
    second = receipt(at=days(250), ip=ip, device=device)
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.status == "qualified"
    assert result.as_dict()["priors"] == [entry(first, 150, matched), entry(second, 250, matched)]


def test_the_account_alone_is_one_element_too_few() -> None:
    qualifying = receipt(at=days(150))
    account_only = receipt(at=days(200), ip="198.51.100.1", device="e" * 32)
    no_elements_held = receipt(at=days(210), ip=None, device=None)
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.as_dict() == {
        "status": "not_qualified",
        "disputed": {
            "receipt_id": disputed.id,
            "charge": disputed.provider_object_id,
            "occurred_at": "2026-11-20T12:00:00Z",
            "elements": ELEMENTS,
        },
        "priors": [entry(qualifying, 150, ALL3)],
        "considered": [
            entry(no_elements_held, 210, ["customer_account_id"], "too_few_elements"),
            entry(account_only, 200, ["customer_account_id"], "too_few_elements"),
        ],
        "reasons": ["1 qualifying prior charges, 2 needed"],
    }
    assert ce3_evidence(result) is None


@pytest.mark.parametrize(
    ("matched", "rejected"),
    [
        ((), TOO_FEW_ELEMENTS),
        (("customer_account_id",), TOO_FEW_ELEMENTS),
        (("customer_purchase_ip",), TOO_FEW_ELEMENTS),
        (("customer_account_id", "shipping_address"), NEEDS_IP_OR_DEVICE),
        (("customer_account_id", "customer_purchase_ip"), None),
        (("customer_account_id", "customer_device_id"), None),
        (("customer_device_id", "customer_purchase_ip"), None),
        (("customer_device_id", "shipping_address"), None),
    ],
)
def test_visas_rule_on_the_shared_elements(matched: tuple[str, ...], rejected: str | None) -> None:
    # Vouch records no shipping address; the rule is Visa's, whatever elements there are.
    assert elements_rule(matched) == rejected


def test_the_elements_are_read_from_vouch_metadata() -> None:
    assert ELEMENT_KEYS == {
        "customer_account_id": "vouch_account",
        "customer_device_id": "vouch_device",
        "customer_purchase_ip": "vouch_ip",
    }


# --- which charges are candidates ----------------------------------------------------------------


def test_disputed_priors_another_card_and_another_buyer_are_not_priors() -> None:
    prior = receipt(at=days(130))
    disputed_later = receipt(at=days(140))
    dispute_on(disputed_later, eligible=[])  # a dispute row on it: disputed
    natively_disputed = receipt(at=days(160), disputed=True)
    other_card = receipt(at=days(170), card="fpCard2")
    other_buyer = receipt(at=days(180), account="acct_" + "b" * 24)
    unrelated = receipt(at=days(190), card="fpCard3", account="acct_" + "c" * 24)
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.status == "not_qualified"
    assert result.as_dict()["priors"] == [entry(prior, 130, ALL3)]
    assert result.as_dict()["considered"] == [
        entry(other_buyer, 180, ["customer_device_id", "customer_purchase_ip"], "other_account"),
        entry(other_card, 170, ALL3, "other_card"),
        entry(natively_disputed, 160, ALL3, "disputed"),
        entry(disputed_later, 140, ALL3, "disputed"),
    ]
    assert unrelated.id not in str(result.as_dict())


def buyers_charge(charge_id: str, **fields: Any) -> Any:
    """An edit making a receipt's body say it is the disputed buyer's charge on the same card,
    under another charge id (one receipt per charge)."""

    def edit(body: dict[str, Any]) -> None:
        body.update(provider_object_id=charge_id, charge_id=charge_id, **fields)
        body["detail"]["id"] = charge_id
        body["detail"]["metadata"]["vouch_account"] = ACCOUNT
        body["detail"]["payment_method_details"]["card"]["fingerprint"] = CARD

    return edit


ELSEWHERE = {"card": "fpElse", "account": "acct_" + "e" * 24}


def test_untrusted_receipts_are_not_read(settings: Any) -> None:
    good = receipt(at=days(130))
    tampered = forged(
        receipt(at=days(140), **ELSEWHERE), buyers_charge("ch_tampered"), resign=False
    )
    trusted_key = (settings.RECEIPT_SIGNING_KEY, settings.RECEIPT_SIGNING_KEY_ID)
    other = keys.key_generate("sandbox")
    settings.RECEIPT_SIGNING_KEY, settings.RECEIPT_SIGNING_KEY_ID = other["seed"], "unknown-1"
    unknown_key = receipt(at=days(150))
    settings.RECEIPT_SIGNING_KEY, settings.RECEIPT_SIGNING_KEY_ID = trusted_key
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.as_dict()["priors"] == [entry(good, 130, ALL3)]
    assert result.as_dict()["considered"] == []
    assert result.status == "not_qualified"
    assert tampered.id not in str(result.as_dict())
    assert unknown_key.id not in str(result.as_dict())


def test_a_signed_body_without_a_readable_time_is_not_read() -> None:
    good = receipt(at=days(130))
    timeless = forged(
        receipt(at=days(140), **ELSEWHERE), buyers_charge("ch_timeless", time="soon"), resign=True
    )
    assert timeless.body["time"] == "soon"
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.as_dict()["priors"] == [entry(good, 130, ALL3)]
    assert result.as_dict()["considered"] == []


# --- choosing two --------------------------------------------------------------------------------


def test_the_two_chosen_share_most_elements_then_are_most_recent_then_lowest_id() -> None:
    fewer_but_recent = receipt(at=days(121), device="e" * 32)  # account + ip
    most_old = receipt(at=days(360))  # all three
    most_recent = receipt(at=days(300))  # all three
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.as_dict()["priors"] == [entry(most_recent, 300, ALL3), entry(most_old, 360, ALL3)]
    assert result.as_dict()["considered"] == [
        entry(
            fewer_but_recent,
            121,
            ["customer_account_id", "customer_purchase_ip"],
            "not_chosen",
        )
    ]


def test_equal_priors_of_the_same_second_are_chosen_by_receipt_id() -> None:
    same = [receipt(at=days(200)) for _ in range(3)]
    disputed = receipt()
    chosen = ce3_qualification(dispute=dispute_on(disputed)).as_dict()["priors"]
    assert [p["receipt_id"] for p in chosen] == sorted(r.id for r in same)[:2]


# --- not eligible, no receipt, and what the disputed receipt lacks --------------------------------


@pytest.mark.parametrize("eligible", [(), ("visa_compliance",), "visa_compelling_evidence_3"])
def test_a_dispute_the_provider_does_not_call_eligible_is_not_eligible(eligible: Any) -> None:
    receipt(at=days(150))
    receipt(at=days(250))
    disputed = receipt()
    result = ce3_qualification(dispute=dispute_on(disputed, eligible=eligible))
    assert result.as_dict() == {
        "status": "not_eligible",
        "disputed": None,
        "priors": [],
        "considered": [],
        "reasons": ["the provider does not report visa_compelling_evidence_3 eligibility"],
    }
    assert result.receipt_ids == []
    assert ce3_evidence(result) is None


def test_without_a_trusted_receipt_of_the_disputed_charge_there_is_no_qualification() -> None:
    receipt(at=days(150))
    receipt(at=days(250))
    missing = Dispute.objects.create(
        provider_dispute_id="dp_missing",
        charge_id="ch_without_receipt",
        amount_micro=10_000_000,
        reason="fraudulent",
        enhanced_eligibility_types=["visa_compelling_evidence_3"],
        source="provider",
    )
    tampered = forged(receipt(**ELSEWHERE), buyers_charge("ch_tampered"), resign=False)
    for dispute, charge in ((missing, "ch_without_receipt"), (dispute_on(tampered), "ch_tampered")):
        result = ce3_qualification(dispute=dispute)
        assert result.as_dict() == {
            "status": "no_receipt",
            "disputed": None,
            "priors": [],
            "considered": [],
            "reasons": [f"no trusted charge receipt for {charge}"],
        }
        assert ce3_evidence(result) is None


def test_a_disputed_receipt_without_card_account_ip_or_device_cannot_qualify() -> None:
    # Receipts written before the data elements were recorded, or with empty values.
    same_card_old = receipt(at=days(150), account=None, ip=None, device=None)
    same_account_no_card = receipt(at=days(160), card=None, account=ACCOUNT)
    disputed = receipt(card="", account=None, ip="", device=None)
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.as_dict()["disputed"]["elements"] == {}
    assert result.as_dict()["priors"] == []
    assert result.as_dict()["reasons"] == [
        "the disputed charge's receipt records no card fingerprint",
        "the disputed charge's receipt records no customer account",
        "the disputed charge's receipt records neither an IP address nor a device",
        "0 qualifying prior charges, 2 needed",
    ]
    assert same_card_old.id not in str(result.as_dict())  # nothing to look it up by
    assert same_account_no_card.id not in str(result.as_dict())


def test_a_disputed_receipt_without_an_account_matches_no_prior() -> None:
    # Same card, IP and device, but neither receipt names an account: not the same buyer.
    no_account = receipt(at=days(150), account=None)
    receipt(at=days(250), account=None)
    disputed = receipt(account=None)
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.as_dict()["considered"][1] == entry(
        no_account, 150, ["customer_device_id", "customer_purchase_ip"], "other_account"
    )
    assert result.as_dict()["reasons"] == [
        "the disputed charge's receipt records no customer account",
        "0 qualifying prior charges, 2 needed",
    ]


def test_a_disputed_receipt_without_a_card_fingerprint_matches_no_prior() -> None:
    no_card = receipt(at=days(150), card=None)
    receipt(at=days(250), card=None)
    disputed = receipt(card=None)
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.as_dict()["considered"][1] == entry(no_card, 150, ALL3, "other_card")
    assert result.as_dict()["reasons"] == [
        "the disputed charge's receipt records no card fingerprint",
        "0 qualifying prior charges, 2 needed",
    ]


def test_a_disputed_receipt_without_ip_or_device_says_so() -> None:
    receipt(at=days(150), ip=None, device=None)
    disputed = receipt(ip=None, device=None)
    result = ce3_qualification(dispute=dispute_on(disputed))
    assert result.as_dict()["disputed"]["elements"] == {"customer_account_id": ACCOUNT}
    assert result.as_dict()["reasons"] == [
        "the disputed charge's receipt records neither an IP address nor a device",
        "0 qualifying prior charges, 2 needed",
    ]
