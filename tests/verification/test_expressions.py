from datetime import UTC, datetime

import pytest

from verification.contracts import Operator
from verification.expressions import Context, apply, evaluate

MISSING = Context({}, {}, {}, "op", None).resolve("$input.nothing")
SKEW = 2.0


@pytest.mark.parametrize(
    ("operator", "actual", "expected", "result"),
    [
        (Operator.EQ, "a", "a", True),
        (Operator.EQ, 1, 2, False),
        (Operator.NE, 1, 2, True),
        (Operator.NE, "x", "x", False),
        (Operator.IN, "b", ["a", "b"], True),
        (Operator.IN, "c", ["a", "b"], False),
        (Operator.NOT_IN, "c", ["a", "b"], True),
        (Operator.NOT_IN, "a", ["a", "b"], False),
        (Operator.IN, "a", "not-a-list", None),
        (Operator.GT, 2, 1, True),
        (Operator.GT, 1, 1, False),
        (Operator.GTE, 1, 1, True),
        (Operator.LT, 1, 2, True),
        (Operator.LTE, 3, 2, False),
        (Operator.GT, "2", 1, None),  # incomparable: unknown, never an accident
        (Operator.EXISTS, 0, None, True),
        (Operator.EXISTS, None, None, False),
    ],
)
def test_operators(
    operator: Operator, actual: object, expected: object, result: bool | None
) -> None:
    assert apply(operator, actual, expected, skew_s=SKEW) is result


@pytest.mark.parametrize(
    ("operator", "actual", "expected", "result"),
    [
        # JSON has booleans and numbers; Python's True == 1 must not leak into a verdict.
        (Operator.EQ, True, 1, False),
        (Operator.EQ, 1, True, False),
        (Operator.EQ, False, 0, False),
        (Operator.EQ, 0, False, False),
        (Operator.EQ, True, True, True),
        (Operator.EQ, 1, 1.0, True),  # one JSON number
        (Operator.NE, True, 1, True),
        (Operator.NE, False, 0, True),
        (Operator.NE, False, False, False),
        (Operator.IN, True, [1, 2], False),
        (Operator.IN, 0, [False], False),
        (Operator.IN, True, [False, True], True),
        (Operator.NOT_IN, True, [1], True),
        (Operator.NOT_IN, False, [0, "x"], True),
        (Operator.NOT_IN, 1, [True], True),
        # Also inside lists and objects.
        (Operator.EQ, [True, 2], [1, 2], False),
        (Operator.EQ, {"paid": True}, {"paid": 1}, False),
        (Operator.EQ, {"paid": True, "n": [1]}, {"paid": True, "n": [1.0]}, True),
        (Operator.IN, [1], [[True]], False),
    ],
)
def test_booleans_are_not_numbers(
    operator: Operator, actual: object, expected: object, result: bool
) -> None:
    assert apply(operator, actual, expected, skew_s=SKEW) is result


@pytest.mark.parametrize("operator", [op for op in Operator if op is not Operator.EXISTS])
def test_an_unresolved_path_is_unknown_for_every_operator_but_exists(operator: Operator) -> None:
    assert apply(operator, MISSING, 1, skew_s=SKEW) is None
    assert apply(operator, 1, MISSING, skew_s=SKEW) is None


def test_exists_is_false_for_an_unresolved_path() -> None:
    assert apply(Operator.EXISTS, MISSING, None, skew_s=SKEW) is False


OP_START = datetime(2026, 11, 29, 10, 0, 0, 700_000, tzinfo=UTC)  # 10:00:00.7
SECOND = int(datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC).timestamp())


@pytest.mark.parametrize(
    ("operator", "actual", "expected", "result"),
    [
        # Same second as the operation: after it, not before it (floored, never rounded).
        (Operator.TIME_AFTER, SECOND, OP_START, True),
        (Operator.TIME_BEFORE, SECOND, OP_START, False),
        # The provider's clock may lag by the skew (2 s): still after.
        (Operator.TIME_AFTER, SECOND - 2, OP_START, True),
        (Operator.TIME_AFTER, SECOND - 3, OP_START, False),
        (Operator.TIME_BEFORE, SECOND - 3, OP_START, True),
        (Operator.TIME_BEFORE, SECOND - 2, OP_START, False),
        # ISO-8601 strings, with and without fractions, and datetimes.
        (Operator.TIME_AFTER, "2026-11-29T10:00:01Z", "2026-11-29T10:00:00.900Z", True),
        (Operator.TIME_BEFORE, "2026-11-29T09:59:57.999Z", OP_START, True),
        (Operator.TIME_AFTER, OP_START, OP_START, True),
        (Operator.TIME_AFTER, "not a time", OP_START, None),
        (Operator.TIME_AFTER, True, OP_START, None),
    ],
)
def test_time_operators(
    operator: Operator, actual: object, expected: object, result: bool | None
) -> None:
    assert apply(operator, actual, expected, skew_s=SKEW) is result


def test_paths_resolve_into_each_root() -> None:
    context = Context(
        observed={"readback": {"status": "succeeded", "items": [{"id": "x"}]}},
        action_result={"id": "re_1"},
        input={"charge": "ch_1"},
        operation_id="erf_1:leg_1",
        operation_created_at=OP_START,
    )
    assert context.resolve("$observed.readback.status") == "succeeded"
    assert context.resolve("$observed.readback.items.0.id") == "x"
    assert context.resolve("$action.result.id") == "re_1"
    assert context.resolve("$input.charge") == "ch_1"
    assert context.resolve("$operation.id") == "erf_1:leg_1"
    assert context.resolve("$operation.created_at") == OP_START
    unresolved = evaluate("$observed.events.count", Operator.GT, 1, context, skew_s=SKEW)
    assert (unresolved.result, unresolved.actual) == (None, None)
    by_path = evaluate(
        "$observed.readback.status", Operator.EQ, "$action.result.status", context, skew_s=SKEW
    )
    assert by_path.result is None  # the expected path does not resolve either
