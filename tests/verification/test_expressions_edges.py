"""Paths and operators of SPEC §6 at their edges: comparisons with equal values, list indexes at
and past the end, ISO-8601 instants where the answer is false, the precision floor and the clock
skew at their exact boundaries, float epochs, naive datetimes."""

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from verification.contracts import Operator
from verification.expressions import Context, apply, as_instant, compare_times, evaluate, same

SKEW = 2.0
MISSING = Context({}, {}, {}, "op", None).resolve("$input.nothing")
OP_START = datetime(2026, 11, 29, 10, 0, 0, 700_000, tzinfo=UTC)  # 10:00:00.7
SECOND = int(datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC).timestamp())


def at(seconds: float) -> datetime:
    """A datetime `seconds` after 10:00:00 UTC on the test day."""
    return datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC) + timedelta(seconds=seconds)


# --- ordering operators ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "actual", "expected", "result"),
    [
        (Operator.LT, 1, 1, False),
        (Operator.LTE, 1, 1, True),
        (Operator.LT, 2, 1, False),
        (Operator.LTE, 1, 2, True),
        (Operator.LTE, 2, 1, False),
        (Operator.GT, 1, 2, False),
        (Operator.GTE, 1, 2, False),
        (Operator.GTE, 2, 1, True),
        (Operator.GT, 1.5, 1, True),
        (Operator.GTE, Decimal("0.5"), 0.5, True),
        (Operator.LT, Decimal("0.4"), 1, True),
        # Strings order with strings.
        (Operator.LT, "a", "b", True),
        (Operator.GTE, "a", "b", False),
        (Operator.LTE, "b", "b", True),
    ],
)
def test_ordering_operators_including_equal_values(
    operator: Operator, actual: object, expected: object, result: bool
) -> None:
    assert apply(operator, actual, expected, skew_s=SKEW) is result


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        (1, "1"),  # a number against a string, either way round
        ("2", 1),
        (True, 0),  # a boolean is not a number
        (1, False),
        (None, 1),
        ([1], [0]),
        ({"a": 1}, 0),
    ],
)
@pytest.mark.parametrize("operator", [Operator.GT, Operator.GTE, Operator.LT, Operator.LTE])
def test_ordering_what_does_not_order_is_unknown_not_an_error(
    operator: Operator, actual: object, expected: object
) -> None:
    assert apply(operator, actual, expected, skew_s=SKEW) is None


# --- equality and membership -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ([1, 2], [1, 2], True),
        ([1], [1, 2], False),  # a prefix is not the list
        ([1, 2], [1], False),
        ([], [], True),
        ({"a": 1}, {"a": 1, "b": 2}, False),  # missing key
        ({"a": 1}, {"b": 1}, False),
        ({"a": 1}, {"a": 2}, False),
        ({}, {}, True),
        ([1], {"0": 1}, False),
        ([1], 1, False),  # a list never equals what is not a list
        ([], "", False),
        ([], None, False),
        ({}, [], False),
        ({"a": 1}, "a", False),
        ("1", 1, False),
        (None, None, True),
        (False, False, True),
        (True, False, False),
        (0, 0.0, True),
    ],
)
def test_json_equality(a: object, b: object, equal: bool) -> None:
    assert same(a, b) is equal
    assert same(b, a) is equal
    assert apply(Operator.EQ, a, b, skew_s=SKEW) is equal
    assert apply(Operator.NE, a, b, skew_s=SKEW) is (not equal)


def test_in_and_not_in_need_a_list_else_unknown() -> None:
    # A string is not a list of its characters.
    assert apply(Operator.IN, "a", "abc", skew_s=SKEW) is None
    assert apply(Operator.NOT_IN, "a", "abc", skew_s=SKEW) is None
    assert apply(Operator.NOT_IN, "z", {"z": 1}, skew_s=SKEW) is None
    assert apply(Operator.IN, "a", [], skew_s=SKEW) is False
    assert apply(Operator.NOT_IN, "a", [], skew_s=SKEW) is True


@pytest.mark.parametrize("value", [False, "", 0, [], {}])
def test_exists_is_true_for_any_present_value_even_a_falsy_one(value: object) -> None:
    context = Context({"readback": {"field": value}}, {}, {}, "op", None)
    found = evaluate("$observed.readback.field", Operator.EXISTS, None, context, skew_s=SKEW)
    assert found.result is True


def test_exists_is_false_for_null() -> None:
    context = Context({"readback": {"field": None}}, {}, {}, "op", None)
    found = evaluate("$observed.readback.field", Operator.EXISTS, None, context, skew_s=SKEW)
    assert found.result is False


# --- paths ------------------------------------------------------------------------------------

CONTEXT = Context(
    observed={"events": {"count": 2, "items": [{"id": "evt_1"}, {"id": "evt_2"}], "name": "x"}},
    action_result={"id": "re_1", "metadata": {"vouch_leg": "leg_1"}},
    input={"charge": "ch_1", "amount": 876},
    operation_id="erf_1:leg_1",
    operation_created_at=OP_START,
)


@pytest.mark.parametrize(
    "path",
    [
        "$observed.events.items.2.id",  # index equal to the length
        "$observed.events.items.7",  # past it
        "$observed.events.items.first",  # a name into a list
        "$observed.events.items.-1",  # no negative indexes
        "$observed.events.count.0",  # into a number
        "$observed.events.name.0",  # into a string
        "$observed.readback.id",  # a channel not observed
        "$action.result.metadata.other",
        "$input.charge.id",
        "$elsewhere.id",  # no such root
    ],
)
def test_a_path_that_does_not_resolve_is_unknown_never_an_error(path: str) -> None:
    assert ev(path, Operator.EQ, "evt_1").result is None
    assert ev(path, Operator.EXISTS, None).result is False
    assert ev(path, Operator.EQ, "evt_1").actual is None


def ev(path: str, operator: Operator, expected: Any) -> Any:
    return evaluate(path, operator, expected, CONTEXT, skew_s=SKEW)


def test_list_indexes_resolve_up_to_the_last_item() -> None:
    assert CONTEXT.resolve("$observed.events.items.0.id") == "evt_1"
    assert CONTEXT.resolve("$observed.events.items.1.id") == "evt_2"
    assert ev("$observed.events.items.1.id", Operator.EQ, "evt_2").result is True


def test_whole_roots_resolve() -> None:
    assert CONTEXT.resolve("$action.result") == {"id": "re_1", "metadata": {"vouch_leg": "leg_1"}}
    assert CONTEXT.resolve("$input") == {"charge": "ch_1", "amount": 876}
    assert CONTEXT.resolve("$observed.events")["count"] == 2
    assert CONTEXT.resolve("$action.result.metadata.vouch_leg") == "leg_1"
    assert CONTEXT.resolve("$operation.created_at") == OP_START
    assert CONTEXT.resolve("$operation.id") == "erf_1:leg_1"


def test_an_expected_path_is_resolved_and_shown_resolved() -> None:
    matched = ev("$observed.events.items.0.id", Operator.NE, "$action.result.id")
    assert (matched.result, matched.actual, matched.expected) == (True, "evt_1", "re_1")
    literal = ev("$input.amount", Operator.GTE, 876)
    assert (literal.result, literal.actual, literal.expected) == (True, 876, 876)
    unresolved = ev("$input.amount", Operator.EQ, "$observed.events.items.9")
    assert (unresolved.result, unresolved.actual, unresolved.expected) == (None, 876, None)
    by_time = ev("$operation.created_at", Operator.TIME_AFTER, "$operation.created_at")
    assert (by_time.result, by_time.expected) == (True, OP_START)


# --- time -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "actual", "expected", "result"),
    [
        # ISO-8601 instants where the answer is false (they must not parse as epoch 0).
        (Operator.TIME_AFTER, "2026-11-29T09:59:57Z", "2026-11-29T10:00:00Z", False),
        (Operator.TIME_BEFORE, "2026-11-29T10:00:00Z", "2026-11-29T09:59:57Z", False),
        (Operator.TIME_AFTER, "2026-11-29T09:59:57.999Z", OP_START, False),
        (Operator.TIME_BEFORE, "2026-11-29T10:00:05Z", OP_START, False),
        (Operator.TIME_AFTER, "2026-11-29T10:00:00+00:00", "2026-11-29T12:00:00+01:00", False),
        (Operator.TIME_AFTER, "2026-11-29T11:00:00+01:00", "2026-11-29T10:00:00Z", True),
        (Operator.TIME_AFTER, SECOND, "2026-11-29T10:00:03Z", False),
        (Operator.TIME_BEFORE, "2026-11-29T09:59:57Z", SECOND, True),
        # A whole-second ISO string against a fractional instant: both floored to the second
        # (never rounded up, never compared unfloored).
        (Operator.TIME_AFTER, "2026-11-29T10:00:02Z", at(4.7), True),
        (Operator.TIME_BEFORE, "2026-11-29T10:00:02Z", at(4.7), False),
        (Operator.TIME_AFTER, at(4.7), "2026-11-29T10:00:06Z", True),
        (Operator.TIME_BEFORE, at(3.6), "2026-11-29T10:00:06Z", True),
        # The coarser of two fractions: tenths against hundredths floors to tenths.
        (Operator.TIME_AFTER, "2026-11-29T10:00:02.5Z", "2026-11-29T10:00:04.59Z", True),
        (Operator.TIME_AFTER, "2026-11-29T10:00:02.55Z", "2026-11-29T10:00:04.59Z", False),
        (Operator.TIME_AFTER, "2026-11-29T10:00:02.5Z", at(4.59), True),
        (Operator.TIME_AFTER, "2026-11-29T10:00:02.5Z", at(4.61), False),
        # Microsecond instants at the 2 s skew boundary.
        (Operator.TIME_AFTER, at(-1.3), OP_START, True),  # exactly 2 s earlier
        (Operator.TIME_BEFORE, at(-1.3), OP_START, False),
        (Operator.TIME_AFTER, at(-1.300001), OP_START, False),
        (Operator.TIME_BEFORE, at(-1.300001), OP_START, True),
        (Operator.TIME_AFTER, "2026-11-29T09:59:58.700000Z", OP_START, True),
        (Operator.TIME_AFTER, "2026-11-29T09:59:58.699999Z", OP_START, False),
        # Float epochs keep their fraction.
        (Operator.TIME_AFTER, SECOND + 0.25, SECOND + 2.5, False),
        (Operator.TIME_BEFORE, SECOND + 0.25, SECOND + 2.5, True),
        (Operator.TIME_AFTER, SECOND + 0.5, SECOND + 2.5, True),
        (Operator.TIME_AFTER, SECOND + 0.5, at(2.5), True),
        (Operator.TIME_AFTER, SECOND + 0.49, at(2.5), False),
        # Not times: unknown.
        (Operator.TIME_AFTER, None, OP_START, None),
        (Operator.TIME_BEFORE, OP_START, [1], None),
        (Operator.TIME_BEFORE, OP_START, False, None),
        (Operator.TIME_AFTER, Decimal(SECOND), OP_START, None),
        (Operator.TIME_AFTER, "2026-13-01T00:00:00Z", OP_START, None),
    ],
)
def test_time_operators_at_their_edges(
    operator: Operator, actual: object, expected: object, result: bool | None
) -> None:
    assert apply(operator, actual, expected, skew_s=SKEW) is result


def test_the_skew_is_configurable() -> None:
    three_late = at(-2.3)  # 3 s before the operation
    assert apply(Operator.TIME_AFTER, three_late, OP_START, skew_s=2.0) is False
    assert apply(Operator.TIME_AFTER, three_late, OP_START, skew_s=3.0) is True
    assert apply(Operator.TIME_AFTER, three_late, OP_START, skew_s=2.5) is False
    assert apply(Operator.TIME_BEFORE, at(0.2), OP_START, skew_s=0) is True
    assert apply(Operator.TIME_AFTER, at(0.7), OP_START, skew_s=0) is True
    assert apply(Operator.TIME_AFTER, at(0.699999), OP_START, skew_s=0) is False


@pytest.mark.parametrize(
    ("value", "instant"),
    [
        (SECOND, (Decimal(SECOND), Decimal(1))),
        (SECOND + 0.25, (Decimal(SECOND) + Decimal("0.25"), Decimal("0.000001"))),
        (OP_START, (Decimal(SECOND) + Decimal("0.7"), Decimal("0.000001"))),
        ("2026-11-29T10:00:00Z", (Decimal(SECOND), Decimal(1))),
        ("2026-11-29T10:00:00.7Z", (Decimal(SECOND) + Decimal("0.7"), Decimal("0.1"))),
        ("2026-11-29T10:00:00.700+00:00", (Decimal(SECOND) + Decimal("0.7"), Decimal("0.001"))),
        # More than microseconds: Python keeps six digits, so does the precision.
        (
            "2026-11-29T10:00:00.123456789Z",
            (Decimal(SECOND) + Decimal("0.123456"), Decimal("1e-6")),
        ),
        ("2026-11-29T10:00:00", (Decimal(SECOND), Decimal(1))),  # naive: UTC
        (True, None),
        (None, None),
        ("yesterday", None),
        ([SECOND], None),
    ],
)
def test_instants_and_their_precision(value: object, instant: object) -> None:
    assert as_instant(value) == instant


@pytest.fixture
def server_in_new_york() -> Iterator[None]:
    import os

    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


@pytest.mark.usefixtures("server_in_new_york")
def test_a_naive_datetime_is_utc_whatever_the_servers_zone() -> None:
    naive = datetime(2026, 11, 29, 10, 0, 0)
    assert as_instant(naive) == (Decimal(SECOND), Decimal("0.000001"))
    assert apply(Operator.TIME_AFTER, naive, "2026-11-29T10:00:03Z", skew_s=SKEW) is False
    assert apply(Operator.TIME_AFTER, naive, "2026-11-29T10:00:02Z", skew_s=SKEW) is True


def test_compared_times_are_floored_to_the_coarser_precision_with_the_skew() -> None:
    assert compare_times(at(4.7), "2026-11-29T10:00:02Z", 2.0) == (
        Decimal(SECOND + 4),
        Decimal(SECOND + 2),
        Decimal("2.0"),
    )
    assert compare_times(at(4.75), at(1.25), 0.5) == (
        Decimal(SECOND) + Decimal("4.75"),
        Decimal(SECOND) + Decimal("1.25"),
        Decimal("0.5"),
    )
    assert compare_times("soon", at(0), 2.0) is None
    assert compare_times(at(0), "soon", 2.0) is None


@pytest.mark.parametrize(
    "written",
    [
        "2026-11-29T10:00:01.5Z",
        "2026-11-29T10:00:01,5Z",  # ISO 8601's comma before the fraction
        "20261129T100001.5Z",  # ISO 8601's basic format
        "2026-11-29 10:00:01.5+00:00",  # the space RFC 3339 allows
    ],
)
def test_an_iso_fraction_keeps_its_precision_however_it_is_written(written: str) -> None:
    """Tenths floor to tenths: 1.5 s is not after 3.95 s less the 2 s skew (1.9 s); floored to
    whole seconds it would wrongly be (1 ≥ 1)."""
    assert as_instant(written) == (Decimal(SECOND) + Decimal("1.5"), Decimal("0.1"))
    assert apply(Operator.TIME_AFTER, written, at(3.95), skew_s=SKEW) is False
    assert apply(Operator.TIME_BEFORE, written, at(3.95), skew_s=SKEW) is True
