import pytest
from django.conf import settings
from rest_framework.test import APIClient

from accounts.models import User
from accounts.services import api_token_issue


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
    return User.objects.create_user("alice", "alice@example.com", "alice-password-1")


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
