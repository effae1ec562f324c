"""Print a new Ed25519 receipt signing key: its seed (secret), its public key, and the settings
that use it. Nothing is stored: put the seed in the deployment's secret store."""

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from receipts.keys import ENVIRONMENTS, key_generate


class Command(BaseCommand):
    help = "Print a new receipt signing key (seed, public key) and the settings that use it."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--environment",
            default="production",
            choices=sorted(ENVIRONMENTS),
            help="The environment the key signs for (default: production).",
        )
        parser.add_argument("--key-id", default="", help="The key id (default: derived).")
        parser.add_argument("--json", action="store_true", help="Print the key as JSON only.")

    def handle(self, *args: Any, environment: str, key_id: str, json: bool, **options: Any) -> None:
        key = key_generate(environment)
        if key_id:
            key["key_id"] = key_id
        if json:
            self.stdout.write(_dumps(key))
            return
        trusted = {key["key_id"]: {"public_key": key["public_key"], "environment": environment}}
        self.stdout.write(
            f"seed (secret, base64):  {key['seed']}\n"
            f"public key (base64):    {key['public_key']}\n"
            f"key id:                 {key['key_id']}\n"
            f"environment:            {environment}\n\n"
            "Settings (environment variables) of the deployment that signs:\n"
            f"  RECEIPT_SIGNING_KEY={key['seed']}\n"
            f"  RECEIPT_SIGNING_KEY_ID={key['key_id']}\n"
            f"  RECEIPT_SIGNING_ENVIRONMENT={environment}\n"
            "and of every deployment that verifies (keep the old keys listed after a rotation):\n"
            f"  RECEIPT_TRUSTED_KEYS='{_dumps(trusted)}'\n"
        )


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
