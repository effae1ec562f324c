"""Stripe's documented rate limits (https://docs.stripe.com/rate-limits), as the official SDK meets
them at a sandbox of each test's own, at Stripe's figures unless a test says otherwise.

Bursts are threads released together on connections opened beforehand (with the limits lifted, so
that opening them takes no token; turning the limits on again fills every bucket). What a burst
gets is decided by the limiter alone: the figures are capacities (a full bucket serves that many at
once), and which limit refuses is fixed by the figures (README: a request takes a token from every
bucket it counts against or from none). That a burst is refused at all only needs it to be offered
faster than the limit refills: each burst offers several times its limit's capacity."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import stripe

from stripe_sandbox import SandboxServer
from stripe_sandbox.client import SandboxControl
from stripe_sandbox.rate_limits import STRIPE_LIMITS
from tests.helpers import CARD_ONLY, free_port

ROOT = Path(__file__).resolve().parents[2]
OK = "ok"
RATE_LIMITS = "https://docs.stripe.com/rate-limits"
IDEMPOTENCY = "https://docs.stripe.com/api/idempotent_requests"
TOKEN_BUCKET = "https://stripe.com/blog/rate-limiters"


@pytest.fixture
def server() -> Iterator[SandboxServer]:
    """A sandbox of the test's own, enforcing Stripe's limits (the default), live keys accepted."""
    with SandboxServer(port=0, live_keys=True) as server:
        yield server


@pytest.fixture
def control(server: SandboxServer) -> SandboxControl:
    return SandboxControl(server.url)


def sdk(server: SandboxServer, key: str = "sk_test_limits") -> stripe.StripeClient:
    return stripe.StripeClient(
        key,
        base_addresses={"api": server.url, "files": server.url},
        http_client=stripe.RequestsClient(timeout=(2, 10)),
        max_network_retries=0,
    )


def outcome(call: Callable[[], Any]) -> str:
    """OK for any answer that passed the limiter (a 404 or 400 did), else the 429's reason."""
    try:
        call()
    except stripe.RateLimitError as exc:
        return str(exc.headers["Stripe-Rate-Limited-Reason"])
    except stripe.StripeError as exc:
        if exc.http_status == 429:
            raise
    return OK


def burst(
    control: SandboxControl,
    client: stripe.StripeClient,
    calls: list[Callable[[], Any]],
    **figures: Any,
) -> list[str]:
    """Each call in a thread of its own, all released at once; answers each call's outcome. The
    limits are lifted while the threads open their connections, then set to Stripe's (and
    `figures`), buckets full."""
    ready = threading.Barrier(len(calls) + 1)
    go = threading.Barrier(len(calls) + 1)
    outcomes = [""] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        outcome(lambda: client.v1.charges.retrieve("ch_warm_up"))
        ready.wait()
        go.wait()
        outcomes[i] = outcome(call)

    control.rate_limits_set(enabled=False)
    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    ready.wait()
    control.rate_limits_set(enabled=True, **figures)
    go.wait()
    for thread in threads:
        thread.join()
    return outcomes


def pdf() -> io.BytesIO:
    upload = io.BytesIO(b"%PDF-1.4\n")
    upload.name = "evidence.pdf"
    return upload


def seeded_charge(control: SandboxControl, amount: int = 1_000_000) -> str:
    """A succeeded charge made through the control API (which is never limited)."""
    return str(control.seed([{"amount": amount}])[0]["id"])


@pytest.mark.stripe_behaviour(
    "the documented limits: 100/s live, 25/s sandbox, 25/s per endpoint, Files 20 reads and "
    "20 writes/s, Search 20/s, 1,000 updates per PaymentIntent an hour",
    source=RATE_LIMITS,
)
def test_stripe_figures_are_the_defaults(control: SandboxControl) -> None:
    answer = control.rate_limits()
    assert answer["enabled"] is True
    assert answer["limits"] == {
        "global_rps_live": 100,
        "global_rps_sandbox": 25,
        "endpoint_rps": 25,
        "files_read_rps": 20,
        "files_write_rps": 20,
        "search_rps": 20,
        "payment_intent_updates_per_hour": 1000,
    }
    assert answer["limits"] == STRIPE_LIMITS


@pytest.mark.stripe_behaviour(
    "a sandbox account is limited to 25 requests a second across endpoints (global-rate)",
    source=RATE_LIMITS,
)
def test_sandbox_key_global_limit_is_25_a_second_across_endpoints(
    server: SandboxServer, control: SandboxControl
) -> None:
    client = sdk(server)
    outcomes = burst(control, client, [client.v1.charges.list] * 60 + [client.v1.refunds.list] * 60)
    counts = Counter(outcomes)
    # The global bucket empties first: it pays for both endpoints, each endpoint's for one.
    assert set(counts) == {OK, "global-rate"}
    assert counts[OK] >= 25  # a full bucket serves a second's worth at once
    by_endpoint = control.rate_limits()["refused"]["by_endpoint"]
    assert sum(by_endpoint.values()) == counts["global-rate"]


@pytest.mark.stripe_behaviour(
    "a live-mode account is limited to 100 requests a second (global-rate)",
    source=RATE_LIMITS,
)
def test_live_key_global_limit_is_100_a_second(
    server: SandboxServer, control: SandboxControl
) -> None:
    client = sdk(server, "sk_live_limits")
    v1 = client.v1
    endpoints: list[Callable[[], Any]] = [
        v1.charges.list, v1.refunds.list, v1.disputes.list, v1.events.list,
        v1.payment_intents.list, v1.balance_transactions.list,
        lambda: v1.charges.retrieve("ch_missing"), lambda: v1.refunds.retrieve("re_missing"),
        lambda: v1.disputes.retrieve("dp_missing"), lambda: v1.events.retrieve("evt_missing"),
        lambda: v1.payment_intents.retrieve("pi_missing"),
        lambda: v1.balance_transactions.retrieve("txn_missing"),
        lambda: v1.refunds.cancel("re_missing"), lambda: v1.disputes.close("dp_missing"),
        lambda: v1.refunds.update("re_missing"), lambda: v1.disputes.update("dp_missing"),
        lambda: v1.payment_intents.confirm("pi_missing"),
        lambda: v1.payment_intents.cancel("pi_missing"),
        lambda: v1.payment_intents.create(params={}), lambda: v1.refunds.create(params={}),
    ]  # fmt: skip
    # 25 each: no endpoint can be over its own 25 a second, only the account over its 100.
    outcomes = burst(control, client, [call for call in endpoints for _ in range(25)])
    counts = Counter(outcomes)
    assert set(counts) == {OK, "global-rate"}
    assert counts[OK] >= 100
    assert control.rate_limits()["refused"]["by_reason"] == {"global-rate": counts["global-rate"]}


@pytest.mark.stripe_behaviour(
    "each endpoint is limited to 25 requests a second, ids sharing it (endpoint-rate)",
    source=RATE_LIMITS,
)
def test_each_endpoint_is_limited_to_25_a_second_while_another_still_answers(
    server: SandboxServer, control: SandboxControl
) -> None:
    client = sdk(server, "sk_live_limits")  # a live key: the account's limit is 100, not 25
    charge = seeded_charge(control)
    hot = [lambda: client.v1.charges.retrieve(charge)] * 100
    other = [client.v1.refunds.list] * 24
    outcomes = burst(control, client, hot + other)
    hot_counts = Counter(outcomes[: len(hot)])
    assert set(hot_counts) == {OK, "endpoint-rate"}
    assert hot_counts[OK] >= 25
    assert outcomes[len(hot) :] == [OK] * len(other)
    assert control.rate_limits()["refused"]["by_endpoint"] == {
        "GET /v1/charges/{id}": hot_counts["endpoint-rate"]
    }


@pytest.mark.stripe_behaviour(
    "the Files API is limited to 20 read requests a second",
    source=RATE_LIMITS,
)
def test_files_api_reads_are_limited_to_20_a_second(
    server: SandboxServer, control: SandboxControl
) -> None:
    client = sdk(server, "sk_live_limits")
    upload = client.v1.files.create(params={"purpose": "dispute_evidence", "file": pdf()})
    # Two Files endpoints of 40 each: under the account's 100, each over nothing of its own but
    # together over the Files API's 20 reads a second.
    calls: list[Callable[[], Any]] = [client.v1.files.list] * 40
    calls += [lambda: client.v1.files.retrieve(upload.id)] * 40
    counts = Counter(burst(control, client, calls))
    assert set(counts) == {OK, "resource-specific"}
    assert counts[OK] >= 20
    # The contents, from files.stripe.com, are no API request (README: *Rate limits*): never
    # limited, even with the account's figure shrunk to 1 a second.
    control.rate_limits_set(global_rps_live=1)
    assert [_download(server, upload.id) for _ in range(30)] == [b"%PDF-1.4\n"] * 30
    assert "GET /v1/files/{id}/contents" not in str(control.rate_limits())


def _download(server: SandboxServer, file_id: str) -> bytes:
    request = urllib.request.Request(  # noqa: S310 - the sandbox's own URL
        f"{server.url}/v1/files/{file_id}/contents",
        headers={"Authorization": "Bearer sk_live_limits"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - ditto
        body: bytes = response.read()
    return body


@pytest.mark.stripe_behaviour(
    "the Files API is limited to 20 write requests a second",
    source=RATE_LIMITS,
)
def test_files_api_writes_are_limited_to_20_a_second(
    server: SandboxServer, control: SandboxControl
) -> None:
    client = sdk(server, "sk_live_limits")

    def upload() -> None:
        client.v1.files.create(params={"purpose": "dispute_evidence", "file": pdf()})

    counts = Counter(burst(control, client, [upload] * 80))
    assert set(counts) == {OK, "resource-specific"}
    assert counts[OK] >= 20
    assert control.state()["counts"]["files"] == counts[OK]


@pytest.mark.stripe_behaviour(
    "the Search API is limited to 20 read requests a second",
    source=RATE_LIMITS,
)
def test_search_api_is_limited_to_20_a_second(
    server: SandboxServer, control: SandboxControl
) -> None:
    client = sdk(server)  # a sandbox key: the account's 25 is still over the Search API's 20

    def search() -> None:
        client.v1.payment_intents.search(params={"query": "status:'succeeded'"})

    counts = Counter(burst(control, client, [search] * 80))
    assert set(counts) == {OK, "resource-specific"}
    assert counts[OK] >= 20
    assert control.rate_limits()["refused"]["by_endpoint"] == {
        "GET /v1/payment_intents/search": counts["resource-specific"]
    }


@pytest.mark.stripe_behaviour(
    "1,000 update requests per PaymentIntent an hour (resource-specific)",
    source=RATE_LIMITS,
)
def test_payment_intent_updates_are_limited_per_payment_intent_per_hour(
    server: SandboxServer, control: SandboxControl
) -> None:
    """1,000 an hour is too many to reach in a test: the figure is shrunk to 3 (its default,
    1,000, is checked in test_stripe_figures_are_the_defaults)."""
    client = sdk(server)
    control.rate_limits_set(payment_intent_updates_per_hour=3)
    params = {"amount": 500, "currency": "usd", **CARD_ONLY}
    first = client.v1.payment_intents.create(params=params)
    second = client.v1.payment_intents.create(params=params)  # creating one is no update of it
    assert client.v1.payment_intents.cancel(first.id).status == "canceled"
    for _ in range(2):  # updates refused by the endpoint (already canceled) still count
        assert outcome(lambda: client.v1.payment_intents.confirm(first.id)) == OK
    assert outcome(lambda: client.v1.payment_intents.cancel(first.id)) == "resource-specific"
    assert outcome(lambda: client.v1.payment_intents.retrieve(first.id)) == OK  # a read
    assert client.v1.payment_intents.cancel(second.id).status == "canceled"  # its own hour
    assert control.rate_limits()["refused"] == {
        "total": 1,
        "by_endpoint": {"POST /v1/payment_intents/{id}/cancel": 1},
        "by_reason": {"resource-specific": 1},
    }


@pytest.mark.stripe_behaviour(
    "a request over a limit is answered 429 rate_limit with Stripe-Rate-Limited-Reason",
    source=RATE_LIMITS,
)
def test_the_429_as_the_sdk_sees_it(server: SandboxServer, control: SandboxControl) -> None:
    client = sdk(server)
    control.rate_limits_set(endpoint_rps=1)
    client.v1.refunds.list()
    with pytest.raises(stripe.RateLimitError) as raised:
        client.v1.refunds.list()
    error = raised.value
    assert (error.http_status, error.error.code) == (429, "rate_limit")
    assert error.headers["Stripe-Rate-Limited-Reason"] == "endpoint-rate"
    assert error.headers["Request-Id"].startswith("req_")
    # Stripe documents neither on a rate-limited answer (README: *Rate limits*).
    assert "Retry-After" not in error.headers
    assert "Stripe-Should-Retry" not in error.headers
    body = error.json_body["error"]
    assert body["type"] == "invalid_request_error"
    assert body["code"] == "rate_limit"
    assert body["message"] == (
        "Request rate limit exceeded. Learn more about rate limits here "
        "https://stripe.com/docs/rate-limits."
    )
    assert body["doc_url"] == "https://stripe.com/docs/error-codes/rate-limit"
    assert body["request_log_url"].startswith(
        f"https://dashboard.stripe.com/test/logs/{error.headers['Request-Id']}?t="
    )


@pytest.mark.stripe_behaviour(
    "the limiter is a token bucket: an even pace under the limit is never refused",
    source=TOKEN_BUCKET,
)
def test_an_evenly_paced_client_at_98_percent_of_the_limit_is_never_refused(
    server: SandboxServer, control: SandboxControl
) -> None:
    """24.5 requests a second for 3 s on one endpoint of a sandbox account (its endpoint and
    global limits both 25): a bucket refilled at 25 a second never runs dry. A request that
    leaves late is sent at once; the bucket's second of capacity absorbs the bunching."""
    client = sdk(server)
    interval = 1 / (0.98 * 25)
    outcomes = []
    start = time.monotonic()
    for i in range(int(3 / interval)):
        delay = start + i * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        outcomes.append(outcome(client.v1.refunds.list))
    assert outcomes == [OK] * len(outcomes)
    assert control.rate_limits()["refused"]["total"] == 0
    assert sum(control.rate_limits()["served"]["GET /v1/refunds"].values()) == len(outcomes)


@pytest.mark.stripe_behaviour(
    "a 429 is answered before the endpoint begins: not saved under the key, a retry executes",
    source=IDEMPOTENCY,
)
def test_a_refused_write_retried_with_its_key_executes_once(
    server: SandboxServer, control: SandboxControl
) -> None:
    """A 429 is answered before the endpoint begins: nothing applied, nothing stored under the
    key (https://docs.stripe.com/api/idempotent_requests), so the retry with the key runs."""
    client = sdk(server)
    charge = seeded_charge(control)

    def refund(key: str) -> Callable[[], Any]:
        return lambda: client.v1.refunds.create(
            params={"charge": charge, "amount": 1, "metadata": {"key": key}},
            options={"idempotency_key": key},
        )

    keys = [f"refund-{i}" for i in range(60)]
    outcomes = burst(control, client, [refund(key) for key in keys])
    refused = [key for key, result in zip(keys, outcomes, strict=True) if result != OK]
    assert set(outcomes) == {OK, "global-rate"}  # one endpoint: the account's bucket first
    served = outcomes.count(OK)
    assert control.state()["charges"][charge]["refunds"] == served  # the refused made none

    key = refused[0]
    time.sleep(1.1)  # the bucket refills: a second later it holds a second's worth again
    first = refund(key)()
    assert first.metadata["key"] == key
    assert "Idempotent-Replayed" not in first.last_response.headers
    again = refund(key)()
    assert again.id == first.id
    assert again.last_response.headers["Idempotent-Replayed"] == "true"
    refunds = client.v1.refunds.list(params={"charge": charge, "limit": 100}).data
    assert len(refunds) == served + 1
    assert [r.id for r in refunds if r.metadata["key"] == key] == [first.id]


def test_lifting_overriding_and_restoring_the_limits(
    server: SandboxServer, control: SandboxControl
) -> None:
    client = sdk(server)
    lifted = control.rate_limits_set(enabled=False)
    assert lifted["enabled"] is False
    assert [outcome(client.v1.refunds.list) for _ in range(60)] == [OK] * 60

    overridden = control.rate_limits_set(endpoint_rps=5)  # a figure given: enforced again
    assert overridden["enabled"] is True
    assert overridden["limits"] == {**STRIPE_LIMITS, "endpoint_rps": 5}
    counts = Counter(burst(control, client, [client.v1.refunds.list] * 20, endpoint_rps=5))
    assert set(counts) == {OK, "endpoint-rate"}  # its 5 a second is under the account's 25
    assert counts[OK] >= 5

    restored = control.rate_limits_set(enabled=True)
    assert restored["limits"] == STRIPE_LIMITS
    counts = Counter(burst(control, client, [client.v1.refunds.list] * 80))
    assert counts[OK] >= 25
    assert counts["global-rate"] > 0

    with pytest.raises(RuntimeError, match="400"):
        control.rate_limits_set(endpoint_rps=0)
    with pytest.raises(RuntimeError, match="unknown rate limit fields"):
        control.rate_limits_set(per_second=5)


def test_the_counters_reset_and_the_state_summary(
    server: SandboxServer, control: SandboxControl
) -> None:
    client = sdk(server)
    before = control.rate_limits()["served"].get("GET /v1/charges", {})
    outcomes = burst(control, client, [client.v1.charges.list] * 60, endpoint_rps=10)
    counts = Counter(outcomes)
    answer = control.rate_limits()
    assert answer["refused"] == {
        "total": counts["endpoint-rate"],
        "by_endpoint": {"GET /v1/charges": counts["endpoint-rate"]},
        "by_reason": {"endpoint-rate": counts["endpoint-rate"]},
    }
    served = answer["served"]["GET /v1/charges"]
    assert sum(served.values()) - sum(before.values()) == counts[OK]
    now = int(time.time())
    assert all(now - 60 <= int(second) <= now for second in served)
    state = control.state()["rate_limits"]
    assert state["refused"] == answer["refused"]
    assert state["enabled"] is True

    control.reset()
    after = control.rate_limits()
    assert after["refused"] == {"total": 0, "by_endpoint": {}, "by_reason": {}}
    assert after["served"] == {}
    assert after["limits"]["endpoint_rps"] == 10  # the configuration stays


def test_lifted_by_the_constructor() -> None:
    with SandboxServer(port=0, rate_limits=False) as server:
        client = sdk(server)
        assert SandboxControl(server.url).rate_limits()["enabled"] is False
        assert [outcome(client.v1.refunds.list) for _ in range(60)] == [OK] * 60


def test_live_keys_are_refused_unless_accepted() -> None:
    with SandboxServer(port=0) as server, pytest.raises(stripe.AuthenticationError):
        sdk(server, "sk_live_limits").v1.refunds.list()


@pytest.mark.parametrize(("flag", "enabled"), [([], True), (["--rate-limits", "off"], False)])
def test_command_line_flag(flag: list[str], enabled: bool) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "stripe_sandbox", "--port", str(port), *flag],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert "listening" in process.stdout.readline()
        assert SandboxControl(f"http://127.0.0.1:{port}").rate_limits()["enabled"] is enabled
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
