"""The one clock of the verification engine (time-machine moves it in tests)."""

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()
