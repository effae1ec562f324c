"""A receipt's id is its content address (SPEC §8): `rcpt_` + the SHA-256 (lower-case hex) of the
body's RFC 8785 bytes. The form is the one the database accepts, the bytes are the body's and
nothing else, and a value JSON cannot carry exactly is refused instead of written approximately.
Pure functions: no database."""

import hashlib
from types import MappingProxyType

import pytest
import rfc8785
from django.db.models import CheckConstraint, Q

from receipts.canonical import RECEIPT_ID_PATTERN, canonical_bytes, receipt_id_of
from receipts.models import Receipt


def test_the_id_is_rcpt_and_the_sha256_hex_of_exactly_the_canonical_bytes() -> None:
    assert receipt_id_of(b"") == (
        "rcpt_e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    canonical = b'{"a":1}'
    assert receipt_id_of(canonical) == "rcpt_" + hashlib.sha256(canonical).hexdigest()
    assert receipt_id_of(canonical) != receipt_id_of(b'{"a":2}')


def test_every_id_has_the_form_the_database_constraint_accepts() -> None:
    """The pattern in code and the database's CHECK on `receipts_receipt.id` are one rule."""
    constraint = next(c for c in Receipt._meta.constraints if c.name == "receipt_id_is_a_digest")
    assert isinstance(constraint, CheckConstraint)
    assert constraint.condition == Q(id__regex=RECEIPT_ID_PATTERN.pattern)
    for canonical in (b"", b"{}", canonical_bytes({"kind": "charge", "amount_micro": 1})):
        assert RECEIPT_ID_PATTERN.match(receipt_id_of(canonical))


@pytest.mark.parametrize(
    "text",
    [
        "rcpt_" + "A" * 64,  # upper-case hex is another spelling, not the id
        "rcpt_" + "a" * 63,
        "rcpt_" + "a" * 65,
        "rcpt" + "a" * 64,
        "x" + "rcpt_" + "a" * 64,
        "rcpt_" + "g" * 64,
    ],
)
def test_the_id_pattern_refuses_anything_but_the_exact_form(text: str) -> None:
    assert not RECEIPT_ID_PATTERN.match(text)


def test_the_canonical_bytes_are_compact_sorted_utf8() -> None:
    assert canonical_bytes({"b": 1, "a": "é", "c": [True, None]}) == (
        '{"a":"é","b":1,"c":[true,null]}'.encode()
    )
    assert canonical_bytes({}) == b"{}"


def test_any_mapping_gives_the_bytes_of_the_same_dict() -> None:
    body = {"kind": "refund", "amount_micro": 2_500_000}
    assert canonical_bytes(MappingProxyType(body)) == canonical_bytes(body)
    assert canonical_bytes(MappingProxyType(body)) == b'{"amount_micro":2500000,"kind":"refund"}'


@pytest.mark.parametrize(
    "value",
    [2**53, -(2**53), float("nan"), float("inf")],
)
def test_a_value_json_cannot_carry_exactly_is_refused(value: object) -> None:
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_bytes({"amount_micro": value})


def test_the_largest_exact_integer_is_written_as_it_is() -> None:
    assert canonical_bytes({"n": 2**53 - 1}) == b'{"n":9007199254740991}'
