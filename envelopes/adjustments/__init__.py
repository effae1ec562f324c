"""The one adjustment service (SPEC §15.4): the only way a person changes balances. One person
proposes a correcting journal entry of kind `adjust`; another, with
`reconciliation.approve_adjustment`, approves it, confirming the amount shown; it is then written
under the envelope's lock, keeping the ledger invariant. Escalations about money resolve this way,
as reconciliation's discrepancies will.

No correction against the provider's word: every correction but `confirm` reads the provider when
it is proposed and again when it is approved, outside any transaction; each read is stored (every
answer's bytes with their SHA-256: `ProviderRead`), kept on the adjustment (`proposal_read`,
`approval_read`) and cited by the journal entry the approval writes. A correction the provider
contradicts is refused with a code that says what it shows (envelopes.exceptions):

- an accept (`leg_accept`, `funding_accept`) or a `foreign_refund` needs the object it names, on
  the leg's charge, for the amount, live, and recorded on no other leg
  (`provider_object_already_recorded`);
- a release (`leg_release`) or a reverse (`leg_reverse`) needs every refund that carries the leg
  — its recorded refund, or one of the charge's refunds with its `vouch_leg` metadata — `failed`
  or `canceled`, or none at all (`provider_shows_refund_succeeded`,
  `provider_shows_refund_in_flight`; `provider_shows_no_charge` when the charge itself is not
  there). A recorded refund id the provider answers 404 for, on a charge it does hold, is a
  refund it does not hold: refunds are never deleted at Stripe, so the money never left through
  it;
- an abandon (`funding_abandon`) needs no PaymentIntent carrying the leg — its recorded one, or
  one with its `vouch_funding` metadata — that succeeded or may still succeed
  (`provider_shows_payment_succeeded`, `provider_shows_payment_in_flight`).

A leg whose idempotency key the provider may still honour is never corrected by hand: Vouch
itself may still send it.

One module per concern (STYLE rule 16): `subjects` (what a correction is about, which fit a leg),
`evidence` (the provider's reads and the checks on them), `proposing`, `deciding` (approve,
reject, and the journal entry an approval writes). `from envelopes.adjustments import X` keeps
working."""

from envelopes.adjustments.deciding import APPROVE_PERMISSION, adjustment_approve, adjustment_reject
from envelopes.adjustments.proposing import PROPOSE_PERMISSION, adjustment_propose
from envelopes.adjustments.subjects import Subject, adjustment_kinds_for, subject_of_escalation

__all__ = [
    "APPROVE_PERMISSION",
    "PROPOSE_PERMISSION",
    "Subject",
    "adjustment_approve",
    "adjustment_kinds_for",
    "adjustment_propose",
    "adjustment_reject",
    "subject_of_escalation",
]
