"""The fidelity report as Markdown, from the JSON a run wrote (Recorder.report())."""

from __future__ import annotations

from collections import Counter
from typing import Any


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _outcome(tests: dict[str, str]) -> str:
    counts = Counter(tests.values())
    if not counts:
        return "not run"
    if set(counts) == {"passed"}:
        return f"matches ({counts['passed']} test{'s' if counts['passed'] > 1 else ''})"
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))


def unexplained_gaps(report: dict[str, Any]) -> list[str]:
    """The declared fields a resource never returned in the run with no reason known
    (`resource.field`): neither included only when expanded, nor a known gap, nor named by the
    resource's own `type` enum. Each is a defect until explained (SPEC §12.1)."""
    includable = {(i["resource"], i["field"]) for i in report.get("includable", [])}
    known = {(g["resource"], g["field"]) for g in report.get("known_gaps", [])}
    found = []
    for name, shown in report["objects"]["resources"].items():
        returned, typed = set(shown["returned"]), set(shown.get("type_specific", []))
        found += [
            f"{name}.{field}"
            for field in shown["declared"]
            if field not in returned
            and field not in typed
            and (name, field) not in includable | known
        ]
    return found


def render(report: dict[str, Any]) -> str:
    sdk = report["sdk"]
    lines = [
        f"Measured against the pinned SDK: `stripe` {sdk['stripe']}, API version "
        f"`{sdk['api_version']}`.",
        "",
        "### Fields per resource",
        "",
        "| resource | declared by the SDK | returned | share | gaps unexplained | objects checked "
        "| states reached |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    resources = report["objects"]["resources"]
    includable = {(i["resource"], i["field"]): i["source"] for i in report.get("includable", [])}
    known = {(g["resource"], g["field"]): g["why"] for g in report.get("known_gaps", [])}
    gaps: list[str] = []
    total_declared = total_returned = 0
    for name, shown in resources.items():
        declared, returned = shown["declared"], set(shown["returned"])
        hit = sum(1 for f in declared if f in returned)
        total_declared += len(declared)
        total_returned += hit
        states = ", ".join(f"`{s}`" for s in shown["statuses"]) or "-"
        typed = set(shown.get("type_specific", []))
        unexplained = 0
        by_type: list[str] = []
        for missing in (f for f in declared if f not in returned):
            if missing in typed and (name, missing) not in known:
                by_type.append(missing)  # one row for all of them, below
                continue
            if (name, missing) in includable:
                why = f"only when expanded ([source]({includable[(name, missing)]}))"
            elif (name, missing) in known:
                why = known[(name, missing)]
            else:
                why = "not returned: a defect until explained"
                unexplained += 1
            gaps.append(f"| `{name}` | `{missing}` | {why} |")
        if by_type:
            named = ", ".join(f"`{field}`" for field in by_type)
            gaps.append(
                f"| `{name}` | {len(by_type)} fields: {named} | each only on a {name} of that "
                "type (its `type` enum names the field) |"
            )
        lines.append(
            f"| `{name}` | {len(declared)} | {hit} | {_pct(hit, len(declared))} | {unexplained} | "
            f"{shown['checked']} | {states} |"
        )
    lines.append(
        f"| **all** | {total_declared} | {total_returned} | "
        f"{_pct(total_returned, total_declared)} | | | |"
    )
    if gaps:
        lines += ["", "Declared fields not returned:", "", "| resource | field | why |"]
        lines += ["|---|---|---|", *gaps]

    violations = report["objects"]["violations"]
    lines += ["", "### Objects outside their class", ""]
    if violations:
        lines += ["| resource | field | kind | times | what |", "|---|---|---|---:|---|"]
        lines += [
            f"| `{v['resource']}` | `{v['field']}` | {v['kind']} | {v['count']} | {v['message']} |"
            for v in violations
        ]
    else:
        lines.append(f"None in {report['objects']['checked']} answers and events checked.")

    requests = report["requests"]
    lines += [
        "",
        "### Requests",
        "",
        "| operation | checked | from the adapter | refused by the contract |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| `{name}` | {op['checked']} | {op['from_adapter']} | {op['refused']} |"
        for name, op in requests["operations"].items()
    ]
    adapter = [v for v in requests["violations"] if v["from_adapter"]]
    if adapter:
        lines += ["", "Requests from the adapter outside their Params type:", ""]
        lines += [
            f"- `{v['operation']}` `{v['param']}`: {v['kind']} (`{v['code']}`), {v['count']}x"
            for v in adapter
        ]

    lines += ["", "### Behaviours checked", ""]
    behaviours = report.get("behaviours", [])
    if behaviours:
        lines += ["| rule | Stripe's source | outcome |", "|---|---|---|"]
        lines += [
            f"| {b['rule']} | [{_short(b['source'])}]({b['source']}) | {_outcome(b['tests'])} |"
            for b in behaviours
        ]
        matched = sum(1 for b in behaviours if set(b["tests"].values()) == {"passed"})
        lines += ["", f"{matched} of {len(behaviours)} behaviours match Stripe's."]
    else:
        lines.append("None recorded.")
    return "\n".join(lines) + "\n"


def _short(url: str) -> str:
    return url.removeprefix("https://").removeprefix("docs.stripe.com/")
