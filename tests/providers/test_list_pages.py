"""Streaming lists (`StripeProvider.list_pages`) against the sandbox, through a tap that records
every byte the adapter receives; and the call budget at the adapter's door."""

import hashlib
import http.client
import inspect
import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import stripe
from django.db import connections

from core.budget import CallBudget, budget_wait
from core.models import ProviderCallBudget
from providers import OutcomeKind, Page, ProviderUnavailable, StripeProvider
from providers.stripe_provider import RetryPolicy
from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

pytestmark = pytest.mark.django_db


class Tap:
    """An HTTP hop between the adapter and the sandbox that forwards each request unchanged and
    records what went out and exactly what came back."""

    def __init__(self, upstream: str) -> None:
        self.exchanges: list[tuple[str, str, int, bytes]] = []  # method, path?query, status, body
        target = urlsplit(upstream)
        tap = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                sent = self.rfile.read(length) if length else None
                upstream_conn = http.client.HTTPConnection(
                    target.hostname or "127.0.0.1", target.port
                )
                passed = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
                }
                upstream_conn.request(self.command, self.path, body=sent, headers=passed)
                answer = upstream_conn.getresponse()
                body = answer.read()
                upstream_conn.close()
                tap.exchanges.append((self.command, self.path, answer.status, body))
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def lists(self, path: str) -> list[tuple[dict[str, str], int, bytes]]:
        """The GETs of `path`: their query (flattened, as on the wire), status and body."""
        return [
            (dict(parse_qsl(urlsplit(full).query)), status, body)
            for method, full, status, body in self.exchanges
            if method == "GET" and urlsplit(full).path == path
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tap(sandbox: SandboxControl) -> Iterator[Tap]:
    t = Tap(sandbox.url)
    yield t
    t.close()


def _provider(api_base: str, **options: Any) -> StripeProvider:
    return StripeProvider(
        api_key="sk_test_vouch_tests",
        api_base=api_base,
        connect_timeout_s=2,
        read_timeout_s=2,
        retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05),
        **options,
    )


@pytest.fixture
def provider(tap: Tap) -> StripeProvider:
    return _provider(tap.url)


@pytest.fixture
def sdk(sandbox: SandboxControl) -> stripe.StripeClient:
    return stripe.StripeClient(
        "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
    )


def _make_refunds(sdk: stripe.StripeClient, count: int) -> list[str]:
    """`count` one-cent refunds at the sandbox, spread over a few charges."""
    charges = [paid_charge(sdk, 100_000) for _ in range(3)]
    return [
        sdk.v1.refunds.create(params={"charge": charges[i % 3], "amount": 1}).id
        for i in range(count)
    ]


class CountingBudget(CallBudget):
    """A real budget (the shared row and all) whose slots the adapter takes through
    `core.budget.slots_take` / `slots_penalize` (every budget of a call at once: decision 0018);
    `counting` records each call that names it."""

    def __init__(self, name: str, per_second: float) -> None:
        super().__init__(name, per_second)
        object.__setattr__(self, "calls", [])


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record, on every CountingBudget a call names, the adapter's takes and penalties."""
    from providers.stripe_provider import limits

    real_take, real_penalize = limits.slots_take, limits.slots_penalize

    def take(budgets: Any, **kwargs: Any) -> Any:
        for budget in budgets:
            if isinstance(budget, CountingBudget):
                budget.calls.append("take")  # type: ignore[attr-defined]
        return real_take(budgets, **kwargs)

    def penalize(budgets: Any, seconds: float) -> None:
        for budget in budgets:
            if isinstance(budget, CountingBudget):
                budget.calls.append(("penalize", seconds))  # type: ignore[attr-defined]
        real_penalize(budgets, seconds)

    monkeypatch.setattr(limits, "slots_take", take)
    monkeypatch.setattr(limits, "slots_penalize", penalize)


def _row(name: str) -> ProviderCallBudget | None:
    return ProviderCallBudget.objects.filter(name=name).first()


# --- paging --------------------------------------------------------------------------------------


def test_list_pages_yields_every_refund_exactly_once_page_by_page(
    provider: StripeProvider, sdk: stripe.StripeClient, tap: Tap
) -> None:
    made = _make_refunds(sdk, 260)
    pages: list[Page] = []
    stream = provider.list_pages("refunds")
    assert tap.lists("/v1/refunds") == []  # nothing is read before it is asked for
    for page in stream:
        pages.append(page)
        # Lazy: one provider page read per page taken, never ahead.
        assert len(tap.lists("/v1/refunds")) == len(pages)

    assert [len(p.data) for p in pages] == [100, 100, 60]
    assert [p.has_more for p in pages] == [True, True, False]
    assert pages[0].params == {"limit": 100}
    for before, after in itertools.pairwise(pages):
        assert after.params == {"limit": 100, "starting_after": before.last_id}
    ids = [obj["id"] for page in pages for obj in page.data]
    assert len(ids) == len(set(ids)) == 260
    assert set(ids) == set(made)
    assert ids == list(reversed(made))  # newest first, as Stripe lists
    for page in pages:
        assert page.kind == "refunds"
        assert page.last_id == page.data[-1]["id"]
        assert page.attempts == 1

    # What went on the wire, and what came back: each body is exactly the bytes received.
    wire = tap.lists("/v1/refunds")
    assert [query for query, _, _ in wire] == [
        {"limit": "100"},
        {"limit": "100", "starting_after": pages[0].last_id},
        {"limit": "100", "starting_after": pages[1].last_id},
    ]
    for page, (_, status, received) in zip(pages, wire, strict=True):
        assert status == 200
        assert page.body == received
        assert hashlib.sha256(page.body).hexdigest() == hashlib.sha256(received).hexdigest()
        assert json.loads(received)["data"] == page.data


def test_list_pages_sends_the_created_window_and_event_types(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient, tap: Tap
) -> None:
    early = _make_refunds(sdk, 3)
    middle = int(sandbox.advance_clock(1000)["now"])
    late = _make_refunds(sdk, 4)
    end = int(sandbox.advance_clock(1000)["now"])
    _make_refunds(sdk, 2)  # after the window

    window = list(provider.list_pages("refunds", created_gte=middle, created_lt=end, limit=3))
    assert [obj["id"] for page in window for obj in page.data] == list(reversed(late))
    assert window[0].params == {"limit": 3, "created": {"gte": middle, "lt": end}}
    query, _, _ = tap.lists("/v1/refunds")[0]
    assert query == {"limit": "3", "created[gte]": str(middle), "created[lt]": str(end)}
    assert not set(early) & {obj["id"] for page in window for obj in page.data}

    events = list(provider.list_pages("events", types=["refund.created", "charge.refunded"]))
    listed = [obj for page in events for obj in page.data]
    assert {e["type"] for e in listed} == {"refund.created", "charge.refunded"}
    assert len([e for e in listed if e["type"] == "refund.created"]) == 3 + 4 + 2
    assert events[0].params["types"] == ["refund.created", "charge.refunded"]
    query, _, _ = tap.lists("/v1/events")[0]
    # The SDK sends Stripe's array `types[]` with indexes, as Stripe reads it.
    assert (query["types[0]"], query["types[1]"]) == ("refund.created", "charge.refunded")

    # Resuming after an object: only what is older.
    resumed = list(provider.list_pages("refunds", starting_after=late[0]))
    assert [obj["id"] for page in resumed for obj in page.data] == list(reversed(early))
    assert resumed[0].params == {"limit": 100, "starting_after": late[0]}


@pytest.mark.parametrize("kind", ["charges", "disputes"])
def test_list_pages_lists_charges_and_disputes(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient, kind: str
) -> None:
    charges = [paid_charge(sdk) for _ in range(3)]
    disputes = [sandbox.open_dispute(charge)["id"] for charge in charges[:2]]
    expected = charges if kind == "charges" else disputes
    pages = list(provider.list_pages(kind, limit=2))
    assert [obj["id"] for page in pages for obj in page.data] == list(reversed(expected))
    assert all(page.kind == kind for page in pages)


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("payment_intents", {}, "cannot list"),
        ("refunds", {"types": ["refund.created"]}, "types selects events"),
        ("events", {"types": "refund.created"}, "not one string"),
        ("refunds", {"limit": 0}, "limit is 1 to 100"),
        ("refunds", {"limit": 101}, "limit is 1 to 100"),
    ],
)
def test_list_pages_refuses_what_it_cannot_send(
    provider: StripeProvider, tap: Tap, kind: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        provider.list_pages(kind, **options)
    assert tap.exchanges == []  # refused at once, not when first iterated


def test_a_page_that_keeps_failing_raises_after_the_pages_before_it(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient, tap: Tap
) -> None:
    _make_refunds(sdk, 5)
    stream = provider.list_pages("refunds", limit=2)
    first = next(stream)
    sandbox.add_fault("/v1/refunds", "server_error", method="GET")
    with pytest.raises(ProviderUnavailable) as caught:
        next(stream)
    failure = caught.value
    assert (failure.error_code, failure.http_status) == ("server_error", 500)
    assert (failure.outcome.kind, failure.outcome.attempts) == (OutcomeKind.UNKNOWN, 3)
    assert (failure.kind, failure.params) == (
        "refunds",
        {"limit": 2, "starting_after": first.last_id},
    )
    assert sandbox.faults()[0]["hits"] == 3
    with pytest.raises(StopIteration):  # a failed stream is over, not resumed silently
        next(stream)


def test_a_refused_page_raises_with_the_refusal(provider: StripeProvider) -> None:
    with pytest.raises(ProviderUnavailable) as caught:
        next(provider.list_pages("refunds", starting_after="re_missing"))
    assert caught.value.outcome.kind is OutcomeKind.REFUSED
    assert (caught.value.error_code, caught.value.http_status) == ("resource_missing", 400)
    assert caught.value.outcome.attempts == 1


def test_refunds_of_charge_answers_an_outcome_with_attempts_summed(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk, 100_000)
    made = [sdk.v1.refunds.create(params={"charge": charge, "amount": 1}).id for _ in range(5)]
    sandbox.add_fault("/v1/refunds", "server_error", method="GET", times=1)
    listed = provider.refunds_of_charge(charge, page_size=2)
    assert [r["id"] for r in listed.require()["data"]] == list(reversed(made))
    assert listed.attempts == 4  # three pages, the first one retried once
    sandbox.add_fault("/v1/refunds", "server_error", method="GET")
    failed = provider.refunds_of_charge(charge, page_size=2)
    assert (failed.kind, failed.error_code, failed.attempts) == (
        OutcomeKind.UNKNOWN,
        "server_error",
        3,
    )


# --- the call budget at the adapter -------------------------------------------------------------


def test_a_429_with_retry_after_penalizes_the_budget_and_the_page_is_read_after(
    sandbox: SandboxControl, sdk: stripe.StripeClient, tap: Tap, counting: None
) -> None:
    made = _make_refunds(sdk, 3)
    slept: list[float] = []
    # The adapter's own sleep does nothing here: only the shared budget can make it wait.
    provider = _provider(tap.url, sleep=slept.append)
    budget = CountingBudget("test-429", 20)
    sandbox.add_fault("/v1/refunds", "rate_limit", method="GET", times=1, retry_after_s=2)
    started_at, started = time.time(), time.monotonic()
    with budget_wait(5):  # a worker's wait: longer than the provider's 2 s
        page = next(provider.list_pages("refunds", budget=budget))
    waited = time.monotonic() - started

    assert [obj["id"] for obj in page.data] == list(reversed(made))
    assert page.attempts == 2
    assert budget.calls == ["take", ("penalize", 2.0), "take"]  # type: ignore[attr-defined]
    assert slept == [2.0]
    assert waited >= 1.95  # held by the budget until the provider's Retry-After had passed
    assert [status for _, status, _ in tap.lists("/v1/refunds")] == [429, 200]
    row = _row("test-429")
    assert row is not None
    assert row.next_slot_at >= started_at + 2.0


def test_every_attempt_takes_from_the_budget(
    provider: StripeProvider, sandbox: SandboxControl, sdk: stripe.StripeClient, counting: None
) -> None:
    refund = _make_refunds(sdk, 1)[0]
    budget = CountingBudget("test-attempts", 1000)
    sandbox.add_fault("/v1/refunds/*", "server_error", method="GET", times=2)
    outcome = provider.refund_read(refund, budget=budget)
    assert (outcome.accepted, outcome.attempts) == (True, 3)
    assert budget.calls == ["take", "take", "take"]  # type: ignore[attr-defined]
    for read, object_id in [
        (provider.charge_read, outcome.require()["charge"]),
        (provider.payment_intent_read, outcome.require()["payment_intent"]),
    ]:
        assert read(object_id, budget=budget).accepted
    assert len(budget.calls) == 5  # type: ignore[attr-defined]


def test_writes_are_never_held_back_by_a_budget(
    provider: StripeProvider, sdk: stripe.StripeClient
) -> None:
    for write in ("payment_create", "refund_create", "dispute_submit_manually", "dispute_file"):
        assert "budget" not in inspect.signature(getattr(StripeProvider, write)).parameters
    with pytest.raises(ValueError, match="never draws on a call budget"):
        provider._call(lambda options: None, idempotency_key="k", budget=CallBudget("w", 1))

    # Every read on this budget now waits a minute; a refund goes straight through.
    CallBudget("test-writes", 1).penalize(60)
    charge = paid_charge(sdk)
    started = time.monotonic()
    outcome = provider.refund_create(
        charge=charge, amount_cents=100, idempotency_key="erf_w:leg_1", metadata={}
    )
    assert outcome.accepted
    assert time.monotonic() - started < 5


def test_a_budget_taken_inside_a_transaction_commits_on_its_own(
    provider: StripeProvider, sdk: stripe.StripeClient
) -> None:
    """This test runs inside a transaction (pytest-django's): the budget's write is not part of
    it, so other processes see it at once and no rollback undoes it."""
    refund = _make_refunds(sdk, 1)[0]
    assert provider.refund_read(refund, budget=CallBudget("test-own-tx", 10)).accepted
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM core_providercallbudget WHERE name = 'test-own-tx'"
            )
            assert cursor.fetchone() == (1,)
    finally:
        other.close()
