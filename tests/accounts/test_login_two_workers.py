"""Issue 12, finding 4: the failed-login limit is global, not per process. Gunicorn with two
workers serves the login form; the wrong passwords are spread over both workers (the access log
names the process that served each request), and the right password is still refused at exactly
the configured count. With a per-process cache (Django's default LocMemCache) each worker counts
only its own share, and the right password logs in."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from accounts.models import User
from tests.accounts.test_login_throttle import TOO_MANY, WRONG, per_login_rate
from tests.crashes import database_url
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "two-workers-password-1"
START_TIMEOUT_S = 60.0


@contextmanager
def gunicorn(tmp_path: Path, workers: int) -> Iterator[tuple[int, Path]]:
    """Gunicorn on a free port with the test settings and database, its counters under a cache
    prefix of their own; yields the port and the access log (`<pid> <method> <path> <status>`)."""
    port = free_port()
    access_log, error_log = tmp_path / "access.log", tmp_path / "error.log"
    config = tmp_path / "gunicorn.conf.py"
    config.write_text("")  # not the repository's: only the options below
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(),
        "CACHE_KEY_PREFIX": f"vouch-test-two-workers-{uuid.uuid4().hex}",
        "PYTHONUNBUFFERED": "1",
    }
    command = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application",
        "--config", str(config), "--workers", str(workers), "--bind", f"127.0.0.1:{port}",
        "--timeout", "60", "--access-logfile", str(access_log),
        "--access-logformat", "%(p)s %(m)s %(U)s %(s)s", "--error-logfile", str(error_log),
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, "gunicorn exited:\n" + error_log.read_text()
            booted = error_log.exists() and error_log.read_text().count("Booting worker") >= workers
            if booted:
                try:
                    if requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=30).ok:
                        break
                except requests.RequestException:
                    pass
            assert time.monotonic() < deadline, "gunicorn did not answer:\n" + (
                error_log.read_text() if error_log.exists() else ""
            )
            time.sleep(0.2)
        yield port, access_log
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.django_db(transaction=True)
def test_failed_logins_are_counted_across_two_gunicorn_workers(tmp_path: Path) -> None:
    User.objects.create_user("two-workers", "two-workers@example.com", PASSWORD)
    rate = per_login_rate()
    with gunicorn(tmp_path, workers=2) as (port, access_log):
        url = f"http://127.0.0.1:{port}/accounts/login/"
        form = requests.get(url, timeout=30)
        token = form.cookies["csrftoken"]

        def attempt(password: str) -> requests.Response:
            # A fresh connection each time (no session object): gunicorn's sync workers take
            # turns at the listening socket.
            return requests.post(
                url,
                data={"csrfmiddlewaretoken": token, "login": "two-workers", "password": password},
                cookies={"csrftoken": token},
                allow_redirects=False,
                timeout=30,
            )

        # A connection that sends nothing keeps one sync worker busy reading it, so the next
        # request goes to the other: handing the hold over after each request alternates them.
        held = socket.create_connection(("127.0.0.1", port))
        time.sleep(0.2)
        answers = []
        for password in [WRONG] * rate.amount + [PASSWORD, PASSWORD]:
            answers.append(attempt(password))
            handover = socket.create_connection(("127.0.0.1", port))
            time.sleep(0.2)  # the worker that just answered accepts it
            held.close()
            held = handover
        held.close()

    served = [
        line.split()
        for line in access_log.read_text().splitlines()
        if re.match(r"<\d+> POST /accounts/login/ ", line)
    ]
    assert len(served) == rate.amount + 2
    failures_by = {pid for pid, *_ in served[: rate.amount]}
    assert len(failures_by) == 2, f"the wrong passwords were not spread over both workers: {served}"
    for number, answer in enumerate(answers[: rate.amount], start=1):
        assert answer.status_code == 200, number
        assert "not correct" in answer.text, number
        assert TOO_MANY not in answer.text, f"limited early, at attempt {number}"
    for answer, (pid, *_) in zip(answers[rate.amount :], served[rate.amount :], strict=True):
        assert "sessionid" not in answer.cookies, (
            f"worker {pid} logged the right password in after {rate.amount} wrong ones "
            f"spread over both workers ({served})"
        )
        assert answer.status_code == 200
        assert TOO_MANY in answer.text
