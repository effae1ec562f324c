"""A body of plain integers for a serializer of MicroFields only (a refund's) is taken without
building the serializer (issue 15): it must answer exactly what the serializer answers, and leave
every other body, valid or not, to the serializer and its error messages."""

from typing import Any

import pytest
from django.core.validators import MinValueValidator
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework import serializers
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from core import exceptions as core_errors
from core.api.parsing import BIGINT_MAX, MicroField, Strict, _micro_only, parse_body
from envelopes.api.views import DebitInput, FundingInput, RefundInput


class Bounded(Strict):
    amount_micro = MicroField(validators=[MinValueValidator(1)])  # a validator of its own


class Checked(Strict):
    amount_micro = MicroField()

    def validate_amount_micro(self, value: int) -> int:
        if value % 2:
            raise serializers.ValidationError("even only")
        return value


class Nullable(Strict):
    amount_micro = MicroField(allow_null=True, required=False)


def _by_serializer(serializer_class: type[serializers.Serializer], data: Any) -> Any:
    serializer = serializer_class(data=data)
    return dict(serializer.validated_data) if serializer.is_valid() else ("invalid",)


def _parsed(serializer_class: type[serializers.Serializer], data: Any) -> Any:
    request = APIRequestFactory().post("/", data, format="json")
    try:
        return parse_body(serializer_class, Request(request, parsers=[JSONParser()]))
    except core_errors.InvalidInput:
        return ("invalid",)


values = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([0, 1, -1, BIGINT_MAX, BIGINT_MAX + 1, -BIGINT_MAX - 1, -BIGINT_MAX - 2]),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
)
bodies = st.dictionaries(st.sampled_from(["amount_micro", "amount", "extra"]), values, max_size=3)


@settings(max_examples=300, deadline=None)
@given(body=bodies)
def test_a_refund_body_parses_exactly_as_its_serializer_would(body: dict[str, Any]) -> None:
    for serializer_class in (RefundInput, Bounded, Checked, Nullable):
        assert _parsed(serializer_class, body) == _by_serializer(serializer_class, body), (
            serializer_class.__name__
        )


@pytest.mark.parametrize(
    "body",
    [{}, {"amount_micro": 1}, {"amount_micro": BIGINT_MAX}, {"amount_micro": -5}],
)
def test_a_plain_refund_body_builds_no_serializer(
    body: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative amounts pass the parser as they did through the serializer: the service refuses
    them with `invalid_amount`."""
    built: list[int] = []
    real = RefundInput.__init__

    def spy(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        real(self, *args, **kwargs)

    _parsed(RefundInput, {})  # the class's shape is worked out once, by building it
    monkeypatch.setattr(RefundInput, "__init__", spy)

    assert _parsed(RefundInput, body) == body
    assert not built


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"amount_micro": "5"}, "amount_micro"),
        ({"amount_micro": True}, "amount_micro"),
        ({"amount_micro": BIGINT_MAX + 1}, "amount_micro"),
        ({"amount_micro": 5, "currency": "usd"}, "currency"),
    ],
)
def test_any_other_refund_body_gets_the_serializers_error(body: dict[str, Any], field: str) -> None:
    request = APIRequestFactory().post("/", body, format="json")
    with pytest.raises(core_errors.InvalidInput) as refused:
        parse_body(RefundInput, Request(request, parsers=[JSONParser()]))
    assert field in refused.value.details


def test_serializers_with_checks_of_their_own_always_go_through_the_serializer() -> None:
    """Funding and debit bodies have string fields; these test serializers add a validator, a
    `validate_<field>` or allow null: none is taken on the plain path."""
    assert _micro_only(RefundInput) is not None
    for serializer_class in (FundingInput, DebitInput, Bounded, Checked, Nullable):
        assert _micro_only(serializer_class) is None, serializer_class.__name__
