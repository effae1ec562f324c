"""`python -m stripe_contract report var/conformance/report.json`: the fidelity tables, Markdown.
`python -m stripe_contract fixtures ../shared/stripe/fixtures3.json`: refresh the copy of the
fixtures' top-level fields (stripe_contract/fixture_fields.json)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stripe_contract.objects import FIXTURE_FIELDS_FILE
from stripe_contract.report import render

SOURCE = (
    "Top-level fields of each resource in Stripe's published fixtures (stripe/openapi, "
    "openapi/fixtures3.json, MIT licence; ../shared/stripe/fixtures3.json), copied so that a "
    "clone without ../shared can check objects. Regenerate with: "
    "python -m stripe_contract fixtures ../shared/stripe/fixtures3.json"
)


def write_fixture_fields(fixtures: Path, target: Path = FIXTURE_FIELDS_FILE) -> int:
    resources = json.loads(fixtures.read_text())["resources"]
    rows = [
        f"  {json.dumps(name)}: {json.dumps(sorted(body))}"
        for name, body in sorted(resources.items())
        if isinstance(body, dict)
    ]
    text = '{\n "_source": ' + json.dumps(SOURCE) + ',\n "resources": {\n'
    target.write_text(text + ",\n".join(rows) + "\n }\n}\n")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stripe_contract")
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="print the fidelity tables of a run's report")
    report.add_argument("path", type=Path)
    fixtures = commands.add_parser("fixtures", help="copy the fixtures' top-level fields")
    fixtures.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    what = "a conformance report (var/conformance/report.json, written by a whole `make test`)"
    if args.command == "fixtures":
        what = "Stripe's fixtures3.json"
    try:
        data = json.loads(args.path.read_text())
        if args.command == "report":
            sys.stdout.write(render(data))
        else:
            count = write_fixture_fields(args.path)
            print(f"{count} resources written to {FIXTURE_FIELDS_FILE}")
    except OSError as exc:
        parser.exit(1, f"{parser.prog}: cannot read {args.path}: {exc.strerror}; give {what}\n")
    except (ValueError, KeyError, TypeError) as exc:
        parser.exit(1, f"{parser.prog}: {args.path} is not {what} ({type(exc).__name__}: {exc})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
