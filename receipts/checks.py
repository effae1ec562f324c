"""A system check: receipt keys that are configured must be readable (a missing signing key is
allowed; the deployment then writes no receipts and logs why)."""

from typing import Any

from django.core.checks import CheckMessage, Error


def receipt_keys_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from receipts.keys import configuration_problems

    return [
        Error(problem, hint="`python manage.py receipt_keygen` makes a key.", id="receipts.E001")
        for problem in configuration_problems()
    ]
