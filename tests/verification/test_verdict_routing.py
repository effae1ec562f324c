"""A recorded verdict goes to the handlers registered for its contract (verification/verdicts.py),
inside the transaction that records it; every-verdict handlers see all of them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from disputes import services as disputes_services
from envelopes import services as envelopes_services
from verification import verdicts
from verification.models import Verdict, VerificationRun
from verification.verdicts import VerdictRoutes

from .conftest import Refunds
from .test_engine import AFTER_WINDOW, attempt_now

CHARGE = "stripe.charge.succeeded"
REFUND = "stripe.refund.created"
DISPUTE = "stripe.dispute.filed"


class Seen:
    """A handler that records the runs it was given."""

    def __init__(self) -> None:
        self.runs: list[VerificationRun] = []

    def __call__(self, *, run: VerificationRun) -> None:
        self.runs.append(run)


def decided(contract_id: str) -> VerificationRun:
    return VerificationRun(contract_id=contract_id, verdict=Verdict.VERIFIED, public_id="vrun_t")


def test_a_verdict_reaches_its_contracts_handler_and_not_anothers() -> None:
    routes = VerdictRoutes()
    on_charge, on_refund = Seen(), Seen()
    routes.on_verdict(CHARGE, on_charge)
    routes.on_verdict(REFUND, on_refund)
    run = decided(CHARGE)
    routes.route(run)
    assert on_charge.runs == [run]
    assert on_refund.runs == []


def test_every_verdict_handlers_see_all_in_the_order_registered() -> None:
    routes = VerdictRoutes()
    calls: list[str] = []
    routes.on_verdict(REFUND, lambda *, run: calls.append(f"refund {run.contract_id}"))
    routes.on_every_verdict(lambda *, run: calls.append(f"every {run.contract_id}"))
    for contract_id in (CHARGE, REFUND, DISPUTE):
        routes.route(decided(contract_id))
    assert calls == [
        f"every {CHARGE}",
        f"refund {REFUND}",
        f"every {REFUND}",
        f"every {DISPUTE}",
    ]


def test_registering_a_contract_twice_for_one_handler_calls_it_once() -> None:
    routes = VerdictRoutes()
    handler = Seen()
    routes.on_verdict(REFUND, handler)
    routes.on_verdict(REFUND, handler)
    routes.on_verdict(CHARGE, handler)
    routes.route(decided(REFUND))
    routes.route(decided(CHARGE))
    assert [run.contract_id for run in handler.runs] == [REFUND, CHARGE]


def test_a_contract_without_handlers_routes_nowhere_and_an_unknown_id_is_refused() -> None:
    routes = VerdictRoutes()
    handler = Seen()
    routes.on_verdict(REFUND, handler)
    routes.route(decided(DISPUTE))  # nobody acts on it: nothing happens, nothing raises
    assert handler.runs == []
    with pytest.raises(LookupError):
        routes.on_verdict("stripe.refund.creatd", handler)
    routes.forget(handler)
    routes.route(decided(REFUND))
    assert handler.runs == []


def test_the_apps_register_refunds_for_envelopes_and_filings_for_disputes() -> None:
    refund = verdicts.handlers_for(REFUND)
    dispute = verdicts.handlers_for(DISPUTE)
    assert envelopes_services.refund_leg_on_verdict in refund
    assert disputes_services.packet_on_verdict not in refund
    assert disputes_services.packet_on_verdict in dispute
    assert envelopes_services.refund_leg_on_verdict not in dispute
    # Receipts' handler sees every verdict, after the contract's own (INSTALLED_APPS order).
    receipts = [h for h in refund if h.__qualname__.startswith("ReceiptsConfig.")]
    assert len(receipts) == 1
    assert refund.index(envelopes_services.refund_leg_on_verdict) < refund.index(receipts[0])
    assert receipts[0] in dispute
    assert receipts[0] in verdicts.handlers_for(CHARGE)


def _listening(contract: str) -> Iterator[Seen]:
    """A handler registered for one contract while a test runs, then forgotten."""
    handler = Seen()
    verdicts.on_verdict(contract, handler)
    yield handler
    verdicts.forget(handler)


@pytest.fixture
def on_refund() -> Iterator[Seen]:
    yield from _listening(REFUND)


@pytest.fixture
def on_charge() -> Iterator[Seen]:
    yield from _listening(CHARGE)


@pytest.mark.django_db
def test_the_engine_routes_a_recorded_verdict_once(
    refunds: Refunds, on_refund: Seen, on_charge: Seen
) -> None:
    run = refunds.make(refunds.charge())
    refunds.store_events()
    run = attempt_now(run, after_s=2)
    assert run.verdict == Verdict.VERIFIED
    assert [(r.pk, r.verdict) for r in on_refund.runs] == [(run.pk, Verdict.VERIFIED)]
    assert on_charge.runs == []
    attempt_now(run, after_s=AFTER_WINDOW, trigger="monitor")  # monitoring records no verdict
    assert len(on_refund.runs) == 1
