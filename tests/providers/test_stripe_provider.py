"""The provider adapter against the sandbox: retries with the same key, typed outcomes."""

import hashlib
import hmac
import json
import time

import pytest
import stripe

from providers import OutcomeKind, StripeProvider, WebhookSignatureError
from providers.stripe_provider import RetryPolicy, classify, provider_from_settings
from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge


@pytest.fixture
def provider(sandbox: SandboxControl) -> StripeProvider:
    return StripeProvider(
        api_key="sk_test_vouch_tests",
        api_base=sandbox.url,
        connect_timeout_s=2,
        read_timeout_s=0.5,
        retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05),
    )


@pytest.fixture
def sdk(sandbox: SandboxControl) -> stripe.StripeClient:
    return stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
    )


def _refunds(sandbox: SandboxControl, charge: str) -> int:
    return sandbox.state()["charges"][charge]["refunds"]


def _refund(provider: StripeProvider, charge: str, key: str = "erf_1:leg_1", amount: int = 100):  # type: ignore[no-untyped-def]
    return provider.refund_create(
        charge=charge, amount_cents=amount, idempotency_key=key, metadata={"vouch_leg": "leg_1"}
    )


def test_payment_create_accepted(provider: StripeProvider, sandbox: SandboxControl) -> None:
    outcome = provider.payment_create(
        amount_cents=1000,
        currency="usd",
        payment_method="pm_card_visa",
        idempotency_key="env_1:fund:1",
        metadata={"vouch_envelope": "env_1"},
    )
    assert outcome.kind is OutcomeKind.ACCEPTED
    pi = outcome.require()
    assert (pi["status"], pi["amount"]) == ("succeeded", 1000)
    assert pi["latest_charge"] in sandbox.state()["charges"]
    assert (outcome.attempts, outcome.replayed, outcome.idempotency_key) == (
        1,
        False,
        "env_1:fund:1",
    )


def test_declined_card_is_refused_with_its_detail(provider: StripeProvider) -> None:
    outcome = provider.payment_create(
        amount_cents=1000,
        currency="usd",
        payment_method="pm_card_chargeDeclinedInsufficientFunds",
        idempotency_key="env_2:fund:1",
        metadata={},
    )
    assert outcome.kind is OutcomeKind.REFUSED
    assert (outcome.error_code, outcome.http_status) == ("card_declined", 402)
    assert outcome.error_detail["decline_code"] == "insufficient_funds"
    assert outcome.error_detail["payment_intent"]["status"] == "requires_payment_method"
    assert outcome.attempts == 1


def test_timeout_then_success_creates_one_refund(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk)
    sandbox.add_fault("/v1/refunds", "timeout", method="POST", times=1, delay_ms=1000)
    outcome = _refund(provider, charge)
    assert outcome.accepted
    assert outcome.attempts == 2
    assert _refunds(sandbox, charge) == 1
    assert sandbox.faults()[0]["hits"] == 1


def test_apply_then_drop_then_retry_leaves_exactly_one_refund(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk)
    sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST", times=1)
    outcome = _refund(provider, charge)
    assert outcome.accepted
    assert (outcome.attempts, outcome.replayed) == (2, True)
    assert _refunds(sandbox, charge) == 1
    assert sandbox.state()["charges"][charge]["amount_refunded"] == 100
    assert outcome.require()["id"] == sdk.v1.refunds.list(params={"charge": charge}).data[0].id


def test_server_errors_are_retried_with_the_same_key(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk)
    sandbox.add_fault("/v1/refunds", "server_error", method="POST", times=2)
    outcome = _refund(provider, charge)
    assert (outcome.kind, outcome.attempts) == (OutcomeKind.ACCEPTED, 3)
    assert _refunds(sandbox, charge) == 1


@pytest.mark.parametrize("kind", ["server_error", "timeout"])
def test_persistent_transient_failure_is_unknown_after_the_budget(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient, kind: str
) -> None:
    charge = paid_charge(sdk)
    sandbox.add_fault("/v1/refunds", kind, method="POST", delay_ms=700)
    outcome = _refund(provider, charge)
    assert outcome.kind is OutcomeKind.UNKNOWN
    assert outcome.error_code == ("server_error" if kind == "server_error" else "network_error")
    assert outcome.attempts == 3
    assert sandbox.faults()[0]["hits"] == 3


def test_stripe_should_retry_false_stops_the_retries(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk)
    sandbox.add_fault("/v1/refunds", "server_error", method="POST", should_retry=False)
    outcome = _refund(provider, charge)
    assert (outcome.kind, outcome.attempts) == (OutcomeKind.UNKNOWN, 1)
    assert sandbox.faults()[0]["hits"] == 1


def test_rate_limit_honours_retry_after(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk)
    sandbox.add_fault("/v1/refunds", "rate_limit", method="POST", times=1, retry_after_s=1)
    started = time.monotonic()
    outcome = _refund(provider, charge)
    assert outcome.accepted
    assert outcome.attempts == 2
    assert time.monotonic() - started >= 0.95  # it waited as the provider asked
    assert _refunds(sandbox, charge) == 1


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        ("dispute", "charge_disputed"),
        ("too_much", "amount_too_large"),
        ("missing", "resource_missing"),
    ],
)
def test_definite_refusals_are_refused_not_retried(
    provider: StripeProvider,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    setup: str,
    code: str,
) -> None:
    charge = paid_charge(sdk, 1000)
    amount = 100
    if setup == "dispute":
        sandbox.open_dispute(charge)
    elif setup == "too_much":
        amount = 1001
    elif setup == "missing":
        charge = "ch_missing"
    outcome = _refund(provider, charge, amount=amount)
    assert (outcome.kind, outcome.error_code, outcome.attempts) == (OutcomeKind.REFUSED, code, 1)
    assert outcome.http_status in (400, 404)


def test_idempotency_conflict_is_unknown_not_refused(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk)
    assert _refund(provider, charge, key="k", amount=100).accepted
    outcome = _refund(provider, charge, key="k", amount=200)
    assert (outcome.kind, outcome.error_code, outcome.attempts) == (
        OutcomeKind.UNKNOWN,
        "idempotency_error",
        1,
    )
    assert _refunds(sandbox, charge) == 1


@pytest.mark.parametrize(
    ("status", "kind", "retry"),
    [
        (409, OutcomeKind.UNKNOWN, True),
        (503, OutcomeKind.UNKNOWN, True),
        (403, OutcomeKind.REFUSED, False),
    ],
)
def test_classification_of_other_statuses(status: int, kind: OutcomeKind, retry: bool) -> None:
    error = (
        stripe.APIError("x", http_status=status)
        if status != 403
        else stripe.PermissionError("x", http_status=403)
    )
    failure = classify(error)
    assert (failure.kind, failure.retry) == (kind, retry)


def test_reads_found_missing_and_unknown(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk)
    refund = _refund(provider, charge).require()
    assert provider.refund_read(refund["id"]).require()["amount"] == 100
    assert provider.charge_read(charge).require()["amount_refunded"] == 100
    missing = provider.refund_read("re_missing")
    assert (missing.kind, missing.error_code, missing.http_status) == (
        OutcomeKind.REFUSED,
        "resource_missing",
        404,
    )
    sandbox.add_fault("/v1/refunds/*", "server_error", method="GET")
    assert provider.refund_read(refund["id"]).kind is OutcomeKind.UNKNOWN


def test_refunds_of_charge_reads_every_page(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk, 100_000)
    made = [_refund(provider, charge, key=f"k{i}", amount=10).require()["id"] for i in range(7)]
    listed = provider.refunds_of_charge(charge, page_size=3)
    assert [r["id"] for r in listed.require()["data"]] == list(reversed(made))
    assert listed.attempts == 3


def test_dispute_read_and_file_exactly_once(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    dispute_id = sandbox.open_dispute(paid_charge(sdk), reason="product_not_received")["id"]
    assert provider.dispute_read(dispute_id).require()["status"] == "needs_response"
    sandbox.add_fault(f"/v1/disputes/{dispute_id}", "apply_then_drop", method="POST", times=1)
    filed = provider.dispute_file(
        dispute_id=dispute_id,
        evidence={"shipping_tracking_number": "1Z999", "uncategorized_text": "Delivered."},
        metadata={"vouch_packet_digest": "d1"},
        idempotency_key="pkt_1:d1",
    )
    assert (filed.kind, filed.replayed, filed.attempts) == (OutcomeKind.ACCEPTED, True, 2)
    read = provider.dispute_read(dispute_id).require()
    assert read["status"] == "under_review"
    assert read["evidence_details"]["submission_count"] == 1
    assert read["metadata"] == {"vouch_packet_digest": "d1"}
    again = provider.dispute_file(
        dispute_id=dispute_id,
        evidence={},
        metadata={"vouch_packet_digest": "d1"},
        idempotency_key="pkt_1:other",
    )
    assert again.kind is OutcomeKind.REFUSED
    assert provider.dispute_read(dispute_id).require()["evidence_details"]["submission_count"] == 1


def test_file_upload_is_multipart_to_the_files_api_and_replayed_with_its_key(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    content = b"%PDF-1.4\n% signed for\n"
    sandbox.add_fault("/v1/files", "apply_then_drop", method="POST", times=1)
    uploaded = provider.file_upload(
        filename="pod.pdf", content=content, idempotency_key="pkt_1:file:abc"
    )
    assert (uploaded.kind, uploaded.replayed, uploaded.attempts) == (OutcomeKind.ACCEPTED, True, 2)
    answer = uploaded.require()
    assert answer["id"].startswith("file_")
    assert (answer["purpose"], answer["filename"], answer["size"]) == (
        "dispute_evidence",
        "pod.pdf",
        len(content),
    )
    again = provider.file_upload(
        filename="pod.pdf", content=content, idempotency_key="pkt_1:file:abc"
    )
    assert again.require()["id"] == answer["id"]  # one file at the provider
    assert sandbox.state()["counts"]["files"] == 1
    assert sdk.v1.files.retrieve(answer["id"]).size == len(content)
    refused = provider.file_upload(filename="run.exe", content=b"MZ", idempotency_key="pkt_1:f:x")
    assert refused.kind is OutcomeKind.REFUSED
    assert sandbox.state()["counts"]["files"] == 1


def _sign(payload: bytes, secret: str, t: int) -> str:
    return hmac.new(secret.encode(), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()


def test_webhook_verify() -> None:
    payload = json.dumps({"id": "evt_1", "type": "refund.created", "data": {"object": {}}}).encode()
    now = 1_800_000_000
    good = f"t={now},v1={_sign(payload, 'whsec_new', now)}"
    assert StripeProvider.webhook_verify(payload, good, ["whsec_new"], now=now)["id"] == "evt_1"
    # Rotation: the old secret still verifies; several v1 signatures, any may match.
    rotated = f"t={now},v1={_sign(payload, 'whsec_x', now)},v1={_sign(payload, 'whsec_old', now)}"
    assert (
        StripeProvider.webhook_verify(payload, rotated, ["whsec_new", "whsec_old"], now=now)["id"]
        == "evt_1"
    )
    bad_cases = [
        (payload + b" ", good, now),  # tampered body
        (payload, f"t={now},v1={'0' * 64}", now),  # wrong signature
        (payload, good, now + 301),  # outside the tolerance
        (payload, good, now - 301),
        (payload, "", now),
        (payload, f"v1={_sign(payload, 'whsec_new', now)}", now),  # no timestamp
    ]
    for body, header, at in bad_cases:
        with pytest.raises(WebhookSignatureError):
            StripeProvider.webhook_verify(body, header, ["whsec_new"], now=at)
    # The SDK's own verifier agrees with what the sandbox signs.
    stripe.Webhook.construct_event(
        payload.decode(),
        f"t={int(time.time())},v1={_sign(payload, 'whsec_new', int(time.time()))}",
        "whsec_new",
    )


def test_provider_from_settings_uses_the_configured_timeouts(settings) -> None:  # type: ignore[no-untyped-def]
    settings.STRIPE_API_KEY = "sk_test_configured"
    provider = provider_from_settings()
    assert provider.read_timeout_s == 0.5
    assert provider.retry_budget_s > provider.retry.max_attempts * provider.read_timeout_s


def test_provider_time_is_counted_apart(provider: StripeProvider, sdk: stripe.StripeClient) -> None:
    from core.timing import _provider_seconds

    token = _provider_seconds.set(0.0)
    try:
        provider.charge_read(paid_charge(sdk))
        assert (_provider_seconds.get() or 0) > 0
    finally:
        _provider_seconds.reset(token)
