"""List endpoints as Stripe pages them: newest first (`created` descending, ties newest made
first), the `created` filter, `limit`, `starting_after` / `ending_before` and `has_more`, so that
reconciliation's windowed sweeps see every object exactly once."""

from collections.abc import Callable
from typing import Any

import pytest
import stripe

from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge

Lister = Callable[[dict[str, Any]], Any]


def _forward(lister: Lister, params: dict[str, Any], limit: int) -> list[list[str]]:
    """Every page, following `starting_after`; asserts `has_more` says whether one follows."""
    pages: list[list[str]] = []
    cursor: dict[str, Any] = {}
    while True:
        page = lister({**params, "limit": limit, **cursor})
        pages.append([obj.id for obj in page.data])
        if not page.has_more:
            return pages
        assert len(page.data) == limit
        cursor = {"starting_after": page.data[-1].id}


def _backward(lister: Lister, params: dict[str, Any], limit: int, oldest: str) -> list[str]:
    """Every object newer than `oldest`, following `ending_before` from it, newest first."""
    seen: list[str] = []
    cursor = oldest
    while True:
        page = lister({**params, "limit": limit, "ending_before": cursor})
        ids = [obj.id for obj in page.data]
        seen = ids + seen
        if not page.has_more:
            return seen
        cursor = ids[0]


def _newest_first(made: list[Any]) -> list[str]:
    """Stripe's order: created descending; of two made in the same second, the later first."""
    order = sorted(range(len(made)), key=lambda i: (made[i].created, i), reverse=True)
    return [made[i].id for i in order]


def _window(made: list[Any], low: int, high: int) -> list[str]:
    return [oid for oid in _newest_first(made) if low <= _created(made, oid) < high]


def _created(made: list[Any], object_id: str) -> int:
    return next(obj.created for obj in made if obj.id == object_id)


def _refunds_over_seconds(
    client: stripe.StripeClient, sandbox: SandboxControl, count: int, per_second: int
) -> list[Any]:
    """`count` refunds over several charges, the sandbox clock moved a second every
    `per_second` of them (so several share each second)."""
    charges = [paid_charge(client, 100_000) for _ in range(3)]
    made = []
    for i in range(count):
        if i and i % per_second == 0:
            sandbox.advance_clock(1)
        made.append(client.v1.refunds.create(params={"charge": charges[i % 3], "amount": 100 + i}))
    return made


@pytest.mark.parametrize("limit", [1, 4, 7, 100])
def test_a_created_window_pages_every_refund_exactly_once_in_order(
    client: stripe.StripeClient, sandbox: SandboxControl, limit: int
) -> None:
    made = _refunds_over_seconds(client, sandbox, 31, per_second=4)
    seconds = sorted({r.created for r in made})
    assert len(seconds) >= 7
    low, high = seconds[2], seconds[-2]
    expected = _window(made, low, high)
    assert 10 < len(expected) < len(made)

    def lister(params: dict[str, Any]) -> Any:
        return client.v1.refunds.list(params=params)

    pages = _forward(lister, {"created": {"gte": low, "lt": high}}, limit)
    assert [oid for page in pages for oid in page] == expected
    assert all(pages[:-1])
    assert len(pages[-1]) <= limit
    # The same window from its other bounds: gt the second before, lte the second before high.
    same = _forward(lister, {"created": {"gt": low - 1, "lte": high - 1}}, limit)
    assert same == pages
    # And backwards from the oldest of the window, by ending_before.
    backward = _backward(lister, {"created": {"gte": low, "lt": high}}, limit, expected[-1])
    assert backward == expected[:-1]
    everything = [oid for page in _forward(lister, {}, limit) for oid in page]
    assert everything == _newest_first(made)


def test_an_exact_created_second(client: stripe.StripeClient, sandbox: SandboxControl) -> None:
    made = _refunds_over_seconds(client, sandbox, 12, per_second=3)
    second = sorted({r.created for r in made})[1]
    page = client.v1.refunds.list(params={"created": second, "limit": 100})
    assert [r.id for r in page.data] == _window(made, second, second + 1)
    assert page.has_more is False


def test_charges_events_and_disputes_page_the_same_way(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    made_charges = []
    for i in range(9):
        if i % 3 == 0:
            sandbox.advance_clock(1)
        made_charges.append(client.v1.charges.retrieve(paid_charge(client, 1000 + i)))
    disputes = [sandbox.open_dispute(c.id) for c in made_charges[::2]]
    low = made_charges[3].created

    def charges(params: dict[str, Any]) -> Any:
        return client.v1.charges.list(params=params)

    got = _forward(charges, {"created": {"gte": low}}, 2)
    assert [oid for page in got for oid in page] == _window(made_charges, low, 2**40)

    def events(params: dict[str, Any]) -> Any:
        return client.v1.events.list(params=params)

    all_events = list(client.v1.events.list(params={"limit": 100}).data)
    # Each dispute: charge.dispute.created and charge.dispute.funds_withdrawn (a chargeback).
    assert len(all_events) == 9 * 3 + 2 * len(disputes)
    ids = [oid for page in _forward(events, {}, 4) for oid in page]
    assert ids == [e.id for e in all_events]
    assert len(set(ids)) == len(ids)

    def dispute_list(params: dict[str, Any]) -> Any:
        return client.v1.disputes.list(params=params)

    assert [oid for page in _forward(dispute_list, {}, 2) for oid in page] == [
        d["id"] for d in reversed(disputes)
    ]


def test_event_types_and_wildcards_across_pages(
    client: stripe.StripeClient, sandbox: SandboxControl
) -> None:
    made = _refunds_over_seconds(client, sandbox, 10, per_second=3)
    assert len(made) == 10

    def events(params: dict[str, Any]) -> Any:
        return client.v1.events.list(params=params)

    every = list(client.v1.events.list(params={"limit": 100}).data)
    wanted = {"refund.created", "payment_intent.succeeded"}
    typed = [oid for page in _forward(events, {"types": sorted(wanted)}, 3) for oid in page]
    assert typed == [e.id for e in every if e.type in wanted]
    assert len(typed) == 10 + 3
    starred = [oid for page in _forward(events, {"type": "charge.*"}, 4) for oid in page]
    assert starred == [e.id for e in every if e.type.startswith("charge.")]
    assert len(starred) == 3 + 10  # charge.succeeded, charge.refunded
    low = made[4].created
    windowed = [
        oid
        for page in _forward(events, {"type": "refund.created", "created": {"gte": low}}, 2)
        for oid in page
    ]
    assert windowed == [e.id for e in every if e.type == "refund.created" and e.created >= low]


def test_seeded_ties_list_newest_made_first_and_out_of_order_created_sorts(
    sandbox: SandboxControl, client: stripe.StripeClient
) -> None:
    day = 86_400
    base = 1_700_000_000
    seeded = sandbox.seed(
        [{"amount": 1000, "created": base + day}] * 3
        + [{"amount": 1000, "created": base}, {"amount": 1000, "created": base + 2 * day}]
    )
    ids = [c["id"] for c in seeded]
    page = client.v1.charges.list(params={"limit": 100})
    assert [c.id for c in page.data] == [ids[4], ids[2], ids[1], ids[0], ids[3]]
    tied = _forward(
        lambda params: client.v1.charges.list(params=params), {"created": base + day}, 1
    )
    assert tied == [[ids[2]], [ids[1]], [ids[0]]]


@pytest.mark.parametrize("path", ["refunds", "charges", "disputes", "events"])
@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 101},
        {"starting_after": "x_missing"},
        {"ending_before": "x_missing"},
        {"created": {"after": 5}},
        {"created": {"gt": "soon"}},
    ],
)
def test_bad_list_parameters_are_refused(
    client: stripe.StripeClient, path: str, params: dict[str, Any]
) -> None:
    with pytest.raises(stripe.InvalidRequestError):
        getattr(client.v1, path).list(params=params)


def test_limit_bounds_are_served(client: stripe.StripeClient) -> None:
    charge = paid_charge(client, 100_000)
    for i in range(101):
        client.v1.refunds.create(params={"charge": charge, "amount": 1 + i})
    assert len(client.v1.refunds.list(params={"limit": 1}).data) == 1
    full = client.v1.refunds.list(params={"limit": 100})
    assert (len(full.data), full.has_more) == (100, True)
    assert len(client.v1.refunds.list().data) == 10  # Stripe's default
