"""Deterministic finalization (SPEC §9 step 6): every drafter's output, and every edit by a person,
passes through `finalize` before it is kept. It never rewrites a draft into something stronger:
it only says what is wrong with it, and a packet with errors is `invalid` and cannot be filed."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from disputes.drafting import Draft, DraftMaterial, evidence_called_for
from disputes.models import Posture

MAX_SUMMARY = 4000
MAX_QUESTIONS = 20
MAX_QUESTION = 500
DRAFT_FIELDS = {"posture", "summary", "citations", "open_questions", "filing_options"}
# Effects a packet can never prove at preparation; `refunded` only with verified refund receipts.
_CLAIMS = re.compile(
    r"\b(filed|submitted|accepted|won|closed|settled|resolved in our favou?r|reversed)\b", re.I
)
_REFUNDED = re.compile(r"\brefunded\b", re.I)


def effect_claims(text: str) -> list[str]:
    """The effects a text claims (filed, won, closed, ...), lowercased, each once, sorted."""
    return sorted({m.group(1).lower() for m in _CLAIMS.finditer(text)})


@dataclass
class Finalized:
    draft: Draft
    errors: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def validation(self) -> dict[str, Any]:
        return {"ok": self.ok, "errors": list(self.errors)}


def _coerce(raw: Draft | Mapping[str, Any], errors: list[dict[str, str]]) -> Draft:
    """A drafter may return a Draft or a mapping (a language model's JSON): take only the known
    fields, with their types, and report anything else."""
    if isinstance(raw, Draft):
        return raw
    unknown = sorted(set(raw) - DRAFT_FIELDS)
    if unknown:
        errors.append(
            {"code": "draft_unknown_field", "message": f"Unknown draft fields: {unknown}."}
        )

    def strings(value: Any, name: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            errors.append({"code": "draft_malformed", "message": f"{name} must be strings."})
            return []
        return list(value)

    options = raw.get("filing_options") or {}
    if not isinstance(options, dict):
        errors.append({"code": "draft_malformed", "message": "filing_options must be an object."})
        options = {}
    return Draft(
        posture=str(raw.get("posture", "")),
        summary=str(raw.get("summary", "")),
        citations=strings(raw.get("citations", []), "citations"),
        open_questions=strings(raw.get("open_questions", []), "open_questions"),
        filing_options=dict(options),
    )


def finalize(raw: Draft | Mapping[str, Any], material: DraftMaterial) -> Finalized:
    errors: list[dict[str, str]] = []
    draft = _coerce(raw, errors)

    def fail(code: str, message: str) -> None:
        errors.append({"code": code, "message": message})

    if draft.posture not in Posture.values:
        fail("posture_unknown", f"Unknown posture {draft.posture!r}.")
    if not draft.summary.strip() or len(draft.summary) > MAX_SUMMARY:
        fail("summary_length", f"The summary must be 1-{MAX_SUMMARY} characters.")
    if len(draft.open_questions) > MAX_QUESTIONS or any(
        len(q) > MAX_QUESTION for q in draft.open_questions
    ):
        fail("open_questions_length", "Too many or too long open questions.")

    receipts = set(material.receipt_ids)
    evidence = {e.ref: e for e in material.evidence}
    uncited = [c for c in draft.citations if c not in receipts and c not in evidence]
    if uncited:
        fail("citation_not_admitted", f"Not admitted receipt ids or evidence refs: {uncited}.")
    if len(set(draft.citations)) != len(draft.citations):
        fail("citation_repeated", "A citation appears twice.")

    if not (material.tree_complete and not material.undecided_refund_legs) and (
        draft.posture != Posture.NEEDS_MORE_EVIDENCE
    ):
        fail(
            "receipt_tree_incomplete",
            "The receipt tree is incomplete, untrusted or has an undecided refund: the only "
            "posture is needs_more_evidence.",
        )

    refunds = material.refund_receipts
    refund_ids = {r.id for r in refunds}
    amount = int(material.dispute["amount_micro"])
    covered = bool(refunds) and material.refunded_micro >= amount
    if refunds and draft.posture not in (
        Posture.REFUND_ALREADY_SENT,
        Posture.OPERATOR_REVIEW,
        Posture.NEEDS_MORE_EVIDENCE,
    ):
        fail(
            "prior_refund_ignored",
            "A verified refund exists on the charge: the posture is refund_already_sent or "
            "operator_review.",
        )
    if covered and draft.posture == Posture.OPERATOR_REVIEW:
        fail(
            "prior_refund_ignored",
            "Verified refunds cover the disputed amount: the posture is refund_already_sent.",
        )
    if draft.posture == Posture.REFUND_ALREADY_SENT:
        if not covered:
            fail(
                "refund_not_proven",
                "refund_already_sent needs verified, unreversed refunds covering the amount.",
            )
        elif not refund_ids <= set(draft.citations):
            fail("refund_receipts_not_cited", "Cite every verified refund receipt relied on.")

    if draft.posture == Posture.CONTEST:
        cited_kinds = {evidence[c].kind for c in draft.citations if c in evidence}
        relied = {"delivery", "consent"} | set().union(
            *evidence_called_for(str(material.dispute["reason"]))
        )
        # Visa CE 3.0 from the receipts is the provider-specific fact a contest may rest on.
        ce3 = bool(material.ce3_priors) and all(
            r.id in draft.citations for r in material.ce3_priors
        )
        if not cited_kinds & relied and not ce3:
            fail(
                "contest_without_evidence",
                "A contest must cite admitted delivery or consent evidence (or the fact the "
                "dispute's reason turns on).",
            )

    texts = [draft.summary, *draft.open_questions]
    claims = sorted({c for t in texts for c in effect_claims(t)})
    if claims:
        fail("effect_claim", f"The packet claims effects it cannot prove: {claims}.")
    if draft.posture != Posture.REFUND_ALREADY_SENT and any(_REFUNDED.search(t) for t in texts):
        fail("effect_claim", "Only a refund_already_sent packet may say the charge was refunded.")
    return Finalized(draft=draft, errors=errors)
