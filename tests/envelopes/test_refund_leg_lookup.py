"""How a refund leg left without an answer learns its fate (issue 36, item 7): sent again under
its key while the provider keeps the key, looked up among the charge's refunds once the key may be
forgotten or when the provider keeps an unknown answer under it; never a lookup where the provider
simply replayed its answer. Counted at the sandbox, which tells a send from a lookup."""

from datetime import timedelta
from typing import Any

import pytest
import stripe
import time_machine
from django.utils import timezone

from envelopes import services
from envelopes.models import Envelope, LegOutcome, RefundLeg
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from verification.models import Escalation

pytestmark = pytest.mark.django_db

SEND, LOOKUP = "POST /v1/refunds", "GET /v1/refunds"


def _calls(sandbox: SandboxControl) -> dict[str, int]:
    requests = sandbox.state()["requests"]
    return {route: int(requests.get(route, 0)) for route in (SEND, LOOKUP)}


def _unanswered(alice: Api, sandbox: SandboxControl, kind: str) -> tuple[RefundLeg, str]:
    """A $2.00 refund of a $5.00 envelope whose one leg got no answer (`kind`: the provider made
    it and the answer was lost, or made nothing)."""
    data = alice.create(5_000_000)
    sandbox.add_fault("/v1/refunds", kind, method="POST", times=1)
    sandbox.add_fault("/v1/refunds", "server_error", method="POST")  # the adapter's retries too
    envelope_id = data["envelope_id"]
    response = alice.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/refund", {"amount_micro": 2_000_000}
    )
    assert response.status_code == 202, response.content
    sandbox.clear_faults()
    leg = RefundLeg.objects.get()
    assert leg.outcome == LegOutcome.UNKNOWN
    return leg, envelope_id


def test_a_leg_at_the_very_end_of_its_keys_life_is_sent_again_not_looked_up(
    alice: Api, sandbox: SandboxControl
) -> None:
    leg, _ = _unanswered(alice, sandbox, "apply_then_drop")
    before = _calls(sandbox)
    with time_machine.travel(leg.reserved_at + services.PROVIDER_KEY_TTL, tick=False):
        services.refund_leg_send(leg=RefundLeg.objects.get(pk=leg.pk))
    after = _calls(sandbox)
    assert (after[SEND] - before[SEND], after[LOOKUP] - before[LOOKUP]) == (1, 0)
    leg.refresh_from_db()
    assert leg.outcome == LegOutcome.ACCEPTED  # the provider replayed what it did


def test_a_replayed_answer_is_recorded_without_a_lookup(
    alice: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    leg, envelope_id = _unanswered(alice, sandbox, "apply_then_drop")
    before = _calls(sandbox)
    services.stranded_resume(older_than_s=-1)
    after = _calls(sandbox)
    assert (after[SEND] - before[SEND], after[LOOKUP] - before[LOOKUP]) == (1, 0)
    leg.refresh_from_db()
    assert leg.outcome == LegOutcome.ACCEPTED
    [refund] = sdk.v1.refunds.list(params={"charge": leg.funding_leg.charge_id}).data
    assert refund.metadata.to_dict() == {
        "vouch_envelope": envelope_id,
        "vouch_refund": leg.operation.public_id,
        "vouch_leg": leg.public_id,
    }


def test_past_the_keys_life_a_leg_is_looked_up_and_found(
    alice: Api, sandbox: SandboxControl
) -> None:
    leg, envelope_id = _unanswered(alice, sandbox, "apply_then_drop")
    before = _calls(sandbox)
    with time_machine.travel(
        leg.reserved_at + services.PROVIDER_KEY_TTL + timedelta(seconds=1), tick=False
    ):
        services.refund_leg_send(leg=RefundLeg.objects.get(pk=leg.pk))
    after = _calls(sandbox)
    assert (after[SEND] - before[SEND], after[LOOKUP] - before[LOOKUP]) == (0, 1)
    leg.refresh_from_db()
    assert leg.outcome == LegOutcome.ACCEPTED
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_refunded_micro, envelope.reserved_micro) == (2_000_000, 0)
    assert not Escalation.objects.exists()
    assert ledger_breaches() == []


def test_past_the_keys_life_a_leg_the_provider_never_made_is_escalated_its_money_reserved(
    alice: Api, sandbox: SandboxControl
) -> None:
    leg, envelope_id = _unanswered(alice, sandbox, "server_error")
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        services.refund_leg_send(leg=RefundLeg.objects.get(pk=leg.pk))
        services.refund_leg_send(leg=RefundLeg.objects.get(pk=leg.pk))  # one escalation only
    leg.refresh_from_db()
    assert leg.outcome == LegOutcome.UNKNOWN
    [escalation] = Escalation.objects.all()
    escalated: Any = escalation
    assert escalated.verdict_class == "not at the provider"
    assert leg.public_id in escalated.reason
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.reserved_micro, envelope.unspent_micro) == (2_000_000, 3_000_000)
    assert ledger_breaches() == []


def test_a_lookup_that_cannot_list_leaves_the_leg_as_it_was(
    alice: Api, sandbox: SandboxControl
) -> None:
    leg, _ = _unanswered(alice, sandbox, "apply_then_drop")
    sandbox.add_fault("/v1/refunds", "server_error", method="GET")
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        returned = services.refund_leg_send(leg=RefundLeg.objects.get(pk=leg.pk))
    assert returned.pk == leg.pk
    assert returned.outcome == LegOutcome.UNKNOWN
    assert not Escalation.objects.exists()  # unknown is not "not found": nobody is called


def test_the_escalation_of_a_leg_never_made_names_it_as_money(
    alice: Api, sandbox: SandboxControl
) -> None:
    leg, _ = _unanswered(alice, sandbox, "server_error")
    with time_machine.travel(timezone.now() + timedelta(hours=25), tick=True):
        returned = services.refund_leg_send(leg=RefundLeg.objects.get(pk=leg.pk))
    assert (returned.pk, returned.outcome) == (leg.pk, LegOutcome.UNKNOWN)
    escalation = Escalation.objects.get()
    assert (escalation.subject_type, escalation.subject_id, escalation.money) == (
        "refund_leg",
        leg.public_id,
        True,
    )


class _Died(Exception):
    pass


def test_the_crash_point_after_the_refund_call_stands_between_call_and_record(
    alice: Api, sandbox: SandboxControl, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process (the crash tests of test_crash_retry.py die in a child process): the point
    `refund_after_provider_call` is reached with the provider's refund made and the leg not yet
    recorded."""
    import core.crash

    def died(status: int) -> None:
        raise _Died(status)

    data = alice.create(5_000_000)
    monkeypatch.setattr(core.crash.os, "_exit", died)
    settings.VOUCH_CRASH_AT = "refund_after_provider_call"
    envelope = Envelope.objects.get(public_id=data["envelope_id"])
    with pytest.raises(_Died):
        services.envelope_refund(envelope=envelope, actor=alice.user, amount_micro=1_000_000)
    assert sandbox.state()["counts"]["refunds"] == 1
    assert RefundLeg.objects.get().outcome == LegOutcome.RESERVED
