"""/healthz (alive, no I/O) and /readyz (database, migrations, broker; never the provider)."""

from pathlib import Path

import pytest
import requests
from django.test import Client

from tests.crashes import database_url
from tests.helpers import free_port

from .conftest import gunicorn


def test_healthz_answers_without_touching_the_database() -> None:
    """No `db` mark: pytest-django refuses any database access here, so a health check that
    queried anything would answer 500."""
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.django_db
def test_readyz_is_ready_when_every_service_answers() -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "broker": "ok"},
    }


@pytest.mark.django_db
def test_readyz_never_calls_the_provider(settings: object) -> None:
    """Stripe unreachable (nothing listens at its address) does not make Vouch unready."""
    settings.STRIPE_API_BASE = f"http://127.0.0.1:{free_port()}"  # type: ignore[attr-defined]
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content


def _database_at(name: str, port: int | None = None) -> str:
    """The test database's URL with another database name or port."""
    base, _, _ = database_url().rpartition("/")
    if port is not None:
        base = base.rsplit(":", 1)[0] + f":{port}"
    return f"{base}/{name}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (
            "database down",
            {"database": "unavailable (OperationalError)", "migrations": "skipped", "broker": "ok"},
        ),
        (
            "database not migrated",
            {"database": "ok", "migrations": "not applied", "broker": "ok"},
        ),
        (
            "broker down",
            {"database": "ok", "migrations": "ok", "broker": "unavailable (OperationalError)"},
        ),
    ],
)
def test_readyz_answers_503_naming_the_check_that_failed(
    tmp_path: Path, case: str, expected: dict[str, str]
) -> None:
    """A real server whose database is at a closed port, whose database has no migration applied
    (PostgreSQL's `postgres` database: read, never written), or whose broker is at a closed port.
    It stays alive (/healthz 200) and says which check failed."""
    env = {
        "database down": {"DATABASE_URL": _database_at("vouch", port=free_port())},
        "database not migrated": {"DATABASE_URL": _database_at("postgres")},
        "broker down": {"CELERY_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"},
    }[case]
    with gunicorn(tmp_path, METRICS_TOKEN="ops-test", **env) as url:
        response = requests.get(f"{url}/readyz", timeout=30)
        alive = requests.get(f"{url}/healthz", timeout=30)
        metrics = requests.get(
            f"{url}/metrics", headers={"Authorization": "Bearer ops-test"}, timeout=30
        )
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["status"] == "unavailable"
    checks = body["checks"]
    if expected["migrations"] == "not applied":
        count, _, rest = checks["migrations"].partition(" ")
        assert int(count) > 50, checks
        assert rest == "not applied", checks
        checks = {**checks, "migrations": "not applied"}
    assert checks == expected
    assert alive.status_code == 200
    # The scrape still answers (the process counters matter most then) and says whether the
    # database's state could be read (not from a database without Vouch's tables).
    assert metrics.status_code == 200
    database_up = 1 if case == "broker down" else 0
    assert f"\nvouch_metrics_database_up {database_up}.0\n" in metrics.text
