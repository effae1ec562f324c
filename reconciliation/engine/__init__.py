"""The comparison of the ledger with the provider (SPEC §15.1, §15.2): the sweep, the full run
and `manage.py reconcile`.

A run lists the provider's refunds, charges and disputes created in its window, a page at a time
(streamed: memory stays flat however many there are), stores each page with its SHA-256, and
compares every object on a Vouch charge with the rows that record it. Then it looks from Vouch's
side (accepted legs and funded charges the listing did not show are read one by one: missing, or
only outside the window), at what is stuck, and at the ledger itself. Last, every open
discrepancy this run did not see again is looked at once more, alone: if it is gone, it is
cleared, citing the provider data that shows it gone.

What Vouch itself has in flight — a leg reserved or awaiting its answer, a refund with Vouch's
metadata whose leg is not recorded yet, a dispute whose webhook may not have arrived — is counted
as *expected* for `RECONCILIATION_GRACE_S` after it started, not as a discrepancy. A refund
without Vouch's metadata is never in flight: it is `refund_foreign` at once.

The only change of money a run makes by itself: a refund Vouch counts as refunded — a leg's, or a
foreign refund recorded by adjustment — that the provider shows `failed` or `canceled` and that was
never released is released through the one release service, exactly as the webhook would have
done. Nothing else changes money without a person; a dry run changes nothing at all.

A charge carrying Vouch's funding metadata that no funding leg records is `funding_unrecorded`
(money the buyer paid that Vouch counts nowhere). Only this run's findings explain an object: a
discrepancy an earlier run left open explains nothing, since this run may clear it.

The package, one module per concern: `run` (a run's life and its phases), `listing` (the
provider's pages), `refunds`, `charges` and `disputes` (the comparers, one per kind of provider
object), `ledger` (Vouch's side: what the listing did not show, what is stuck, the balances),
`clearing` (looking again at what a run did not see) and `shared` (the context, findings and
stored reads). The names callers use are re-exported here."""

from reconciliation.engine.charges import _funding_named, _taken
from reconciliation.engine.run import (
    PHASES,
    WINDOWS,
    ReconciliationIncomplete,
    reconcile,
    reconcile_due,
    reconcile_queued,
)
from reconciliation.engine.shared import (
    GONE,
    LIVE,
    _committed_lazily,
    _Context,
    _id,
    _leg_named,
    _micro,
    _submissions,
)

__all__ = [
    "GONE",
    "LIVE",
    "PHASES",
    "WINDOWS",
    "ReconciliationIncomplete",
    "_Context",
    "_committed_lazily",
    "_funding_named",
    "_id",
    "_leg_named",
    "_micro",
    "_submissions",
    "_taken",
    "reconcile",
    "reconcile_due",
    "reconcile_queued",
]
