"""Contracts: what proves that one kind of operation took effect at the provider (SPEC §6).

A contract is data: a YAML file in verification/contracts/, validated when loaded. An invalid
contract stops startup with the file, the field and what is wrong. The engine is generic: no code
branches on a contract's id."""

from __future__ import annotations

import re
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from django.core.exceptions import ImproperlyConfigured
from django.db.models import TextChoices
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

CONTRACTS_DIR = Path(__file__).resolve().parent / "contracts"

PATH_PATTERN = re.compile(
    r"^\$(observed\.[A-Za-z_][\w]*(\.[\w]+)*|action\.result(\.[\w]+)*|input(\.[\w]+)*|operation\.(id|created_at))$"
)


# docs/decisions/0003-verdicts-and-contracts.md: what each verdict means, and the contract format.
class Verdict(TextChoices):
    """The one definition of a verdict: the engine decides it (evaluation), a contract names the
    bad ones its rules give, and the models store it (`verification.models.Verdict` is this one).
    A TextChoices, importable before the apps are ready (it defines no model)."""

    PENDING = "PENDING"
    VERIFIED = "VERIFIED"
    CONTRADICTED = "CONTRADICTED"
    FAILED = "FAILED"
    UNVERIFIABLE = "UNVERIFIABLE"


class Operator(StrEnum):
    EQ = "eq"
    NE = "ne"
    IN = "in"
    NOT_IN = "not_in"
    GT = "gt"
    GTE = "gte"
    LT = "lt"
    LTE = "lte"
    EXISTS = "exists"
    TIME_AFTER = "time_after"
    TIME_BEFORE = "time_before"


LEVELS = {"E0": 0, "E1": 1, "E2": 2, "E3": 3}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_path(value: str) -> str:
    if not PATH_PATTERN.match(value):
        raise ValueError(
            f"{value!r} is not a path: use $observed.<channel>.<field…>, $action.result.<field…>, "
            "$input.<field…>, $operation.id or $operation.created_at"
        )
    return value


def is_path(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("$")


class Correlation(_Strict):
    strategy: Literal["resource_id", "idempotency_key", "fingerprint"]
    assurance: Literal["strong", "weak"]
    keys: dict[str, str] = Field(min_length=1)
    required: bool

    @field_validator("keys")
    @classmethod
    def _paths(cls, keys: dict[str, str]) -> dict[str, str]:
        for value in keys.values():
            _check_path(value)
        return keys


class Evidence(_Strict):
    min_level: Literal["E0", "E1", "E2", "E3"]
    independent_required: bool
    min_channels: int = Field(ge=0)


class HttpRead(_Strict):
    resource: str = Field(min_length=1)
    id: str

    _id = field_validator("id")(lambda cls, v: _check_path(v))


class EventScope(_Strict):
    field: str = Field(min_length=1)
    equals: str

    _equals = field_validator("equals")(lambda cls, v: _check_path(v))


class EventOwner(_Strict):
    metadata_key: str = Field(min_length=1)
    equals: str

    _equals = field_validator("equals")(lambda cls, v: _check_path(v))


class EventSelection(_Strict):
    """Which stored provider events belong to a run (SPEC §6, the webhook verifier)."""

    types: list[str] = Field(min_length=1)
    resource: str | None = None
    idempotency_key: str | None = None
    scope: EventScope | None = None
    owner: EventOwner | None = None
    marker_prefix: str | None = None
    correlate: dict[str, str] = Field(default_factory=dict)

    @field_validator("resource", "idempotency_key")
    @classmethod
    def _paths(cls, value: str | None) -> str | None:
        return None if value is None else _check_path(value)


class Channel(_Strict):
    name: str = Field(pattern=r"^[A-Za-z_]\w*$")
    level: Literal["E0", "E1", "E2", "E3"]
    independence: Literal["provider_readback", "provider_event", "none"]
    verifier: str = Field(min_length=1)
    description: str
    read: HttpRead | None = None
    events: EventSelection | None = None

    @property
    def independent(self) -> bool:
        """E0 and E1 never count as independent, whatever the channel says."""
        return self.independence != "none" and LEVELS[self.level] >= LEVELS["E2"]


class Condition(_Strict):
    path: str
    operator: Operator
    expected: Any = None

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return _check_path(value)

    @model_validator(mode="after")
    def _expected(self) -> Condition:
        if is_path(self.expected):
            _check_path(self.expected)
        if self.operator in (Operator.IN, Operator.NOT_IN) and not (
            isinstance(self.expected, list) or is_path(self.expected)
        ):
            raise ValueError(f"operator {self.operator} needs a list (or a path) as expected")
        if self.operator is not Operator.EXISTS and self.expected is None:
            raise ValueError(f"operator {self.operator} needs an expected value")
        return self


class VerifiedCondition(Condition):
    name: str
    meaning: str
    channel: str


class ContradictedCondition(Condition):
    name: str
    class_: str = Field(alias="class", min_length=1)
    reason: str


def _verdict_in(value: Verdict, allowed: tuple[Verdict, ...]) -> Verdict:
    """`value` if it is one of `allowed` (the YAML holds the verdict's name), else a clear error.
    Called at each validation (not only when the class is made), so what it decides is tested."""
    if value not in allowed:
        raise ValueError(f"the verdict must be {' or '.join(allowed)}, not {value}")
    return value


class Rule(_Strict):
    name: str
    match: Condition
    verdict: Verdict
    reason: str
    class_: str | None = Field(default=None, alias="class")

    @field_validator("verdict")
    @classmethod
    def _verdict(cls, value: Verdict) -> Verdict:
        return _verdict_in(value, (Verdict.FAILED, Verdict.CONTRADICTED))


class Backoff(_Strict):
    factor: float = Field(ge=1)
    max_delay_ms: int = Field(gt=0)


class OnTimeout(_Strict):
    verdict: Verdict
    reason: str
    escalate: bool

    @field_validator("verdict")
    @classmethod
    def _verdict(cls, value: Verdict) -> Verdict:
        return _verdict_in(value, (Verdict.UNVERIFIABLE,))


class Timing(_Strict):
    initial_delay_ms: int = Field(ge=0)
    poll_interval_ms: int = Field(gt=0)
    backoff: Backoff
    max_attempts: int = Field(gt=0)
    timeout_ms: int = Field(gt=0)
    stale_read_window_ms: int = Field(ge=0)
    on_timeout: OnTimeout

    def delay_before(self, attempt: int) -> float:
        """Seconds between attempt `attempt - 1` and attempt `attempt` (attempt 1: the initial
        delay; then min(poll interval * factor^(k-1), maximum))."""
        if attempt <= 1:
            return self.initial_delay_ms / 1000
        k = attempt - 1
        return (
            min(self.poll_interval_ms * self.backoff.factor ** (k - 1), self.backoff.max_delay_ms)
            / 1000
        )


class Contract(_Strict):
    id: str = Field(pattern=r"^[a-z0-9_.]+$")
    version: int = Field(ge=1)
    title: str
    level: str
    description: str
    retry_safety: str
    provider: str
    correlation: list[Correlation] = Field(min_length=1)
    evidence: Evidence
    channels: list[Channel] = Field(min_length=1)
    verified: list[VerifiedCondition] = Field(min_length=1)
    contradicted: list[ContradictedCondition] = Field(default_factory=list)
    pre_completion: list[Rule] = Field(default_factory=list)
    timing: Timing

    @model_validator(mode="after")
    def _consistent(self) -> Contract:
        names = [c.name for c in self.channels]
        if len(set(names)) != len(names):
            raise ValueError("channel names must be unique")
        for channel in self.channels:
            if channel.verifier == "http" and channel.read is None:
                raise ValueError(f"channel {channel.name}: the http verifier needs `read`")
            if channel.verifier == "webhook" and channel.events is None:
                raise ValueError(f"channel {channel.name}: the webhook verifier needs `events`")
        conditions: list[Condition] = [*self.verified, *self.contradicted]
        conditions += [rule.match for rule in self.pre_completion]
        for condition in conditions:
            for path in (condition.path, condition.expected):
                observed = is_path(path) and path.startswith("$observed.")
                if observed and path.split(".")[1] not in names:
                    raise ValueError(f"{path} names no channel of this contract")
        for verified in self.verified:
            if verified.channel not in names:
                raise ValueError(
                    f"verified condition {verified.name} cites unknown channel {verified.channel}"
                )
        all_names = [c.name for c in self.verified] + [c.name for c in self.contradicted]
        all_names += [r.name for r in self.pre_completion]
        if len(set(all_names)) != len(all_names):
            raise ValueError("condition and rule names must be unique")
        return self

    def channel(self, name: str) -> Channel:
        return next(c for c in self.channels if c.name == name)


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"]) or "(top level)"
        problems.append(f"{location}: {item['msg']}")
    return "; ".join(problems)


def load_contract(path: Path) -> Contract:
    """Read and validate one contract file, its shape and what it asks the verifiers to read
    (provider, verifiers, resources). ImproperlyConfigured names the file, the field and the
    problem."""
    # The verifiers build on contracts (their types, expressions) and are the registry of what
    # can be read; a contract is checked against that registry once both modules exist, here.
    from verification.verifiers import contract_problems

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ImproperlyConfigured(f"contract {path.name}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ImproperlyConfigured(f"contract {path.name}: the file must hold a mapping")
    try:
        contract = Contract.model_validate(data)
    except ValidationError as exc:
        raise ImproperlyConfigured(f"contract {path.name}: {_describe(exc)}") from exc
    if path.name != f"{contract.id}.yaml":
        raise ImproperlyConfigured(
            f"contract {path.name}: id {contract.id!r} must match the file name"
        )
    if problems := contract_problems(contract):
        raise ImproperlyConfigured(f"contract {path.name}: {'; '.join(problems)}")
    return contract


def load_contracts(directory: Path = CONTRACTS_DIR) -> dict[str, Contract]:
    contracts: dict[str, Contract] = {}
    for path in sorted(directory.glob("*.yaml")):
        contract = load_contract(path)
        contracts[contract.id] = contract
    return contracts


@cache
def registry() -> dict[str, Contract]:
    from django.conf import settings

    contracts = load_contracts()
    for directory in getattr(settings, "VERIFICATION_CONTRACT_DIRS", []):
        contracts.update(load_contracts(Path(directory)))
    return contracts


def get_contract(contract_id: str) -> Contract:
    try:
        return registry()[contract_id]
    except KeyError:
        raise LookupError(f"no contract {contract_id!r}; known: {sorted(registry())}") from None
