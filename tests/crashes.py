"""Crash-after-commit tests (SPEC §3, §4): a request runs in a fresh process that dies (`os._exit`,
as a power cut would) at a named crash point, right after one of its commits; the test then
retries with the same Idempotency-Key, past the dead request's lease on the shared clock, and
counts the effects. Tests using it need `django_db(transaction=True)`: the other process must see
the rows, and this one must see what the other committed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import time_machine
from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.crash import CRASH_EXIT_STATUS
from core.models import IdempotencyRecord

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = """
import json, sys
import django
django.setup()
from rest_framework.test import APIClient
from accounts.models import User
spec = json.loads(sys.argv[1])
client = APIClient()
client.force_login(User.objects.get(username=spec["username"]))
response = client.generic(
    spec["method"], spec["path"], data=spec["body"], content_type="application/json",
    HTTP_IDEMPOTENCY_KEY=spec["key"],
)
print(json.dumps({"status": response.status_code, "body": response.content.decode()}))
"""


def database_url() -> str:
    db = connection.settings_dict
    user = db["USER"] or "postgres"
    return f"postgres://{user}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def request_in_a_fresh_process(
    *,
    username: str,
    path: str,
    key: str,
    crash_at: str,
    body: Any = None,
    method: str = "POST",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Send one API request, as `username` (a session), from a new Python process that dies at
    `crash_at`. Returns the finished process (its `returncode` is CRASH_EXIT_STATUS if it died
    there; its stdout holds the answer if it did not)."""
    spec = {
        "username": username,
        "method": method,
        "path": path,
        "key": key,
        "body": "" if body is None else json.dumps(body),
    }
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(),
        "STRIPE_API_BASE": settings.STRIPE_API_BASE,
        "VOUCH_CRASH_AT": crash_at,
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps(spec)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_died(process: subprocess.CompletedProcess[str], point: str) -> None:
    assert process.returncode == CRASH_EXIT_STATUS, (
        f"the request did not die at {point}: exit {process.returncode}\n"
        f"{process.stdout[-2000:]}\n{process.stderr[-4000:]}"
    )


@contextmanager
def past_the_lease(key: str) -> Iterator[None]:
    """The shared clock moved past the lease the dead request left on `key` (no process renews
    it any more), and ticking on from there."""
    record = IdempotencyRecord.objects.get(key=key)
    assert record.running, "the dead request's record should still be running"
    later = max(record.lease_until, timezone.now()) + timedelta(seconds=1)
    with time_machine.travel(later, tick=True):
        yield
