"""What a run showed: every request checked against its Params type, every object against its
class (and what each resource showed), and the Stripe behaviours the tests checked. One
process-global RECORDER, thread-safe; the sandbox records into it, the pytest plugin reads it.

If the environment variable STRIPE_CONTRACT_LOG names a file, every distinct violation is also
appended to it as a JSON line (with the process id), so that a sandbox in a subprocess reports to
the test session that started it."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Collection as Container
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import stripe

from stripe_contract.known import INCLUDABLE, KNOWN_GAPS
from stripe_contract.objects import (
    ResourceSeen,
    check_error,
    check_object,
    declared_fields,
    type_specific_fields,
)
from stripe_contract.violations import Violation

LOG_ENV = "STRIPE_CONTRACT_LOG"


@dataclass
class _Operation:
    checked: int = 0
    from_adapter: int = 0
    refused: int = 0


@dataclass
class _Behaviour:
    rule: str
    source: str
    tests: dict[str, str] = field(default_factory=dict)  # node id -> outcome


class Recorder:
    def __init__(self, log_path: str | None = None, *, enabled: bool = True) -> None:
        self._lock = threading.Lock()
        self.enabled = enabled
        self.log_path = log_path
        self.reset()

    def start(self, log_path: str | None = None) -> None:
        """Record from now on (and log to `log_path`, if given)."""
        with self._lock:
            self.enabled = True
            if log_path is not None:
                self.log_path = log_path

    def reset(self) -> None:
        with self._lock:
            self.requests_checked = 0
            self.operations: dict[str, _Operation] = {}
            self.request_violations: dict[tuple[Any, ...], dict[str, Any]] = {}
            self.objects_checked = 0
            self.object_violations: dict[tuple[Any, ...], dict[str, Any]] = {}
            self.seen: dict[str, ResourceSeen] = {}
            self.behaviours: dict[tuple[str, str], _Behaviour] = {}
            self._logged: set[tuple[Any, ...]] = set()

    # --- recording -------------------------------------------------------------------------

    def record_request(
        self, operation: str, violations: Iterable[Violation], *, from_adapter: bool
    ) -> None:
        """A request to `operation` ("POST /v1/refunds") was checked; `violations` is what
        check_params found (empty: it conformed)."""
        found = list(violations)
        lines: list[dict[str, Any]] = []
        with self._lock:
            self.requests_checked += 1
            stats = self.operations.setdefault(operation, _Operation())
            stats.checked += 1
            stats.from_adapter += from_adapter
            stats.refused += bool(found)
            for violation in found:
                key = ("request", operation, violation.param, violation.kind, from_adapter)
                first = {
                    "operation": operation,
                    "param": violation.param,
                    "kind": violation.kind,
                    "code": violation.code,
                    "message": violation.message,
                    "from_adapter": from_adapter,
                }
                self._tally(self.request_violations, key, first, lines)
        self._log(lines)

    def _tally(
        self,
        table: dict[tuple[Any, ...], dict[str, Any]],
        key: tuple[Any, ...],
        first: dict[str, Any],
        lines: list[dict[str, Any]],
    ) -> None:
        """Count one violation under `key` (its first sighting described by `first`), and log
        each distinct one once (the caller holds the lock)."""
        entry = table.setdefault(key, {**first, "count": 0})
        entry["count"] += 1
        if key not in self._logged:
            self._logged.add(key)
            lines.append({"type": key[0], **entry, "count": 1})

    def record_object(
        self,
        obj: Any,
        *,
        expanded: Iterable[str] | None = None,
        skip_ids: Container[str] = (),
        where: str = "",
    ) -> list[Violation]:
        """An object answered (or emitted) was checked: its violations kept, what it showed
        gathered. `where` says what answered it ("GET /v1/charges/{charge}", "event")."""
        seen: dict[str, ResourceSeen] = {}
        found = check_object(obj, expanded=expanded, skip_ids=skip_ids, seen=seen)
        self._merge(found, seen, where)
        return found

    def record_error(self, body: Any, *, where: str = "") -> list[Violation]:
        found = [
            Violation(v.param, v.kind, v.message, resource="error", field=v.field or v.param)
            for v in check_error(body)
        ]
        self._merge(found, {}, where)
        return found

    def _merge(self, found: list[Violation], seen: dict[str, ResourceSeen], where: str) -> None:
        lines: list[dict[str, Any]] = []
        with self._lock:
            self.objects_checked += 1
            for name, shown in seen.items():
                self.seen.setdefault(name, ResourceSeen()).merge(shown)
            for violation in found:
                key = ("object", violation.resource, violation.field, violation.kind)
                first = {
                    "resource": violation.resource,
                    "field": violation.field,
                    "kind": violation.kind,
                    "message": violation.message,
                    "example": violation.param,
                    "where": where,
                }
                self._tally(self.object_violations, key, first, lines)
        self._log(lines)

    def record_behaviour(self, rule: str, source: str, test: str, outcome: str) -> None:
        with self._lock:
            behaviour = self.behaviours.setdefault((rule, source), _Behaviour(rule, source))
            behaviour.tests[test] = outcome

    def _log(self, lines: list[dict[str, Any]]) -> None:
        path = self.log_path or os.environ.get(LOG_ENV)
        if not lines or not path:
            return
        text = "".join(json.dumps({"pid": os.getpid(), **line}) + "\n" for line in lines)
        with self._lock, open(path, "a", encoding="utf-8") as handle:
            handle.write(text)

    def merge_log(self, path: str) -> int:
        """Take in the violations other processes logged to `path` (not this process's own, which
        are here already). Answers how many were taken."""
        taken = 0
        try:
            with open(path, encoding="utf-8") as handle:
                lines = [json.loads(line) for line in handle if line.strip()]
        except FileNotFoundError:
            return 0
        with self._lock:
            for line in lines:
                if line.pop("pid", None) == os.getpid():
                    continue
                kind = line.pop("type")
                key: tuple[Any, ...]
                if kind == "request":
                    key = (
                        "request",
                        line["operation"],
                        line["param"],
                        line["kind"],
                        line["from_adapter"],
                    )
                    table = self.request_violations
                else:
                    key = ("object", line["resource"], line["field"], line["kind"])
                    table = self.object_violations
                if key in table:
                    table[key]["count"] += line["count"]
                else:
                    table[key] = {**line, "subprocess": True}
                taken += 1
        return taken

    # --- reading ---------------------------------------------------------------------------

    def failures(self) -> list[str]:
        """What fails a run: a request from the adapter outside its Params type, an object
        outside its class. One line each."""
        with self._lock:
            lines = [
                f"request {v['operation']}: {v['param']} ({v['kind']}, {v['code']}): "
                f"{v['message']} [x{v['count']}]"
                for v in self.request_violations.values()
                if v["from_adapter"]
            ]
            lines += [
                f"object {v['resource']}.{v['field']} ({v['kind']}): {v['message']} "
                f"[x{v['count']}, e.g. {v['example']} in {v['where'] or 'an answer'}]"
                for v in self.object_violations.values()
            ]
        return sorted(lines)

    def summary(self) -> str:
        with self._lock:
            adapter = sum(op.from_adapter for op in self.operations.values())
            return (
                f"Stripe contract (stripe {stripe.VERSION}, API {stripe.api_version}): "
                f"{self.requests_checked} requests checked ({adapter} from the adapter) over "
                f"{len(self.operations)} operations; {self.objects_checked} answers and events "
                f"checked over {len(self.seen)} resources; "
                f"{sum(1 for v in self.request_violations.values() if v['from_adapter'])} "
                "distinct request violations from the adapter "
                f"({len(self.request_violations)} from any client), "
                f"{len(self.object_violations)} distinct object violations."
            )

    def report(self) -> dict[str, Any]:
        """Everything, as the JSON that `python -m stripe_contract report` renders."""
        with self._lock:
            resources = {
                name: {
                    "checked": shown.count,
                    "declared": declared_fields(name),
                    "returned": sorted(shown.fields),
                    "type_specific": type_specific_fields(name),
                    "statuses": sorted(shown.statuses),
                }
                for name, shown in sorted(self.seen.items())
            }
            return {
                "sdk": {"stripe": stripe.VERSION, "api_version": stripe.api_version},
                "requests": {
                    "checked": self.requests_checked,
                    "operations": {
                        name: vars(stats) for name, stats in sorted(self.operations.items())
                    },
                    "violations": sorted(
                        self.request_violations.values(),
                        key=lambda v: (v["operation"], v["param"], v["kind"]),
                    ),
                },
                "objects": {
                    "checked": self.objects_checked,
                    "resources": resources,
                    "violations": sorted(
                        self.object_violations.values(),
                        key=lambda v: (str(v["resource"]), str(v["field"]), v["kind"]),
                    ),
                },
                "behaviours": [
                    {"rule": b.rule, "source": b.source, "tests": dict(sorted(b.tests.items()))}
                    for b in sorted(self.behaviours.values(), key=lambda b: (b.rule, b.source))
                ],
                "includable": [
                    {"resource": r, "field": f, "source": s} for (r, f), s in INCLUDABLE.items()
                ],
                "known_gaps": [
                    {"resource": r, "field": f, "why": why} for (r, f), why in KNOWN_GAPS.items()
                ],
            }


# The process's recorder: on when the environment names a log (a sandbox a test session started)
# or once the pytest plugin starts it; off otherwise (`make run`, benchmarks pay nothing).
RECORDER = Recorder(enabled=bool(os.environ.get(LOG_ENV)))
