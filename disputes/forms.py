"""The forms of the packet review page (SPEC §10). They only parse what a person sent: the
services judge it. Approve and File each carry the digest the page showed, so a packet that
changed in between is refused (`packet_drifted`) instead of acted on unseen."""

from __future__ import annotations

from typing import Any

from django import forms

from disputes.models import EvidenceKind, Packet, Posture
from disputes.packets import COMPLIANCE_LABELS, compliance_program

DIGEST_SHOWN = 16  # hex characters of the digest quoted in a confirmation


def lines(text: str) -> list[str]:
    """One item a line; blank lines and surrounding spaces dropped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def short_digest(digest: str) -> str:
    return f"{digest[:DIGEST_SHOWN]}…"


class _DigestForm(forms.Form):
    digest = forms.CharField(widget=forms.HiddenInput, max_length=64)


class ApproveForm(_DigestForm):
    prefix = "approve"
    confirm = forms.BooleanField(required=True)
    # A separate box, offered only for a response filed to a Visa or Mastercard compliance dispute
    # (SPEC §17): the service refuses the approval without it (`fee_not_acknowledged`).
    acknowledge_fee = forms.BooleanField(required=False)

    def __init__(self, *args: Any, packet: Packet, fee: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("initial", {"digest": packet.digest})
        super().__init__(*args, **kwargs)
        self.fields[
            "confirm"
        ].label = f"I approve this packet with digest {short_digest(packet.digest)}"
        if fee is None:
            del self.fields["acknowledge_fee"]
        else:
            program = COMPLIANCE_LABELS.get(compliance_program(packet.dispute) or "", "compliance")
            self.fields["acknowledge_fee"].label = (
                f"I acknowledge the card network's fee of {fee} for contesting this {program} "
                "dispute, kept by the network if the dispute is lost"
            )


class FileForm(_DigestForm):
    prefix = "file"
    idempotency_key = forms.CharField(
        max_length=255,
        label="Idempotency key",
        help_text="One stable key for this filing: a retry with the same key cannot file twice.",
        widget=forms.TextInput(attrs={"size": 60, "class": "vouch-mono"}),
    )
    confirm = forms.BooleanField(required=True)

    def __init__(self, *args: Any, packet: Packet, proposed_key: str, **kwargs: Any) -> None:
        kwargs.setdefault("initial", {"digest": packet.digest, "idempotency_key": proposed_key})
        super().__init__(*args, **kwargs)
        self.fields[
            "confirm"
        ].label = f"I file this packet with digest {short_digest(packet.digest)} at the provider"


class EditForm(_DigestForm):
    """The fields a person may change; the rest of the packet is derived from them."""

    prefix = "edit"

    posture = forms.ChoiceField(choices=Posture.choices)
    # Not required: finalization judges an empty summary (`summary_length`), as it judges all.
    summary = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 5, "cols": 90})
    )
    citations = forms.CharField(
        required=False,
        help_text="One a line: admitted receipt ids (rcpt_…) and evidence refs.",
        widget=forms.Textarea(attrs={"rows": 4, "cols": 90, "class": "vouch-mono"}),
    )
    open_questions = forms.CharField(
        required=False,
        label="Open questions",
        help_text="One a line.",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 90}),
    )

    def __init__(self, *args: Any, packet: Packet, **kwargs: Any) -> None:
        kwargs.setdefault(
            "initial",
            {
                "digest": packet.digest,
                "posture": packet.posture,
                "summary": packet.summary,
                "citations": "\n".join(packet.citations),
                "open_questions": "\n".join(packet.open_questions),
            },
        )
        super().__init__(*args, **kwargs)
        self.packet = packet

    def changes(self) -> dict[str, Any]:
        """Only the fields whose value differs from the packet's."""
        data = self.cleaned_data
        proposed: dict[str, Any] = {
            "posture": data["posture"],
            "summary": data["summary"].replace("\r\n", "\n"),
            "citations": lines(data["citations"]),
            "open_questions": lines(data["open_questions"]),
        }
        current = {
            "posture": self.packet.posture,
            "summary": self.packet.summary,
            "citations": list(self.packet.citations),
            "open_questions": list(self.packet.open_questions),
        }
        return {name: value for name, value in proposed.items() if value != current[name]}


class EvidenceForm(forms.Form):
    """Admit evidence from the dispute's page: ref, kind, summary, and a file (whose SHA-256 Vouch
    computes) or, without one, the SHA-256 of a document kept elsewhere. The admission rules are
    the service's (`disputes.services.evidence_admit`)."""

    prefix = "evidence"
    ref = forms.CharField(
        max_length=200,
        label="Reference",
        help_text="Your name for it, e.g. ups:1Z999AA10123456784 or doc:signed-delivery.",
        widget=forms.TextInput(attrs={"size": 50, "class": "vouch-mono"}),
    )
    kind = forms.ChoiceField(choices=EvidenceKind.choices)
    summary = forms.CharField(
        max_length=500,
        help_text="1-500 characters. For delivery evidence, a summary that is only tracking "
        "numbers is also sent as shipping_tracking_number.",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
    )
    file = forms.FileField(
        required=False,
        help_text="A PDF, PNG or JPEG. Vouch computes its SHA-256 and uploads it to Stripe when "
        "a packet citing it is filed.",
    )
    sha256 = forms.CharField(
        required=False,
        max_length=64,
        label="SHA-256",
        help_text="Only without a file: the SHA-256 of the document, kept elsewhere.",
        widget=forms.TextInput(attrs={"size": 70, "class": "vouch-mono"}),
    )

    def data_for_service(self) -> dict[str, str]:
        """The evidence item as the service takes it: the SHA-256 only when one was given."""
        data = {name: self.cleaned_data[name] for name in ("ref", "kind", "summary")}
        if self.cleaned_data["sha256"].strip():
            data["sha256"] = self.cleaned_data["sha256"].strip()
        return data
