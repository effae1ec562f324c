"""The console's search box (SPEC §10, issue 27): any Vouch or provider id, or an e-mail, to the
objects that carry it.

Reads only, and only exact matches on indexed columns: the id's prefix decides which tables are
asked (`KINDS`), each lookup one indexed equality (no LIKE, no scan of JSON or text), so a search
costs a handful of index probes whatever the tables hold (bench/search.py). The indexes it relies
on are declared on the models, each saying so.

A hit is one object with an admin page: the object the id is its own (first), and every object
that names it — a discrepancy or escalation about it, the receipts, runs and events of a charge,
the envelope a provider id belongs to. A person sees only hits of the lists they may open: the
caller says which (`can_view`), and a table they may not read is not even asked. An id of an
object they may not view (a Vouch id's own kind, a Stripe dispute) asks nothing at all, so it
answers exactly as an unknown id (issue 38 item 2)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ops.search.hits import (
    _EMAIL,
    _TOKEN,
    LIMIT,
    MAX_TERM,
    Hit,
    IdKind,
    Lookup,
    More,
    SearchResult,
    _changelist,
)
from ops.search.lookups import (
    adjustment_own,
    adjustments_naming,
    debit_own,
    discrepancies_naming,
    discrepancies_of_payment_intent,
    discrepancy_own,
    dispute_of_provider_id,
    dispute_own,
    disputes_of_charge,
    disputes_of_payment_intent,
    envelope_own,
    envelopes_of_dispute,
    envelopes_of_email,
    escalations_naming,
    event_own,
    events_of_charge,
    events_of_object,
    events_of_payment_intent,
    evidence_own,
    funding_leg_own,
    funding_legs_of_charge,
    funding_legs_of_payment_intent,
    packet_own,
    receipt_own,
    receipts_of_charge,
    receipts_of_payment_intent,
    receipts_of_refund,
    reconciliation_run_own,
    refund_leg_own,
    refund_legs_of_charge,
    refund_legs_of_dispute,
    refund_legs_of_refund,
    refund_operation_own,
    refund_request_own,
    refund_requests_of_email,
    run_own,
    runs_keyed,
    users_by_email,
)

__all__ = [
    "KINDS",
    "PREFIXES",
    "Hit",
    "IdKind",
    "More",
    "SearchResult",
    "kind_of",
    "search",
    "search_term",
]


# --- what each prefix names ---------------------------------------------------------------------


def _lookup(model: str, find: Callable[[str], Iterable[Hit]], *, more: bool = True) -> Lookup:
    return Lookup(model, find, (lambda term: _changelist(model, term)) if more else None)


ENVELOPE, REFUNDS = "envelopes.envelope", "envelopes.refundoperation"
DISPUTE, RECEIPT = "disputes.dispute", "receipts.receipt"
RUN, ESCALATION = "verification.verificationrun", "verification.escalation"
EVENT, DISCREPANCY = "verification.providerevent", "reconciliation.discrepancy"
ADJUSTMENT, REQUEST = "reconciliation.adjustment", "agents.refundrequest"
PACKET, EVIDENCE = "disputes.packet", "disputes.evidence"
RECON_RUN = "reconciliation.run"

NAMED = (  # what names a Vouch object's id: a discrepancy or an escalation about it
    _lookup(DISCREPANCY, discrepancies_naming),
    _lookup(ESCALATION, escalations_naming),
)
CHARGE = (
    _lookup(ENVELOPE, funding_legs_of_charge),
    _lookup(REFUNDS, refund_legs_of_charge),
    _lookup(DISPUTE, disputes_of_charge),
    _lookup(RECEIPT, receipts_of_charge),
    _lookup(RUN, runs_keyed),
    _lookup(EVENT, events_of_charge, more=False),
    *NAMED,
)
PAYMENT_INTENT = (
    _lookup(ENVELOPE, funding_legs_of_payment_intent),
    _lookup(DISPUTE, disputes_of_payment_intent, more=False),
    _lookup(RECEIPT, receipts_of_payment_intent, more=False),
    _lookup(RUN, runs_keyed),
    _lookup(EVENT, events_of_payment_intent, more=False),
    _lookup(ADJUSTMENT, adjustments_naming),
    _lookup(DISCREPANCY, discrepancies_of_payment_intent, more=False),
)
REFUND = (
    _lookup(REFUNDS, refund_legs_of_refund),
    _lookup(RECEIPT, receipts_of_refund),
    _lookup(ADJUSTMENT, adjustments_naming),
    _lookup(RUN, runs_keyed),
    _lookup(EVENT, events_of_object, more=False),
    *NAMED,
)
PROVIDER_DISPUTE = (
    _lookup(DISPUTE, dispute_of_provider_id),
    _lookup(ENVELOPE, envelopes_of_dispute, more=False),
    _lookup(REFUNDS, refund_legs_of_dispute, more=False),
    _lookup(RUN, runs_keyed),
    _lookup(EVENT, events_of_object, more=False),
    *NAMED,
)


def _own(model: str, find: Callable[[str], Iterable[Hit]]) -> Lookup:
    return Lookup(model, find)


KINDS: tuple[IdKind, ...] = (
    IdKind("env_", "Vouch envelope", (_own(ENVELOPE, envelope_own), *NAMED), ENVELOPE),
    IdKind("fnd_", "Vouch funding leg", (_own(ENVELOPE, funding_leg_own), *NAMED), ENVELOPE),
    IdKind("dbt_", "Vouch debit", (_own(ENVELOPE, debit_own),), ENVELOPE),
    IdKind("erf_", "Vouch refund", (_own(REFUNDS, refund_operation_own), *NAMED), REFUNDS),
    IdKind("rfl_", "Vouch refund leg", (_own(REFUNDS, refund_leg_own), *NAMED), REFUNDS),
    IdKind("adj_", "Vouch adjustment", (_own(ADJUSTMENT, adjustment_own),), ADJUSTMENT),
    IdKind("dsp_", "Vouch dispute", (_own(DISPUTE, dispute_own),), DISPUTE),
    IdKind("pkt_", "Vouch dispute packet", (_own(PACKET, packet_own),), PACKET),
    IdKind("evd_", "Vouch evidence", (_own(EVIDENCE, evidence_own),), EVIDENCE),
    IdKind("vrun_", "Vouch verification run", (_own(RUN, run_own), *NAMED), RUN),
    IdKind(
        "rec_",
        "Vouch reconciliation run",
        (_own(RECON_RUN, reconciliation_run_own),),
        RECON_RUN,
    ),
    IdKind("dsc_", "Vouch discrepancy", (_own(DISCREPANCY, discrepancy_own),), DISCREPANCY),
    IdKind("rrq_", "Vouch refund request", (_own(REQUEST, refund_request_own),), REQUEST),
    IdKind("rcpt_", "Vouch receipt", (_own(RECEIPT, receipt_own),), RECEIPT),
    IdKind("ch_", "Stripe charge", CHARGE),
    IdKind("py_", "Stripe payment (charge)", CHARGE),
    IdKind("pi_", "Stripe PaymentIntent", PAYMENT_INTENT),
    IdKind("re_", "Stripe refund", REFUND),
    IdKind("pyr_", "Stripe payment refund", REFUND),
    # Everything a Stripe dispute id finds confirms the dispute: only who may view disputes asks.
    IdKind("dp_", "Stripe dispute", PROVIDER_DISPUTE, DISPUTE),
    IdKind("du_", "Stripe dispute", PROVIDER_DISPUTE, DISPUTE),
    IdKind("evt_", "Stripe event", (_own(EVENT, event_own),), EVENT),
)
EMAIL = (
    _lookup("accounts.user", users_by_email, more=False),
    Lookup(ENVELOPE, envelopes_of_email, lambda term: _changelist(ENVELOPE, term)),
    Lookup(REQUEST, refund_requests_of_email, lambda term: _changelist(REQUEST, term)),
)
PREFIXES = tuple(kind.prefix for kind in KINDS)


def search_term(query: str) -> str:
    """The id a person pasted: trimmed of spaces and quotes, and out of a URL (a Stripe Dashboard
    address ends with the object's id)."""
    term = query.strip().strip("\"'`<>").strip()
    if "/" in term:
        term = term.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0].split("#", 1)[0]
    return term


def kind_of(term: str) -> IdKind | None:
    """What kind of id `term` is, by its prefix (the longest that matches); None if none does."""
    if len(term) > MAX_TERM or not _TOKEN.match(term):
        return None
    matches = [
        kind for kind in KINDS if term.startswith(kind.prefix) and len(term) > len(kind.prefix)
    ]
    return max(matches, key=lambda kind: len(kind.prefix), default=None)


def search(query: str, *, can_view: Callable[[str], bool]) -> SearchResult:
    """Every object carrying the id (or e-mail) in `query` that the person may see, the object
    the id is its own first; `can_view(model_label)` says which admin lists they may open (a
    table behind a list they may not is not asked). Unknown shapes and ids find nothing."""
    term = search_term(query)
    email = bool(len(term) <= MAX_TERM and _EMAIL.match(term))
    kind = None if email else kind_of(term)
    result = SearchResult(query=query, term=term, kind=kind, email=email)
    lookups = EMAIL if email else kind.lookups if kind is not None else ()
    seen: set[tuple[str, str]] = set()
    allowed: dict[str, bool] = {}
    if kind is not None and kind.names:
        allowed[kind.names] = bool(can_view(kind.names))
        if not allowed[kind.names]:
            lookups = ()  # the same answer as an unknown id of this kind: nothing asked
    for lookup in lookups:
        if lookup.model not in allowed:
            allowed[lookup.model] = bool(can_view(lookup.model))
        if not allowed[lookup.model]:
            continue
        hits = list(lookup.find(term))
        if len(hits) > LIMIT:
            hits = hits[:LIMIT]
            url = lookup.more(term) if lookup.more is not None else ""
            result.more.append(More(kind=hits[0].kind, url=url))
        for hit in hits:
            if hit.key not in seen:
                seen.add(hit.key)
                result.hits.append(hit)
    result.hits.sort(key=lambda hit: not hit.own)  # stable: the lookups' order otherwise
    return result
