"""Where a recorded verdict goes: the handlers other apps register for a contract (or for every
verdict), called by `route` inside the transaction that records the verdict, so a handler's
writes (a release of money, a filed packet, a receipt) commit or roll back with it.

Registered in the apps' `ready()`:
- envelopes: `stripe.refund.created` -> `refund_leg_on_verdict` (FAILED, or the `reversed`
  contradiction, gives the refund leg's money back);
- disputes: `stripe.dispute.filed` -> `packet_on_verdict` (the filing readback decides the packet);
- receipts: every verdict -> a receipt for a VERIFIED run of a receipt contract (in a savepoint).

Handlers are called in the order they were first registered (the apps' order in INSTALLED_APPS),
each with `run=` the decided run. A handler may keep its own check of the contract as a guard."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from verification.contracts import get_contract

if TYPE_CHECKING:
    from verification.models import VerificationRun

logger = logging.getLogger("vouch.verification")

VerdictHandler = Callable[..., object]  # called as handler(run=<the decided run>)


class VerdictRoutes:
    """Handlers by contract id. One entry per handler: the contract ids it acts on, or every
    contract. Registering a handler again for a contract it has is a no-op."""

    def __init__(self) -> None:
        # Insertion-ordered: the order of first registration is the order of calls.
        self._contracts: dict[VerdictHandler, set[str] | None] = {}

    def on_verdict(self, contract_id: str, handler: VerdictHandler) -> None:
        """Call `handler(run=run)` for every decided run of `contract_id` (LookupError if no such
        contract is loaded: a misspelled id would otherwise never be routed)."""
        get_contract(contract_id)
        contracts = self._contracts.setdefault(handler, set())
        if contracts is not None:
            contracts.add(contract_id)

    def on_every_verdict(self, handler: VerdictHandler) -> None:
        """Call `handler(run=run)` for every decided run, whatever its contract."""
        self._contracts[handler] = None

    def forget(self, handler: VerdictHandler) -> None:
        """Stop calling `handler` (a test's temporary handler)."""
        self._contracts.pop(handler, None)

    def handlers_for(self, contract_id: str) -> list[VerdictHandler]:
        return [
            handler
            for handler, contracts in self._contracts.items()
            if contracts is None or contract_id in contracts
        ]

    def route(self, run: VerificationRun) -> None:
        """Hand a run whose verdict is being recorded to its contract's handlers. Called inside
        the recording transaction: a handler's exception rolls the verdict back with it."""
        handlers = self.handlers_for(run.contract_id)
        if not handlers:
            # A contract no app acts on: the verdict is recorded (and escalated if bad), and
            # nothing else follows from it.
            logger.debug("verdict of run %s (%s): no handler", run.public_id, run.contract_id)
            return
        for handler in handlers:
            handler(run=run)


_ROUTES = VerdictRoutes()

on_verdict = _ROUTES.on_verdict
on_every_verdict = _ROUTES.on_every_verdict
forget = _ROUTES.forget
handlers_for = _ROUTES.handlers_for
route = _ROUTES.route
