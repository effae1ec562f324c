import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from verification.contracts import get_contract
from verification.explain import CaseError, explain


class Command(BaseCommand):
    help = (
        "Evaluate one attempt of a contract on a case file and print the verdict, its class and "
        "reason, and every condition (true, false or unknown). Touches no database and no "
        "provider. Case: {input, action: {result}, operation: {id, created_at}, observed: "
        "{<channel>: ...}, now, attempt?}."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("contract_id")
        parser.add_argument("case", help="path of the case file (JSON), or - for standard input")

    def handle(self, *args: Any, contract_id: str, case: str, **options: Any) -> None:
        try:
            contract = get_contract(contract_id)
        except LookupError as exc:
            raise CommandError(str(exc)) from exc
        try:
            text = self.stdin_text() if case == "-" else Path(case).read_text()
        except OSError as exc:
            raise CommandError(f"cannot read {case}: {exc.strerror}") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CommandError(f"{case} is not JSON: {exc}") from exc
        try:
            decision = explain(contract, data, skew_s=settings.VERIFICATION_CLOCK_SKEW_S)
        except CaseError as exc:
            raise CommandError(f"{case}: {exc}") from exc
        self.stdout.write(json.dumps(decision.as_json(), indent=2, default=str))

    def stdin_text(self) -> str:
        import sys

        return sys.stdin.read()
