"""A request's parameters against the pinned SDK's `*Params` type: stripe_contract.check_params
reports what the SDK does not declare, what it requires and is missing, and values of the wrong
type or outside an enum, with Stripe's parameter names and error codes."""

import pytest

from stripe_contract import Operation, check_params, operation_for, operations


def _op(method: str, path: str) -> Operation:
    operation = operation_for(method, path)
    assert operation is not None, f"{method} {path}"
    return operation


DISPUTE_UPDATE = ("POST", "/v1/disputes/dp_123")


def _found(method: str, path: str, data: dict) -> list[tuple[str, str, str | None]]:
    return [(v.param, v.kind, v.code) for v in check_params(_op(method, path), data)]


def test_the_operations_come_from_the_sdk_service_modules() -> None:
    names = {operation.name for operation in operations()}
    assert len(names) > 400  # every v1 operation of the SDK, not a hand-picked few
    dispute = _op(*DISPUTE_UPDATE)
    assert (dispute.name, dispute.service, dispute.params_class, dispute.returns) == (
        "POST /v1/disputes/{dispute}",
        "DisputeService.update",
        "DisputeUpdateParams",
        "Dispute",
    )
    assert _op("GET", "/v1/refunds").returns == "ListObject[Refund]"
    assert _op("POST", "/v1/files").base_address == "files"


def test_a_literal_segment_beats_a_placeholder() -> None:
    assert _op("GET", "/v1/payment_intents/search").service == "PaymentIntentService.search"
    assert _op("GET", "/v1/payment_intents/search").collection == "search_result"
    assert _op("GET", "/v1/payment_intents/pi_123").service == "PaymentIntentService.retrieve"
    assert operation_for("GET", "/v1/no_such_things/x_1") is None


def test_a_parameter_the_sdk_does_not_declare_is_reported() -> None:
    assert _found("POST", "/v1/refunds", {"charge": "ch_1", "bogus": "1"}) == [
        ("bogus", "unknown", "parameter_unknown")
    ]


def test_appeals_nest_under_card() -> None:
    """SDK DisputeUpdateParamsEvidenceAppeal has only `card`."""
    card = {"reason_for_filing": "The goods arrived", "supporting_files": ["file_1"]}
    assert _found(*DISPUTE_UPDATE, {"evidence": {"appeal": {"card": card}}}) == []
    assert _found(*DISPUTE_UPDATE, {"evidence": {"appeal": {"reason_for_filing": "x"}}}) == [
        ("evidence[appeal][reason_for_filing]", "unknown", "parameter_unknown")
    ]


def test_a_missing_required_parameter_is_reported() -> None:
    assert _found("POST", "/v1/payment_intents", {"amount": "1000"}) == [
        ("currency", "missing", "parameter_missing")
    ]
    # Nested: FileCreateParamsFileLinkData requires `create`.
    assert ("file_link_data[create]", "missing", "parameter_missing") in _found(
        "POST", "/v1/files", {"purpose": "dispute_evidence", "file": "a.pdf", "file_link_data": {}}
    )


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"amount": "12.5"}, ("amount", "type", "parameter_invalid_integer")),
        ({"amount": "twelve"}, ("amount", "type", "parameter_invalid_integer")),
        ({"reason": "because"}, ("reason", "enum", None)),
        ({"metadata": ["a"]}, ("metadata", "type", None)),
        ({"metadata": {"k": {"deeper": "v"}}}, ("metadata[k]", "type", None)),
        ({"expand": "charge"}, ("expand", "type", None)),
        ({"amount": ""}, ("amount", "empty", "parameter_invalid_empty")),
    ],
)
def test_wrong_types_and_enum_values_are_reported(
    data: dict, expected: tuple[str, str, str | None]
) -> None:
    assert _found("POST", "/v1/refunds", {"charge": "ch_1", **data}) == [expected]


def test_booleans_are_true_or_false_and_integers_digits() -> None:
    assert _found(*DISPUTE_UPDATE, {"submit": "false"}) == []
    assert _found(*DISPUTE_UPDATE, {"submit": "True"}) == [("submit", "type", None)]
    assert _found("GET", "/v1/refunds", {"limit": "3", "created": {"gte": "1700000000"}}) == []
    assert _found("GET", "/v1/refunds", {"created": {"gte": "soon"}}) == [
        ("created[gte]", "type", "parameter_invalid_integer")
    ]
    assert _found("GET", "/v1/refunds", {"created": {"around": "1"}}) == [
        ("created[around]", "unknown", "parameter_unknown")
    ]


def test_an_enum_with_the_sdks_str_escape_is_still_an_enum() -> None:
    """`purpose: Union[Literal[...], str]`: the `str` is for values added later, not any value."""
    assert _found("POST", "/v1/files", {"purpose": "dispute_evidence", "file": "a.pdf"}) == []
    assert _found("POST", "/v1/files", {"purpose": "holiday_photos", "file": "a.pdf"}) == [
        ("purpose", "enum", None)
    ]


def test_the_empty_string_unsets_only_what_the_sdk_lets_unset() -> None:
    """`Literal['']` in a union is Stripe's "unset"; a plain string may not be emptied."""
    unsets = {"card": {"reason_for_filing": "", "supporting_files": ""}}
    assert _found(*DISPUTE_UPDATE, {"evidence": {"appeal": unsets}, "metadata": ""}) == []
    assert _found(*DISPUTE_UPDATE, {"evidence": {"appeal": ""}}) == []
    assert _found(*DISPUTE_UPDATE, {"metadata": {"old_key": ""}}) == []  # one key unset
    assert _found("POST", "/v1/payment_intents", {"amount": "1", "currency": "usd"}) == []
    assert _found(
        "POST", "/v1/payment_intents", {"amount": "1", "currency": "usd", "description": ""}
    ) == [("description", "empty", "parameter_invalid_empty")]
    assert _found(*DISPUTE_UPDATE, {"evidence": {"appeal": {"card": {"bogus": ""}}}}) == [
        ("evidence[appeal][card][bogus]", "unknown", "parameter_unknown")
    ]


def test_a_list_may_come_as_a_list_or_an_index_keyed_hash() -> None:
    files = {"card": {"supporting_files": {"0": "file_1", "1": "file_2"}}}
    assert _found(*DISPUTE_UPDATE, {"evidence": {"appeal": files}}) == []
    assert _found(*DISPUTE_UPDATE, {"expand": ["charge", {"x": "y"}]}) == [
        ("expand[1]", "type", None)
    ]


def test_request_options_are_headers_not_parameters() -> None:
    """FileCreateParams inherits RequestOptions (api_key, idempotency_key, …): not form fields."""
    assert _found(
        "POST", "/v1/files", {"purpose": "dispute_evidence", "file": "a", "idempotency_key": "k"}
    ) == [("idempotency_key", "unknown", "parameter_unknown")]


def test_a_removed_parameter_gets_stripes_own_error_before_unknown() -> None:
    """https://docs.stripe.com/changelog/endive/2026-09-30/removes-the-payment-method-types-parameter-from-payment-intents-and-setup-intents"""
    found = check_params(
        _op("POST", "/v1/payment_intents"),
        {"amount": "1000", "currency": "usd", "payment_method_types": ["card"], "other": "1"},
    )
    assert [(v.param, v.code) for v in found] == [
        ("payment_method_types", "payment_method_types_no_longer_supported"),
        ("other", "parameter_unknown"),
    ]
    confirm = _op("POST", "/v1/payment_intents/pi_1/confirm")
    assert check_params(confirm, {"payment_method": "pm_card_visa"}) == []
    assert [v.code for v in check_params(confirm, {"payment_method_types": ["card"]})] == [
        "payment_method_types_no_longer_supported"
    ]
