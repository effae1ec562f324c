"""`disputes/packets.py`'s SPEC §17 parts as exact values, for packets built in memory (no
database, no provider): an appeal's content and request, Visa CE 3.0 and the compliance fee in a
response's request, file placeholders at any depth, and an appeal's budget."""

from __future__ import annotations

from typing import Any

from stripe.params import (
    DisputeUpdateParamsEvidence,
    DisputeUpdateParamsEvidenceAppeal,
    DisputeUpdateParamsEvidenceAppealCard,
    DisputeUpdateParamsEvidenceEnhancedEvidence,
)

from disputes.models import Dispute, Packet
from disputes.packets import (
    APPEAL_FILES_MAX,
    appeal_files,
    appeal_mapping,
    appeal_text,
    ce3_claimed,
    evidence_mapping,
    evidence_text,
    evidence_with_file_ids,
    fee_acknowledgement_needed,
    field_max,
    file_placeholders,
    filing_request,
    packet_budget,
    packet_content,
    packet_digest,
)
from tests.disputes.test_packets_rules import POD, POD_SLOT, RECEIPT, a_dispute, a_file, item

CE3 = "visa_compelling_evidence_3"
CE3_EVIDENCE = {
    "disputed_transaction": {
        "customer_account_id": "acct_1",
        "merchandise_or_services": "services",
    },
    "prior_undisputed_transactions": [{"charge": "ch_a"}, {"charge": "ch_b"}],
}
PRIORS = [
    {
        "receipt_id": "rcpt_" + "b" * 64,
        "charge": "ch_a",
        "occurred_at": "2026-01-01T00:00:00Z",
        "age_days": 200,
        "matched": ["customer_account_id", "customer_purchase_ip"],
    },
    {
        "receipt_id": "rcpt_" + "c" * 64,
        "charge": "ch_b",
        "occurred_at": "2026-01-02T00:00:00Z",
        "age_days": 199,
        "matched": ["customer_device_id", "customer_purchase_ip"],
    },
]
QUALIFIED = {"status": "qualified", "priors": PRIORS, "evidence": CE3_EVIDENCE}
NEW = item(
    "chat:1", "communication", "The buyer confirmed receipt", "7", a_file("chat.png", 90, "png")
)
NEW_SLOT = {"ref": "chat:1", "sha256": "7" * 64, "name": "chat.png", "size": 90, "type": "png"}
BASED_ON = {"packet": "pkt_1", "version": 2, "digest": "d" * 64}


def response(*, posture: str = "contest", types: list[str] | None = None, **fields: Any) -> Packet:
    dispute = a_dispute(enhanced_eligibility_types=types or [])
    return Packet(
        dispute=dispute,
        version=1,
        posture=posture,
        summary="Signed for.",
        citations=[RECEIPT],
        evidence_refs=[],
        open_questions=[],
        **fields,
    )


def appeal(*, evidence: list[Any] | None = None, new: list[str] | None = None) -> Packet:
    evidence = evidence if evidence is not None else [POD, NEW]
    return Packet(
        dispute=a_dispute(),
        version=3,
        kind="appeal",
        posture="contest",
        summary=" The bank did not see the chat. ",
        citations=[RECEIPT, *(e["ref"] for e in evidence)],
        evidence_refs=evidence,
        open_questions=[],
        appeal={"based_on": BASED_ON, "new_evidence": new if new is not None else ["chat:1"]},
    )


APPEAL_TEXT = "\n".join(
    [
        "Appeal of dispute dp_test_1.",
        f"Response filed: version 2, packet digest {'d' * 64}.",
        "",
        "The bank did not see the chat.",
        "",
        "Vouch receipts cited:",
        f"- {RECEIPT}",
        "",
        "Evidence admitted since the response:",
        f"- chat:1 (communication, sha256 {'7' * 64}): The buyer confirmed receipt",
    ]
)


def test_a_response_without_round_two_content_keeps_the_content_it_had() -> None:
    packet = response()
    assert set(packet_content(packet)) == {
        "dispute",
        "posture",
        "summary",
        "citations",
        "evidence_refs",
        "open_questions",
        "filing",
    }


def test_kind_appeal_enhanced_and_costs_join_the_content_and_the_digest_when_present() -> None:
    plain = response()
    costs = response(costs={"accept_micro": -1})
    enhanced = response(enhanced={CE3: {"status": "not_qualified"}})
    assert packet_content(costs)["costs"] == {"accept_micro": -1}
    assert packet_content(enhanced)["enhanced"] == {CE3: {"status": "not_qualified"}}
    digests = {packet_digest(p) for p in (plain, costs, enhanced)}
    assert len(digests) == 3
    content = packet_content(appeal())
    assert content["kind"] == "appeal"
    assert content["appeal"] == {"based_on": BASED_ON, "new_evidence": ["chat:1"]}
    assert "kind" not in packet_content(plain)


def test_the_fee_acknowledgement_is_needed_for_a_filed_compliance_response_only() -> None:
    """Visa's and Mastercard's compliance disputes alike; for every response that is filed
    (Stripe refuses a submission without it, whatever Vouch calls the posture)."""
    for program in ("visa_compliance", "mastercard_compliance"):
        compliance = [program]
        assert fee_acknowledgement_needed(response(types=compliance))
        assert fee_acknowledgement_needed(response(types=compliance, posture="refund_already_sent"))
        assert not fee_acknowledgement_needed(response(types=compliance, posture="accept"))
        compliance_appeal = appeal()
        compliance_appeal.dispute = a_dispute(enhanced_eligibility_types=compliance)
        assert not fee_acknowledgement_needed(compliance_appeal)
    assert not fee_acknowledgement_needed(response(types=[CE3]))
    assert not fee_acknowledgement_needed(response())


def test_a_mastercard_compliance_response_sends_mastercards_acknowledgement_once_approved() -> None:
    needed = response(types=["mastercard_compliance"])
    request = filing_request(needed, digest="e" * 64)
    assert request is not None
    assert "enhanced_evidence" not in request["evidence"]
    needed.fee_acknowledged = True
    request = filing_request(needed, digest="e" * 64)
    assert request is not None
    enhanced = request["evidence"]["enhanced_evidence"]
    assert enhanced == {"mastercard_compliance": {"fee_acknowledged": True}}
    assert set(enhanced) <= set(DisputeUpdateParamsEvidenceEnhancedEvidence.__annotations__)
    assert list(request["evidence"]) == sorted(request["evidence"])


def test_a_qualified_contest_sends_ce3_and_says_so_in_its_response_text() -> None:
    packet = response(enhanced={CE3: QUALIFIED})
    mapping = evidence_mapping(packet)
    assert mapping is not None
    assert mapping["enhanced_evidence"] == {CE3: CE3_EVIDENCE}
    assert list(mapping) == sorted(mapping)
    assert ce3_claimed(packet)
    assert evidence_text(packet).splitlines()[6:10] == [
        "",
        "Visa Compelling Evidence 3.0: qualified by two prior undisputed charges:",
        f"- ch_a (200 days before; matching customer_account_id, customer_purchase_ip; receipt "
        f"{PRIORS[0]['receipt_id']})",
        f"- ch_b (199 days before; matching customer_device_id, customer_purchase_ip; receipt "
        f"{PRIORS[1]['receipt_id']})",
    ]


def test_ce3_is_sent_only_for_a_qualified_contest_with_its_evidence() -> None:
    for packet in (
        response(enhanced={CE3: {**QUALIFIED, "status": "not_qualified"}}),
        response(enhanced={CE3: {**QUALIFIED, "evidence": None}}),
        response(enhanced={CE3: QUALIFIED}, posture="refund_already_sent"),
        response(),
    ):
        mapping = evidence_mapping(packet)
        assert mapping is not None
        assert "enhanced_evidence" not in mapping
        assert not ce3_claimed(packet)
        assert "Compelling" not in evidence_text(packet)
    assert not ce3_claimed(response(posture="accept", enhanced={CE3: QUALIFIED}))


def test_the_fee_acknowledgement_is_sent_only_once_approved_and_beside_ce3() -> None:
    needed = response(types=["visa_compliance"], enhanced={CE3: QUALIFIED})
    request = filing_request(needed, digest="e" * 64)
    assert request is not None
    assert request["evidence"]["enhanced_evidence"] == {CE3: CE3_EVIDENCE}
    needed.fee_acknowledged = True
    request = filing_request(needed, digest="e" * 64)
    assert request is not None
    assert request["evidence"]["enhanced_evidence"] == {
        CE3: CE3_EVIDENCE,
        "visa_compliance": {"fee_acknowledged": True},
    }
    assert list(request["evidence"]) == sorted(request["evidence"])
    assert request["metadata"] == {"vouch_packet_digest": "e" * 64}
    unneeded = response(fee_acknowledged=True)
    request = filing_request(unneeded, digest="e" * 64)
    assert request is not None
    assert "enhanced_evidence" not in request["evidence"]
    # The mapping the digest covers never holds the acknowledgement: the approval adds it.
    assert "visa_compliance" not in str(evidence_mapping(needed))


def test_an_appeal_sends_its_reason_and_the_new_evidences_files_only() -> None:
    packet = appeal()
    assert appeal_text(packet) == APPEAL_TEXT
    assert appeal_files(packet) == [NEW_SLOT]
    expected = {
        "appeal": {
            "card": {"reason_for_filing": APPEAL_TEXT, "supporting_files": [{"file": NEW_SLOT}]}
        }
    }
    assert appeal_mapping(packet) == expected
    assert evidence_mapping(packet) == expected
    request = filing_request(packet, digest="f" * 64)
    assert request == {
        "dispute_id": "dp_test_1",
        "evidence": expected,
        "metadata": {"vouch_appeal_digest": "f" * 64},
        "submit": True,
    }


def test_an_appeals_request_has_the_shape_the_pinned_sdk_declares() -> None:
    """Stripe takes `evidence[appeal][card][reason_for_filing|supporting_files]`: the keys the
    request uses, at each level, are the ones the SDK's generated params declare."""
    request = filing_request(appeal(), digest="f" * 64)
    assert request is not None
    evidence = request["evidence"]
    assert set(evidence) <= set(DisputeUpdateParamsEvidence.__annotations__)
    assert set(evidence["appeal"]) == set(DisputeUpdateParamsEvidenceAppeal.__annotations__)
    card = evidence["appeal"]["card"]
    assert set(card) == set(DisputeUpdateParamsEvidenceAppealCard.__annotations__)


def test_an_appeal_without_new_files_sends_no_supporting_files() -> None:
    uncited = appeal(evidence=[POD, NEW])
    uncited.citations = [RECEIPT, "pod:1"]  # the new item not cited
    assert appeal_files(uncited) == []
    assert appeal_mapping(uncited) == {
        "appeal": {"card": {"reason_for_filing": appeal_text(uncited)}}
    }
    old_only = appeal(new=[])
    assert appeal_files(old_only) == []
    assert appeal_text(old_only).endswith(f"- {RECEIPT}")
    no_file = appeal(evidence=[item("chat:1", "communication", "By chat", "7")])
    assert appeal_files(no_file) == []
    assert "- chat:1 (communication, sha256 " in appeal_text(no_file)
    no_receipts = appeal()
    no_receipts.citations = ["chat:1"]
    assert "Vouch receipts cited:" not in appeal_text(no_receipts)


def test_placeholders_are_found_and_replaced_at_any_depth_and_other_values_kept() -> None:
    evidence = {
        "appeal": {
            "card": {
                "reason_for_filing": "why",
                "supporting_files": [{"file": NEW_SLOT}, {"file": POD_SLOT}],
            }
        },
        "enhanced_evidence": {"visa_compliance": {"fee_acknowledged": True}},
        "shipping_documentation": {"file": POD_SLOT},
        "uncategorized_text": "text",
    }
    assert file_placeholders(evidence) == {
        "appeal.card.supporting_files.0": NEW_SLOT,
        "appeal.card.supporting_files.1": POD_SLOT,
        "shipping_documentation": POD_SLOT,
    }
    ids = {"7" * 64: "file_new", "2" * 64: "file_pod"}
    assert evidence_with_file_ids(evidence, ids) == {
        "appeal": {
            "card": {"reason_for_filing": "why", "supporting_files": ["file_new", "file_pod"]}
        },
        "enhanced_evidence": {"visa_compliance": {"fee_acknowledged": True}},
        "shipping_documentation": "file_pod",
        "uncategorized_text": "text",
    }


def test_an_appeals_budget_counts_its_reason_and_at_most_five_files() -> None:
    files = [
        item(f"doc:{n}", "delivery", f"Proof {n}", str(n), a_file(f"p{n}.pdf", 10))
        for n in range(1, 7)
    ]
    five = appeal(evidence=files[:5], new=[f["ref"] for f in files[:5]])
    budget = packet_budget(five)
    assert budget is not None
    assert budget.ok
    assert budget.unplaced == []  # an appeal's files are a list, not fields of their kinds
    reason = "appeal.card.reason_for_filing"
    assert budget.fields == [(reason, len(appeal_text(five)), field_max(reason))]
    assert budget.text_chars == len(appeal_text(five))
    assert [f["field"] for f in budget.files] == [
        f"appeal.card.supporting_files.{n}" for n in range(APPEAL_FILES_MAX)
    ]
    six = appeal(evidence=files, new=[f["ref"] for f in files])
    budget = packet_budget(six)
    assert budget is not None
    assert budget.problems == [
        {
            "limit": "file_slots",
            "refs": ["doc:6"],
            "message": "Vouch files an appeal with at most 5 supporting files; it cites 6: "
            "combine documents into one PDF.",
        }
    ]


def test_a_response_with_ce3_counts_only_its_text_fields_in_the_budget() -> None:
    budget = packet_budget(response(enhanced={CE3: QUALIFIED}))
    assert budget is not None
    assert [name for name, _, _ in budget.fields] == ["uncategorized_text"]


def test_a_dispute_of_another_kind_is_no_compliance_dispute() -> None:
    dispute = Dispute(enhanced_eligibility_types=None)
    packet = Packet(dispute=dispute, posture="contest", kind="response")
    assert not fee_acknowledgement_needed(packet)
