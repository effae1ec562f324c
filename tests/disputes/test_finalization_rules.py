"""Deterministic finalization (SPEC §9 step 6) on its own: the rules every draft, from any drafter
or from a person's edit, must pass before it is kept. These are pure (no database): each builds the
admitted material by hand and hands `finalize` a draft that breaks, or just keeps, one rule. The
codes and messages asserted here are what the admin's review page shows the operator."""

from __future__ import annotations

from typing import Any

import pytest

from disputes.drafting import Draft, DraftMaterial, ReceiptFact
from disputes.evidence import AdmittedEvidence
from disputes.finalization import MAX_QUESTION, MAX_QUESTIONS, MAX_SUMMARY, finalize
from disputes.models import Posture

AMOUNT = 10_000_000  # $10.00 disputed
CHARGE = "rc_charge"


def receipt(rid: str, amount_micro: int, kind: str = "refund") -> ReceiptFact:
    return ReceiptFact(
        id=rid, kind=kind, amount_micro=amount_micro, provider_object_id=f"obj_{rid}", detail={}
    )


def evidence(ref: str, kind: str) -> AdmittedEvidence:
    return AdmittedEvidence(ref=ref, sha256="ab" * 32, kind=kind, summary=f"{kind} proof")


def material(
    *,
    refunds: tuple[int, ...] = (),
    evidence_kinds: dict[str, str] | None = None,
    tree_complete: bool = True,
    undecided: tuple[str, ...] = (),
    reason: str = "fraudulent",
    amount_micro: int = AMOUNT,
) -> DraftMaterial:
    """Admitted material for one dispute: a charge receipt, refund receipts `rc_refund_<i>` of the
    given amounts, and evidence by ref -> kind."""
    return DraftMaterial(
        dispute={
            "provider": "stripe",
            "dispute_id": "dp_1",
            "charge_id": "ch_1",
            "amount_micro": amount_micro,
            "currency": "usd",
            "reason": reason,
        },
        tree_complete=tree_complete,
        tree_problems=[] if tree_complete else ["a refund leg has no receipt"],
        undecided_refund_legs=list(undecided),
        charge_receipt=receipt(CHARGE, amount_micro, kind="charge"),
        refund_receipts=[receipt(f"rc_refund_{i}", a) for i, a in enumerate(refunds)],
        evidence=[evidence(ref, kind) for ref, kind in (evidence_kinds or {}).items()],
    )


def draft(posture: str = Posture.OPERATOR_REVIEW, **fields: Any) -> dict[str, Any]:
    """A drafter's JSON: a plain, acceptable summary unless a test says otherwise."""
    out: dict[str, Any] = {
        "posture": str(posture),
        "summary": "The charge is proven by Vouch's receipt; a person decides the rest.",
        "citations": [CHARGE],
        "open_questions": [],
    }
    out.update(fields)
    return out


def codes(result: Any) -> list[str]:
    return [e["code"] for e in result.errors]


# --- a clean draft, and what finalization gives back --------------------------------------------


def test_a_contest_citing_the_charge_and_consent_evidence_is_valid() -> None:
    final = finalize(
        draft(Posture.CONTEST, citations=[CHARGE, "ev_consent"]),
        material(evidence_kinds={"ev_consent": "consent"}),
    )
    assert final.ok is True
    assert final.errors == []
    assert final.validation() == {"ok": True, "errors": []}


def test_an_invalid_draft_is_kept_as_written_only_flagged() -> None:
    """Finalization never rewrites a draft into something else: it only says what is wrong."""
    written = Draft(posture=Posture.CONTEST, summary="We won this dispute.", citations=["ev_x"])
    final = finalize(written, material())
    assert final.ok is False
    assert final.draft is written
    assert final.draft.posture == Posture.CONTEST
    assert final.draft.summary == "We won this dispute."
    assert final.validation()["ok"] is False


def test_the_validation_kept_on_a_packet_is_a_copy_of_the_errors() -> None:
    final = finalize(draft(summary=""), material())
    kept = final.validation()
    kept["errors"].append({"code": "added_later", "message": "x"})
    assert codes(final) == ["summary_length"]


# --- a language model's JSON: only known fields, with their types --------------------------------


def test_unknown_draft_fields_are_named_sorted() -> None:
    final = finalize(draft(zeta=1, accepted_by_bank=True), material())
    assert final.errors == [
        {
            "code": "draft_unknown_field",
            "message": "Unknown draft fields: ['accepted_by_bank', 'zeta'].",
        }
    ]


def test_a_draft_with_only_known_fields_and_defaults_omitted_is_valid() -> None:
    """`citations`, `open_questions` and `filing_options` may be left out of the JSON."""
    final = finalize({"posture": "operator_review", "summary": "A person must decide."}, material())
    assert final.errors == []
    assert final.draft.citations == []
    assert final.draft.open_questions == []
    assert final.draft.filing_options == {}


@pytest.mark.parametrize("citations", ["rc_charge", {"rc_charge": 1}, None, 7, ["rc_charge", 3]])
def test_citations_that_are_not_a_list_of_strings_are_malformed(citations: Any) -> None:
    final = finalize(draft(citations=citations), material())
    assert final.errors == [{"code": "draft_malformed", "message": "citations must be strings."}]
    assert final.draft.citations == []


@pytest.mark.parametrize("questions", ["Is this a question?", None, [1, 2], [["nested"]]])
def test_open_questions_that_are_not_a_list_of_strings_are_malformed(questions: Any) -> None:
    final = finalize(draft(open_questions=questions), material())
    assert final.errors == [
        {"code": "draft_malformed", "message": "open_questions must be strings."}
    ]
    assert final.draft.open_questions == []


def test_a_list_of_strings_is_taken_as_a_copy() -> None:
    citations = [CHARGE]
    final = finalize(draft(citations=citations, open_questions=["Why?"]), material())
    assert final.ok
    assert final.draft.citations == [CHARGE]
    assert final.draft.open_questions == ["Why?"]
    citations.append("rc_later")
    assert final.draft.citations == [CHARGE]


@pytest.mark.parametrize("options", [["submit"], "submit=true", 1])
def test_filing_options_that_are_not_an_object_are_malformed(options: Any) -> None:
    final = finalize(draft(filing_options=options), material())
    assert final.errors == [
        {"code": "draft_malformed", "message": "filing_options must be an object."}
    ]
    assert final.draft.filing_options == {}


def test_filing_options_given_as_an_object_are_kept() -> None:
    options = {"idempotency_key": "file-once"}
    final = finalize(draft(filing_options=options), material())
    assert final.ok
    assert final.draft.filing_options == {"idempotency_key": "file-once"}


def test_a_draft_without_posture_or_summary_is_refused_for_both() -> None:
    final = finalize({"citations": [CHARGE]}, material())
    assert final.errors == [
        {"code": "posture_unknown", "message": "Unknown posture ''."},
        {"code": "summary_length", "message": f"The summary must be 1-{MAX_SUMMARY} characters."},
    ]
    assert final.draft.posture == ""
    assert final.draft.summary == ""


def test_a_draft_object_is_taken_as_is() -> None:
    written = Draft(posture=Posture.OPERATOR_REVIEW, summary="A person must decide.")
    final = finalize(written, material())
    assert final.ok
    assert final.draft is written


# --- posture, summary and open questions ---------------------------------------------------------


@pytest.mark.parametrize(
    "posture", [Posture.ACCEPT, Posture.NEEDS_MORE_EVIDENCE, Posture.OPERATOR_REVIEW]
)
def test_the_known_postures_that_need_no_refund_or_evidence_are_valid(posture: str) -> None:
    assert finalize(draft(posture), material()).errors == []


@pytest.mark.parametrize("posture", ["ACCEPT", "refunded", "won", "contest "])
def test_an_unknown_posture_is_refused_and_named(posture: str) -> None:
    final = finalize(draft(posture), material())
    assert {"code": "posture_unknown", "message": f"Unknown posture {posture!r}."} in final.errors


@pytest.mark.parametrize("summary", ["", " ", "\n\t  "])
def test_an_empty_or_blank_summary_is_refused(summary: str) -> None:
    final = finalize(draft(summary=summary), material())
    assert final.errors == [
        {"code": "summary_length", "message": "The summary must be 1-4000 characters."}
    ]


def test_a_summary_of_one_character_is_accepted() -> None:
    assert finalize(draft(summary="x"), material()).ok


def test_a_summary_at_the_limit_is_accepted_and_one_over_refused() -> None:
    assert MAX_SUMMARY == 4000
    assert finalize(draft(summary="a" * 4000), material()).ok
    assert codes(finalize(draft(summary="a" * 4001), material())) == ["summary_length"]


def test_open_questions_at_the_count_limit_are_accepted_and_one_more_refused() -> None:
    assert MAX_QUESTIONS == 20
    assert finalize(draft(open_questions=["Why?"] * 20), material()).ok
    final = finalize(draft(open_questions=["Why?"] * 21), material())
    assert final.errors == [
        {"code": "open_questions_length", "message": "Too many or too long open questions."}
    ]


def test_an_open_question_at_the_length_limit_is_accepted_and_one_over_refused() -> None:
    assert MAX_QUESTION == 500
    assert finalize(draft(open_questions=["q" * 500]), material()).ok
    final = finalize(draft(open_questions=["Short?", "q" * 501]), material())
    assert codes(final) == ["open_questions_length"]


# --- citations -------------------------------------------------------------------------------


def test_citing_the_charge_refund_receipts_and_evidence_refs_is_admitted() -> None:
    final = finalize(
        draft(Posture.OPERATOR_REVIEW, citations=[CHARGE, "rc_refund_0", "ev_note"]),
        material(refunds=(1_000_000,), evidence_kinds={"ev_note": "communication"}),
    )
    assert final.errors == []


def test_citations_not_admitted_are_refused_and_listed_in_order() -> None:
    final = finalize(
        draft(citations=["rc_invented", CHARGE, "ev_made_up"]),
        material(evidence_kinds={"ev_real": "delivery"}),
    )
    assert final.errors == [
        {
            "code": "citation_not_admitted",
            "message": "Not admitted receipt ids or evidence refs: ['rc_invented', 'ev_made_up'].",
        }
    ]


def test_a_citation_repeated_is_refused() -> None:
    final = finalize(draft(citations=[CHARGE, CHARGE]), material())
    assert final.errors == [{"code": "citation_repeated", "message": "A citation appears twice."}]


# --- the receipt tree (rule 1) handed to finalize directly -----------------------------------

TREE_MESSAGE = (
    "The receipt tree is incomplete, untrusted or has an undecided refund: the only posture is "
    "needs_more_evidence."
)


@pytest.mark.parametrize(
    "posture",
    [Posture.CONTEST, Posture.OPERATOR_REVIEW, Posture.ACCEPT, Posture.REFUND_ALREADY_SENT],
)
def test_an_incomplete_tree_allows_only_needs_more_evidence(posture: str) -> None:
    final = finalize(draft(posture, citations=[]), material(tree_complete=False, evidence_kinds={}))
    assert {"code": "receipt_tree_incomplete", "message": TREE_MESSAGE} in final.errors


@pytest.mark.parametrize("posture", [Posture.OPERATOR_REVIEW, Posture.ACCEPT])
def test_an_undecided_refund_leg_allows_only_needs_more_evidence(posture: str) -> None:
    final = finalize(draft(posture), material(undecided=("leg_7",)))
    assert final.errors == [{"code": "receipt_tree_incomplete", "message": TREE_MESSAGE}]


@pytest.mark.parametrize(
    ("tree_complete", "undecided"), [(False, ()), (True, ("leg_7",)), (False, ("leg_7",))]
)
def test_needs_more_evidence_is_valid_on_an_incomplete_or_undecided_tree(
    tree_complete: bool, undecided: tuple[str, ...]
) -> None:
    final = finalize(
        draft(Posture.NEEDS_MORE_EVIDENCE, citations=[]),
        material(tree_complete=tree_complete, undecided=undecided),
    )
    assert final.errors == []


# --- prior refunds (rules 2 and 3) -----------------------------------------------------------

REFUND_EXISTS = (
    "A verified refund exists on the charge: the posture is refund_already_sent or operator_review."
)
REFUND_COVERS = "Verified refunds cover the disputed amount: the posture is refund_already_sent."
NOT_PROVEN = "refund_already_sent needs verified, unreversed refunds covering the amount."


@pytest.mark.parametrize("posture", [Posture.CONTEST, Posture.ACCEPT])
def test_a_partial_prior_refund_refuses_contest_and_accept(posture: str) -> None:
    final = finalize(
        draft(posture, citations=[CHARGE, "ev_d"]),
        material(refunds=(4_000_000,), evidence_kinds={"ev_d": "delivery"}),
    )
    assert final.errors == [{"code": "prior_refund_ignored", "message": REFUND_EXISTS}]


@pytest.mark.parametrize("posture", [Posture.OPERATOR_REVIEW, Posture.NEEDS_MORE_EVIDENCE])
def test_a_partial_prior_refund_allows_operator_review_or_needs_more_evidence(
    posture: str,
) -> None:
    final = finalize(draft(posture), material(refunds=(4_000_000, 5_999_999)))
    assert final.errors == []


def test_refund_already_sent_on_refunds_one_micro_short_is_not_proven() -> None:
    final = finalize(
        draft(Posture.REFUND_ALREADY_SENT, citations=["rc_refund_0", "rc_refund_1"]),
        material(refunds=(4_000_000, 5_999_999)),
    )
    assert final.errors == [{"code": "refund_not_proven", "message": NOT_PROVEN}]


def test_refund_already_sent_without_any_refund_is_not_proven() -> None:
    final = finalize(draft(Posture.REFUND_ALREADY_SENT), material())
    assert final.errors == [{"code": "refund_not_proven", "message": NOT_PROVEN}]


def test_refund_already_sent_needs_a_refund_even_when_nothing_is_disputed() -> None:
    """Covering the amount is about verified refunds: none at all proves no refund was sent."""
    final = finalize(draft(Posture.REFUND_ALREADY_SENT), material(amount_micro=0))
    assert codes(final) == ["refund_not_proven"]


def test_refunds_adding_up_to_exactly_the_amount_prove_refund_already_sent() -> None:
    final = finalize(
        draft(
            Posture.REFUND_ALREADY_SENT,
            summary="The cardholder was refunded before the dispute.",
            citations=[CHARGE, "rc_refund_0", "rc_refund_1"],
        ),
        material(refunds=(4_000_000, 6_000_000)),
    )
    assert final.errors == []


def test_a_draft_citing_exactly_the_refund_receipts_proves_refund_already_sent() -> None:
    final = finalize(
        draft(Posture.REFUND_ALREADY_SENT, citations=["rc_refund_0", "rc_refund_1"]),
        material(refunds=(4_000_000, 7_000_000)),
    )
    assert final.errors == []


def test_refund_already_sent_must_cite_every_refund_relied_on() -> None:
    final = finalize(
        draft(Posture.REFUND_ALREADY_SENT, citations=[CHARGE, "rc_refund_1"]),
        material(refunds=(4_000_000, 7_000_000)),
    )
    assert final.errors == [
        {
            "code": "refund_receipts_not_cited",
            "message": "Cite every verified refund receipt relied on.",
        }
    ]


def test_refunds_covering_the_amount_refuse_operator_review() -> None:
    final = finalize(draft(Posture.OPERATOR_REVIEW), material(refunds=(10_000_000,)))
    assert final.errors == [{"code": "prior_refund_ignored", "message": REFUND_COVERS}]


@pytest.mark.parametrize("posture", [Posture.CONTEST, Posture.ACCEPT])
def test_refunds_covering_the_amount_refuse_contest_and_accept_once(posture: str) -> None:
    final = finalize(
        draft(posture, citations=[CHARGE, "ev_c"]),
        material(refunds=(12_000_000,), evidence_kinds={"ev_c": "consent"}),
    )
    assert final.errors == [{"code": "prior_refund_ignored", "message": REFUND_EXISTS}]


def test_needs_more_evidence_stays_valid_when_refunds_cover_the_amount() -> None:
    final = finalize(draft(Posture.NEEDS_MORE_EVIDENCE), material(refunds=(10_000_000,)))
    assert final.errors == []


# --- contest needs the evidence it rests on (rule 4) -----------------------------------------

CONTEST_MESSAGE = (
    "A contest must cite admitted delivery or consent evidence (or the fact the dispute's reason "
    "turns on)."
)


@pytest.mark.parametrize("kind", ["delivery", "consent"])
@pytest.mark.parametrize("reason", ["fraudulent", "duplicate", "general", "credit_not_processed"])
def test_a_contest_citing_delivery_or_consent_evidence_is_valid_for_any_reason(
    kind: str, reason: str
) -> None:
    final = finalize(
        draft(Posture.CONTEST, citations=[CHARGE, "ev_1"]),
        material(evidence_kinds={"ev_1": kind}, reason=reason),
    )
    assert final.errors == []


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("duplicate", "other"),
        ("credit_not_processed", "policy"),
        ("subscription_canceled", "policy"),
        ("product_unacceptable", "communication"),
    ],
)
def test_a_contest_citing_the_fact_its_reason_turns_on_is_valid(reason: str, kind: str) -> None:
    final = finalize(
        draft(Posture.CONTEST, citations=[CHARGE, "ev_1"]),
        material(evidence_kinds={"ev_1": kind}, reason=reason),
    )
    assert final.errors == []


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("fraudulent", "communication"),
        ("fraudulent", "policy"),
        ("general", "other"),
        ("duplicate", "policy"),
        ("product_not_received", "communication"),
    ],
)
def test_a_contest_citing_evidence_its_reason_does_not_turn_on_is_refused(
    reason: str, kind: str
) -> None:
    final = finalize(
        draft(Posture.CONTEST, citations=[CHARGE, "ev_1"]),
        material(evidence_kinds={"ev_1": kind}, reason=reason),
    )
    assert final.errors == [{"code": "contest_without_evidence", "message": CONTEST_MESSAGE}]


def test_a_contest_must_cite_the_evidence_not_just_have_it_admitted() -> None:
    final = finalize(
        draft(Posture.CONTEST, citations=[CHARGE]),
        material(evidence_kinds={"ev_d": "delivery", "ev_c": "consent"}),
    )
    assert codes(final) == ["contest_without_evidence"]


def test_a_contest_citing_an_invented_ref_is_refused_for_that_not_a_crash() -> None:
    final = finalize(
        draft(Posture.CONTEST, citations=[CHARGE, "ev_invented", "ev_d"]),
        material(evidence_kinds={"ev_d": "delivery"}),
    )
    assert codes(final) == ["citation_not_admitted"]


def test_a_contest_citing_only_an_invented_ref_lacks_evidence_too() -> None:
    final = finalize(draft(Posture.CONTEST, citations=["ev_invented"]), material())
    assert codes(final) == ["citation_not_admitted", "contest_without_evidence"]


def test_only_a_contest_needs_cited_evidence() -> None:
    final = finalize(draft(Posture.OPERATOR_REVIEW, citations=[]), material(reason="general"))
    assert final.errors == []


# --- effects a packet cannot prove -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "claimed"),
    [
        ("The response was filed with the bank.", "filed"),
        ("Evidence submitted on time.", "submitted"),
        ("The bank accepted our evidence.", "accepted"),
        ("We won.", "won"),
        ("The dispute is closed.", "closed"),
        ("Settled with the cardholder.", "settled"),
        ("The dispute was reversed.", "reversed"),
        ("FILED yesterday.", "filed"),
    ],
)
def test_a_summary_claiming_an_effect_is_refused_and_names_it(text: str, claimed: str) -> None:
    final = finalize(draft(summary=text), material())
    assert final.errors == [
        {
            "code": "effect_claim",
            "message": f"The packet claims effects it cannot prove: [{claimed!r}].",
        }
    ]


@pytest.mark.parametrize("spelling", ["favour", "favor", "FAVOUR"])
def test_resolved_in_our_favour_is_an_effect_claim(spelling: str) -> None:
    final = finalize(draft(summary=f"It was resolved in our {spelling}."), material())
    assert codes(final) == ["effect_claim"]
    assert f"resolved in our {spelling.lower()}" in final.errors[0]["message"]


def test_several_claims_are_named_once_each_in_order() -> None:
    final = finalize(
        draft(summary="Won and closed.", open_questions=["Filed twice? It was won."]),
        material(),
    )
    assert final.errors == [
        {
            "code": "effect_claim",
            "message": "The packet claims effects it cannot prove: ['closed', 'filed', 'won'].",
        }
    ]


def test_a_claim_in_an_open_question_is_refused() -> None:
    final = finalize(draft(open_questions=["Was it settled already?"]), material())
    assert codes(final) == ["effect_claim"]


@pytest.mark.parametrize(
    "text",
    [
        "A wonderful delivery record.",
        "The buyer's profile was profiled; the claim is unfiled.",
        "Acceptance criteria and a closedown notice.",
        "Unsettled and unresolved questions.",
        "The refund is partial; refunds were sent.",
    ],
)
def test_words_that_only_contain_a_claim_are_not_claims(text: str) -> None:
    assert finalize(draft(summary=text), material()).errors == []


ONLY_REFUND = "Only a refund_already_sent packet may say the charge was refunded."


@pytest.mark.parametrize(
    "posture", [Posture.OPERATOR_REVIEW, Posture.NEEDS_MORE_EVIDENCE, Posture.ACCEPT]
)
def test_only_refund_already_sent_may_say_the_charge_was_refunded(posture: str) -> None:
    final = finalize(draft(posture, summary="Part of the charge was Refunded."), material())
    assert final.errors == [{"code": "effect_claim", "message": ONLY_REFUND}]


def test_refunded_in_an_open_question_is_refused_outside_refund_already_sent() -> None:
    final = finalize(
        draft(open_questions=["Was the rest refunded?"]), material(refunds=(1_000_000,))
    )
    assert final.errors == [{"code": "effect_claim", "message": ONLY_REFUND}]


def test_a_refund_already_sent_packet_may_say_refunded_in_its_questions() -> None:
    final = finalize(
        draft(
            Posture.REFUND_ALREADY_SENT,
            citations=["rc_refund_0"],
            open_questions=["It was refunded in full: accept the dispute?"],
        ),
        material(refunds=(10_000_000,)),
    )
    assert final.errors == []


def test_a_refund_already_sent_packet_still_cannot_claim_other_effects() -> None:
    final = finalize(
        draft(
            Posture.REFUND_ALREADY_SENT,
            summary="Refunded, and the dispute is closed.",
            citations=["rc_refund_0"],
        ),
        material(refunds=(10_000_000,)),
    )
    assert codes(final) == ["effect_claim"]
    assert "['closed']" in final.errors[0]["message"]


def test_every_broken_rule_is_reported_in_one_pass() -> None:
    """The operator sees every problem at once, in the order the rules are checked."""
    final = finalize(
        draft(
            Posture.CONTEST,
            summary="We won; it was refunded.",
            citations=["rc_refund_0", "rc_refund_0", "nope"],
            open_questions=["?"] * 21,
            extra=True,
        ),
        material(refunds=(1_000_000,), tree_complete=False),
    )
    assert codes(final) == [
        "draft_unknown_field",
        "open_questions_length",
        "citation_not_admitted",
        "citation_repeated",
        "receipt_tree_incomplete",
        "prior_refund_ignored",
        "contest_without_evidence",
        "effect_claim",
        "effect_claim",
    ]


# --- Visa CE 3.0 (SPEC §17): a contest may rest on it instead of evidence ------------------------

PRIORS = [
    receipt("rc_prior_a", 5_000_000, kind="charge"),
    receipt("rc_prior_b", 7_000_000, "charge"),
]


def with_ce3(m: DraftMaterial) -> DraftMaterial:
    return DraftMaterial(**{**m.__dict__, "ce3_priors": list(PRIORS)})


def test_a_contest_citing_both_ce3_priors_needs_no_evidence() -> None:
    out = finalize(
        draft(Posture.CONTEST, citations=[CHARGE, "rc_prior_a", "rc_prior_b"]), with_ce3(material())
    )
    assert codes(out) == []


def test_a_contest_citing_one_ce3_prior_is_a_contest_without_evidence() -> None:
    out = finalize(draft(Posture.CONTEST, citations=[CHARGE, "rc_prior_a"]), with_ce3(material()))
    assert codes(out) == ["contest_without_evidence"]


def test_ce3_priors_cited_without_qualifying_material_are_not_admitted() -> None:
    out = finalize(
        draft(Posture.CONTEST, citations=[CHARGE, "rc_prior_a", "rc_prior_b"]), material()
    )
    assert codes(out) == ["citation_not_admitted", "contest_without_evidence"]
