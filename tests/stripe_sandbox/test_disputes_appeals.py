"""Appeals of lost disputes (Stripe API 2026-10-28.endive) through the official SDK: the control
API makes a loss appeal-eligible and opens the appeal; the merchant answers with
`evidence[appeal]` alone, the rest of the evidence frozen; the network decides."""

import io
from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
REASON = "evidence[appeal][reason_for_filing]"
FILES = "evidence[appeal][supporting_files]"


def _file(client: stripe.StripeClient) -> str:
    handle = io.BytesIO(PNG)
    handle.name = "appeal.png"
    return str(client.v1.files.create(params={"purpose": "dispute_evidence", "file": handle}).id)


def _lost(client: stripe.StripeClient, sandbox: SandboxControl, *, eligible: bool = True) -> str:
    """A dispute contested (submitted once) and lost, appeal-eligible or not."""
    dispute_id = str(sandbox.open_dispute(paid_charge(client, 5000), reason="fraudulent")["id"])
    client.v1.disputes.update(dispute_id, params={"evidence": {"uncategorized_text": "Ours."}})
    sandbox.set_dispute_status(dispute_id, "lost", appeal_eligible=eligible)
    return dispute_id


def _appealing(client: stripe.StripeClient, sandbox: SandboxControl) -> str:
    dispute_id = _lost(client, sandbox)
    sandbox.appeal_dispute(dispute_id)
    return dispute_id


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
    assert dispute["evidence_details"]["appeal_eligible"] is False


def test_the_full_appeal_path_to_a_win(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _lost(client, sandbox)
    lost = client.v1.disputes.retrieve(dispute_id)
    assert (lost.status, lost.evidence_details.appeal_eligible) == ("lost", True)
    event = _latest_event(client)
    assert event["type"] == "charge.dispute.closed"
    assert event["data"]["previous_attributes"] == {
        "status": "under_review",
        "evidence_details": {"appeal_eligible": False},
    }

    sandbox.advance_clock(3600)
    opened = sandbox.appeal_dispute(dispute_id)
    assert opened["status"] == "appeal_needs_response"
    assert opened["evidence"]["appeal"] == {"reason_for_filing": None, "supporting_files": []}
    assert opened["evidence_details"]["due_by"] > lost.evidence_details.due_by  # a new deadline
    event = _latest_event(client)
    assert event["type"] == "charge.dispute.updated"
    assert event["data"]["previous_attributes"]["status"] == "lost"
    assert event["data"]["previous_attributes"]["evidence"] == {"appeal": None}

    files = [_file(client), _file(client)]
    staged = client.v1.disputes.update(
        dispute_id,
        params={
            "evidence": {
                "appeal": {
                    "reason_for_filing": "The bank misread the log.",
                    "supporting_files": files,
                }
            },
            "metadata": {"vouch_packet_digest": "appeal-1"},
            "submit": False,
        },
    )
    assert staged.status == "appeal_needs_response"
    assert staged.evidence.appeal.to_dict() == {
        "reason_for_filing": "The bank misread the log.",
        "supporting_files": files,
    }
    assert staged.evidence.uncategorized_text == "Ours."  # the first round's evidence stays

    submitted = client.v1.disputes.update(dispute_id, params={"submit": True})
    assert submitted.status == "appeal_under_review"
    assert submitted.evidence_details.submission_count == 2
    assert submitted.evidence_details.submission_method == "manual"
    event = _latest_event(client)
    assert event["data"]["previous_attributes"]["status"] == "appeal_needs_response"
    assert event["data"]["previous_attributes"]["evidence_details"]["submission_count"] == 1

    sandbox.set_dispute_status(dispute_id, "won")
    won = client.v1.disputes.retrieve(dispute_id)
    assert (won.status, won.evidence_details.appeal_eligible) == ("won", False)
    event = _latest_event(client)
    assert event["type"] == "charge.dispute.closed"
    assert event["data"]["previous_attributes"] == {
        "status": "appeal_under_review",
        "evidence_details": {"appeal_eligible": True},
    }
    assert won.evidence.appeal.reason_for_filing == "The bank misread the log."


def test_a_lost_appeal_is_final(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    dispute_id = _appealing(client, sandbox)
    client.v1.disputes.update(
        dispute_id, params={"evidence": {"appeal": {"reason_for_filing": "Please."}}}
    )
    with pytest.raises(RuntimeError, match="A lost appeal is final"):
        sandbox.set_dispute_status(dispute_id, "lost", appeal_eligible=True)
    sandbox.set_dispute_status(dispute_id, "lost")
    lost = client.v1.disputes.retrieve(dispute_id)
    assert (lost.status, lost.evidence_details.appeal_eligible) == ("lost", False)
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
        ("lost_not_eligible", "not eligible for an appeal"),
        ("appealing", "already been appealed"),
    ],
)
def test_an_appeal_is_opened_only_for_an_eligible_loss(
    client: stripe.StripeClient, sandbox: SandboxControl, setup: str, message: str
) -> None:
    if setup == "lost_not_eligible":
        dispute_id = _lost(client, sandbox, eligible=False)
    elif setup == "appealing":
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
    dispute = client.v1.disputes.retrieve(dispute_id)
    assert (dispute.status, dispute.evidence_details.appeal_eligible) == ("needs_response", False)


@pytest.mark.parametrize("status", ["under_review", "needs_response", "warning_closed"])
def test_an_appeal_is_decided_won_or_lost_only(
    client: stripe.StripeClient, sandbox: SandboxControl, status: str
) -> None:
    dispute_id = _appealing(client, sandbox)
    client.v1.disputes.update(
        dispute_id, params={"evidence": {"appeal": {"reason_for_filing": "Please."}}}
    )
    with pytest.raises(RuntimeError, match="decided won or lost"):
        sandbox.set_dispute_status(dispute_id, status)
    assert client.v1.disputes.retrieve(dispute_id).status == "appeal_under_review"


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
            {"appeal": {"reason_for_filing": "Please."}, "customer_name": "A. Buyer"},
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


@pytest.mark.parametrize("stage", ["needs_response", "under_review", "lost", "won_after_appeal"])
def test_appeal_evidence_outside_the_appeal_stage_is_refused(
    client: stripe.StripeClient, sandbox: SandboxControl, stage: str
) -> None:
    if stage == "won_after_appeal":
        dispute_id = _appealing(client, sandbox)
        client.v1.disputes.update(
            dispute_id, params={"evidence": {"appeal": {"reason_for_filing": "Please."}}}
        )
        sandbox.set_dispute_status(dispute_id, "won")
    else:
        dispute_id = str(sandbox.open_dispute(paid_charge(client, 5000))["id"])
        if stage != "needs_response":
            client.v1.disputes.update(dispute_id, params={"submit": True})
        if stage == "lost":
            sandbox.set_dispute_status(dispute_id, "lost", appeal_eligible=True)
    error = _refused(
        client,
        dispute_id,
        {"evidence": {"appeal": {"reason_for_filing": "Please."}}, "submit": False},
    )
    assert error.param == "evidence[appeal]"
    assert "only while the dispute is in appeal_needs_response" in str(error.user_message)


def test_an_appeal_is_not_submitted_without_a_reason_for_filing(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    file_id = _file(client)
    for params in (
        {"submit": True},
        {"metadata": {"k": "v"}},  # Stripe's default: submit=true
        {"evidence": {"appeal": {"supporting_files": [file_id]}}, "submit": True},
        {"evidence": {"appeal": {"reason_for_filing": ""}}, "submit": True},
    ):
        error = _refused(client, dispute_id, params)
        assert (error.param, error.code) == (REASON, "parameter_missing")
    staged = client.v1.disputes.update(dispute_id, params={"metadata": {"k": "v"}, "submit": False})
    assert staged.metadata.to_dict() == {"k": "v"}
    assert staged.status == "appeal_needs_response"


def test_after_the_appeal_is_submitted_the_evidence_is_closed(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    client.v1.disputes.update(
        dispute_id, params={"evidence": {"appeal": {"reason_for_filing": "Please."}}}
    )
    assert client.v1.disputes.retrieve(dispute_id).status == "appeal_under_review"
    assert _refused(client, dispute_id, {"submit": True}).param == "submit"
    error = _refused(
        client,
        dispute_id,
        {"evidence": {"appeal": {"reason_for_filing": "More."}}, "submit": False},
    )
    assert error.param == "evidence[appeal]"
    error = _refused(
        client, dispute_id, {"evidence": {"uncategorized_text": "More."}, "submit": False}
    )
    assert "already been submitted" in str(error.user_message)


def test_the_reason_for_filing_has_stripes_bound(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    error = _refused(
        client,
        dispute_id,
        {"evidence": {"appeal": {"reason_for_filing": "x" * 20_001}}, "submit": False},
    )
    assert error.param == REASON
    assert "at most 20000 characters" in str(error.user_message)
    staged = client.v1.disputes.update(
        dispute_id,
        params={"evidence": {"appeal": {"reason_for_filing": "x" * 20_000}}, "submit": False},
    )
    assert len(staged.evidence.appeal.reason_for_filing) == 20_000


def test_supporting_files_exist_and_are_at_most_five(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    error = _refused(
        client,
        dispute_id,
        {"evidence": {"appeal": {"supporting_files": ["file_missing"]}}, "submit": False},
    )
    assert (error.param, error.code) == (f"{FILES}[0]", "resource_missing")
    files = [_file(client) for _ in range(6)]
    error = _refused(
        client, dispute_id, {"evidence": {"appeal": {"supporting_files": files}}, "submit": False}
    )
    assert error.param == FILES
    assert "at most 5" in str(error.user_message)
    staged = client.v1.disputes.update(
        dispute_id,
        params={"evidence": {"appeal": {"supporting_files": files[:5]}}, "submit": False},
    )
    assert staged.evidence.appeal.supporting_files == files[:5]
    emptied = client.v1.disputes.update(
        dispute_id, params={"evidence": {"appeal": {"supporting_files": ""}}, "submit": False}
    )
    assert emptied.evidence.appeal.supporting_files == []


@pytest.mark.parametrize(
    ("appeal", "param", "code"),
    [
        ({"reason": "Please."}, "evidence[appeal][reason]", "parameter_unknown"),
        ({"reason_for_filing": {"a": "b"}}, REASON, "parameter_invalid_string"),
        ({"supporting_files": "file_x"}, FILES, None),
        ("Please.", "evidence[appeal]", None),
    ],
)
def test_bad_appeal_evidence_is_refused(
    client: stripe.StripeClient,
    sandbox: SandboxControl,
    appeal: Any,
    param: str,
    code: str | None,
) -> None:
    dispute_id = _appealing(client, sandbox)
    error = _refused(client, dispute_id, {"evidence": {"appeal": appeal}, "submit": False})
    assert (error.param, error.code) == (param, code)


def test_smart_disputes_never_submits_an_appeal(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    client.v1.disputes.update(
        dispute_id,
        params={"evidence": {"appeal": {"reason_for_filing": "Please."}}, "submit": False},
    )
    with pytest.raises(RuntimeError, match="Smart Disputes does not submit appeals"):
        sandbox.smart_submit_dispute(dispute_id)
    dispute = client.v1.disputes.retrieve(dispute_id)
    assert (dispute.status, dispute.evidence_details.submission_count) == (
        "appeal_needs_response",
        1,
    )


def test_a_dispute_in_its_appeal_stage_cannot_be_closed(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    with pytest.raises(stripe.InvalidRequestError, match="appeal stage"):
        client.v1.disputes.close(dispute_id)
    assert client.v1.disputes.retrieve(dispute_id).status == "appeal_needs_response"


def test_appeal_statuses_are_open_and_listed(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    dispute_id = _appealing(client, sandbox)
    charge = client.v1.disputes.retrieve(dispute_id).charge
    # An appealed dispute is still open: its charge cannot be disputed again meanwhile.
    with pytest.raises(RuntimeError, match="already has an open dispute"):
        sandbox.open_dispute(str(charge))
    listed = client.v1.disputes.list(params={"charge": str(charge)}).data
    assert [(d.id, d.status) for d in listed] == [(dispute_id, "appeal_needs_response")]


def test_a_seeded_dispute_in_its_appeal_stage_takes_an_appeal(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    [seeded] = sandbox.seed(
        [
            {
                "amount": 5000,
                "disputes": [{"reason": "fraudulent", "status": "appeal_needs_response"}],
            }
        ]
    )
    dispute = client.v1.disputes.retrieve(seeded["disputes"][0])
    assert dispute.evidence.appeal.to_dict() == {"reason_for_filing": None, "supporting_files": []}
    assert dispute.evidence_details.appeal_eligible is True
    submitted = client.v1.disputes.update(
        dispute.id, params={"evidence": {"appeal": {"reason_for_filing": "Please."}}}
    )
    assert submitted.status == "appeal_under_review"
