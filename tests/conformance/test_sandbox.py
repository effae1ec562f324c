"""The sandbox answers as Stripe's contract says (SPEC §12.1): every route is an operation of the
pinned SDK, every request is checked against its Params type before the handler runs and refused
as Stripe refuses it, and every answer and event is recorded against its class. The recording
tests swap in a private Recorder, so what they do deliberately never reaches the session's."""

import io
import json
import urllib.error
import urllib.request

import pytest
import stripe

from stripe_contract import Recorder
from stripe_contract.examples import example
from stripe_sandbox import SandboxServer, contract_checks, server
from stripe_sandbox.client import SandboxControl

UNKNOWN = "https://docs.stripe.com/error-codes"
PMT_REMOVED = (
    "https://docs.stripe.com/changelog/endive/2026-09-30/"
    "removes-the-payment-method-types-parameter-from-payment-intents-and-setup-intents"
)


@pytest.fixture(autouse=True)
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    private = Recorder()
    monkeypatch.setattr(contract_checks, "RECORDER", private)
    return private


def _pdf(name: str = "evidence.pdf") -> io.BytesIO:
    handle = io.BytesIO(b"%PDF-1.4 a receipt")
    handle.name = name
    return handle


def test_every_sandbox_route_is_an_sdk_operation() -> None:
    routes = [f"{method} {pattern}" for method, pattern, _ in server._ROUTE_TABLE]
    assert set(server.OPERATIONS) == {*routes, "POST /v1/files"}
    for name, operation in server.OPERATIONS.items():
        method, pattern = name.split(" ")
        assert operation.method == method
        # The same path, segment by segment: literals equal, `{id}` where the SDK has `{x}`.
        ours, theirs = pattern.split("/"), operation.path.split("/")
        assert len(ours) == len(theirs), name
        for mine, sdk in zip(ours, theirs, strict=True):
            assert mine == sdk or (mine == "{id}" and sdk.startswith("{")), name


def test_a_route_stripe_does_not_have_is_an_error() -> None:
    with pytest.raises(contract_checks.RouteWithoutOperation, match="explode"):
        contract_checks.route_operations(
            [("GET", "/v1/refunds"), ("POST", "/v1/charges/{id}/explode")]
        )


@pytest.mark.stripe_behaviour(
    "A parameter the operation does not take is refused: 400 parameter_unknown, naming it",
    source=UNKNOWN,
)
def test_the_sandbox_refuses_a_parameter_the_sdk_does_not_declare(
    stripe_client: stripe.StripeClient,
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as refused:
        stripe_client.v1.files.list(params={"purpose": "dispute_evidence", "colour": "blue"})  # type: ignore[typeddict-unknown-key]
    assert refused.value.http_status == 400
    assert refused.value.code == "parameter_unknown"
    assert refused.value.param == "colour"


@pytest.mark.stripe_behaviour(
    "A value outside a parameter's enum is refused (400, naming the parameter)",
    source="https://docs.stripe.com/api/files/list",
)
def test_the_sandbox_refuses_a_value_outside_the_enum(stripe_client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.InvalidRequestError) as refused:
        stripe_client.v1.files.list(params={"purpose": "holiday_photos"})  # type: ignore[typeddict-item]
    assert refused.value.http_status == 400
    assert refused.value.param == "purpose"
    assert "must be one of" in str(refused.value.user_message)


@pytest.mark.stripe_behaviour(
    "A request refused for its parameters is not stored under its idempotency key",
    source="https://docs.stripe.com/api/idempotent_requests",
)
def test_a_refused_request_is_not_kept_under_its_idempotency_key(
    stripe_client: stripe.StripeClient,
) -> None:
    options = {"idempotency_key": "upload-conformance-1"}
    with pytest.raises(stripe.InvalidRequestError) as refused:
        stripe_client.v1.files.create(
            params={"purpose": "holiday_photos", "file": _pdf()},  # type: ignore[typeddict-item]
            options=options,  # type: ignore[arg-type]
        )
    assert refused.value.param == "purpose"
    uploaded = stripe_client.v1.files.create(
        params={"purpose": "dispute_evidence", "file": _pdf()},
        options=options,  # type: ignore[arg-type]
    )
    assert uploaded.purpose == "dispute_evidence"  # the key was free: no replay, no conflict


@pytest.mark.stripe_behaviour(
    "payment_method_types is no longer a PaymentIntent parameter: 400 "
    "payment_method_types_no_longer_supported",
    source=PMT_REMOVED,
)
def test_payment_method_types_is_refused_with_stripes_own_code(
    stripe_client: stripe.StripeClient,
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as refused:
        stripe_client.v1.payment_intents.create(
            params={  # type: ignore[typeddict-unknown-key]
                "amount": 2000,
                "currency": "usd",
                "payment_method_types": ["card"],
                "payment_method": "pm_card_visa",
                "confirm": True,
            }
        )
    assert refused.value.http_status == 400
    assert refused.value.code == "payment_method_types_no_longer_supported"
    assert refused.value.param == "payment_method_types"


def _raw(url: str, path: str, body: str, agent: str) -> int:
    request = urllib.request.Request(  # noqa: S310 - the local sandbox
        url + path,
        data=body.encode(),
        headers={"Authorization": "Bearer sk_test_conformance", "User-Agent": agent},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request) as answer:  # noqa: S310
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_only_the_adapters_violations_fail_the_run(
    sandbox: SandboxControl, recorder: Recorder
) -> None:
    body = "amount=100&currency=usd&payment_method_types[0]=card"
    agent = "Stripe/v1 PythonBindings/16.1.0 Vouch/0.1.0 (https://vouch.example)"
    assert _raw(sandbox.url, "/v1/payment_intents", body, "Stripe/v1 PythonBindings/16.1.0") == 400
    assert recorder.failures() == []  # a test's own client, refused all the same
    assert _raw(sandbox.url, "/v1/payment_intents", body, agent) == 400
    assert recorder.failures() == [
        "request POST /v1/payment_intents: payment_method_types (removed, "
        "payment_method_types_no_longer_supported): The `payment_method_types` parameter is no "
        "longer supported on this API version. Use dynamic payment methods, "
        "`excluded_payment_method_types` or `allowed_payment_method_types` instead. [x1]"
    ]
    stats = recorder.report()["requests"]["operations"]["POST /v1/payment_intents"]
    assert stats == {"checked": 2, "from_adapter": 1, "refused": 2}


def test_answers_are_recorded_and_tampered_objects_skipped(
    stripe_client: stripe.StripeClient, sandbox: SandboxControl, recorder: Recorder
) -> None:
    uploaded = stripe_client.v1.files.create(params={"purpose": "dispute_evidence", "file": _pdf()})
    stripe_client.v1.files.retrieve(uploaded.id)
    stripe_client.v1.files.list(params={"limit": 3})
    report = recorder.report()
    assert report["objects"]["resources"]["file"]["checked"] == 3
    assert {"POST /v1/files", "GET /v1/files/{file}", "GET /v1/files"} <= set(
        report["requests"]["operations"]
    )
    sandbox.tamper(uploaded.id, size="a lot")
    stripe_client.v1.files.retrieve(uploaded.id)
    assert not [v for v in recorder.object_violations.values() if v["field"] == "size"]
    assert recorder.report()["objects"]["resources"]["file"]["checked"] == 3  # skipped


def test_an_emitted_events_object_is_checked_against_its_class(
    sandbox: SandboxControl, sandbox_server: SandboxServer, recorder: Recorder
) -> None:
    state = sandbox_server.sandbox.state
    refund = example("refund")
    refund["bogus"] = "a field Stripe's Refund does not have"
    with state.lock:
        event = state.emit("refund.updated", refund, None)
    assert [
        (v["resource"], v["field"], v["kind"], v["where"])
        for v in recorder.report()["objects"]["violations"]
    ] == [("refund", "bogus", "undeclared", "event refund.updated")]
    assert json.loads(json.dumps(event))["data"]["object"]["bogus"]
