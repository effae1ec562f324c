"""The canonical form (RFC 8785) and the content address of a receipt body are stable: a known body
gives a known id, computed here independently from a hand-written canonical string."""

import hashlib
from datetime import UTC, datetime, timedelta, timezone

from receipts.canonical import canonical_bytes, receipt_id_of
from receipts.services import receipt_body

PARENT = "rcpt_" + "a" * 64
# Written by hand: keys sorted, no whitespace, integers as integers, the time in UTC with a Z.
CANONICAL = (
    '{"amount_micro":2500000,"charge_id":"ch_9","currency":"usd",'
    '"detail":{"amount":250,"id":"re_123","metadata":{"vouch_leg":"rfl_1"},'
    '"object":"refund","status":"succeeded"},'
    f'"kind":"refund","livemode":false,"parent":"{PARENT}","provider":"stripe",'
    '"provider_object_id":"re_123","time":"2026-01-02T03:04:05Z",'
    '"verification":{"run":"vrun_abc","verdict":"VERIFIED"},"version":2}'
)
KNOWN_ID = "rcpt_f638266d85bdcd19584aab056f85a975855a779596e44dfa6b45e02a6575ced3"


def _body(**changes: object) -> dict[str, object]:
    values: dict[str, object] = {
        "kind": "refund",
        "provider": "stripe",
        "livemode": False,
        "provider_object_id": "re_123",
        "amount_micro": 2_500_000,
        "currency": "usd",
        "charge_id": "ch_9",
        # The same instant in another zone, with microseconds: one spelling in the body.
        "occurred_at": datetime(2026, 1, 2, 4, 4, 5, 999_000, tzinfo=timezone(timedelta(hours=1))),
        "parent_id": PARENT,
        "run_id": "vrun_abc",
        "verdict": "VERIFIED",
        # Keys in no particular order: the canonical form orders them.
        "detail": {
            "status": "succeeded",
            "object": "refund",
            "metadata": {"vouch_leg": "rfl_1"},
            "id": "re_123",
            "amount": 250,
        },
    }
    values.update(changes)
    return receipt_body(**values)  # type: ignore[arg-type]


def test_a_known_body_has_a_known_canonical_form_and_id() -> None:
    canonical = canonical_bytes(_body())
    assert canonical == CANONICAL.encode()
    assert receipt_id_of(canonical) == "rcpt_" + hashlib.sha256(CANONICAL.encode()).hexdigest()
    assert receipt_id_of(canonical) == KNOWN_ID


def test_the_id_is_stable_and_any_change_gives_another_id() -> None:
    first = receipt_id_of(canonical_bytes(_body()))
    assert receipt_id_of(canonical_bytes(_body())) == first  # again, from a fresh dict
    assert receipt_id_of(canonical_bytes(dict(reversed(list(_body().items()))))) == first
    changed = _body(amount_micro=2_500_001)
    assert receipt_id_of(canonical_bytes(changed)) != first
    assert receipt_id_of(canonical_bytes(_body(livemode=True))) != first
    utc = _body(occurred_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert receipt_id_of(canonical_bytes(utc)) == first  # the same instant: the same receipt


def test_rfc8785_key_order_and_number_formatting() -> None:
    # Keys sort by UTF-16 code units: U+1F600 (a surrogate pair, 0xD83D…) before U+E000, unlike
    # code point order. Numbers in ECMAScript form; strings in UTF-8 with minimal escaping.
    value = {"\ue000": 1, "\U0001f600": 2, "a": [1.0, 1e21, 1e-7, 0.000001, -0.0, 'é\x0f"\\']}
    expected = '{"a":[1,1e+21,1e-7,0.000001,0,"é\\u000f\\"\\\\"],"\U0001f600":2,"\ue000":1}'
    assert canonical_bytes(value) == expected.encode("utf-8")
