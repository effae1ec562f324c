"""What a contract may say (SPEC §6, `verification.contracts`): paths, each member's limits, the
rules that tie a contract's parts together, the evidence levels, the timing schedule, and how a
file that breaks them is named when it is loaded."""

import copy
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured
from pydantic import ValidationError

from verification import models
from verification.contracts import (
    CONTRACTS_DIR,
    LEVELS,
    PATH_PATTERN,
    Channel,
    Contract,
    ContradictedCondition,
    Timing,
    Verdict,
    get_contract,
    is_path,
    load_contract,
    load_contracts,
    registry,
)
from verification.evaluation import decide
from verification.expressions import Context

REFUND = yaml.safe_load((CONTRACTS_DIR / "stripe.refund.created.yaml").read_text())
STRENGTH = Path(__file__).resolve().parent / "contracts_strength"


def refund_data(edit: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    data = copy.deepcopy(REFUND)
    if edit is not None:
        edit(data)
    return data


def problem(edit: Callable[[dict[str, Any]], Any]) -> str:
    """The validation message of the refund contract once edited."""
    with pytest.raises(ValidationError) as raised:
        Contract.model_validate(refund_data(edit))
    return str(raised.value)


def valid(edit: Callable[[dict[str, Any]], Any]) -> Contract:
    return Contract.model_validate(refund_data(edit))


# --- paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "$observed.refund_readback",
        "$observed.refund_readback.status",
        "$observed.refund_readback.items.0.id",
        "$observed._private.x",
        "$action.result",
        "$action.result.metadata.vouch_leg",
        "$input",
        "$input.amount",
        "$operation.id",
        "$operation.created_at",
    ],
)
def test_paths_of_each_root_are_paths(path: str) -> None:
    assert PATH_PATTERN.match(path)
    assert is_path(path)


@pytest.mark.parametrize(
    "path",
    [
        "$observed",  # no channel
        "$observed.1readback.id",  # a channel name starts with a letter
        "$observed.refund-readback.id",
        "$action.id",  # only the action's result
        "$action",
        "$operation.created",
        "$operation.id.x",
        "$operation",
        "$input.",
        "$input.a b",
        "$input..amount",
        "input.amount",  # the sigil
        " $input.amount",
        "$input.amount.",
        "$elsewhere.x",
        "x$input.amount",
    ],
)
def test_what_is_not_a_path_is_refused_with_the_forms_a_path_may_take(path: str) -> None:
    assert not PATH_PATTERN.match(path)
    message = problem(lambda d: d["verified"][0].update(path=path))
    assert f"{path!r} is not a path" in message
    assert "use $observed.<channel>.<field…>, $action.result.<field…>" in message
    assert "$input.<field…>, $operation.id or $operation.created_at" in message


def test_a_literal_is_not_a_path() -> None:
    assert not is_path("succeeded")
    assert not is_path(5)
    assert not is_path(["$input.x"])
    assert is_path("$anything")


@pytest.mark.parametrize(
    ("where", "edit"),
    [
        ("correlation.0.keys", lambda d: d["correlation"][0]["keys"].update(refund_id="id")),
        ("channels.0.read.id", lambda d: d["channels"][0]["read"].update(id="re_1")),
        (
            "channels.1.events.scope.equals",
            lambda d: d["channels"][1]["events"]["scope"].update(equals="ch_1"),
        ),
        (
            "channels.1.events.owner.equals",
            lambda d: d["channels"][1]["events"]["owner"].update(equals="leg"),
        ),
        ("channels.1.events.resource", lambda d: d["channels"][1]["events"].update(resource="r")),
        (
            "channels.1.events.idempotency_key",
            lambda d: d["channels"][1]["events"].update(idempotency_key="k"),
        ),
        ("verified.0.expected", lambda d: d["verified"][0].update(expected="$action.id")),
        ("pre_completion.0.match.path", lambda d: d["pre_completion"][0]["match"].update(path="x")),
    ],
)
def test_every_place_that_takes_a_path_checks_it(
    where: str, edit: Callable[[dict[str, Any]], Any]
) -> None:
    message = problem(edit)
    assert "is not a path" in message
    assert where.split(".")[0] in message


def test_the_paths_a_contract_names_are_kept_as_written() -> None:
    contract = valid(lambda d: None)
    assert contract.correlation[2].keys == {"charge": "$input.charge", "amount": "$input.amount"}
    assert contract.channels[0].read is not None
    assert contract.channels[0].read.id == "$action.result.id"
    events = contract.channels[1].events
    assert events is not None
    assert (events.resource, events.idempotency_key) == ("$action.result.id", "$operation.id")
    assert events.scope is not None
    assert events.scope.equals == "$input.charge"
    assert events.owner is not None
    assert events.owner.equals == "$action.result.metadata.vouch_leg"
    assert contract.verified[0].path == "$observed.refund_readback.id"
    assert contract.verified[0].expected == "$action.result.id"
    assert contract.verified[1].expected == ["pending", "requires_action", "succeeded"]


def test_optional_event_paths_may_be_left_out() -> None:
    def drop(d: dict[str, Any]) -> None:
        events = d["channels"][1]["events"]
        for key in ("resource", "idempotency_key", "scope", "owner", "marker_prefix", "correlate"):
            del events[key]

    events = valid(drop).channels[1].events
    assert events is not None
    assert (events.resource, events.idempotency_key, events.scope, events.owner) == (
        None,
        None,
        None,
        None,
    )
    assert events.correlate == {}


# --- each member's limits ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda d: d["correlation"][0].update(keys={}), "correlation.0.keys"),
        (lambda d: d["correlation"][0].update(strategy="guess"), "correlation.0.strategy"),
        (lambda d: d["correlation"][0].update(assurance="medium"), "correlation.0.assurance"),
        (lambda d: d.update(correlation=[]), "correlation"),
        (lambda d: d.update(channels=[]), "channels"),
        (lambda d: d.update(verified=[]), "verified"),
        (lambda d: d["evidence"].update(min_channels=-1), "evidence.min_channels"),
        (lambda d: d["channels"][0].update(name="refund readback"), "channels.0.name"),
        (lambda d: d["channels"][0].update(name="9lives"), "channels.0.name"),
        (lambda d: d["channels"][0].update(level="E4"), "channels.0.level"),
        (lambda d: d["channels"][0].update(independence="trust"), "channels.0.independence"),
        (lambda d: d["channels"][0].update(verifier=""), "channels.0.verifier"),
        (lambda d: d["channels"][0]["read"].update(resource=""), "channels.0.read.resource"),
        (lambda d: d["channels"][1]["events"].update(types=[]), "channels.1.events.types"),
        (
            lambda d: d["channels"][1]["events"]["scope"].update(field=""),
            "channels.1.events.scope.field",
        ),
        (
            lambda d: d["channels"][1]["events"]["owner"].update(metadata_key=""),
            "channels.1.events.owner.metadata_key",
        ),
        (lambda d: d["contradicted"][0].update({"class": ""}), "contradicted.0.class"),
        (lambda d: d["pre_completion"][0].update(verdict="PENDING"), "pre_completion.0.verdict"),
        (lambda d: d["timing"]["backoff"].update(factor=0.99), "timing.backoff.factor"),
        (lambda d: d["timing"]["backoff"].update(max_delay_ms=0), "timing.backoff.max_delay_ms"),
        (lambda d: d["timing"].update(initial_delay_ms=-1), "timing.initial_delay_ms"),
        (lambda d: d["timing"].update(poll_interval_ms=0), "timing.poll_interval_ms"),
        (lambda d: d["timing"].update(timeout_ms=0), "timing.timeout_ms"),
        (lambda d: d["timing"].update(stale_read_window_ms=-1), "timing.stale_read_window_ms"),
        (lambda d: d["timing"]["on_timeout"].update(verdict="FAILED"), "timing.on_timeout.verdict"),
        (lambda d: d.update(id="Stripe.Refund"), "id"),
        (lambda d: d.update(id="stripe refund"), "id"),
        (lambda d: d.update(version=0), "version"),
    ],
)
def test_each_members_limit_is_enforced(edit: Callable[[dict[str, Any]], Any], where: str) -> None:
    assert where in problem(edit).splitlines()[1]


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["evidence"].update(min_channels=0),
        lambda d: d["timing"]["backoff"].update(factor=1),
        lambda d: d["timing"]["backoff"].update(max_delay_ms=1),
        lambda d: d["timing"].update(initial_delay_ms=0, stale_read_window_ms=0),
        lambda d: d["timing"].update(poll_interval_ms=1, timeout_ms=1, max_attempts=1),
        lambda d: d.update(version=1, id="a.b_c9"),
        lambda d: (
            d["channels"][1].update(name="_events_2"),
            d["contradicted"][3].update(path="$observed._events_2.count"),
        ),
        lambda d: d["contradicted"][0].update(expected=["ch_1"], operator="not_in"),
        lambda d: d["verified"][1].update(expected="$input.states"),  # `in` a path
        lambda d: d["pre_completion"][0].update({"class": "failed"}),
    ],
)
def test_values_at_each_limit_are_accepted(edit: Callable[[dict[str, Any]], Any]) -> None:
    valid(edit)


def test_a_rule_without_a_class_has_none_and_a_condition_may_name_its_class_in_code() -> None:
    contract = valid(lambda d: None)
    assert contract.pre_completion[0].class_ is None
    assert contract.pre_completion[1].class_ == "reversed"
    built = ContradictedCondition.model_validate(
        {"name": "n", "class_": "wrong amount", "reason": "r", "path": "$input.amount"}
        | {"operator": "gt", "expected": 1}
    )
    assert built.class_ == "wrong amount"


def test_a_verdict_a_contract_gives_is_one_of_the_verdicts_its_place_allows() -> None:
    assert "the verdict must be FAILED or CONTRADICTED, not PENDING" in problem(
        lambda d: d["pre_completion"][0].update(verdict="PENDING")
    )
    assert "the verdict must be UNVERIFIABLE, not FAILED" in problem(
        lambda d: d["timing"]["on_timeout"].update(verdict="FAILED")
    )
    assert "Input should be 'PENDING', 'VERIFIED'" in problem(
        lambda d: d["pre_completion"][0].update(verdict="LOST")
    )
    contract = valid(lambda d: d["pre_completion"][0].update(verdict="CONTRADICTED"))
    assert contract.pre_completion[0].verdict is Verdict.CONTRADICTED
    assert contract.timing.on_timeout.verdict is Verdict.UNVERIFIABLE
    assert models.Verdict is Verdict  # one definition, stored by the models


def test_a_contract_is_frozen() -> None:
    contract = valid(lambda d: None)
    with pytest.raises(ValidationError):
        contract.version = 2


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ({"operator": "in", "expected": "succeeded"}, "operator in needs a list (or a path)"),
        ({"operator": "not_in", "expected": 1}, "operator not_in needs a list (or a path)"),
        ({"operator": "eq"}, "operator eq needs an expected value"),
        ({"operator": "time_after", "expected": None}, "operator time_after needs an expected"),
    ],
)
def test_a_condition_needs_the_expected_value_its_operator_takes(
    condition: dict[str, Any], message: str
) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["contradicted"][0].pop("expected")
        d["contradicted"][0].update(condition)

    assert message in problem(edit)


def test_exists_needs_no_expected_value() -> None:
    contract = valid(lambda d: d["contradicted"][0].update(operator="exists", expected=None))
    assert contract.contradicted[0].expected is None


# --- the parts of a contract agree ------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["channels"].append(dict(d["channels"][0])), "channel names must be unique"),
        (
            lambda d: d["channels"][1].pop("events"),
            "channel refund_created_events: the webhook verifier needs `events`",
        ),
        (
            lambda d: d["channels"][0].pop("read"),
            "channel refund_readback: the http verifier needs `read`",
        ),
        (
            lambda d: d["verified"][0].update(channel="refund_events"),
            "verified condition refund_present cites unknown channel refund_events",
        ),
        (
            lambda d: d["contradicted"][0].update(expected="$observed.elsewhere.charge"),
            "$observed.elsewhere.charge names no channel of this contract",
        ),
        (
            lambda d: d["pre_completion"][0]["match"].update(path="$observed.other.status"),
            "$observed.other.status names no channel of this contract",
        ),
        (
            lambda d: d["contradicted"][0].update(name="refund_present"),
            "condition and rule names must be unique",
        ),
        (
            lambda d: d["pre_completion"][0].update(name="refund_on_wrong_charge"),
            "condition and rule names must be unique",
        ),
        (
            lambda d: d["pre_completion"][1].update(name="terminal_failure"),
            "condition and rule names must be unique",
        ),
    ],
)
def test_the_parts_of_a_contract_must_agree(
    edit: Callable[[dict[str, Any]], Any], message: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        Contract.model_validate(refund_data(edit))
    assert [e["msg"] for e in raised.value.errors()] == [f"Value error, {message}"]


def test_the_verifiers_without_a_read_need_none() -> None:
    contract = valid(lambda d: d["channels"][1].update(verifier="other"))
    assert contract.channels[1].read is None


def test_a_channel_is_found_by_name() -> None:
    contract = valid(lambda d: None)
    assert contract.channel("refund_created_events").level == "E3"
    assert contract.channel("refund_readback").level == "E2"


# --- evidence levels and independence ---------------------------------------------------------


@pytest.mark.parametrize(
    ("level", "independence", "independent"),
    [
        ("E0", "provider_readback", False),  # a claim never counts as independent
        ("E1", "provider_event", False),  # nor the action's own response
        ("E2", "provider_readback", True),
        ("E3", "provider_event", True),
        ("E2", "none", False),
        ("E3", "none", False),
    ],
)
def test_only_an_e2_or_e3_channel_that_says_so_is_independent(
    level: str, independence: str, independent: bool
) -> None:
    channel = Channel.model_validate(
        {"name": "c", "level": level, "independence": independence}
        | {"verifier": "http", "description": ""}
    )
    assert channel.independent is independent


def test_evidence_levels_rise_from_a_claim_to_a_provider_event() -> None:
    assert LEVELS["E0"] < LEVELS["E1"] < LEVELS["E2"] < LEVELS["E3"]


@pytest.mark.parametrize(
    ("channel_level", "min_level", "verified"),
    [
        ("E0", "E0", True),
        ("E0", "E1", False),
        ("E1", "E1", True),
        ("E1", "E2", False),
        ("E2", "E3", False),
        ("E3", "E3", True),
    ],
)
def test_one_channel_meets_a_minimum_level_at_or_below_its_own(
    channel_level: str, min_level: str, verified: bool
) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["channels"][0].update(level=channel_level)
        d["evidence"].update(min_level=min_level, independent_required=False)

    contract = valid(edit)
    readback = {"id": "re_1", "status": "succeeded", "charge": "ch_1", "amount": 5, "created": 9}
    context = Context({"refund_readback": readback}, {"id": "re_1"}, {}, "op", 0)
    decision = decide(contract, context, now=_at(60), skew_s=2.0)
    assert (str(decision.verdict) == "VERIFIED") is verified
    if not verified:
        assert decision.reason == f"Waiting for: evidence at level {min_level}"


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


# --- timing -----------------------------------------------------------------------------------


def test_the_schedule_waits_the_initial_delay_then_backs_off_up_to_the_maximum() -> None:
    timing = Timing.model_validate(
        {
            **REFUND["timing"],
            "initial_delay_ms": 1500,
            "poll_interval_ms": 2000,
            "backoff": {"factor": 3, "max_delay_ms": 30_000},
        }
    )
    assert [timing.delay_before(k) for k in range(0, 7)] == [1.5, 1.5, 2.0, 6.0, 18.0, 30.0, 30.0]


def test_a_backoff_factor_of_one_polls_at_the_interval() -> None:
    timing = Timing.model_validate(
        {**REFUND["timing"], "backoff": {"factor": 1, "max_delay_ms": 1}}
    )
    assert [timing.delay_before(k) for k in (2, 3, 10)] == [0.001, 0.001, 0.001]
    steady = Timing.model_validate(
        {**REFUND["timing"], "backoff": {"factor": 1, "max_delay_ms": 60_000}}
    )
    assert [steady.delay_before(k) for k in (2, 3, 10)] == [5.0, 5.0, 5.0]


# --- loading files ----------------------------------------------------------------------------


def write(tmp_path: Path, data: Any, name: str = "stripe.refund.created.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("content", [["a", "list"], "text", None, 5])
def test_a_file_must_hold_a_mapping(tmp_path: Path, content: Any) -> None:
    with pytest.raises(ImproperlyConfigured) as raised:
        load_contract(write(tmp_path, content))
    assert str(raised.value) == "contract stripe.refund.created.yaml: the file must hold a mapping"


def test_every_problem_is_named_with_its_field_and_a_whole_contract_problem_as_top_level(
    tmp_path: Path,
) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["version"] = 0
        d["timing"]["max_attempts"] = 0

    with pytest.raises(ImproperlyConfigured) as raised:
        load_contract(write(tmp_path, refund_data(edit)))
    assert str(raised.value) == (
        "contract stripe.refund.created.yaml: version: Input should be greater than or equal to 1; "
        "timing.max_attempts: Input should be greater than 0"
    )
    duplicate = refund_data(lambda d: d["channels"].append(dict(d["channels"][0])))
    with pytest.raises(ImproperlyConfigured) as raised:
        load_contract(write(tmp_path, duplicate))
    assert str(raised.value) == (
        "contract stripe.refund.created.yaml: (top level): Value error, channel names must be "
        "unique"
    )


def test_every_verifier_problem_is_named(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["channels"][0]["read"]["resource"] = "refnd"
        d["channels"][1]["verifier"] = "pigeon"

    with pytest.raises(ImproperlyConfigured) as raised:
        load_contract(write(tmp_path, refund_data(edit)))
    message = str(raised.value)
    assert message.startswith(
        "contract stripe.refund.created.yaml: channels.0.read.resource: stripe has no readable "
        "resource 'refnd'"
    )
    assert "; channels.1.verifier: no verifier 'pigeon'" in message


def test_the_file_name_is_the_contract_id(tmp_path: Path) -> None:
    with pytest.raises(ImproperlyConfigured) as raised:
        load_contract(write(tmp_path, refund_data(), "stripe.refund.yaml"))
    assert str(raised.value) == (
        "contract stripe.refund.yaml: id 'stripe.refund.created' must match the file name"
    )


def test_a_directory_loads_every_yaml_file_by_id(tmp_path: Path) -> None:
    write(tmp_path, refund_data())
    write(tmp_path, refund_data(lambda d: d.update(id="a.first")), "a.first.yaml")
    (tmp_path / "notes.txt").write_text("not a contract")
    contracts = load_contracts(tmp_path)
    assert list(contracts) == ["a.first", "stripe.refund.created"]
    assert contracts["a.first"].title == REFUND["title"]
    assert load_contracts(tmp_path / "empty") == {}


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """The registry read again (it is cached once per process), and again after the test."""
    registry.cache_clear()
    yield
    registry.cache_clear()


@pytest.mark.usefixtures("fresh_registry")
def test_the_registry_holds_the_shipped_and_the_configured_contracts() -> None:
    known = registry()
    assert {"stripe.refund.created", "stripe.dispute.filed", "test.refund.short"} <= set(known)
    assert get_contract("test.refund.short").timing == known["test.refund.short"].timing
    with pytest.raises(LookupError) as raised:
        get_contract("stripe.nothing")
    assert str(raised.value).startswith("no contract 'stripe.nothing'; known: [")
    assert "'stripe.refund.created'" in str(raised.value)


@pytest.mark.usefixtures("fresh_registry")
def test_the_registry_reads_every_configured_directory(settings: Any) -> None:
    settings.VERIFICATION_CONTRACT_DIRS = [str(STRENGTH)]
    known = registry()
    assert "test.strength.rules_overlap" in known
    assert "test.refund.short" not in known
    assert get_contract("stripe.refund.created").id == "stripe.refund.created"


def test_the_strength_test_contracts_are_valid() -> None:
    assert len(load_contracts(STRENGTH)) == 7


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("eq", 1),
        ("ne", 1),
        ("in", [1]),
        ("not_in", [1]),
        ("gt", 1),
        ("gte", 1),
        ("lt", 1),
        ("lte", 1),
        ("exists", None),
        ("time_after", "$operation.created_at"),
        ("time_before", "$operation.created_at"),
    ],
)
def test_a_contract_names_each_operator_of_the_spec(name: str, expected: Any) -> None:
    contract = valid(lambda d: d["contradicted"][1].update(operator=name, expected=expected))
    assert contract.contradicted[1].operator == name
