"""Operations tests: a real gunicorn (readiness with a service down), a real Celery worker whose
log lines are kept, and a tap on the log handler the settings configure."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from config.celery_app import app
from stripe_sandbox.client import SandboxControl
from tests.crashes import database_url
from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


@contextmanager
def gunicorn(tmp_path: Path, **env: str) -> Iterator[str]:
    """Gunicorn (one worker) on a free port with the test settings and database, the variables in
    `env` on top; yields its base URL once it answers /healthz (which needs no service)."""
    port = free_port()
    error_log = tmp_path / f"gunicorn-{port}.log"
    config = tmp_path / "gunicorn.conf.py"
    config.write_text("")  # not the repository's: only the options below
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(),
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    command = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application",
        "--config", str(config), "--workers", "1", "--bind", f"127.0.0.1:{port}",
        "--timeout", "60", "--error-logfile", str(error_log),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, env=environment, start_new_session=True, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, "gunicorn exited:\n" + _read(error_log)
            try:
                if requests.get(f"{url}/healthz", timeout=10).ok:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, "gunicorn did not answer:\n" + _read(error_log)
            time.sleep(0.2)
        yield url
    finally:
        _stop(process)


class WorkerLog:
    """The lines a Celery worker wrote (its banner aside): its JSON records."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in _read(self.path).splitlines() if line.startswith("{")]


@pytest.fixture
def logging_worker(
    celery_broker: str, sandbox: SandboxControl, tmp_path: Path, transactional_db: None
) -> Iterator[WorkerLog]:
    """A real Celery worker (a process of its own, as deployed: prefork, one child) at INFO, on
    the test database and the sandbox, its output kept in a file."""
    with app.connection_for_write() as broker:
        broker.default_channel.queue_purge(app.conf.task_default_queue)
    log = WorkerLog(tmp_path / f"worker-{uuid.uuid4().hex}.log")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": celery_broker,
        "STRIPE_API_BASE": sandbox.url,
        "PYTHONUNBUFFERED": "1",
    }
    with log.path.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config.celery_app", "worker",
             "--loglevel=INFO", "--concurrency=1", "--without-mingle", "--without-gossip",
             "--without-heartbeat"],
            cwd=ROOT, env=env, start_new_session=True, stdout=output, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not any(r.get("event", "").endswith(" ready.") for r in log.records()):
            assert process.poll() is None, "the worker exited:\n" + _read(log.path)
            assert time.monotonic() < deadline, "the worker did not start:\n" + _read(log.path)
            time.sleep(0.2)
        yield log
    finally:
        _stop(process)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _stop(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
