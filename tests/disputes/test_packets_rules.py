"""`disputes/packets.py` as exact values (issue 24 acceptance 3): what a packet's content, digest,
filing request, response text, handoff and budget are, byte for byte, for packets built in memory
(no database, no provider), so that any change to what is sent or digested is seen. The last test
files such a packet at the sandbox."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest
import rfc8785

from disputes.models import Dispute, Packet
from disputes.packets import (
    Budget,
    canonical_digest,
    dispute_facts,
    evidence_mapping,
    evidence_text,
    evidence_with_file_ids,
    field_max,
    file_placeholders,
    filing_request,
    handoff,
    is_fileable,
    packet_budget,
    packet_content,
    packet_digest,
    tracking_numbers,
)

RECEIPT = "rcpt_" + "a" * 64
DEADLINE = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def a_dispute(**overrides: Any) -> Dispute:
    fields: dict[str, Any] = {
        "provider": "stripe",
        "provider_dispute_id": "dp_test_1",
        "charge_id": "ch_test_1",
        "amount_micro": 25_000_000,
        "currency": "usd",
        "reason": "product_not_received",
        "response_deadline": DEADLINE,
        **overrides,
    }
    return Dispute(**fields)


def item(ref: str, kind: str, summary: str, digit: str, file: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"ref": ref, "sha256": digit * 64, "kind": kind, "summary": summary}
    if file is not None:
        out["file"] = file
    return out


def a_file(name: str, size: int | None, type_: str = "pdf") -> dict[str, Any]:
    return {"name": name, "size": size, "type": type_}


TRACK = item("track:1", "delivery", "Tracking: 1Z999AA10123456784, 9400110898825022579493", "1")
POD = item("pod:1", "delivery", "Signed for at the door", "2", a_file("pod.pdf", 1200))
POLICY = item("policy:1", "policy", "Refunds within 30 days.", "3")
MAIL = item(
    "mail:1", "communication", "Buyer confirmed receipt", "5", a_file("mail.png", 800, "png")
)
UNCITED = item("note:9", "other", "Not cited", "9", a_file("note.pdf", 50))


def a_packet(
    *,
    posture: str = "contest",
    summary: str = "  The parcel was delivered and signed for.\n",
    citations: list[str] | None = None,
    evidence: list[Any] | None = None,
    open_questions: list[str] | None = None,
    dispute: Dispute | None = None,
) -> Packet:
    return Packet(
        dispute=dispute or a_dispute(),
        version=1,
        posture=posture,
        summary=summary,
        citations=citations if citations is not None else [],
        evidence_refs=evidence if evidence is not None else [],
        open_questions=open_questions if open_questions is not None else [],
    )


def the_packet() -> Packet:
    """A contest citing a receipt, a tracking item (no file) before a delivery file, a policy and
    an e-mail file; one more file admitted and not cited."""
    return a_packet(
        citations=[RECEIPT, "track:1", "pod:1", "policy:1", "mail:1"],
        evidence=[TRACK, POD, POLICY, MAIL, UNCITED],
        open_questions=["Was the signature the buyer's?"],
    )


POD_SLOT = {"ref": "pod:1", "sha256": "2" * 64, "name": "pod.pdf", "size": 1200, "type": "pdf"}
MAIL_SLOT = {"ref": "mail:1", "sha256": "5" * 64, "name": "mail.png", "size": 800, "type": "png"}
TEXT = "\n".join(
    [
        "Posture: contest",
        "",
        "The parcel was delivered and signed for.",
        "",
        "Vouch receipts cited:",
        f"- {RECEIPT}",
        "",
        "Evidence cited:",
        f"- track:1 (delivery, sha256 {'1' * 64}): Tracking: 1Z999AA10123456784, "
        "9400110898825022579493",
        f"- pod:1 (delivery, sha256 {'2' * 64}): Signed for at the door [file pod.pdf, sent as "
        "shipping_documentation]",
        f"- policy:1 (policy, sha256 {'3' * 64}): Refunds within 30 days.",
        f"- mail:1 (communication, sha256 {'5' * 64}): Buyer confirmed receipt [file mail.png, "
        "sent as customer_communication]",
    ]
)
MAPPING = {
    "customer_communication": {"file": MAIL_SLOT},
    "refund_policy_disclosure": "Refunds within 30 days.",
    "shipping_documentation": {"file": POD_SLOT},
    "shipping_tracking_number": "1Z999AA10123456784, 9400110898825022579493",
    "uncategorized_text": TEXT,
}
FACTS = {
    "provider": "stripe",
    "dispute_id": "dp_test_1",
    "charge_id": "ch_test_1",
    "amount_micro": 25_000_000,
    "currency": "usd",
    "reason": "product_not_received",
    "response_deadline": "2026-03-04T05:06:07Z",
}


def placed_refs(packet: Packet) -> dict[str, str]:
    """The file field each cited file was placed in: field -> ref."""
    slots = file_placeholders(evidence_mapping(packet) or {})
    return {name: slot["ref"] for name, slot in slots.items()}


def sha256_of(value: Any) -> str:
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


# --- the dispute and the digest ------------------------------------------------------------------


def test_the_dispute_facts_are_exactly_the_normalized_fields_with_a_z_deadline() -> None:
    assert dispute_facts(a_dispute()) == FACTS
    assert dispute_facts(a_dispute(response_deadline=None))["response_deadline"] is None


def test_the_canonical_digest_is_the_sha256_of_rfc8785_json() -> None:
    expected = hashlib.sha256(b'{"a":[1,"x"],"b":1}').hexdigest()
    assert canonical_digest({"b": 1, "a": [1, "x"]}) == expected


def test_the_content_is_posture_summary_citations_evidence_questions_dispute_and_mapping() -> None:
    packet = the_packet()
    content = {
        "dispute": FACTS,
        "posture": "contest",
        "summary": "  The parcel was delivered and signed for.\n",
        "citations": [RECEIPT, "track:1", "pod:1", "policy:1", "mail:1"],
        "evidence_refs": [TRACK, POD, POLICY, MAIL, UNCITED],
        "open_questions": ["Was the signature the buyer's?"],
        "filing": MAPPING,
    }
    assert packet_content(packet) == content
    assert packet_digest(packet) == sha256_of(content)


def test_approval_and_filing_state_leave_the_digest_alone_and_content_changes_it() -> None:
    packet = the_packet()
    before = packet_digest(packet)
    packet.approval_status, packet.approved_digest = "approved", before
    packet.filing_status, packet.filing_key = "awaiting_readback", "key-1"
    assert packet_digest(packet) == before
    packet.evidence_refs = [TRACK, {**POD, "sha256": "7" * 64}, POLICY, MAIL, UNCITED]
    assert packet_digest(packet) != before  # another file, another digest


# --- tracking numbers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("summary", "numbers"),
    [
        ("1Z999AA10123456784", ["1Z999AA10123456784"]),
        (
            "Tracking: 9400110898825022579493, 781234567890",
            ["9400110898825022579493", "781234567890"],
        ),
        ("tracking #  AB12345678 ,CD87654321 ", ["AB12345678", "CD87654321"]),
        ("Signed for at the door", []),
        ("1234567", []),  # too short to be a tracking number
    ],
)
def test_a_delivery_summary_is_tracking_numbers_only_when_it_is_nothing_else(
    summary: str, numbers: list[str]
) -> None:
    assert tracking_numbers(summary) == numbers


# --- which evidence is sent, and where ------------------------------------------------------------


def test_only_contest_and_refund_already_sent_are_fileable() -> None:
    assert is_fileable(a_packet(posture="contest")) is True
    assert is_fileable(a_packet(posture="refund_already_sent")) is True
    for posture in ("accept", "operator_review", "needs_more_evidence"):
        packet = a_packet(posture=posture, citations=["pod:1"], evidence=[POD])
        assert is_fileable(packet) is False
        assert evidence_mapping(packet) is None
        assert filing_request(packet, digest="d" * 64) is None
        assert packet_budget(packet) is None


def test_the_mapping_sends_only_cited_evidence_each_in_its_stripe_field() -> None:
    assert evidence_mapping(the_packet()) == MAPPING
    assert list(evidence_mapping(the_packet()) or {}) == sorted(MAPPING)


def test_a_cited_item_without_a_file_before_a_cited_file_does_not_stop_the_file() -> None:
    """Issue 24: a prose item placed before a file must not keep the file (or any after it) from
    being sent."""
    prose = item("note:1", "other", "The buyer signed", "6")
    packet = a_packet(citations=["note:1", "pod:1", "mail:1"], evidence=[prose, POD, MAIL])
    mapping = evidence_mapping(packet) or {}
    assert file_placeholders(mapping) == {
        "customer_communication": MAIL_SLOT,
        "shipping_documentation": POD_SLOT,
    }


def test_each_kind_takes_its_file_fields_in_order_and_a_file_with_none_left_is_unplaced() -> None:
    consents = [
        item(f"consent:{n}", "consent", "Checkbox ticked", str(n), a_file(f"c{n}.pdf", 10))
        for n in range(1, 5)
    ]
    packet = a_packet(citations=[c["ref"] for c in consents], evidence=consents)
    placed = placed_refs(packet)
    assert placed == {
        "customer_signature": "consent:1",
        "customer_communication": "consent:2",
        "uncategorized_file": "consent:3",
    }
    budget = packet_budget(packet)
    assert budget is not None
    assert budget.unplaced == ["consent:4"]


def test_a_file_with_no_field_left_does_not_stop_the_files_after_it() -> None:
    others = [
        item(f"other:{n}", "other", "Invoice", str(n), a_file(f"o{n}.pdf", 10)) for n in (1, 2, 3)
    ]
    consent = item("consent:1", "consent", "Checkbox ticked", "8", a_file("c.pdf", 10))
    evidence = [*others, consent]
    packet = a_packet(citations=[e["ref"] for e in evidence], evidence=evidence)
    placed = placed_refs(packet)
    assert placed == {"uncategorized_file": "other:1", "customer_signature": "consent:1"}
    budget = packet_budget(packet)
    assert budget is not None
    assert budget.unplaced == ["other:2", "other:3"]
    assert budget.problems == [
        {
            "limit": "file_slots",
            "refs": ["other:2", "other:3"],
            "message": "No file field is left for other:2, other:3: combine the documents of one "
            "kind into one PDF.",
        }
    ]
    assert budget.ok is False


def test_a_kind_without_file_fields_of_its_own_takes_uncategorized_file() -> None:
    video = item("video:1", "video", "Doorbell camera", "4", a_file("v.pdf", 10))
    packet = a_packet(citations=["video:1"], evidence=[video])
    assert file_placeholders(evidence_mapping(packet) or {}) == {
        "uncategorized_file": {"ref": "video:1", "sha256": "4" * 64, **a_file("v.pdf", 10)}
    }


def test_uncited_and_malformed_evidence_is_never_sent() -> None:
    packet = a_packet(citations=["pod:1"], evidence=["junk", UNCITED, POD])
    mapping = evidence_mapping(packet) or {}
    assert file_placeholders(mapping) == {"shipping_documentation": POD_SLOT}
    assert "note:9" not in mapping["uncategorized_text"]


def test_policies_and_tracking_numbers_of_several_items_are_joined() -> None:
    second_policy = item("policy:2", "policy", "Restocking fee 10%.", "4")
    second_track = item("track:2", "delivery", "781234567890", "6")
    evidence = [TRACK, POLICY, second_track, second_policy]
    packet = a_packet(citations=[e["ref"] for e in evidence], evidence=evidence)
    mapping = evidence_mapping(packet) or {}
    assert mapping["refund_policy_disclosure"] == "Refunds within 30 days.\n\nRestocking fee 10%."
    assert mapping["shipping_tracking_number"] == (
        "1Z999AA10123456784, 9400110898825022579493, 781234567890"
    )


# --- the response text ---------------------------------------------------------------------------


def test_the_response_text_is_exactly_the_packets_content() -> None:
    assert evidence_text(the_packet()) == TEXT


def test_a_response_citing_nothing_is_its_posture_and_summary() -> None:
    packet = a_packet(summary=" Nothing more. ", citations=[], evidence=[POD])
    assert evidence_text(packet) == "Posture: contest\n\nNothing more."


# --- the request and the handoff -----------------------------------------------------------------


def test_the_filing_request_is_the_mapping_the_digest_and_submit() -> None:
    assert filing_request(the_packet(), digest="d" * 64) == {
        "dispute_id": "dp_test_1",
        "evidence": MAPPING,
        "metadata": {"vouch_packet_digest": "d" * 64},
        "submit": True,
    }


def test_files_are_sent_as_the_provider_file_ids_of_their_sha256_and_text_as_text() -> None:
    sent = evidence_with_file_ids(MAPPING, {"2" * 64: "file_pod", "5" * 64: "file_mail"})
    assert sent == {
        "customer_communication": "file_mail",
        "refund_policy_disclosure": "Refunds within 30 days.",
        "shipping_documentation": "file_pod",
        "shipping_tracking_number": "1Z999AA10123456784, 9400110898825022579493",
        "uncategorized_text": TEXT,
    }
    assert file_placeholders(MAPPING) == {
        "customer_communication": MAIL_SLOT,
        "shipping_documentation": POD_SLOT,
    }


def test_the_handoff_of_a_fileable_packet_is_the_request_its_digest_and_the_options() -> None:
    request = {
        "dispute_id": "dp_test_1",
        "evidence": MAPPING,
        "metadata": {"vouch_packet_digest": "d" * 64},
        "submit": True,
    }
    assert handoff(the_packet(), digest="d" * 64, options={"idempotency_key": "k-1"}) == {
        "provider": "stripe",
        "operation": "dispute.file",
        "request": request,
        "request_digest": sha256_of(request),
        "options": {"idempotency_key": "k-1"},
    }


def test_the_handoff_of_a_packet_that_is_not_filed_says_why_and_has_no_request() -> None:
    assert handoff(a_packet(posture="operator_review"), digest="d" * 64, options={}) == {
        "provider": "stripe",
        "operation": None,
        "request": None,
        "request_digest": None,
        # Issue 41: in words (the posture's code stays in the packet's own field).
        "not_filed": "Nothing is sent to Stripe for “A person decides”: Vouch files only "
        "“Contest the dispute” and “Refund already sent”.",
    }


# --- the budget ----------------------------------------------------------------------------------


def test_the_budget_counts_every_text_field_longest_first_and_every_file() -> None:
    expected_fields = [
        ("uncategorized_text", len(TEXT), 20_000),
        ("shipping_tracking_number", 42, 5000),
        ("refund_policy_disclosure", 23, 20_000),
    ]
    assert packet_budget(the_packet()) == Budget(
        text_chars=len(TEXT) + 42 + 23,
        text_max=150_000,
        fields=expected_fields,
        file_bytes=2000,
        files_max=4_500_000,
        files=[
            {"field": "customer_communication", **MAIL_SLOT},
            {"field": "shipping_documentation", **POD_SLOT},
        ],
        unplaced=[],
        problems=[],
    )
    assert Budget(0, 1, [], 0, 1, [], []).ok is True


def test_a_short_field_is_held_to_the_lower_of_its_own_bound_and_the_setting(settings: Any) -> None:
    assert (field_max("uncategorized_text"), field_max("shipping_tracking_number")) == (
        20_000,
        5000,
    )
    settings.DISPUTES_EVIDENCE_FIELD_MAX_CHARS = 3000
    assert (field_max("uncategorized_text"), field_max("shipping_tracking_number")) == (3000, 3000)


def test_a_file_without_a_recorded_size_counts_no_bytes() -> None:
    unsized = item("pod:2", "delivery", "Signed", "8", a_file("pod2.pdf", None))
    budget = packet_budget(a_packet(citations=["pod:2"], evidence=[unsized]))
    assert budget is not None
    assert budget.file_bytes == 0


def test_all_text_at_its_limit_passes_and_one_character_over_is_named(settings: Any) -> None:
    total = len(TEXT) + 42 + 23
    settings.DISPUTES_EVIDENCE_TEXT_MAX_CHARS = total
    assert (packet_budget(the_packet()) or Budget(0, 0, [], 0, 0, [], [], [{}])).ok is True
    settings.DISPUTES_EVIDENCE_TEXT_MAX_CHARS = total - 1
    budget = packet_budget(the_packet())
    assert budget is not None
    assert budget.problems == [
        {
            "limit": "text_total",
            "message": f"All evidence text is {total:,} characters; at most {total - 1:,} are "
            "sent.",
        }
    ]


def test_a_field_at_its_limit_passes_and_one_character_over_is_named(settings: Any) -> None:
    settings.DISPUTES_EVIDENCE_FIELD_MAX_CHARS = len(TEXT)
    assert (packet_budget(the_packet()) or Budget(0, 0, [], 0, 0, [], [], [{}])).ok is True
    settings.DISPUTES_EVIDENCE_FIELD_MAX_CHARS = len(TEXT) - 1
    budget = packet_budget(the_packet())
    assert budget is not None
    assert budget.problems == [
        {
            "limit": "text_field",
            "field": "uncategorized_text",
            "message": f"uncategorized_text is {len(TEXT):,} characters; at most "
            f"{len(TEXT) - 1:,}.",
        }
    ]
    assert budget.ok is False


def test_files_at_their_limit_pass_and_one_byte_over_is_named(settings: Any) -> None:
    settings.DISPUTES_EVIDENCE_FILES_MAX_BYTES = 2000
    assert (packet_budget(the_packet()) or Budget(0, 0, [], 0, 0, [], [], [{}])).ok is True
    settings.DISPUTES_EVIDENCE_FILES_MAX_BYTES = 1999
    budget = packet_budget(the_packet())
    assert budget is not None
    assert budget.problems == [
        {"limit": "files", "message": "The evidence files are 2,000 bytes together; at most 1,999."}
    ]
