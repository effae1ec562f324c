"""Appeals of lost disputes (Stripe API 2026-10-28.endive,
https://docs.stripe.com/changelog/endive/2026-10-28/evidence-submission-appeal-dispute-decisions)
through the official SDK: the control API opens the appeal of a loss (the network's part); the
merchant answers with `evidence[appeal][card]` alone, the rest of the evidence frozen; the network
decides."""

import io
from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
REASON = "evidence[appeal][card][reason_for_filing]"
FILES = "evidence[appeal][card][supporting_files]"
CHANGELOG = "https://docs.stripe.com/changelog/endive/2026-10-28/evidence-submission-appeal-dispute-decisions"


def _file(client: stripe.StripeClient) -> str:
    handle = io.BytesIO(PNG)
    handle.name = "appeal.png"
    return str(client.v1.files.create(params={"purpose": "dispute_evidence", "file": handle}).id)


def _lost(client: stripe.StripeClient, sandbox: SandboxControl) -> str:
    """A dispute contested (submitted once) and lost."""
    dispute_id = str(sandbox.open_dispute(paid_charge(client, 5000), reason="fraudulent")["id"])
    client.v1.disputes.update(dispute_id, params={"evidence": {"uncategorized_text": "Ours."}})
    sandbox.set_dispute_status(dispute_id, "lost", appeal_eligible=True)
    return dispute_id


def _appealing(client: stripe.StripeClient, sandbox: SandboxControl) -> str:
    dispute_id = _lost(client, sandbox)
    sandbox.appeal_dispute(dispute_id)
    return dispute_id


def _card(**fields: Any) -> dict[str, Any]:
    """`evidence[appeal]` as Stripe takes it: the response nests under `card`."""
    return {"appeal": {"card": fields}}


def _latest_event(client: stripe.StripeClient) -> dict[str, Any]:
    event: dict[str, Any] = client.v1.events.list(params={"limit": 1}).data[0].to_dict()
    return event


def _refused(
    client: stripe.StripeClient, dispute_id: str, params: dict[str, Any]
) -> stripe.InvalidRequestError:
    before = client.v1.disputes.retrieve(dispute_id).to_dict()
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.disputes.update(dispute_id, params=params)
    assert raised.value.http_status == 400
    assert client.v1.disputes.retrieve(dispute_id).to_dict() == before  # nothing changed
    return raised.value


def test_a_new_dispute_has_no_appeal(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    opened = sandbox.open_dispute(paid_charge(client, 5000))
    dispute = client.v1.disputes.retrieve(opened["id"]).to_dict()
    assert dispute["evidence"]["appeal"] is None
    assert "appeal_eligible" not in dispute["evidence_details"]  # not a field Stripe declares


@pytest.mark.stripe_behaviour(
    "An appeal is answered in appeal_needs_response with evidence[appeal][card] (submit defaults "
    "to true) and moves to appeal_under_review; the first round's evidence stays",
    source=CHANGELOG,
)
def test_the_full_appeal_path_to_a_win(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _lost(client, sandbox)
    lost = client.v1.disputes.retrieve(dispute_id)
    assert lost.status == "lost"
    event = _latest_event(client)
    assert event["type"] == "charge.dispute.closed"
    assert event["data"]["previous_attributes"] == {"status": "under_review"}

    sandbox.advance_clock(3600)
    opened = sandbox.appeal_dispute(dispute_id)
    assert opened["status"] == "appeal_needs_response"
    assert opened["evidence"]["appeal"] == {
        "card": {"reason_for_filing": None, "supporting_files": []}
    }
    assert opened["evidence_details"]["due_by"] > lost.evidence_details.due_by  # a new deadline
    event = _latest_event(client)
    assert event["type"] == "charge.dispute.updated"
    assert event["data"]["previous_attributes"]["status"] == "lost"
    assert event["data"]["previous_attributes"]["evidence"] == {"appeal": None}

    files = [_file(client), _file(client)]
    staged = client.v1.disputes.update(
        dispute_id,
        params={
            "evidence": _card(
                reason_for_filing="The bank misread the log.", supporting_files=files
            ),
            "metadata": {"vouch_packet_digest": "appeal-1"},
            "submit": False,
        },
    )
    assert staged.status == "appeal_needs_response"
    assert staged.evidence.appeal.to_dict() == {
        "card": {"reason_for_filing": "The bank misread the log.", "supporting_files": files}
    }
    assert staged.evidence.uncategorized_text == "Ours."  # the first round's evidence stays

    submitted = client.v1.disputes.update(dispute_id)  # Stripe's default: submit=true
    assert submitted.status == "appeal_under_review"
    assert submitted.evidence_details.submission_count == 2
    assert submitted.evidence_details.submission_method == "manual"
    event = _latest_event(client)
    assert event["data"]["previous_attributes"]["status"] == "appeal_needs_response"
    assert event["data"]["previous_attributes"]["evidence_details"]["submission_count"] == 1

    sandbox.set_dispute_status(dispute_id, "won")
    won = client.v1.disputes.retrieve(dispute_id)
    assert won.status == "won"
    closed = client.v1.events.list(params={"type": "charge.dispute.closed", "limit": 1}).data[0]
    assert closed.data.previous_attributes.status == "appeal_under_review"
    assert won.evidence.appeal.card.reason_for_filing == "The bank misread the log."
    # A won appeal gives back what the chargeback withdrew.
    assert [t.amount for t in won.balance_transactions] == [-5000, 5000]


def test_a_lost_appeal_is_final(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    dispute_id = _appealing(client, sandbox)
    client.v1.disputes.update(dispute_id, params={"evidence": _card(reason_for_filing="Please.")})
    sandbox.set_dispute_status(dispute_id, "lost")
    assert client.v1.disputes.retrieve(dispute_id).status == "lost"
    assert _latest_event(client)["type"] == "charge.dispute.closed"
    with pytest.raises(RuntimeError, match="already been appealed"):
        sandbox.appeal_dispute(dispute_id)
    with pytest.raises(RuntimeError, match="already closed"):
        sandbox.set_dispute_status(dispute_id, "won")
    assert client.v1.disputes.retrieve(dispute_id).status == "lost"


def test_an_appeal_left_unanswered_can_be_lost(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    sandbox.set_dispute_status(dispute_id, "lost")
    assert client.v1.disputes.retrieve(dispute_id).status == "lost"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("open", "Only a lost dispute can be appealed"),
        ("won", "Only a lost dispute can be appealed"),
        ("appealing", "already been appealed"),
    ],
)
def test_the_control_api_opens_an_appeal_of_a_loss_only(
    client: stripe.StripeClient, sandbox: SandboxControl, setup: str, message: str
) -> None:
    if setup == "appealing":
        dispute_id = _appealing(client, sandbox)
    else:
        dispute_id = str(sandbox.open_dispute(paid_charge(client, 5000))["id"])
        if setup == "won":
            sandbox.set_dispute_status(dispute_id, "won")
    before = client.v1.disputes.retrieve(dispute_id).to_dict()
    events = len(client.v1.events.list(params={"limit": 100}).data)
    with pytest.raises(RuntimeError, match=message):
        sandbox.appeal_dispute(dispute_id)
    assert client.v1.disputes.retrieve(dispute_id).to_dict() == before
    assert len(client.v1.events.list(params={"limit": 100}).data) == events


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"status": "won", "appeal_eligible": True}, "only come with status lost"),
        ({"status": "lost", "appeal_eligible": "yes"}, "appeal_eligible must be true or false"),
        ({"status": "appeal_needs_response"}, "enters appeal_needs_response by POST"),
        ({"status": "appeal_under_review"}, "enters appeal_needs_response by POST"),
    ],
)
def test_the_status_route_guards_the_appeal_stages(
    client: stripe.StripeClient, sandbox: SandboxControl, body: dict[str, Any], message: str
) -> None:
    dispute_id = str(sandbox.open_dispute(paid_charge(client, 5000))["id"])
    with pytest.raises(RuntimeError, match=message):
        sandbox.call("POST", f"disputes/{dispute_id}/status", body)
    assert client.v1.disputes.retrieve(dispute_id).status == "needs_response"


@pytest.mark.parametrize("status", ["under_review", "needs_response", "warning_closed"])
def test_an_appeal_is_decided_won_or_lost_only(
    client: stripe.StripeClient, sandbox: SandboxControl, status: str
) -> None:
    dispute_id = _appealing(client, sandbox)
    client.v1.disputes.update(dispute_id, params={"evidence": _card(reason_for_filing="Please.")})
    with pytest.raises(RuntimeError, match="decided won or lost"):
        sandbox.set_dispute_status(dispute_id, status)
    assert client.v1.disputes.retrieve(dispute_id).status == "appeal_under_review"


@pytest.mark.stripe_behaviour(
    "You can't update other dispute evidence during the appeal stage",
    source=CHANGELOG,
)
@pytest.mark.parametrize(
    ("evidence", "param"),
    [
        ({"uncategorized_text": "More."}, "evidence[uncategorized_text]"),
        ({"receipt": "file_x"}, "evidence[receipt]"),
        (
            {"enhanced_evidence": {"visa_compliance": {"fee_acknowledged": True}}},
            "evidence[enhanced_evidence]",
        ),
        (
            {**_card(reason_for_filing="Please."), "customer_name": "A. Buyer"},
            "evidence[customer_name]",
        ),
    ],
)
def test_the_rest_of_the_evidence_is_frozen_in_the_appeal_stage(
    client: stripe.StripeClient, sandbox: SandboxControl, evidence: dict[str, Any], param: str
) -> None:
    dispute_id = _appealing(client, sandbox)
    error = _refused(client, dispute_id, {"evidence": evidence, "submit": False})
    assert error.param == param
    assert "the rest of the evidence is frozen" in str(error.user_message)


@pytest.mark.stripe_behaviour(
    "Appeal evidence is taken only for disputes with a status of appeal_needs_response",
    source=CHANGELOG,
)
@pytest.mark.parametrize("stage", ["needs_response", "under_review", "lost", "won_after_appeal"])
def test_appeal_evidence_outside_the_appeal_stage_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, stage: str
) -> None:
    if stage == "won_after_appeal":
        dispute_id = _appealing(client, sandbox)
        client.v1.disputes.update(
            dispute_id, params={"evidence": _card(reason_for_filing="Please.")}
        )
        sandbox.set_dispute_status(dispute_id, "won")
    else:
        dispute_id = str(sandbox.open_dispute(paid_charge(client, 5000))["id"])
        if stage != "needs_response":
            client.v1.disputes.update(dispute_id, params={"submit": True})
        if stage == "lost":
            sandbox.set_dispute_status(dispute_id, "lost")
    error = _refused(
        client, dispute_id, {"evidence": _card(reason_for_filing="Please."), "submit": False}
    )
    assert error.param == "evidence[appeal]"
    assert "only while the dispute is in appeal_needs_response" in str(error.user_message)


def test_after_the_appeal_is_submitted_the_evidence_is_closed(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    client.v1.disputes.update(dispute_id, params={"evidence": _card(reason_for_filing="Please.")})
    assert client.v1.disputes.retrieve(dispute_id).status == "appeal_under_review"
    assert _refused(client, dispute_id, {"submit": True}).param == "submit"
    error = _refused(
        client, dispute_id, {"evidence": _card(reason_for_filing="More."), "submit": False}
    )
    assert error.param == "evidence[appeal]"
    error = _refused(
        client, dispute_id, {"evidence": {"uncategorized_text": "More."}, "submit": False}
    )
    assert "already been submitted" in str(error.user_message)


@pytest.mark.stripe_behaviour(
    "Each of reason_for_filing and supporting_files replaces what was staged; the empty string "
    "unsets it (Literal[''] in DisputeUpdateParamsEvidenceAppealCard)",
    source="https://docs.stripe.com/api/disputes/update",
)
def test_appeal_fields_are_staged_separately_and_unset_by_the_empty_string(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    files = [_file(client), _file(client)]

    def stage(card: Any) -> dict[str, Any]:
        params = {"evidence": {"appeal": {"card": card}}, "submit": False}
        dispute = client.v1.disputes.update(dispute_id, params=params).to_dict()
        appeal: dict[str, Any] = dispute["evidence"]["appeal"]
        return appeal

    assert stage({"reason_for_filing": "Please."})["card"] == {
        "reason_for_filing": "Please.",
        "supporting_files": [],
    }
    assert stage({"supporting_files": files})["card"] == {
        "reason_for_filing": "Please.",
        "supporting_files": files,
    }
    assert stage({"reason_for_filing": ""})["card"]["reason_for_filing"] is None
    assert stage({"supporting_files": ""})["card"]["supporting_files"] == []
    stage({"reason_for_filing": "Again.", "supporting_files": files})
    assert stage("")["card"] == {"reason_for_filing": None, "supporting_files": []}


@pytest.mark.parametrize(
    ("card", "param"),
    [
        ({"reason_for_filing": {"a": "b"}}, REASON),
        ({"supporting_files": "file_x"}, FILES),
        ("Please.", "evidence[appeal][card]"),
    ],
)
def test_bad_appeal_evidence_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, card: Any, param: str
) -> None:
    dispute_id = _appealing(client, sandbox)
    error = _refused(client, dispute_id, {"evidence": {"appeal": {"card": card}}, "submit": False})
    assert error.param == param


def test_supporting_files_must_exist(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    dispute_id = _appealing(client, sandbox)
    error = _refused(
        client,
        dispute_id,
        {"evidence": _card(supporting_files=[_file(client), "file_missing"]), "submit": False},
    )
    assert (error.param, error.code) == (f"{FILES}[1]", "resource_missing")


def test_smart_disputes_submits_no_appeal(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    with pytest.raises(RuntimeError, match="cannot be submitted"):
        sandbox.smart_submit_dispute(dispute_id)
    dispute = client.v1.disputes.retrieve(dispute_id)
    assert (dispute.status, dispute.evidence_details.submission_count) == (
        "appeal_needs_response",
        1,
    )


def test_closing_a_dispute_in_its_appeal_stage_accepts_the_loss(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    assert client.v1.disputes.close(dispute_id).status == "lost"
    with pytest.raises(RuntimeError, match="already been appealed"):
        sandbox.appeal_dispute(dispute_id)


def test_appeal_statuses_are_open_and_listed(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    charge = client.v1.disputes.retrieve(dispute_id).charge
    listed = client.v1.disputes.list(params={"charge": str(charge)}).data
    assert [(d.id, d.status) for d in listed] == [(dispute_id, "appeal_needs_response")]
    assert client.v1.disputes.list(params={"limit": 1}).data[0].id == dispute_id


@pytest.mark.stripe_behaviour(
    "An appeal's response is evidence[appeal][card][reason_for_filing|supporting_files], shown "
    "as evidence.appeal.card",
    source=CHANGELOG,
)
def test_appeal_evidence_nests_under_card(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    file_id = _file(client)
    staged = client.v1.disputes.update(
        dispute_id,
        params={
            "evidence": {
                "appeal": {
                    "card": {
                        "reason_for_filing": "The network erred.",
                        "supporting_files": [file_id],
                    }
                }
            },
            "submit": False,
        },
    )
    assert staged.to_dict()["evidence"]["appeal"] == {
        "card": {"reason_for_filing": "The network erred.", "supporting_files": [file_id]}
    }
    submitted = client.v1.disputes.update(dispute_id)
    assert submitted.status == "appeal_under_review"
    assert submitted.evidence.appeal.card.reason_for_filing == "The network erred."


@pytest.mark.stripe_behaviour(
    "The flat evidence[appeal][reason_for_filing] is not a parameter: DisputeUpdateParams"
    "EvidenceAppeal declares only card",
    source=CHANGELOG,
)
@pytest.mark.parametrize("field", ["reason_for_filing", "supporting_files"])
def test_the_flat_appeal_shape_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, field: str
) -> None:
    dispute_id = _appealing(client, sandbox)
    value: Any = "Flat." if field == "reason_for_filing" else [_file(client)]
    error = _refused(client, dispute_id, {"evidence": {"appeal": {field: value}}, "submit": False})
    assert (error.code, error.param) == ("parameter_unknown", f"evidence[appeal][{field}]")
