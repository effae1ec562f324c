"""A provider call that gets no answer (the connection refused, a timeout, the connection dropped)
names the URL it tried — in the Outcome's message, in a list page's `ProviderUnavailable` and in
what `manage.py reconcile` prints — so an operator pointed at the wrong sandbox port sees which
address was called."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from providers import OutcomeKind, ProviderUnavailable, StripeProvider
from providers.stripe_provider import RetryPolicy
from stripe_sandbox.client import SandboxControl
from tests.helpers import free_port


def _provider(api_base: str) -> StripeProvider:
    return StripeProvider(
        api_key="sk_test_vouch_tests",
        api_base=api_base,
        connect_timeout_s=2,
        read_timeout_s=0.3,
        retry=RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02),
    )


def test_a_refused_connection_names_the_url_it_tried() -> None:
    base = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    outcome = _provider(base).charge_read("ch_nowhere")
    assert (outcome.kind, outcome.error_code) == (OutcomeKind.UNKNOWN, "network_error")
    assert outcome.error_message is not None
    assert f"GET {base}/v1/charges/ch_nowhere" in outcome.error_message
    assert "connection refused" in outcome.error_message
    assert outcome.attempts == 2


def test_a_read_timeout_names_the_url_it_tried(sandbox: SandboxControl) -> None:
    sandbox.add_fault("/v1/charges/ch_slow", "timeout", method="GET", delay_ms=1500)
    outcome = _provider(sandbox.url).charge_read("ch_slow")
    assert (outcome.kind, outcome.error_code) == (OutcomeKind.UNKNOWN, "network_error")
    assert outcome.error_message is not None
    assert f"GET {sandbox.url}/v1/charges/ch_slow" in outcome.error_message
    assert "timed out" in outcome.error_message


def test_a_write_whose_answer_was_dropped_names_the_url_it_tried(sandbox: SandboxControl) -> None:
    sandbox.add_fault("/v1/refunds", "apply_then_drop", method="POST")
    outcome = _provider(sandbox.url).refund_create(
        charge="ch_x", amount_cents=100, idempotency_key="erf_url:1", metadata={}
    )
    assert (outcome.kind, outcome.error_code) == (OutcomeKind.UNKNOWN, "network_error")
    assert outcome.error_message is not None
    assert f"POST {sandbox.url}/v1/refunds" in outcome.error_message
    # The key the caller resolves the unknown outcome with is still carried.
    assert outcome.idempotency_key == "erf_url:1"


def test_a_list_page_that_gets_no_answer_names_the_url_it_tried() -> None:
    base = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ProviderUnavailable) as raised:
        next(_provider(base).list_pages("charges", limit=10))
    assert f"GET {base}/v1/charges" in str(raised.value)
    assert "connection refused" in str(raised.value)
    assert raised.value.error_code == "network_error"


@pytest.mark.django_db
def test_reconcile_that_could_not_complete_names_the_url_it_tried(settings) -> None:  # type: ignore[no-untyped-def]
    base = f"http://127.0.0.1:{free_port()}"
    settings.STRIPE_API_BASE = base
    settings.STRIPE_MAX_ATTEMPTS = 1
    stderr = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("reconcile", "--since", "1h", stdout=io.StringIO(), stderr=stderr)
    assert exited.value.code == 2
    line = next(line for line in stderr.getvalue().splitlines() if "could not complete" in line)
    assert f"GET {base}/v1/" in line
    assert "connection refused" in line
