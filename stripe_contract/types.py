"""The pinned SDK's type annotations, compiled once into small nodes the checkers walk.

The SDK's generated modules name each other's classes as strings under `if TYPE_CHECKING:`
(`Optional[ExpandableField["Charge"]]`), so `typing.get_type_hints` gets, for each module, a
namespace that imports those names when first asked for. Nothing here is written by hand: a field,
a type or an enum value comes from the installed `stripe` package (SPEC §12.1, STYLE rule 19)."""

from __future__ import annotations

import ast
import collections.abc
import importlib
import sys
import threading
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, Union

import stripe
from stripe._list_object import ListObject
from stripe._search_result_object import SearchResultObject
from stripe._stripe_object import StripeObject, UntypedStripeObject

SDK_ROOT = Path(stripe.__file__).resolve().parent

# --- the nodes --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scalar:
    kind: str  # "str", "int", "float", "bool", "any", "null", "empty" (the '' that unsets)


@dataclass(frozen=True, slots=True)
class Enum:
    values: frozenset[Any]


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Node


@dataclass(frozen=True, slots=True)
class DictOf:
    value: Node


@dataclass(frozen=True, slots=True)
class Collection:
    """Stripe's `list` or `search_result` of `item`s (`ListObject[X]`, `SearchResultObject[X]`)."""

    object: str
    item: Node


@dataclass(frozen=True, slots=True)
class OneOf:
    options: tuple[Node, ...]


@dataclass(eq=False)
class Struct:
    """A TypedDict (request parameters) or a StripeObject class (an object), its fields compiled
    the first time they are needed (the classes refer to each other, and to themselves)."""

    cls: type
    object_name: str | None  # "charge" for an API resource, None for a nested class
    _fields: dict[str, Field] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.cls.__qualname__

    @property
    def fields(self) -> dict[str, Field]:
        if self._fields is None:
            with _LOCK:
                if self._fields is None:
                    self._fields = _fields_of(self.cls)
        return self._fields


@dataclass(frozen=True, slots=True)
class Field:
    node: Node
    required: bool  # a params key that must be sent, or an object field that may not be absent


Node = Scalar | Enum | ListOf | DictOf | Collection | OneOf | Struct

STR, INT, FLOAT, BOOL, ANY, NULL, EMPTY = (
    Scalar(kind) for kind in ("str", "int", "float", "bool", "any", "null", "empty")
)

_LOCK = threading.RLock()

# --- resolving the SDK's string annotations ---------------------------------------------------


class _LazyNames(dict[str, Any]):
    """A module's TYPE_CHECKING imports, imported when `get_type_hints` first asks for one."""

    def __init__(self, imports: dict[str, tuple[str, str]]) -> None:
        super().__init__()
        self._imports = imports

    def __missing__(self, name: str) -> Any:
        if name not in self._imports:
            raise KeyError(name)
        module, attr = self._imports[name]
        value = getattr(importlib.import_module(module), attr)
        self[name] = value
        return value


@cache
def _type_checking_names(module_name: str) -> _LazyNames:
    module = sys.modules[module_name]
    source = Path(module.__file__ or "").read_text()
    imports: dict[str, tuple[str, str]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
    return _LazyNames(imports)


def hints(cls: type) -> dict[str, Any]:
    """The class's field annotations, every string resolved (ClassVars and private names out)."""
    names = _type_checking_names(cls.__module__)
    with _LOCK:
        if _is_typeddict(cls):
            # A TypedDict holds its parents' annotations too, RequestOptions' among them, whose
            # strings name what only RequestOptions' own module imports: those keys are headers
            # (request_option_keys), left out before anything is evaluated.
            skip = request_option_keys()
            own = types.SimpleNamespace(
                __annotations__={
                    name: hint for name, hint in cls.__annotations__.items() if name not in skip
                }
            )
            module = sys.modules[cls.__module__].__dict__
            resolved = typing.get_type_hints(own, globalns=module, localns=names)
        else:
            resolved = typing.get_type_hints(cls, localns=names)
    return {
        name: hint
        for name, hint in resolved.items()
        if not name.startswith("_") and typing.get_origin(hint) is not typing.ClassVar
    }


@cache
def request_option_keys() -> frozenset[str]:
    """What `stripe.RequestOptions` declares (api_key, idempotency_key, stripe_account, …): some
    Params classes inherit them, but they travel as headers, never as form fields."""
    return frozenset(stripe.RequestOptions.__annotations__)


# --- compiling --------------------------------------------------------------------------------


_STRUCTS: dict[type, Struct] = {}


def struct(cls: type) -> Struct:
    with _LOCK:
        found = _STRUCTS.get(cls)
        if found is None:
            name = getattr(cls, "OBJECT_NAME", None)
            found = Struct(cls, name if isinstance(name, str) else None)
            _STRUCTS[cls] = found
        return found


def _is_typeddict(cls: Any) -> bool:
    return isinstance(cls, type) and hasattr(cls, "__required_keys__")


def _fields_of(cls: type) -> dict[str, Field]:
    annotations = hints(cls)
    if _is_typeddict(cls):
        required = cls.__required_keys__  # type: ignore[attr-defined]
        skip = request_option_keys()
        return {
            name: Field(compile_hint(hint), name in required)
            for name, hint in annotations.items()
            if name not in skip
        }
    return {
        name: Field(compile_hint(hint), not _optional(hint)) for name, hint in annotations.items()
    }


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(
        hint
    )


def compile_hint(hint: Any) -> Node:
    """One annotation as a node. `Union[Literal[...], str]` is the enum of its literals (the
    `str` is the SDK's escape for values added later), unless the only literal is `''`, the
    idiom that unsets a plain string."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any or hint is object:
        return ANY
    if hint is type(None):
        return NULL
    if hint is str:
        return STR
    if hint is bool:
        return BOOL
    if hint is int:
        return INT
    if hint is float:
        return FLOAT
    if origin is Literal:
        return _literals(set(args), has_str=False)
    if origin in (Union, types.UnionType):
        return _union(args)
    if origin in (list, tuple, collections.abc.Sequence):
        return ListOf(compile_hint(args[0]) if args else ANY)
    if origin in (dict, collections.abc.Mapping) or origin is UntypedStripeObject:
        return DictOf(compile_hint(args[-1]) if args else ANY)
    if origin in (ListObject, SearchResultObject):
        kind = "list" if origin is ListObject else "search_result"
        return Collection(kind, compile_hint(args[0]))
    if isinstance(hint, type) and (issubclass(hint, StripeObject) or _is_typeddict(hint)):
        if hint is UntypedStripeObject:
            return DictOf(ANY)
        return struct(hint)
    if isinstance(hint, typing.TypeVar):
        return ANY
    raise TypeError(f"stripe_contract cannot read the SDK annotation {hint!r}")


def _literals(values: set[Any], *, has_str: bool) -> Node:
    if has_str and values <= {""}:
        return OneOf((EMPTY, STR)) if values else STR
    if values == {""}:
        return EMPTY
    return Enum(frozenset(values))


def _union(args: tuple[Any, ...]) -> Node:
    literals: set[Any] = set()
    has_str = False
    others: list[Node] = []
    for arg in args:
        if typing.get_origin(arg) is Literal:
            literals.update(typing.get_args(arg))
        elif arg is str:
            has_str = True
        else:
            node = compile_hint(arg)
            if node not in others:
                others.append(node)
    if literals or has_str:
        scalar = _literals(literals, has_str=has_str)
        options: list[Node] = list(scalar.options) if isinstance(scalar, OneOf) else [scalar]
        others = options + others
    return others[0] if len(others) == 1 else OneOf(tuple(others))


# --- resources --------------------------------------------------------------------------------


@cache
def resource_struct(object_name: str) -> Struct | None:
    """The class Stripe's `object` value names (stripe._object_classes.OBJECT_CLASSES)."""
    from stripe._object_classes import OBJECT_CLASSES

    entry = OBJECT_CLASSES.get(object_name)
    if entry is None or object_name in ("list", "search_result"):
        return None
    module, name = entry
    return struct(getattr(importlib.import_module(module), name))


@cache
def error_struct() -> Struct | None:
    """`stripe._error_object.ErrorObject`, what an error body's `error` holds, if the SDK has it."""
    try:
        module = importlib.import_module("stripe._error_object")
    except ImportError:  # pragma: no cover - every SDK we pin has it
        return None
    return struct(module.ErrorObject)


def params_struct(module: str, name: str) -> Struct:
    return struct(getattr(importlib.import_module(module), name))
