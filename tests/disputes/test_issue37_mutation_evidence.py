"""Issue 37's mutation round for disputes/evidence.py's `evidence_parse` (bench/MUTATION.md): each
admission rule at its edge, in its order, with exactly the refusal it names — an adjustment's
public id (`adj_…`, cited as a refund made, SPEC §18) is never admitted by hand, as a receipt id
is not. Pure: no database, no provider."""

from __future__ import annotations

from typing import Any

import pytest

from disputes import exceptions as errors
from disputes.evidence import AdmittedEvidence, evidence_parse

SHA = "ab" * 32


def item(**changes: Any) -> dict[str, Any]:
    return {"ref": "doc:1", "sha256": SHA, "kind": "delivery", "summary": "Signed for", **changes}


def refusal(data: Any) -> errors.VouchError:
    with pytest.raises(errors.VouchError) as refused:
        evidence_parse(data)
    return refused.value


def test_an_item_within_every_rule_is_admitted_normalized() -> None:
    assert evidence_parse(item(summary="  Signed for\nat the door  ")) == AdmittedEvidence(
        ref="doc:1", sha256=SHA, kind="delivery", summary="Signed for\nat the door"
    )
    longest = "r" * 200
    assert evidence_parse(item(ref=longest, summary="s" * 500)).ref == longest
    for kind in ("delivery", "consent", "communication", "policy", "other"):
        assert evidence_parse(item(kind=kind)).kind == kind


@pytest.mark.parametrize("ref", ["adj_" + "1" * 24, "adj_x"])
def test_an_adjustment_is_never_admitted_as_evidence(ref: str) -> None:
    refused = refusal(item(ref=ref))
    assert isinstance(refused, errors.ReceiptDetailRefused)
    assert refused.message == (
        "A refund recorded by adjustment is not evidence: Vouch resolves it from its own ledger."
    )
    assert refused.details == {"field": "ref"}
    # Only a ref that starts so: one that merely contains it is evidence like any other.
    assert evidence_parse(item(ref="doc-adj_1")).ref == "doc-adj_1"


def test_a_receipt_id_is_never_admitted_as_evidence() -> None:
    refused = refusal(item(ref="rcpt_" + "1" * 64))
    assert isinstance(refused, errors.ReceiptDetailRefused)
    assert refused.message == (
        "A receipt is not evidence: Vouch resolves receipts from its own history."
    )
    assert refused.details == {"field": "ref"}


def test_the_shape_rules_in_their_order() -> None:
    not_object = refusal(["doc:1"])
    assert isinstance(not_object, errors.EvidenceRawPayload)
    assert not_object.message == "Evidence is a JSON object {ref, sha256, kind, summary}."

    receipt = refusal({**item(), "receipt_id": "rcpt_1", "native": {}, "zzz": 1})
    assert isinstance(receipt, errors.ReceiptDetailRefused)
    assert receipt.details == {"fields": ["native", "receipt_id"]}

    unknown = refusal({**item(), "zzz": 1, "aaa": 2})
    assert isinstance(unknown, errors.EvidenceUnknownField)
    assert unknown.details == {"fields": ["aaa", "zzz"]}

    missing = refusal({"summary": "x", "ref": "doc:1"})
    assert isinstance(missing, errors.EvidenceMissingField)
    assert missing.details == {"fields": ["sha256", "kind"]}

    nested = refusal(item(kind={"a": 1}))
    assert isinstance(nested, errors.EvidenceRawPayload)
    assert nested.details == {"field": "kind"}
    listed = refusal(item(summary=["a"]))
    assert isinstance(listed, errors.EvidenceRawPayload)
    assert listed.details == {"field": "summary"}

    number = refusal(item(sha256=12))
    assert type(number) is errors.EvidenceRefused
    assert number.message == "sha256 must be a string."
    assert number.details == {"field": "sha256", "rule": "type"}


@pytest.mark.parametrize("field", ["ref", "summary"])
def test_secrets_card_numbers_and_payloads_are_refused_in_ref_and_summary(field: str) -> None:
    credential = refusal(item(**{field: "sk_live_abcdefgh"}))
    assert isinstance(credential, errors.EvidenceCredential)
    assert credential.details == {"field": field}
    card = refusal(item(**{field: "4242424242424242"}))
    assert isinstance(card, errors.EvidenceCardNumber)
    assert card.details == {"field": field}
    payload = refusal(item(**{field: '"a":1,"b":2'}))
    assert isinstance(payload, errors.EvidenceRawPayload)
    assert payload.details == {"field": field}


def test_ref_sha256_kind_and_summary_bounds() -> None:
    for ref in ("r" * 201, "-doc", "doc 1", ""):
        bad = refusal(item(ref=ref))
        assert isinstance(bad, errors.EvidenceInvalidRef), ref
        assert bad.details == {"field": "ref", "max_length": 200}
    for sha in ("AB" * 32, "ab" * 31, "ab" * 32 + "a"):
        bad = refusal(item(sha256=sha))
        assert isinstance(bad, errors.EvidenceInvalidSha256), sha
        assert bad.details == {"field": "sha256"}
    bad = refusal(item(kind="Delivery"))
    assert isinstance(bad, errors.EvidenceInvalidKind)
    assert bad.details == {
        "field": "kind",
        "allowed": ["delivery", "consent", "communication", "policy", "other"],
    }
    for summary in ("", "   ", "s" * 501, "a\tb", "a\x00b"):
        bad = refusal(item(summary=summary))
        assert isinstance(bad, errors.EvidenceTooLong), summary
        assert bad.details == {"field": "summary", "max_length": 500}
