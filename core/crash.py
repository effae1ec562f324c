"""Crash points for tests (SPEC §3): a test-only setting names a point at which the process dies
at once, as a power cut would, so that a fresh process can be shown to resume the work."""

import os

from django.conf import settings

CRASH_EXIT_STATUS = 86


def crash_point(name: str) -> None:
    if getattr(settings, "VOUCH_CRASH_AT", None) == name:
        os._exit(CRASH_EXIT_STATUS)
