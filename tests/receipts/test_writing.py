"""Receipts written from verdicts (SPEC §8): a funded envelope's charge run VERIFIED gives one
charge receipt; refunds through the API give refund receipts whose parent is the charge's
receipt; the tree is complete. Writes are idempotent; a refund verified before its charge waits
for the charge's receipt; a receipt that cannot be written never undoes a verdict."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from envelopes.models import FundingLeg, RefundLeg
from receipts import keys, services
from receipts.models import Receipt
from receipts.selectors import receipt_tree, receipt_verify, receipts_for_charge
from stripe_sandbox.client import SandboxControl
from tests.helpers import settle_runs
from verification.models import VerificationRun
from verification.services import run_attempt, runs_claim_due

from .conftest import Shop, charge_receipt, refund_receipt

pytestmark = pytest.mark.django_db


def test_a_funded_envelope_gets_one_verified_charge_receipt(shop: Shop) -> None:
    charge_id = shop.fund(10_000_000, settle=False)
    leg = FundingLeg.objects.get()
    run = VerificationRun.objects.get(contract_id="stripe.charge.succeeded")
    assert (run.operation_id, run.input) == (
        leg.idempotency_key,
        {"charge": charge_id, "amount": 1000},
    )
    assert run.action_result["id"] == charge_id
    assert not Receipt.objects.exists()  # the PaymentIntent's answer proves nothing by itself

    assert settle_runs() == {run.pk: "VERIFIED"}
    receipt = Receipt.objects.get()
    assert receipt == charge_receipt(charge_id)
    assert (receipt.kind, receipt.provider, receipt.charge_id) == ("charge", "stripe", charge_id)
    assert (receipt.amount_micro, receipt.currency, receipt.parent) == (10_000_000, "usd", None)
    assert (receipt.verification_run, receipt.verdict) == (run, "VERIFIED")
    assert (receipt.key_id, receipt.key_environment) == ("test-sandbox-1", "sandbox")
    body = receipt.body
    assert body["verification"] == {"run": run.public_id, "verdict": "VERIFIED"}
    assert body["time"].endswith("Z")
    assert body["detail"]["id"] == charge_id
    assert body["detail"]["status"] == "succeeded"
    assert body["detail"]["metadata"] == {
        "vouch_envelope": shop.envelope_id,
        "vouch_funding": leg.public_id,
        **leg.provider_metadata,  # the data elements (tests/envelopes/test_funding_data_elements)
    }
    assert receipt_verify(receipt).ok

    tree = receipt_tree(charge_id=charge_id)
    assert tree.charge is not None
    assert tree.charge.ok
    assert (tree.refunds, tree.undecided_refund_legs, tree.missing_refund_receipts) == ([], [], [])
    assert tree.complete
    assert tree.problems == []


def test_refunds_through_the_api_get_receipts_under_the_charge(shop: Shop) -> None:
    charge_id = shop.fund(10_000_000)
    shop.refund(2_500_000)
    shop.refund(1_000_000)
    legs = list(RefundLeg.objects.order_by("id"))
    assert len(legs) == 2
    parent = charge_receipt(charge_id)
    refunds = [refund_receipt(leg) for leg in legs]
    for leg, receipt in zip(legs, refunds, strict=True):
        assert receipt.parent == parent
        assert receipt.charge_id == charge_id
        assert receipt.amount_micro == leg.amount_micro
        assert receipt.verification_run == leg.verification_run
        assert receipt.body["parent"] == parent.id
        assert receipt.body["detail"]["charge"] == charge_id
        assert receipt.body["detail"]["metadata"]["vouch_leg"] == leg.public_id

    tree = receipt_tree(charge_id=charge_id)
    assert tree.complete, tree.problems
    assert [check.receipt for check in tree.refunds] == refunds
    assert all(check.ok for check in tree.refunds)
    assert tree.reversed_refund_ids == frozenset()
    assert tree.unreversed_refunds() == tree.refunds
    assert tree.unreversed_refunded_micro() == 3_500_000
    assert receipts_for_charge(charge_id=charge_id) == [parent, *refunds]


def test_a_refund_over_two_charges_gives_one_receipt_under_each(shop: Shop) -> None:
    original = shop.fund(5_000_000)
    top_up = shop.top_up(2_000_000)
    shop.refund(6_000_000)  # last in, first out: $2 from the top-up, $4 from the original
    first, second = receipt_tree(charge_id=original), receipt_tree(charge_id=top_up)
    assert first.complete
    assert second.complete
    assert first.unreversed_refunded_micro() == 4_000_000
    assert second.unreversed_refunded_micro() == 2_000_000
    assert first.charge is not None
    assert second.charge is not None
    assert first.refunds[0].receipt.parent == first.charge.receipt
    assert second.refunds[0].receipt.parent == second.charge.receipt


def test_writing_is_idempotent(shop: Shop) -> None:
    charge_id = shop.fund()
    shop.refund(1_000_000)
    before = set(Receipt.objects.values_list("id", flat=True))
    for run in VerificationRun.objects.all():
        again = services.receipt_for_run(run=run)
        assert again is not None
        assert again.id in before
    assert services.receipts_catch_up() == 0
    assert set(Receipt.objects.values_list("id", flat=True)) == before
    assert receipt_tree(charge_id=charge_id).complete


def test_a_refund_verified_before_its_charge_waits_for_the_charge_receipt(shop: Shop) -> None:
    charge_id = shop.fund(settle=False)
    shop.refund(1_000_000, settle=False)
    leg = RefundLeg.objects.get()
    assert leg.verification_run is not None
    charge_run = VerificationRun.objects.get(contract_id="stripe.charge.succeeded")
    # Only the refund's run is due: the charge's readback comes later.
    VerificationRun.objects.filter(pk=charge_run.pk).update(
        next_attempt_at=timezone.now() + timedelta(hours=1)
    )
    VerificationRun.objects.filter(pk=leg.verification_run.pk).update(
        next_attempt_at=timezone.now()
    )
    [(run_id, token)] = runs_claim_due(limit=10)
    assert run_id == leg.verification_run.pk
    run_attempt(run_id=run_id, token=token, trigger="poll")
    assert VerificationRun.objects.get(pk=run_id).verdict == "VERIFIED"
    assert not Receipt.objects.exists()  # no parent yet: the refund's receipt waits

    waiting = receipt_tree(charge_id=charge_id)
    assert waiting.charge is None
    assert waiting.missing_refund_receipts == [leg.public_id]
    assert not waiting.complete
    assert "charge_receipt_missing" in waiting.problems
    assert f"refund_receipt_missing: {leg.public_id}" in waiting.problems

    assert settle_runs() == {charge_run.pk: "VERIFIED"}
    tree = receipt_tree(charge_id=charge_id)
    assert tree.complete, tree.problems
    assert [check.receipt for check in tree.refunds] == [refund_receipt(leg)]


def test_an_undecided_refund_leg_keeps_the_tree_incomplete(
    shop: Shop, sandbox: SandboxControl
) -> None:
    charge_id = shop.fund(5_000_000)
    sandbox.add_fault("/v1/refunds", "timeout", method="POST", delay_ms=700)
    data = shop.refund(1_000_000, settle=False)
    sandbox.clear_faults()
    assert [leg["outcome"] for leg in data["legs"]] == ["unknown"]
    leg = RefundLeg.objects.get()
    tree = receipt_tree(charge_id=charge_id)
    assert tree.undecided_refund_legs == [leg.public_id]
    assert not tree.complete
    assert f"refund_leg_undecided: {leg.public_id}" in tree.problems
    # Accepted later, its run still PENDING: still undecided.
    from envelopes import services as envelope_services

    envelope_services.stranded_resume(older_than_s=-1)
    assert receipt_tree(charge_id=charge_id).undecided_refund_legs == [leg.public_id]
    settle_runs()
    tree = receipt_tree(charge_id=charge_id)
    assert tree.complete, tree.problems
    assert tree.unreversed_refunded_micro() == 1_000_000


def test_without_a_signing_key_the_verdict_stands_and_receipts_catch_up_later(
    shop: Shop, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    signing_key = settings.RECEIPT_SIGNING_KEY
    settings.RECEIPT_SIGNING_KEY = ""
    charge_id = shop.fund()
    shop.refund(1_000_000)
    assert set(VerificationRun.objects.values_list("verdict", flat=True)) == {"VERIFIED"}
    assert not Receipt.objects.exists()
    assert "RECEIPT_SIGNING_KEY" in caplog.text
    assert not receipt_tree(charge_id=charge_id).complete

    settings.RECEIPT_SIGNING_KEY = signing_key
    assert services.receipts_catch_up() == 2
    assert receipt_tree(charge_id=charge_id).complete


def test_the_admin_shows_a_receipt_with_its_verification(shop: Shop) -> None:
    charge_id = shop.fund()
    receipt = charge_receipt(charge_id)
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-pw-123"))
    listing = client.get(reverse("admin:receipts_receipt_changelist"))
    assert listing.status_code == 200
    assert receipt.id in listing.content.decode()
    response = client.get(f"/admin/receipts/receipt/{quote(receipt.id)}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    for text in (
        receipt.signature,
        "test-sandbox-1",
        "trusted",
        receipt.verification_run.public_id,
    ):
        assert text in page
    assert "&quot;amount_micro&quot;:10000000" in page  # the canonical text, escaped
    assert "not trusted" not in page
    # Nobody changes or deletes a receipt in the admin, superusers included.
    assert client.post(f"/admin/receipts/receipt/{quote(receipt.id)}/delete/").status_code == 403


def test_receipt_keygen_prints_a_usable_key(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    call_command("receipt_keygen", "--environment", "sandbox", "--json")
    key = json.loads(capsys.readouterr().out)
    assert key["environment"] == "sandbox"
    assert keys.public_key_of_seed(key["seed"]) == key["public_key"]
    call_command("receipt_keygen")
    out = capsys.readouterr().out
    assert "RECEIPT_SIGNING_KEY=" in out
    assert "RECEIPT_TRUSTED_KEYS=" in out


def test_a_malformed_key_configuration_fails_the_system_check(settings: Any) -> None:
    from receipts.checks import receipt_keys_check

    assert receipt_keys_check() == []
    settings.RECEIPT_TRUSTED_KEYS = {"k1": {"public_key": "not base64!", "environment": "sandbox"}}
    assert [m.id for m in receipt_keys_check()] == ["receipts.E001"]
    settings.RECEIPT_TRUSTED_KEYS = {}
    settings.RECEIPT_SIGNING_ENVIRONMENT = "staging"
    assert [m.id for m in receipt_keys_check()] == ["receipts.E001"]
