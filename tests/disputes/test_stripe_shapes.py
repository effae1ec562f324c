"""The disputes app reads Stripe's Dispute as the pinned SDK declares it (API 2026-10-28.endive):
every field it reads, from a read or a readback contract, is one `stripe.Dispute` declares; an
appeal's readback finds Stripe's `evidence.appeal.card`; a dispute is recorded with what Stripe
says of it (`case_type`, `is_charge_refundable`, `due_by` 0: no response allowed); and the
charges Stripe will not refund are the ones its last read says so of."""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import stripe
from django.apps import apps
from django.test import Client

from disputes import selectors
from disputes.models import Dispute
from disputes.services import checks, dispute_normalize
from verification.contracts import get_contract, registry
from verification.explain import explain

FIXTURE = Path(__file__).parent / "fixtures" / "stripe_dispute.json"
APPEAL_CONTRACT = "stripe.dispute.appeal_filed"
DIGEST = "a" * 64


def stripe_dispute(**changes: Any) -> dict[str, Any]:
    """Stripe's own example Dispute (fixtures3.json: an inquiry, `warning_needs_response`,
    `case_type: inquiry`, `is_charge_refundable: true`), with `changes` at dotted paths."""
    obj = copy.deepcopy(json.loads(FIXTURE.read_text())["dispute"])
    for path, value in changes.items():
        node = obj
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return obj


# --- what the SDK declares ----------------------------------------------------------------------


def _annotations(cls: type) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        found.update(getattr(klass, "__annotations__", {}))
    return found


def sdk_declares(path: str, cls: type = stripe.Dispute) -> bool:
    """Whether the pinned SDK's resource class declares the field at `path` (dotted): each part
    a declared attribute of the class the previous part names; `metadata` takes any key."""
    part, _, rest = path.partition(".")
    annotations = _annotations(cls)
    if part not in annotations:
        return False
    if not rest:
        return True
    inner = getattr(cls, "_inner_class_types", {}).get(part)
    if inner is not None:
        return sdk_declares(rest, inner)
    return "UntypedStripeObject" in str(annotations[part]) and "." not in rest


class Recording(Mapping[str, Any]):
    """A provider object that records the path of every field read from it."""

    def __init__(self, data: Mapping[str, Any], seen: set[str], prefix: str = "") -> None:
        self._data, self._seen, self._prefix = data, seen, prefix

    def _wrap(self, key: str, value: Any) -> Any:
        path = f"{self._prefix}{key}"
        self._seen.add(path)
        return Recording(value, self._seen, f"{path}.") if isinstance(value, Mapping) else value

    def __getitem__(self, key: str) -> Any:
        return self._wrap(key, self._data[key])

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self._data:
            self._seen.add(f"{self._prefix}{key}")
            return default
        return self[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_every_field_the_app_reads_from_a_dispute_is_one_the_sdk_declares() -> None:
    """Recording it (`dispute_normalize`, every read and event) and reading a filing's readback
    (`checks.nothing_submitted`, which decides `not_submitted`)."""
    seen: set[str] = set()
    dispute_normalize(Recording(stripe_dispute(), seen))
    assert seen, "nothing was read"
    read_back: set[str] = set()
    for kind in ("response", "appeal"):
        checks.nothing_submitted(Recording(stripe_dispute(), read_back), kind)
    assert read_back == {"evidence_details", "evidence_details.submission_count", "status"}
    assert sorted(p for p in seen | read_back if not sdk_declares(p)) == []
    # What it reads, so that a new read is seen here (each one checked above).
    assert seen >= {
        "id",
        "charge",
        "amount",
        "status",
        "is_charge_refundable",
        "evidence_details.due_by",
        "payment_method_details.card.case_type",
        "payment_method_details.card.network_reason_code",
        "payment_method_details.card.brand",
        "enhanced_eligibility_types",
    }


def _dispute_paths(contract_id: str) -> list[str]:
    """The dispute fields a contract's conditions read from its dispute readback channels."""
    contract = get_contract(contract_id)
    channels = {
        c.name for c in contract.channels if c.read is not None and c.read.resource == "dispute"
    }
    conditions = [*contract.verified, *contract.contradicted]
    conditions += [rule.match for rule in contract.pre_completion]
    paths = []
    for condition in conditions:
        for value in (condition.path, condition.expected):
            if isinstance(value, str) and value.startswith("$observed."):
                _, channel, field = value.split(".", 2)
                if channel in channels:
                    paths.append(field)
    return paths


@pytest.mark.parametrize(
    "contract_id", sorted(c for c in registry() if c.startswith("stripe.dispute."))
)
def test_every_dispute_field_a_readback_contract_reads_is_one_the_sdk_declares(
    contract_id: str,
) -> None:
    paths = _dispute_paths(contract_id)
    assert paths
    assert [p for p in paths if not sdk_declares(p)] == []


def appeal_case(dispute: dict[str, Any], now_after_s: int = 60) -> dict[str, Any]:
    start = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    return {
        "input": {"dispute": dispute["id"], "packet_digest": DIGEST},
        "action": {"result": {"id": dispute["id"], "status": dispute["status"]}},
        "operation": {"id": "pkt_1:appeal", "created_at": start.isoformat()},
        "observed": {"dispute_readback": dispute},
        "now": (start + timedelta(seconds=now_after_s)).isoformat(),
    }


def test_the_appeal_readback_verifies_stripes_appeal_under_card() -> None:
    """Stripe shows a submitted appeal as `evidence.appeal.card.reason_for_filing`."""
    appealed = stripe_dispute(
        status="appeal_under_review",
        metadata={"vouch_appeal_digest": DIGEST},
        **{
            "evidence.appeal": {
                "card": {
                    "reason_for_filing": "The bank overlooked the chat.",
                    "supporting_files": [],
                }
            }
        },
    )
    decision = explain(get_contract(APPEAL_CONTRACT), appeal_case(appealed))
    assert decision.verdict == "VERIFIED", decision.as_json()
    # Without a reason for filing under `card`, nothing shows the appeal: never VERIFIED.
    bare = copy.deepcopy(appealed)
    bare["evidence"]["appeal"] = {"card": {"reason_for_filing": None, "supporting_files": []}}
    assert explain(get_contract(APPEAL_CONTRACT), appeal_case(bare)).verdict != "VERIFIED"


# --- a dispute recorded as Stripe shows it --------------------------------------------------------


def test_an_inquiry_is_recorded_as_stripe_shows_it() -> None:
    fields = dispute_normalize(stripe_dispute())
    assert fields["provider_status"] == "warning_needs_response"
    assert fields["case_type"] == "inquiry"
    assert fields["is_charge_refundable"] is True
    assert fields["response_allowed"] is True
    assert fields["response_deadline"] == datetime.fromtimestamp(1723679999, tz=UTC)
    chargeback = dispute_normalize(
        stripe_dispute(
            status="needs_response",
            is_charge_refundable=False,
            **{"payment_method_details.card.case_type": "chargeback"},
        )
    )
    assert (chargeback["case_type"], chargeback["is_charge_refundable"]) == ("chargeback", False)


def test_due_by_zero_means_no_response_allowed_and_null_means_no_deadline_known() -> None:
    """Stripe: `evidence_details.due_by` "will be 0 if the customer's bank or credit card
    company doesn't allow a response for this particular dispute"."""
    none_allowed = dispute_normalize(stripe_dispute(**{"evidence_details.due_by": 0}))
    assert none_allowed["response_deadline"] is None  # never 1970-01-01
    assert none_allowed["response_allowed"] is False
    unknown = dispute_normalize(stripe_dispute(**{"evidence_details.due_by": None}))
    assert (unknown["response_deadline"], unknown["response_allowed"]) == (None, True)


@pytest.mark.django_db
def test_the_charges_stripe_will_not_refund_are_those_its_last_read_says_so_of() -> None:
    def recorded(dispute_id: str, charge: str, refundable: bool | None, case_type: str) -> None:
        Dispute.objects.create(
            provider_dispute_id=dispute_id,
            charge_id=charge,
            amount_micro=10_000_000,
            reason="fraudulent",
            source="provider" if refundable is not None else "staff",
            case_type=case_type,
            is_charge_refundable=refundable,
        )

    recorded("dp_chargeback", "ch_chargeback", False, "chargeback")
    recorded("dp_inquiry", "ch_inquiry", True, "inquiry")
    recorded("dp_unread", "ch_staff", None, "")  # entered by staff, never read from Stripe
    recorded("dp_elsewhere", "ch_not_asked", False, "chargeback")
    asked = ["ch_chargeback", "ch_inquiry", "ch_staff", "ch_undisputed"]
    assert selectors.charges_stripe_will_not_refund(charge_ids=asked) == {"ch_chargeback"}
    assert selectors.charges_stripe_will_not_refund(charge_ids=[]) == set()
    # A later read that says the charge is refundable again is what counts.
    Dispute.objects.filter(provider_dispute_id="dp_chargeback").update(is_charge_refundable=True)
    assert selectors.charges_stripe_will_not_refund(charge_ids=asked) == set()


@pytest.mark.django_db
def test_the_api_schema_says_what_stripe_says_of_a_dispute() -> None:
    """drf-spectacular's schema: the dispute's new fields, the words for a missing deadline as an
    enum, and the refusal's code on preparing a packet."""
    schema = Client().get("/api/v1/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    dispute = components["DisputeOut"]["properties"]
    assert dispute["response_allowed"]["type"] == "boolean"
    assert (dispute["case_type"]["nullable"], dispute["is_charge_refundable"]["type"]) == (
        True,
        "boolean",
    )
    assert "`due_by` 0" in dispute["response_deadline"]["description"]
    refs = [ref["$ref"].rsplit("/", 1)[1] for ref in dispute["response_deadline_note"]["oneOf"]]
    assert refs == ["ResponseDeadlineNoteEnum", "NullEnum"]
    assert components["ResponseDeadlineNoteEnum"]["enum"] == [
        selectors.NO_RESPONSE_ALLOWED,
        selectors.NO_DEADLINE_KNOWN,
    ]
    assert set(components["DisputeListItemOut"]["properties"]) >= {
        "response_allowed",
        "response_deadline_note",
        "case_type",
        "is_charge_refundable",
    }
    prepare = schema["paths"]["/api/v1/disputes/{dispute_id}/packet"]["post"]
    assert "`dispute_response_not_allowed`" in prepare["responses"]["409"]["description"]


@pytest.mark.django_db
def test_a_provider_deadline_of_1970_recorded_before_is_no_response_allowed() -> None:
    """Migration 0012: `due_by` 0 was read as 1970-01-01; such a provider dispute allows no
    response and has no deadline. A staff entry's deadline is what the person typed: left."""
    migration = importlib.import_module(
        "disputes.migrations.0012_dispute_case_type_refundable_response"
    )
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for dispute_id, source in (("dp_epoch", "provider"), ("dp_typed", "staff")):
        Dispute.objects.create(
            provider_dispute_id=dispute_id,
            charge_id=f"ch_{dispute_id}",
            amount_micro=10_000,
            reason="general",
            source=source,
            response_deadline=epoch,
        )
    migration.epoch_deadlines_allow_no_response(apps, None)
    fixed = Dispute.objects.get(provider_dispute_id="dp_epoch")
    assert (fixed.response_allowed, fixed.response_deadline) == (False, None)
    typed = Dispute.objects.get(provider_dispute_id="dp_typed")
    assert (typed.response_allowed, typed.response_deadline) == (True, epoch)
