"""/metrics: refused unless configured and allowed; Prometheus text that parses; the database's
state read when scraped; the process counters (provider calls, idempotency) summed over processes
in multiprocess mode."""

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

TOKEN = "metrics-test-token-0123456789"


@pytest.fixture
def scrape(settings: Any) -> Any:
    """Scrape /metrics as Prometheus would (with the token): {(name, labels): value}."""
    settings.METRICS_TOKEN = TOKEN

    def scrape() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200, response.content
        assert response["Content-Type"].startswith("text/plain; version=")
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples
        }

    return scrape


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.mark.django_db
def test_without_a_token_or_network_configured_metrics_is_not_served(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = []
    assert Client().get("/metrics").status_code == 404
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("networks", "authorization", "remote", "status"),
    [
        ([], None, "127.0.0.1", 403),
        ([], "Bearer wrong-token", "127.0.0.1", 403),
        ([], f"Basic {TOKEN}", "127.0.0.1", 403),
        ([], f"Bearer {TOKEN}x", "127.0.0.1", 403),
        ([], f"Bearer {TOKEN}", "203.0.113.9", 200),
        (["10.0.0.0/8"], None, "127.0.0.1", 403),
        (["10.0.0.0/8"], None, "10.1.2.3", 200),
        (["10.0.0.0/8", "::1/128"], None, "::1", 200),
        (["10.0.0.0/8"], "Bearer wrong-token", "10.1.2.3", 200),
    ],
)
def test_metrics_is_served_to_the_token_or_an_allowed_network_only(
    settings: Any, networks: list[str], authorization: str | None, remote: str, status: int
) -> None:
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = networks
    headers = {"REMOTE_ADDR": remote}
    if authorization is not None:
        headers["HTTP_AUTHORIZATION"] = authorization
    response = Client().get("/metrics", **headers)
    assert response.status_code == status
    if status == 403:
        assert b"vouch_" not in response.content


@pytest.mark.django_db
def test_the_text_parses_and_names_every_required_metric(scrape: Any) -> None:
    samples = scrape()
    names = {name for name, _ in samples}
    for required in (
        "vouch_refund_legs",
        "vouch_refund_legs_micro",
        "vouch_escalations_open",
        "vouch_verification_oldest_pending_run_age_seconds",
        "vouch_metrics_database_up",
        "vouch_metrics_database_statements",
        "vouch_metrics_database_seconds",
        "vouch_legs_waiting_for_room",
    ):
        assert required in names, required
    assert _value(samples, "vouch_metrics_database_up") == 1
    # A fixed number of aggregate queries, whatever the tables hold.
    assert _value(samples, "vouch_metrics_database_statements") == 7


@pytest.mark.django_db
def test_a_refund_through_the_api_moves_the_metrics(alice: Api, scrape: Any) -> None:
    """Funding and refunding an envelope through the API: the refund legs by outcome, the
    verification runs they started, the provider calls with their latency, and the idempotency
    replay and conflict of a retried request."""
    before = scrape()
    envelope_id = alice.create(10_000_000)["envelope_id"]
    alice.top_up(envelope_id, 5_000_000)
    path = f"/api/v1/escrow/envelopes/{envelope_id}/refund"
    first = alice.post(path, {}, key="refund-1")
    assert first.status_code == 200, first.content
    legs = first.json()["data"]["legs"]
    assert [leg["outcome"] for leg in legs] == ["accepted", "accepted"]
    replay = alice.post(path, {}, key="refund-1")
    assert replay["Idempotent-Replayed"] == "true"
    conflict = alice.post(path, {"amount_micro": 1_000_000}, key="refund-1")
    assert conflict.status_code == 422
    after = scrape()

    def delta(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert delta("vouch_refund_legs", outcome="accepted") == 2
    assert delta("vouch_refund_legs_micro", outcome="accepted") == 15_000_000
    assert delta("vouch_refund_legs", outcome="reserved") == 0
    assert (
        delta("vouch_verification_runs", contract="stripe.refund.created", verdict="PENDING") == 2
    )
    assert _value(after, "vouch_verification_oldest_pending_run_age_seconds") > 0
    # Provider calls: two PaymentIntents, two refunds, each one call, accepted, timed.
    refunds = {"operation": "refund_create", "outcome": "accepted"}
    payments = {"operation": "payment_create", "outcome": "accepted"}
    assert delta("vouch_provider_calls_total", **refunds) == 2
    assert delta("vouch_provider_calls_total", **payments) == 2
    assert delta("vouch_provider_call_seconds_count", **refunds) == 2
    assert delta("vouch_provider_call_seconds_sum", **refunds) > 0
    assert delta("vouch_provider_call_seconds_bucket", **refunds, le="+Inf") == 2
    assert delta("vouch_provider_attempts_total", operation="refund_create") == 2
    # The same key: one replay, one conflict (another body).
    assert delta("vouch_idempotency_replays_total", surface="rest") == 1
    conflicts = {"surface": "rest", "code": "idempotency_key_conflict"}
    assert delta("vouch_idempotency_conflicts_total", **conflicts) == 1


@pytest.mark.django_db
def test_a_refused_refund_leg_is_counted_as_refused(
    alice: Api, stripe_at_sandbox: SandboxControl, scrape: Any
) -> None:
    """A charge disputed at the provider: its refund is refused, its leg counted so."""
    envelope_id = alice.create(10_000_000)["envelope_id"]
    (leg,) = alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"]["funding_legs"]
    stripe_at_sandbox.open_dispute(leg["charge"], reason="fraudulent")
    before = scrape()
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert response.status_code == 200, response.content
    assert [leg["outcome"] for leg in response.json()["data"]["legs"]] == ["refused"]
    after = scrape()
    refused = {"operation": "refund_create", "outcome": "refused"}
    assert (
        _value(after, "vouch_refund_legs", outcome="refused")
        - _value(before, "vouch_refund_legs", outcome="refused")
        == 1
    )
    assert (
        _value(after, "vouch_provider_calls_total", **refused)
        - _value(before, "vouch_provider_calls_total", **refused)
        == 1
    )


# What each of two other processes counts: a provider call and an idempotency replay.
_COUNT_IN_ANOTHER_PROCESS = """
from core.metrics import idempotency_replayed
from providers.metrics import provider_call_observe
provider_call_observe(operation="refund_read", outcome="unknown", attempts=3, seconds=0.7)
idempotency_replayed(surface="mcp")
"""


@pytest.mark.django_db
def test_multiprocess_mode_sums_the_counters_of_every_process(
    scrape: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As under gunicorn and Celery with PROMETHEUS_MULTIPROC_DIR: two processes count (each in
    its own file there), and a scrape in a third sees their sum."""
    directory = tmp_path / "prometheus"
    directory.mkdir()
    for _ in range(2):
        subprocess.run(
            [sys.executable, "-c", _COUNT_IN_ANOTHER_PROCESS],
            check=True,
            cwd=Path(__file__).resolve().parents[2],
            env={"PROMETHEUS_MULTIPROC_DIR": str(directory), "PATH": "/usr/bin:/bin"},
        )
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    samples = scrape()
    unknown = {"operation": "refund_read", "outcome": "unknown"}
    assert _value(samples, "vouch_provider_calls_total", **unknown) == 2
    assert _value(samples, "vouch_provider_attempts_total", operation="refund_read") == 6
    assert _value(samples, "vouch_provider_call_seconds_bucket", **unknown, le="1.0") == 2
    assert _value(samples, "vouch_provider_call_seconds_bucket", **unknown, le="0.5") == 0
    assert _value(samples, "vouch_idempotency_replays_total", surface="mcp") == 2
    # The database's state is still read at scrape time, beside them.
    assert _value(samples, "vouch_metrics_database_up") == 1


_CALL_WITH_METRICS_UNWRITABLE = """
import sys
from providers.stripe_provider import StripeProvider
outcome = StripeProvider(api_key="sk_test_vouch_sandbox", api_base=sys.argv[1]).charge_read("ch_x")
print(outcome.kind.value, outcome.error_code)
"""


def test_a_metric_that_cannot_be_written_never_breaks_a_provider_call(
    sandbox: SandboxControl, tmp_path: Path
) -> None:
    """Multiprocess mode with its folder gone: the provider's answer still comes back (the metric
    is logged as not written), never an error in its place."""
    result = subprocess.run(
        [sys.executable, "-c", _CALL_WITH_METRICS_UNWRITABLE, sandbox.url],
        cwd=Path(__file__).resolve().parents[2],
        env={"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "gone"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["refused", "resource_missing"]
    assert "provider call metrics not written" in result.stderr
