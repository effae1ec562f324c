"""Reconciliation (SPEC §15): holding the ledger against the provider. For now it holds the
adjustments queue: corrections of the ledger proposed by one person and approved by another. The
adjustment itself is money, so it lives in `envelopes` (its one service writes the `adjust` journal
entry); this app, above envelopes, owns the approval permission and the queue."""

from envelopes.models import Adjustment as EnvelopeAdjustment


class Adjustment(EnvelopeAdjustment):
    """The adjustments queue, and the permission `reconciliation.approve_adjustment`: whoever
    holds it may approve a correction someone else proposed (four eyes)."""

    class Meta:
        proxy = True
        verbose_name = "adjustment"
        permissions = [
            ("approve_adjustment", "Can approve an adjustment of the ledger someone else proposed")
        ]
