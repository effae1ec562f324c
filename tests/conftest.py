import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from rest_framework.test import APIClient

from accounts.models import User
from accounts.services import api_token_issue, email_address_verify
from config.celery_app import app
from stripe_sandbox import SandboxServer
from stripe_sandbox.client import SandboxControl
from tests.helpers import Receiver

# The shared drivers' fixtures (tests/drivers/), for every test: a test imports their classes and
# helpers from there, never from another directory's conftest.py.
pytest_plugins = [
    "tests.drivers.api",
    "tests.drivers.disputes",
    "tests.drivers.https_documents",
    "tests.drivers.logs",
    "tests.drivers.mcp",
    # Stripe's contract (SPEC §12.1): fails a run whose sandbox or adapter departs from it.
    "tests.conformance.plugin",
]


ROOT = Path(__file__).resolve().parents[1]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once, with instructions, when PostgreSQL is unreachable: the suite never falls
    back to another database."""
    import psycopg

    db = settings.DATABASES["default"]
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    try:
        psycopg.connect(
            host=host,
            port=port,
            user=db.get("USER") or None,
            password=db.get("PASSWORD") or None,
            dbname="postgres",
            connect_timeout=3,
        ).close()
    except psycopg.OperationalError as exc:
        pytest.exit(
            f"PostgreSQL is not reachable at {host}:{port} ({exc}).\n"
            "Start it, e.g.: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main "
            "start\nor point DATABASE_URL at a PostgreSQL server (postgres://user@host:5432/db).",
            returncode=3,
        )


@pytest.fixture
def buyer(db: None) -> User:
    """A buyer whose e-mail address is verified (moving money needs it)."""
    user = User.objects.create_user("alice", "alice@example.com", "alice-password-1")
    email_address_verify(user=user)
    return user


@pytest.fixture
def staff(db: None) -> User:
    return User.objects.create_user("olga", "olga@example.com", "olga-password-1", is_staff=True)


@pytest.fixture
def api_client() -> APIClient:
    """A client that enforces CSRF as a browser session would experience it."""
    return APIClient(enforce_csrf_checks=True)


@pytest.fixture
def session_client(api_client: APIClient, buyer: User) -> APIClient:
    api_client.force_login(buyer)
    return api_client


@pytest.fixture
def bearer_client(buyer: User) -> APIClient:
    _, raw = api_token_issue(user=buyer, name="test")
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture(autouse=True)
def _root_log_level_kept() -> Iterator[None]:
    """Every test ends with the root logger at the level it began with. An in-process Celery
    worker (`celery.contrib.testing.worker.start_worker`) sets up Celery's logging, which may
    leave the root logger at ERROR (its test log level): every later INFO line, a request's
    included, was dropped, and a test reading them failed only after those tests had run."""
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)


@pytest.fixture
def celery_broker() -> str:
    """The Celery broker (Redis under test settings), reachable, or a failure saying how to start
    it: a test that needs a real worker never passes or hangs without one."""
    from config.celery_app import app

    url = app.conf.broker_url
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=3)
    except Exception as exc:
        pytest.fail(
            f"The Celery broker at {url} is not reachable ({exc}). Start Redis: redis-server "
            '--daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no, '
            "or set CELERY_BROKER_URL."
        )
    return str(url)


@pytest.fixture(scope="session")
def sandbox_server() -> Iterator[SandboxServer]:
    """One Stripe sandbox for the session, on a free port, in this process."""
    # Stripe's rate limits lifted: tests here check behaviour, not speed, and a suite's bursts of
    # setup calls would be refused 429 as Stripe would. The limits themselves are tested at
    # Stripe's figures on sandboxes of their own (tests/stripe_sandbox/test_rate_limits.py).
    server = SandboxServer(port=0, seed=1234, rate_limits=False).start()
    yield server
    server.stop()


@pytest.fixture
def sandbox(sandbox_server: SandboxServer) -> SandboxControl:
    """The sandbox, reset: every test starts from an empty provider."""
    control = SandboxControl(sandbox_server.url)
    control.reset(seed=1234)
    return control


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook endpoint that records deliveries."""
    r = Receiver()
    yield r
    r.close()


def _database_url() -> str:
    db = connection.settings_dict
    user = db["USER"] or "postgres"
    return f"postgres://{user}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def worker_with_beat(
    sandbox: SandboxControl, celery_broker: str, live_server: Any
) -> Iterator[None]:
    call_command("setup_periodic_tasks", stdout=open(os.devnull, "w"))  # noqa: SIM115
    every_second, _ = IntervalSchedule.objects.get_or_create(
        every=1, period=IntervalSchedule.SECONDS
    )
    PeriodicTask.objects.filter(task="verification.poll").update(interval=every_second)
    with app.connection_for_write() as broker:
        for queue in app.conf.task_queues:
            broker.default_channel.queue_purge(queue.name)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": celery_broker,
        "STRIPE_API_BASE": sandbox.url,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config.celery_app", "worker", "--beat",
         "--concurrency=2", "--loglevel=WARNING", "--without-mingle", "--without-gossip"],
        cwd=ROOT, env=env, start_new_session=True,
    )  # fmt: skip
    sandbox.add_webhook(f"{live_server.url}/webhooks/stripe", settings.STRIPE_WEBHOOK_SECRET)
    try:
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
