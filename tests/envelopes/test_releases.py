"""One release service (issue 10, item 6; SPEC §2): a refused leg, a FAILED verdict, a cancel, a
later `refund.failed` and a `charge.refunded` showing a failed refund all give the money back
through `refund_leg_release` — the one writer of release entries, which announces each release
once (`refund_leg_released`) — and two observers of one failure release it once."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
import stripe

from envelopes.models import Envelope, JournalEntry, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from envelopes.signals import refund_leg_released
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import settle_runs
from verification.services import provider_event_process, provider_event_store

pytestmark = pytest.mark.django_db


@pytest.fixture
def released() -> Iterator[list[tuple[str, str]]]:
    """Every release announced by the one service: (leg, reason)."""
    seen: list[tuple[str, str]] = []

    def listener(sender: Any, leg: RefundLeg, reason: str, **kwargs: Any) -> None:
        seen.append((leg.public_id, reason))

    refund_leg_released.connect(listener, dispatch_uid="tests.released", weak=False)
    yield seen
    refund_leg_released.disconnect(dispatch_uid="tests.released")


def _deliver(event: dict[str, Any]) -> None:
    stored, _ = provider_event_store(event=event, raw=json.dumps(event))
    provider_event_process(event_pk=stored.pk, enqueue=lambda *a: None)


def test_a_refused_leg_is_released_by_the_one_service(
    alice: Api, sandbox: SandboxControl, released: list[tuple[str, str]]
) -> None:
    envelope = alice.create(5_000_000)
    sandbox.open_dispute(envelope["funding_legs"][0]["charge"], reason="fraudulent")
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope['envelope_id']}/refund", {})
    assert response.json()["data"]["status"] == "failed"
    # Nothing reached the provider, so there is nothing to verify (not "verified").
    assert response.json()["data"]["verification_status"] == "not_applicable"
    leg = RefundLeg.objects.get()
    assert (leg.outcome, leg.released) == (LegOutcome.REFUSED, True)
    assert released == [(leg.public_id, "refused: charge_disputed")]
    entry = JournalEntry.objects.get(kind="release")
    assert (entry.refund_leg_id, entry.reserved_delta, entry.unspent_delta) == (
        leg.pk,
        -5_000_000,
        5_000_000,
    )
    assert Envelope.objects.get().unspent_micro == 5_000_000
    assert ledger_breaches() == []


def test_every_later_failure_path_releases_once(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    released: list[tuple[str, str]],
) -> None:
    """A refund that fails after it was accepted: the webhook's re-read, the `charge.refunded`
    re-read and the verdict all notice it; the money comes back once, through the one service."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    leg = RefundLeg.objects.get()
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "lost_or_stolen_card")
    for event_type in ("charge.refunded", "refund.failed"):
        for event in sdk.v1.events.list(params={"type": event_type}).data:
            _deliver(event.to_dict())
    _deliver(
        {
            "id": "evt_synthetic_charge_refunded",
            "type": "charge.refunded",
            "created": 1,
            "data": {"object": {"id": leg.funding_leg.charge_id, "object": "charge"}},
        }
    )
    settle_runs(max_rounds=1)  # the verdict sees it too (or holds it: the window)
    assert [public_id for public_id, _ in released] == [leg.public_id]
    assert JournalEntry.objects.filter(kind="release", refund_leg=leg).count() == 1
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (0, 5_000_000)
    assert ledger_breaches() == []


def test_charge_refunded_alone_releases_a_failed_refund(
    alice: Api, sandbox: SandboxControl, released: list[tuple[str, str]]
) -> None:
    """The `refund.failed` webhook never arrived; the `charge.refunded` re-read is enough."""
    envelope_id = alice.create(5_000_000)["envelope_id"]
    alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000})
    leg = RefundLeg.objects.get()
    sandbox.set_refund_status(leg.provider_refund_id, "failed", "expired_or_canceled_card")
    _deliver(
        {
            "id": "evt_only_charge_refunded",
            "type": "charge.refunded",
            "created": 1,
            "data": {"object": {"id": leg.funding_leg.charge_id, "object": "charge"}},
        }
    )
    assert released == [(leg.public_id, "provider reports failed")]
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 5_000_000
