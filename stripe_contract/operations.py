"""Stripe's operations, read from the installed SDK's service modules (`stripe/**/_*_service.py`):
for each `self._request("post", "/v1/disputes/{dispute}", base_address="api", params=...)`, the
HTTP method, the path template, the base address, the `*Params` TypedDict of its `params`
argument and the class it returns (`cast("Dispute", ...)`). Parsed with `ast`, never imported or
called, and never typed out by hand (STYLE rule 19)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from stripe_contract.types import SDK_ROOT, Struct, params_struct


@dataclass(frozen=True)
class Operation:
    method: str  # "GET", "POST", "DELETE"
    path: str  # "/v1/disputes/{dispute}"
    base_address: str  # "api", "files", …
    service: str  # "DisputeService.update"
    params_module: str | None  # "stripe.params._dispute_update_params"
    params_class: str | None  # "DisputeUpdateParams"
    returns: str  # "Dispute", "ListObject[Dispute]", "SearchResultObject[PaymentIntent]"

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def params(self) -> Struct | None:
        """The compiled `*Params` TypedDict, or None when the call takes no parameters."""
        if self.params_module is None or self.params_class is None:
            return None
        return params_struct(self.params_module, self.params_class)

    @property
    def collection(self) -> str | None:
        """ "list" or "search_result" when the operation answers a page of objects."""
        if self.returns.startswith("ListObject["):
            return "list"
        if self.returns.startswith("SearchResultObject["):
            return "search_result"
        return None


def _service_files() -> list[Any]:
    """Every v1 service module of the SDK (the v2 API is JSON, another contract)."""
    return sorted(
        path
        for path in SDK_ROOT.rglob("_*_service.py")
        if "v2" not in path.relative_to(SDK_ROOT).parts and path.name != "_stripe_service.py"
    )


def _module_name(path: Any) -> str:
    relative = path.relative_to(SDK_ROOT.parent).with_suffix("")
    return ".".join(relative.parts)


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _path_template(node: ast.AST) -> str | None:
    """`"/v1/disputes/{dispute}".format(...)` or a plain `"/v1/disputes"`."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
    ):
        return _string(node.func.value)
    return _string(node)


def _params_annotation(function: ast.FunctionDef) -> str | None:
    """The class named by `params: Optional["XParams"]` or `params: "XParams"`."""
    for arg in function.args.args + function.args.kwonlyargs:
        if arg.arg != "params" or arg.annotation is None:
            continue
        text = ast.unparse(arg.annotation)
        match = re.search(r"[\"']([A-Za-z_]\w*)[\"']", text)
        return match.group(1) if match else None
    return None


def _parse(path: Any) -> list[Operation]:
    tree = ast.parse(path.read_text())
    imports: dict[str, str] = {}
    for statement in tree.body:  # the imports, at the top and under `if TYPE_CHECKING:`
        for node in statement.body if isinstance(statement, ast.If) else [statement]:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    imports[alias.asname or alias.name] = node.module
    operations: list[Operation] = []
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for function in cls.body:
            if not isinstance(function, ast.FunctionDef):  # the async twins repeat the same call
                continue
            operation = _operation(cls.name, function, imports)
            if operation is not None:
                operations.append(operation)
    return operations


def _calls(function: ast.FunctionDef) -> list[ast.Call]:
    """The calls of `return cast("X", self._request(...))`: the cast, then what it wraps."""
    calls: list[ast.Call] = []
    for statement in function.body:
        if isinstance(statement, ast.Return) and isinstance(statement.value, ast.Call):
            calls.append(statement.value)
            calls.extend(arg for arg in statement.value.args if isinstance(arg, ast.Call))
    return calls


def _operation(
    service: str, function: ast.FunctionDef, imports: dict[str, str]
) -> Operation | None:
    calls = _calls(function)
    for node in calls:
        if not (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in ("_request", "_request_stream")
            and len(node.args) >= 2
        ):
            continue
        method = _string(node.args[0])
        template = _path_template(node.args[1])
        if method is None or template is None:
            return None
        base = next((_string(kw.value) for kw in node.keywords if kw.arg == "base_address"), "api")
        params_class = _params_annotation(function)
        return Operation(
            method=method.upper(),
            path=template,
            base_address=base or "api",
            service=f"{service}.{function.name}",
            params_module=imports.get(params_class) if params_class else None,
            params_class=params_class,
            returns=_returns(function, calls),
        )
    return None


def _returns(function: ast.FunctionDef, calls: list[ast.Call]) -> str:
    for node in calls:
        if isinstance(node.func, ast.Name) and node.func.id == "cast" and node.args:
            text = _string(node.args[0])
            if text is not None:
                return text
    return ast.unparse(function.returns).strip("\"'") if function.returns else "Any"


@cache
def operations() -> tuple[Operation, ...]:
    """Every operation of the installed SDK, in a stable order; the first declaration of a
    (method, path) wins (a service and its deprecated alias declare the same call)."""
    seen: dict[tuple[str, str], Operation] = {}
    for path in _service_files():
        for operation in _parse(path):
            seen.setdefault((operation.method, operation.path), operation)
    return tuple(seen.values())


# --- matching a concrete path -------------------------------------------------------------------


class _Node:
    __slots__ = ("literal", "operations", "placeholder")

    def __init__(self) -> None:
        self.literal: dict[str, _Node] = {}
        self.placeholder: _Node | None = None
        self.operations: dict[str, Operation] = {}


def _is_placeholder(segment: str) -> bool:
    return segment.startswith("{") and segment.endswith("}")


@cache
def _trie() -> _Node:
    root = _Node()
    for operation in operations():
        node = root
        for segment in operation.path.strip("/").split("/"):
            if _is_placeholder(segment):
                if node.placeholder is None:
                    node.placeholder = _Node()
                node = node.placeholder
            else:
                node = node.literal.setdefault(segment, _Node())
        node.operations.setdefault(operation.method, operation)
    return root


def operation_for(method: str, path: str) -> Operation | None:
    """The SDK operation a request goes to: `("GET", "/v1/disputes/dp_123")` is
    `DisputeService.retrieve`. A literal segment beats a placeholder (`/v1/payment_intents/search`
    is the search, not a retrieve of the PaymentIntent "search"). A `{x}` segment in `path` (a
    route pattern) matches only a placeholder."""
    segments = path.split("?", 1)[0].strip("/").split("/")
    return _match(_trie(), segments, 0, method.upper())


def _match(node: _Node, segments: list[str], index: int, method: str) -> Operation | None:
    if index == len(segments):
        return node.operations.get(method)
    segment = segments[index]
    if not _is_placeholder(segment):
        child = node.literal.get(segment)
        if child is not None:
            found = _match(child, segments, index + 1, method)
            if found is not None:
                return found
    if node.placeholder is not None:
        return _match(node.placeholder, segments, index + 1, method)
    return None
