"""`manage.py demo_ce3` (issue 41 item 7): a Visa CE 3.0 "qualified" packet under `make run`,
against the sandbox over HTTP, without moving any clock. Two earlier payments on the buyer's card
are seeded 200 days back at the sandbox and recorded by Vouch as funding legs whose signed charge
receipts are dated by the provider's own `created`; a new envelope is funded now on the same card
and disputed as fraud; the packet Vouch prepares says "qualified"."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
import stripe
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.models import User
from disputes.models import Dispute, Packet
from envelopes.models import Envelope, FundingLeg
from receipts.models import Receipt, ReceiptKind
from receipts.selectors import receipt_verify
from stripe_sandbox.client import SandboxControl


def demo(*args: str) -> str:
    out = StringIO()
    call_command("demo_ce3", *args, stdout=out)
    return out.getvalue()


def sdk(sandbox: SandboxControl) -> stripe.StripeClient:
    return stripe.StripeClient("sk_test_vouch_tests", base_addresses={"api": sandbox.url})


def test_the_demo_makes_a_packet_that_qualifies_from_receipts_dated_by_the_provider(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    printed = demo("--buyer", buyer.email)

    dispute = Dispute.objects.get()
    packet = dispute.packets.order_by("-version").first()
    assert packet is not None
    ce3 = packet.enhanced["visa_compelling_evidence_3"]
    assert ce3["status"] == "qualified", ce3
    assert (dispute.reason, dispute.network_reason_code) == ("fraudulent", "10.4")
    assert f"/admin/disputes/packet/{packet.pk}/review/" in printed
    assert "qualified" in printed

    # Three envelopes of the buyer: two earlier payments and the disputed one, all recorded.
    legs = FundingLeg.objects.filter(envelope__owner=buyer).order_by("created_at")
    assert [leg.status for leg in legs] == ["succeeded"] * 3
    assert Envelope.objects.filter(owner=buyer).count() == 3
    client = sdk(stripe_at_sandbox)
    disputed_created = client.v1.charges.retrieve(dispute.charge_id).created
    prior_charges = {p["charge"] for p in ce3["priors"]}
    assert prior_charges == {leg.charge_id for leg in legs} - {dispute.charge_id}
    for charge_id in prior_charges:
        charge = client.v1.charges.retrieve(charge_id)
        receipt = Receipt.objects.get(kind=ReceiptKind.CHARGE, provider_object_id=charge_id)
        assert receipt_verify(receipt).ok
        # The receipt's time is the payment's, as the provider holds it, 200 days before the
        # disputed one: read back, not invented; the receipt itself was written now.
        held = datetime.fromtimestamp(charge.created, UTC)
        assert receipt.body["time"] == held.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert receipt.occurred_at == held
        assert (disputed_created - charge.created) // 86_400 == 200
        assert receipt.created_at > timezone.now() - timedelta(minutes=5)
        # The signed body says what this payment is.
        assert "demo_ce3" in receipt.body["detail"]["metadata"]["vouch_demo"]
        assert charge.payment_method_details.card.fingerprint == (
            client.v1.charges.retrieve(dispute.charge_id).payment_method_details.card.fingerprint
        )
    assert all(p["age_days"] == 200 for p in ce3["priors"])
    assert all(
        p["matched"] == ["customer_account_id", "customer_device_id", "customer_purchase_ip"]
        for p in ce3["priors"]
    )


def test_a_second_run_makes_nothing_new_and_shows_the_same_packet(
    buyer: User, stripe_at_sandbox: SandboxControl
) -> None:
    demo("--buyer", buyer.email)
    charges_before = stripe_at_sandbox.state()["counts"]
    packet = Packet.objects.get()

    again = demo("--buyer", buyer.username)

    assert "already" in again
    assert f"/admin/disputes/packet/{packet.pk}/review/" in again
    assert Dispute.objects.count() == 1
    assert Packet.objects.count() == 1
    assert FundingLeg.objects.count() == 3
    assert stripe_at_sandbox.state()["counts"] == charges_before


@pytest.mark.parametrize(
    ("key", "says"),
    [("sk_live_51RealLiveKey", "live"), ("sk_test_51RealTestModeKey", "sandbox")],
)
def test_it_refuses_when_not_on_the_sandbox_and_makes_nothing(
    buyer: User, stripe_at_sandbox: SandboxControl, settings: Any, key: str, says: str
) -> None:
    settings.STRIPE_API_KEY = key
    with pytest.raises(CommandError) as refused:
        demo("--buyer", buyer.email)
    assert says in str(refused.value)
    assert not Envelope.objects.exists()
    assert stripe_at_sandbox.state()["counts"]["charges"] == 0


def test_it_refuses_a_sandbox_that_does_not_answer_its_control_api(
    buyer: User, settings: Any
) -> None:
    settings.STRIPE_API_BASE = "http://127.0.0.1:9"  # nothing listens (discard port)
    with pytest.raises(CommandError) as refused:
        demo("--buyer", buyer.email)
    assert "control" in str(refused.value)
    assert not Envelope.objects.exists()


def test_it_refuses_an_unknown_buyer(db: None, stripe_at_sandbox: SandboxControl) -> None:
    with pytest.raises(CommandError) as refused:
        demo("--buyer", "nobody@example.com")
    assert "nobody@example.com" in str(refused.value)


def test_a_run_stopped_before_the_dispute_is_completed_by_the_next(
    buyer: User, stripe_at_sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    from disputes import demo as module

    real_control = module.control

    def sandbox_gone_at_the_dispute(method: str, path: str, body: Any = None) -> Any:
        if path == "disputes":
            raise module.DemoRefused("the sandbox stopped answering")
        return real_control(method, path, body)

    monkeypatch.setattr(module, "control", sandbox_gone_at_the_dispute)
    with pytest.raises(CommandError):
        demo("--buyer", buyer.email)
    assert FundingLeg.objects.count() == 3
    assert not Dispute.objects.exists()
    monkeypatch.setattr(module, "control", real_control)

    demo("--buyer", buyer.email)

    assert FundingLeg.objects.count() == 3  # the new funding of the first run is the disputed one
    packet = Packet.objects.get()
    assert packet.enhanced["visa_compelling_evidence_3"]["status"] == "qualified"


def test_a_run_stopped_before_a_receipt_never_disputes_an_earlier_payment(
    buyer: User, stripe_at_sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first earlier payment is recorded, then the run stops before its receipt is written:
    the next run still knows it for a seeded one (by its receipt, written first), and disputes a
    payment made now."""
    from disputes import demo as module

    real_receipt_now = module._receipt_now

    def stop(leg: FundingLeg) -> Receipt:
        raise module.DemoRefused("stopped")

    monkeypatch.setattr(module, "_receipt_now", stop)
    with pytest.raises(CommandError):
        demo("--buyer", buyer.email)
    monkeypatch.setattr(module, "_receipt_now", real_receipt_now)
    assert FundingLeg.objects.filter(status="succeeded").count() == 1

    demo("--buyer", buyer.email)

    dispute = Dispute.objects.get()
    client = sdk(stripe_at_sandbox)
    assert client.v1.charges.retrieve(dispute.charge_id).created > time.time() - 3600
    packet = Packet.objects.get()
    assert packet.enhanced["visa_compelling_evidence_3"]["status"] == "qualified"
    assert FundingLeg.objects.count() == 3
