"""Idempotency rules that need no request (SPEC §4): which keys are accepted (1 to 255 printable
ASCII characters), how an operation is named and kept within its column (stable, distinct per
id), how a body is compared (canonical JSON; no body equals `{}`), and how long a running request
holds its key (Vouch's margin plus the provider's retry budget per call it is about to make)."""

import hashlib
import json
from datetime import timedelta
from typing import Any

import pytest

from core.idempotency import (
    OPERATION_MAX_LENGTH,
    InvalidIdempotencyKey,
    body_digest,
    lease_for,
    operation_bounded,
    operation_name,
    validate_key,
)

BUDGET_CALLS: list[int] = []


def seven_and_a_half_seconds() -> float:
    """A provider retry budget for these tests (IDEMPOTENCY_PROVIDER_BUDGET names it)."""
    BUDGET_CALLS.append(1)
    return 7.5


# --- the key --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "a",  # the shortest
        "k" * 255,  # the longest
        " ",  # 0x20, the first printable character
        "~",  # 0x7E, the last
        "refund-2026-01-02T03:04:05Z #1 {x}",
        "".join(chr(c) for c in range(0x20, 0x7F)),  # every printable ASCII character
    ],
)
def test_a_key_of_1_to_255_printable_ascii_characters_is_accepted(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    "key",
    [
        "",  # too short
        "k" * 256,  # too long
        "key\x1f",  # a control character just below the printable range
        "key\x7f",  # DEL, just above it
        "key\n",
        "key\t",
        "clé",  # not ASCII
        "key\u00a0",
        "k" * 254 + "\x00",
    ],
)
def test_any_other_key_is_refused_as_invalid(key: str) -> None:
    with pytest.raises(InvalidIdempotencyKey) as caught:
        validate_key(key)
    assert (caught.value.code, caught.value.status_code) == ("invalid_idempotency_key", 400)


# --- the operation ---------------------------------------------------------------------------


def test_an_operation_is_the_action_and_its_ids_joined_by_colons() -> None:
    assert operation_name("envelope.refund", "env_A") == "envelope.refund:env_A"
    assert operation_name("envelope.refund", "env_B") != operation_name("envelope.refund", "env_A")
    assert operation_name("envelope.top_up", "env_A") != operation_name("envelope.refund", "env_A")
    assert operation_name("dispute.respond", "dp_1", 7) == "dispute.respond:dp_1:7"
    assert operation_name("envelope.create") == "envelope.create"


def test_an_operation_name_that_fits_its_column_is_kept_as_it_is() -> None:
    name = "envelope.refund:" + "e" * (OPERATION_MAX_LENGTH - len("envelope.refund:"))
    assert len(name) == OPERATION_MAX_LENGTH == 255
    assert operation_bounded(name) == name
    assert operation_name("envelope.refund", name.split(":", 1)[1]) == name


def test_a_longer_operation_name_becomes_its_action_and_a_digest_of_the_whole_name() -> None:
    name = "envelope.refund:" + "e" * (OPERATION_MAX_LENGTH - len("envelope.refund:") + 1)
    assert len(name) == 256
    digest = hashlib.sha256(name.encode()).hexdigest()
    assert operation_bounded(name) == f"envelope.refund:/sha256/{digest}"
    assert operation_name("envelope.refund", name.split(":", 1)[1]) == operation_bounded(name)


def test_a_digested_operation_name_is_stable_distinct_and_fits() -> None:
    first = operation_name("envelope.refund", "x" * 300)
    assert operation_name("envelope.refund", "x" * 300) == first  # a retry replays
    assert operation_name("envelope.refund", "x" * 299 + "y") != first  # another id
    assert operation_name("envelope.top_up", "x" * 300) != first  # another action
    assert len(first) <= OPERATION_MAX_LENGTH
    assert "/" in first  # never equal to a name that fits (an id from a path has no `/`)


def test_a_very_long_action_is_cut_to_100_characters_before_the_digest() -> None:
    action = "a" * 400  # no colon: the whole name is its action
    bounded = operation_bounded(action)
    assert bounded == "a" * 100 + ":/sha256/" + hashlib.sha256(action.encode()).hexdigest()
    assert len(bounded) == 100 + len(":/sha256/") + 64 <= OPERATION_MAX_LENGTH


def test_a_non_ascii_name_is_digested_from_its_utf8_bytes() -> None:
    name = "envelope.refund:" + "é" * 250
    expected = hashlib.sha256(name.encode("utf-8")).hexdigest()
    assert operation_bounded(name) == f"envelope.refund:/sha256/{expected}"


# --- the body --------------------------------------------------------------------------------


def test_no_body_equals_an_empty_object() -> None:
    empty = hashlib.sha256(b"{}").hexdigest()
    assert body_digest(None) == body_digest("") == body_digest({}) == empty


def test_a_body_is_compared_as_canonical_json() -> None:
    """Sorted keys, no spaces: the same body however it was spelled gives the same digest."""
    expected = hashlib.sha256(b'{"amount_micro":5000000,"note":{"a":1,"b":[1,2]}}').hexdigest()
    assert body_digest({"note": {"b": [1, 2], "a": 1}, "amount_micro": 5_000_000}) == expected
    spelled = json.loads('{ "amount_micro" : 5000000 , "note" : { "a" : 1, "b" : [1, 2] } }')
    assert body_digest(spelled) == expected


@pytest.mark.parametrize(
    "other",
    [
        {"amount_micro": 5_000_001},
        {"amount_micro": "5000000"},
        {"amount_micro": 5_000_000, "extra": None},
        [],
        0,
    ],
)
def test_another_body_gives_another_digest(other: Any) -> None:
    assert body_digest(other) != body_digest({"amount_micro": 5_000_000})
    assert body_digest(other) != body_digest({})


def test_a_body_digest_is_sha256_hex() -> None:
    digest = body_digest({"a": 1})
    assert digest == hashlib.sha256(b'{"a":1}').hexdigest()
    assert len(digest) == 64


# --- the lease -------------------------------------------------------------------------------


@pytest.fixture
def budget(settings: Any) -> list[int]:
    settings.IDEMPOTENCY_LEASE_MARGIN_S = 10
    settings.IDEMPOTENCY_PROVIDER_BUDGET = f"{__name__}.seven_and_a_half_seconds"
    BUDGET_CALLS.clear()
    return BUDGET_CALLS


@pytest.mark.parametrize(("calls", "seconds"), [(1, 17.5), (2, 25.0), (3, 32.5)])
def test_a_lease_is_the_margin_plus_the_budget_of_each_provider_call(
    budget: list[int], calls: int, seconds: float
) -> None:
    assert lease_for(provider_calls=calls) == timedelta(seconds=seconds)


def test_a_request_that_calls_no_provider_holds_its_key_for_the_margin_alone(
    budget: list[int], settings: Any
) -> None:
    assert lease_for(provider_calls=0) == timedelta(seconds=10)
    assert budget == []  # the provider's budget is not even asked for
    settings.IDEMPOTENCY_PROVIDER_BUDGET = "no.such.module.budget"
    assert lease_for(provider_calls=0) == timedelta(seconds=10)


def test_the_margin_is_read_from_the_settings(budget: list[int], settings: Any) -> None:
    settings.IDEMPOTENCY_LEASE_MARGIN_S = "2.5"  # as an environment variable gives it
    assert lease_for(provider_calls=0) == timedelta(seconds=2.5)
    assert lease_for(provider_calls=1) == timedelta(seconds=10)
