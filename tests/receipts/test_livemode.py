"""A receipt records the provider object's `livemode` from the readback it is built from, and a
receipt whose mode is not the deployment's (`production` reads live objects, `sandbox` test-mode
ones) fails verification, so its tree is not complete (SPEC §8). Stripe's Refund carries no
`livemode`: a refund is in the mode of the charge it refunds, so its receipt records the charge
receipt's. Receipts written before the field existed (body version 1) are judged by the `livemode`
their signed native detail kept, or (refunds) by their parent's."""

import copy
from typing import Any

import pytest

from envelopes import services as envelope_services
from envelopes.models import RefundLeg
from receipts import keys, services
from receipts.canonical import canonical_bytes, receipt_id_of
from receipts.exceptions import ReceiptNotWritable
from receipts.models import Receipt
from receipts.selectors import receipt_tree, receipt_verify
from stripe_sandbox.client import SandboxControl
from verification.models import Observation, VerificationRun

from .conftest import Shop, charge_receipt, refund_receipt, sign_with

pytestmark = pytest.mark.django_db


def _resigned(receipt: Receipt, edit: Any) -> Receipt:
    """An in-memory receipt whose body was edited and then signed again with the deployment's
    own (trusted) key: everything verifies except what the edit says."""
    body = copy.deepcopy(receipt.body)
    edit(body)
    canonical = canonical_bytes(body)
    forged = copy.copy(receipt)
    forged.body = body
    forged.canonical = canonical.decode()
    forged.id = receipt_id_of(canonical)
    forged.signature = keys.signing_key().sign(canonical)
    return forged


def _version_1(body: dict[str, Any]) -> None:
    body.pop("livemode")
    body["version"] = 1


def test_every_receipt_records_the_provider_objects_livemode(
    shop: Shop, sandbox: SandboxControl
) -> None:
    charge_id = shop.fund(10_000_000)
    shop.refund(2_000_000)
    leg = RefundLeg.objects.get()
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "expired_or_canceled_card")
    envelope_services.refund_leg_on_provider_event(
        event={
            "id": "evt_lm_1",
            "type": "refund.failed",
            "created": 1,
            "data": {"object": {"id": leg.provider_refund_id, "object": "refund"}},
        }
    )
    receipts = {r.kind: r for r in Receipt.objects.all()}
    assert set(receipts) == {"charge", "refund", "refund_reversal"}
    for receipt in receipts.values():
        # The sandbox is Stripe's test mode: its objects say `livemode: false`.
        assert receipt.body["livemode"] is False, receipt.kind
        assert receipt.body["version"] == 2
        assert receipt_verify(receipt).ok, receipt.kind
    assert receipt_tree(charge_id=charge_id).complete


def test_a_live_receipt_fails_in_a_sandbox_deployment(shop: Shop) -> None:
    charge_id = shop.fund()
    receipt = charge_receipt(charge_id)

    live = _resigned(receipt, lambda body: body.update(livemode=True))
    assert receipt_verify(live).problem == "livemode_mismatch"
    # The detail the provider returned and the recorded mode must agree.
    both = _resigned(
        receipt, lambda body: (body.update(livemode=True), body["detail"].update(livemode=True))
    )
    assert receipt_verify(both).problem == "livemode_mismatch"
    disagreeing = _resigned(receipt, lambda body: body["detail"].update(livemode=True))
    assert receipt_verify(disagreeing).problem == "livemode_mismatch"


def test_a_test_mode_receipt_fails_in_a_production_deployment(shop: Shop, settings: Any) -> None:
    """A production deployment trusting its production key still refuses a receipt of a
    test-mode object: the key says who signed, not which money moved."""
    sign_with(settings, key_id="prod-1", environment="production", trusted_as="production")
    settings.VOUCH_ENVIRONMENT = "production"
    charge_id = shop.fund()
    shop.refund(1_000_000)
    charge = charge_receipt(charge_id)
    refund = refund_receipt(RefundLeg.objects.get())
    assert receipt_verify(charge).problem == "livemode_mismatch"
    assert receipt_verify(refund).problem == "livemode_mismatch"
    tree = receipt_tree(charge_id=charge_id)
    assert not tree.complete
    assert tree.problems == [f"{charge.id}: livemode_mismatch", f"{refund.id}: livemode_mismatch"]

    live = _resigned(
        charge, lambda body: (body.update(livemode=True), body["detail"].update(livemode=True))
    )
    assert receipt_verify(live).ok


def test_a_receipt_written_before_livemode_was_recorded(shop: Shop) -> None:
    """Version 1 bodies have no top-level `livemode`; their signed native detail kept the
    provider's (the allow-list always had it), and that decides. Without either, the mode is
    unknown and the receipt is not trusted."""
    receipt = charge_receipt(shop.fund())

    old = _resigned(receipt, _version_1)
    assert old.body["detail"]["livemode"] is False
    assert receipt_verify(old).ok

    old_live = _resigned(
        receipt, lambda body: (_version_1(body), body["detail"].update(livemode=True))
    )
    assert receipt_verify(old_live).problem == "livemode_mismatch"

    unknown = _resigned(receipt, lambda body: (_version_1(body), body["detail"].pop("livemode")))
    assert receipt_verify(unknown).problem == "livemode_missing"
    not_a_bool = _resigned(receipt, lambda body: body.update(livemode=0))
    assert receipt_verify(not_a_bool).problem == "livemode_missing"


def test_an_old_refund_receipt_is_in_its_charges_mode(shop: Shop, settings: Any) -> None:
    """A version-1 refund receipt's detail has no `livemode` (a Stripe refund has none): its
    charge receipt's decides, and only while that one is still what its id addresses."""
    shop.fund()
    shop.refund(1_000_000)
    refund = refund_receipt(RefundLeg.objects.get())
    assert "livemode" not in refund.body["detail"]
    old = _resigned(refund, _version_1)
    assert receipt_verify(old).ok

    tampered_parent = copy.copy(refund.parent)
    assert tampered_parent is not None
    tampered_parent.body = {**tampered_parent.body, "livemode": True}
    old.parent = tampered_parent
    assert receipt_verify(old).problem == "livemode_missing"


def test_an_old_test_mode_refund_fails_in_production(shop: Shop, settings: Any) -> None:
    sign_with(settings, key_id="prod-1", environment="production", trusted_as="production")
    settings.VOUCH_ENVIRONMENT = "production"
    shop.fund()
    shop.refund(1_000_000)
    old = _resigned(refund_receipt(RefundLeg.objects.get()), _version_1)
    assert receipt_verify(old).problem == "livemode_mismatch"


def test_a_readback_without_livemode_writes_no_receipt(shop: Shop, settings: Any) -> None:
    signing_key = settings.RECEIPT_SIGNING_KEY
    settings.RECEIPT_SIGNING_KEY = ""  # the verdict stands; the receipt is written later
    shop.fund()
    run = VerificationRun.objects.get(contract_id="stripe.charge.succeeded", verdict="VERIFIED")
    observation = Observation.objects.get(attempt_id=run.decided_by_id, channel="charge_readback")
    observation.data = {k: v for k, v in observation.data.items() if k != "livemode"}
    observation.save()
    settings.RECEIPT_SIGNING_KEY = signing_key

    with pytest.raises(ReceiptNotWritable, match="livemode"):
        services.receipt_for_run(run=run)
    assert not Receipt.objects.exists()
