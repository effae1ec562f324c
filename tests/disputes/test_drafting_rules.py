"""The default drafter (SPEC §9 step 5) on its own: what the RuleDrafter writes for each rule, each
dispute reason and each kind of admitted material — the posture, the summary with its amounts in
USD, the receipts and evidence it cites, the evidence it asks for. Pure: the material is built by
hand, no database. Every draft it writes must also pass finalization (step 6) untouched."""

from __future__ import annotations

from typing import Any

import pytest

from disputes.drafting import (
    DEFAULT_EVIDENCE,
    Draft,
    DraftMaterial,
    ReceiptFact,
    RuleDrafter,
    drafter_from_settings,
    evidence_called_for,
    usd,
)
from disputes.evidence import AdmittedEvidence
from disputes.finalization import finalize
from disputes.models import Posture

AMOUNT = 10_000_000  # $10.00 disputed
CHARGE = "rc_charge"


def receipt(rid: str, amount_micro: int, kind: str = "refund") -> ReceiptFact:
    return ReceiptFact(
        id=rid, kind=kind, amount_micro=amount_micro, provider_object_id=f"obj_{rid}", detail={}
    )


def evidence(ref: str, kind: str) -> AdmittedEvidence:
    return AdmittedEvidence(ref=ref, sha256="cd" * 32, kind=kind, summary=f"{kind} proof")


def material(
    *,
    refunds: tuple[int, ...] = (),
    evidence_items: tuple[tuple[str, str], ...] = (),
    tree_complete: bool = True,
    tree_problems: tuple[str, ...] = (),
    undecided: tuple[str, ...] = (),
    reason: str = "fraudulent",
    amount_micro: int = AMOUNT,
    charge: bool = True,
) -> DraftMaterial:
    """Material for a dispute on charge `ch_1`: refund receipts `rc_refund_<i>` of the given
    amounts, and evidence as (ref, kind) pairs in the order admitted."""
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
        tree_problems=list(tree_problems),
        undecided_refund_legs=list(undecided),
        charge_receipt=receipt(CHARGE, amount_micro, kind="charge") if charge else None,
        refund_receipts=[receipt(f"rc_refund_{i}", a) for i, a in enumerate(refunds)],
        evidence=[evidence(ref, kind) for ref, kind in evidence_items],
    )


def drafted(m: DraftMaterial) -> Draft:
    """The rule drafter's draft, checked to pass finalization as written."""
    out = RuleDrafter().draft(m)
    assert finalize(out, m).errors == []
    return out


# --- amounts in USD text, and the material's facts ---------------------------------------------


@pytest.mark.parametrize(
    ("micro", "text"),
    [
        (0, "$0.00"),
        (10_000, "$0.01"),
        (1_000_000, "$1.00"),
        (4_000_000, "$4.00"),
        (123_450_000, "$123.45"),
        (1_234_560_000, "$1,234.56"),
        (999_999_990_000, "$999,999.99"),
    ],
)
def test_amounts_read_as_dollars_and_cents_with_thousands_separators(micro: int, text: str) -> None:
    assert usd(micro) == text


def test_the_material_adds_up_its_refunds_and_lists_its_receipts_charge_first() -> None:
    m = material(refunds=(1_500_000, 2_500_000))
    assert m.refunded_micro == 4_000_000
    assert m.receipt_ids == [CHARGE, "rc_refund_0", "rc_refund_1"]
    bare = material(charge=False)
    assert bare.refunded_micro == 0
    assert bare.receipt_ids == []


@pytest.mark.parametrize(
    ("reason", "called_for"),
    [
        ("fraudulent", [{"consent"}]),
        ("unrecognized", [{"consent"}]),
        ("debit_not_authorized", [{"consent"}]),
        ("product_not_received", [{"delivery"}]),
        ("product_unacceptable", [{"delivery", "communication"}]),
        ("credit_not_processed", [{"policy"}]),
        ("subscription_canceled", [{"policy"}]),
        ("duplicate", [{"other"}]),
        ("general", [{"delivery"}, {"consent"}]),
        ("bank_cannot_process", [{"delivery"}, {"consent"}]),
    ],
)
def test_each_reason_calls_for_the_evidence_the_spec_names(
    reason: str, called_for: list[set[str]]
) -> None:
    assert [set(kinds) for kinds in evidence_called_for(reason)] == called_for


def test_general_and_unknown_reasons_call_for_delivery_or_consent() -> None:
    assert evidence_called_for("general") == DEFAULT_EVIDENCE
    assert evidence_called_for("") == DEFAULT_EVIDENCE


def test_the_default_drafter_is_the_rules_and_a_setting_can_name_another(settings: Any) -> None:
    default = drafter_from_settings()
    assert isinstance(default, RuleDrafter)
    assert default.name == "rules"
    settings.DISPUTES_DRAFTER = f"{__name__}.AlwaysAccept"
    other = drafter_from_settings()
    assert isinstance(other, AlwaysAccept)


class AlwaysAccept:
    name = "always-accept"

    def draft(self, material: DraftMaterial) -> dict[str, Any]:
        return {"posture": "accept", "summary": "Accept."}


def test_a_draft_starts_with_no_citations_questions_or_filing_options() -> None:
    one = Draft(posture=Posture.ACCEPT, summary="Accept.")
    two = Draft(posture=Posture.ACCEPT, summary="Accept.")
    assert (one.citations, one.open_questions, one.filing_options) == ([], [], {})
    one.citations.append(CHARGE)
    assert two.citations == []


# --- rule 1: incomplete or untrusted tree, or an undecided refund --------------------------------

UNPROVEN = (
    "Vouch cannot yet prove the history of charge ch_1: its receipt tree is incomplete, untrusted "
    "here, or a refund on it is undecided."
)


def test_an_incomplete_tree_needs_more_evidence_and_asks_about_each_problem() -> None:
    out = drafted(
        material(
            tree_complete=False,
            tree_problems=(
                "the charge receipt is missing",
                "rc_x is from local development",
            ),
            refunds=(10_000_000,),
            evidence_items=(("ev_c", "consent"),),
        )
    )
    assert out.posture == Posture.NEEDS_MORE_EVIDENCE
    assert out.summary == UNPROVEN
    assert out.citations == []
    assert out.open_questions == [
        "Receipt tree: the charge receipt is missing",
        "Receipt tree: rc_x is from local development",
    ]


def test_an_incomplete_tree_without_a_named_problem_still_asks_a_question() -> None:
    out = drafted(material(tree_complete=False))
    assert out.posture == Posture.NEEDS_MORE_EVIDENCE
    assert out.open_questions == ["The receipt tree could not be resolved."]


def test_an_undecided_refund_leg_on_a_complete_tree_needs_more_evidence() -> None:
    out = drafted(material(undecided=("leg_a", "leg_b"), refunds=(10_000_000,)))
    assert out.posture == Posture.NEEDS_MORE_EVIDENCE
    assert out.summary == UNPROVEN
    assert out.citations == []
    assert out.open_questions == [
        "Refund leg leg_a on this charge is not decided yet: wait for its verification.",
        "Refund leg leg_b on this charge is not decided yet: wait for its verification.",
    ]


def test_tree_problems_come_before_undecided_legs_in_the_questions() -> None:
    out = drafted(material(tree_complete=False, tree_problems=("untrusted",), undecided=("leg_a",)))
    assert out.open_questions == [
        "Receipt tree: untrusted",
        "Refund leg leg_a on this charge is not decided yet: wait for its verification.",
    ]


# --- rules 2 and 3: prior refunds ------------------------------------------------------------


def test_refunds_covering_exactly_the_amount_give_refund_already_sent_citing_them() -> None:
    out = drafted(material(refunds=(4_000_000, 6_000_000), evidence_items=(("ev_c", "consent"),)))
    assert out.posture == Posture.REFUND_ALREADY_SENT
    assert out.summary == (
        "Verified refunds of $10.00 on charge ch_1 already cover the disputed $10.00; the "
        "cardholder's money was sent back before this dispute."
    )
    assert out.citations == [CHARGE, "rc_refund_0", "rc_refund_1"]
    assert out.open_questions == []


def test_refunds_beyond_the_amount_give_refund_already_sent_with_both_sums() -> None:
    out = drafted(material(refunds=(12_345_670_000,), amount_micro=1_000_000_000))
    assert out.posture == Posture.REFUND_ALREADY_SENT
    assert "Verified refunds of $12,345.67 on charge ch_1" in out.summary
    assert "the disputed $1,000.00;" in out.summary


def test_refund_already_sent_without_a_charge_receipt_cites_exactly_the_refunds() -> None:
    out = RuleDrafter().draft(material(refunds=(10_000_000,), charge=False))
    assert out.posture == Posture.REFUND_ALREADY_SENT
    assert out.citations == ["rc_refund_0"]


def test_a_refund_one_micro_short_gives_operator_review_naming_what_is_left() -> None:
    out = drafted(material(refunds=(4_000_000, 5_990_000), evidence_items=(("ev_c", "consent"),)))
    assert out.posture == Posture.OPERATOR_REVIEW
    assert out.summary == (
        "Verified refunds of $9.99 cover part of the disputed $10.00 on charge ch_1; a person "
        "must decide how to answer for the rest."
    )
    assert out.citations == [CHARGE, "rc_refund_0", "rc_refund_1"]
    assert out.open_questions == [
        "$0.01 of the disputed amount is not covered by a verified refund: contest it, refund it "
        "or accept the dispute?"
    ]


# --- rule 4: the evidence the reason calls for is admitted -> contest ---------------------------


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("fraudulent", "consent"),
        ("unrecognized", "consent"),
        ("debit_not_authorized", "consent"),
        ("product_not_received", "delivery"),
        ("credit_not_processed", "policy"),
        ("subscription_canceled", "policy"),
        ("duplicate", "other"),
        ("general", "delivery"),
        ("general", "consent"),
    ],
)
def test_the_evidence_a_reason_calls_for_gives_contest_citing_it(reason: str, kind: str) -> None:
    out = drafted(
        material(reason=reason, evidence_items=(("ev_note", "communication"), ("ev_1", kind)))
    )
    assert out.posture == Posture.CONTEST
    assert out.citations == [CHARGE, "ev_1"]
    assert out.summary == (
        f"Charge ch_1 of $10.00 is proven by Vouch's receipt, and the dispute's reason ({reason}) "
        f"is answered by admitted {kind} evidence."
    )
    assert out.open_questions == []


def test_product_unacceptable_contests_only_with_delivery_and_communication() -> None:
    both = drafted(
        material(
            reason="product_unacceptable",
            evidence_items=(("ev_msg", "communication"), ("ev_c", "consent"), ("ev_d", "delivery")),
        )
    )
    assert both.posture == Posture.CONTEST
    assert both.citations == [CHARGE, "ev_msg", "ev_d"]
    assert both.summary.endswith(
        "reason (product_unacceptable) is answered by admitted communication and delivery evidence."
    )
    half = drafted(material(reason="product_unacceptable", evidence_items=(("ev_d", "delivery"),)))
    assert half.posture == Posture.OPERATOR_REVIEW


@pytest.mark.parametrize(
    ("reason", "admitted"),
    [
        ("fraudulent", (("ev_c", "consent"),)),
        ("product_unacceptable", (("ev_d", "delivery"), ("ev_m", "communication"))),
    ],
)
def test_exactly_the_evidence_called_for_and_nothing_else_gives_contest(
    reason: str, admitted: tuple[tuple[str, str], ...]
) -> None:
    out = drafted(material(reason=reason, evidence_items=admitted))
    assert out.posture == Posture.CONTEST
    assert out.citations == [CHARGE, *(ref for ref, _ in admitted)]


def test_every_admitted_item_of_the_kind_called_for_is_cited_in_admission_order() -> None:
    out = drafted(
        material(
            reason="fraudulent",
            evidence_items=(("ev_c2", "consent"), ("ev_d", "delivery"), ("ev_c1", "consent")),
        )
    )
    assert out.citations == [CHARGE, "ev_c2", "ev_c1"]


def test_a_general_reason_with_delivery_and_consent_cites_the_delivery() -> None:
    """The first alternative the reason calls for (delivery) wins; consent is not cited too."""
    out = drafted(
        material(reason="general", evidence_items=(("ev_c", "consent"), ("ev_d", "delivery")))
    )
    assert out.posture == Posture.CONTEST
    assert out.citations == [CHARGE, "ev_d"]
    assert out.summary.endswith("is answered by admitted delivery evidence.")


def test_a_contest_without_a_charge_receipt_cites_only_the_evidence() -> None:
    out = RuleDrafter().draft(material(charge=False, evidence_items=(("ev_c", "consent"),)))
    assert out.posture == Posture.CONTEST
    assert out.citations == ["ev_c"]


# --- rule 5: otherwise operator_review, naming the missing evidence ------------------------------


@pytest.mark.parametrize(
    ("reason", "admitted", "wanted"),
    [
        ("fraudulent", (("ev_d", "delivery"),), "consent"),
        ("product_not_received", (("ev_c", "consent"),), "delivery"),
        ("product_unacceptable", (("ev_d", "delivery"),), "communication and delivery"),
        ("duplicate", (), "other"),
        ("general", (("ev_p", "policy"),), "delivery or consent"),
    ],
)
def test_missing_evidence_gives_operator_review_asking_for_what_the_reason_calls_for(
    reason: str, admitted: tuple[tuple[str, str], ...], wanted: str
) -> None:
    out = drafted(material(reason=reason, evidence_items=admitted))
    assert out.posture == Posture.OPERATOR_REVIEW
    assert out.citations == [CHARGE]
    assert out.summary == (
        "Charge ch_1 of $10.00 is proven by Vouch's receipt, but no admitted evidence answers the "
        f"dispute's reason ({reason})."
    )
    assert out.open_questions == [
        f"Missing evidence: {wanted} (the reason `{reason}` calls for it). Admit it, or decide to "
        "accept the dispute."
    ]


def test_missing_evidence_without_a_charge_receipt_cites_nothing() -> None:
    out = RuleDrafter().draft(material(charge=False))
    assert out.posture == Posture.OPERATOR_REVIEW
    assert out.citations == []


@pytest.mark.parametrize(
    "m",
    [
        material(tree_complete=False),
        material(refunds=(10_000_000,)),
        material(refunds=(1_000_000,)),
        material(evidence_items=(("ev_c", "consent"),)),
        material(),
    ],
)
def test_the_rule_drafter_never_chooses_accept(m: DraftMaterial) -> None:
    assert drafted(m).posture != Posture.ACCEPT


# --- Visa CE 3.0 (SPEC §17): the fact a fraud contest may rest on --------------------------------

PRIORS = [
    receipt("rc_prior_a", 5_000_000, kind="charge"),
    receipt("rc_prior_b", 7_000_000, "charge"),
]


def with_ce3(m: DraftMaterial) -> DraftMaterial:
    return DraftMaterial(**{**m.__dict__, "ce3_priors": list(PRIORS)})


def test_the_material_lists_the_ce3_priors_after_the_refunds() -> None:
    m = with_ce3(material(refunds=(1_000_000,)))
    assert m.receipt_ids == [CHARGE, "rc_refund_0", "rc_prior_a", "rc_prior_b"]
    assert m.refunded_micro == 1_000_000
    assert material().ce3_priors == []


def test_ce3_without_the_evidence_called_for_gives_contest_citing_the_priors() -> None:
    out = drafted(with_ce3(material(reason="fraudulent")))
    assert out.posture == Posture.CONTEST
    assert out.citations == [CHARGE, "rc_prior_a", "rc_prior_b"]
    assert out.summary == (
        "Charge ch_1 of $10.00 is proven by Vouch's receipt, and Visa Compelling Evidence 3.0 "
        "answers the dispute's reason (fraudulent): two earlier undisputed charges of the same "
        "buyer on the same card, shown by Vouch's receipts."
    )
    assert out.open_questions == []


def test_ce3_without_a_charge_receipt_cites_only_the_priors() -> None:
    out = RuleDrafter().draft(with_ce3(material(charge=False)))
    assert out.citations == ["rc_prior_a", "rc_prior_b"]


def test_the_evidence_called_for_comes_before_ce3() -> None:
    out = drafted(with_ce3(material(evidence_items=(("doc:1", "consent"),))))
    assert out.posture == Posture.CONTEST
    assert out.citations == [CHARGE, "doc:1"]


def test_a_verified_partial_refund_comes_before_ce3() -> None:
    out = drafted(with_ce3(material(refunds=(1_000_000,))))
    assert out.posture == Posture.OPERATOR_REVIEW
