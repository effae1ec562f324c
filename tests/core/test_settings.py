import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = {
    "SECRET_KEY": "x" * 20 + "dummy-production-secret-for-checks-only-0123456789",
    "ALLOWED_HOSTS": "vouch.example.com",
    "DATABASE_URL": "postgres://vouch@db.example.com:5432/vouch",
    "CELERY_BROKER_URL": "redis://redis.example.com:6379/0",
    "CACHE_URL": "redis://redis.example.com:6379/1",
    "STRIPE_API_KEY": "sk_live_dummy",
    "STRIPE_WEBHOOK_SECRET": "whsec_dummy",
    "MCP_RESOURCE_URL": "https://vouch.example.com/mcp",
    # A backend that sends: the default (console) prints every reset link (issue 38 item 3).
    "DJANGO_EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
}


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in PRODUCTION_ENV and k not in ("VOUCH_ENVIRONMENT", "EMAIL_BACKEND_INSECURE_OK")
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "config.settings.production", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("missing", sorted(PRODUCTION_ENV))
def test_production_refuses_to_start_without_each_variable(missing: str) -> None:
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != missing}
    result = _manage(env, "check")
    assert result.returncode != 0
    assert f"Set the environment variable {missing}" in result.stderr


def test_production_refuses_a_cache_other_processes_cannot_see() -> None:
    """Login limits and API throttles count in the cache: production's must be Redis."""
    result = _manage({**PRODUCTION_ENV, "CACHE_URL": "file:///tmp/vouch-cache"}, "check")
    assert result.returncode != 0
    assert "CACHE_URL must be a redis:// or rediss:// URL in production" in result.stderr


def test_production_passes_the_deployment_checklist() -> None:
    result = _manage(PRODUCTION_ENV, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


TEST_KEY_IN_PRODUCTION = "STRIPE_API_KEY is a test-mode key but VOUCH_ENVIRONMENT is production"
LIVE_KEY_IN_SANDBOX = "STRIPE_API_KEY is a live-mode key but VOUCH_ENVIRONMENT is sandbox"


@pytest.mark.parametrize(
    ("environment", "key", "refusal"),
    [
        (None, "sk_test_dummy", TEST_KEY_IN_PRODUCTION),
        ("production", "rk_test_dummy", TEST_KEY_IN_PRODUCTION),
        ("sandbox", "sk_live_dummy", LIVE_KEY_IN_SANDBOX),
        ("sandbox", "rk_live_dummy", LIVE_KEY_IN_SANDBOX),
        ("production", "pk_live_dummy", "STRIPE_API_KEY must be a Stripe secret key"),
        ("prod", "sk_live_dummy", "VOUCH_ENVIRONMENT must be production or sandbox"),
    ],
)
def test_production_refuses_a_key_of_the_other_mode(
    environment: str | None, key: str, refusal: str
) -> None:
    """A production deployment must not run on test money, a sandbox one must not move live
    money: receipts would claim the wrong mode."""
    env = {**PRODUCTION_ENV, "STRIPE_API_KEY": key}
    if environment:
        env["VOUCH_ENVIRONMENT"] = environment
    result = _manage(env, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert refusal in result.stderr


@pytest.mark.parametrize(
    ("environment", "key"),
    [
        ("production", "sk_live_dummy"),
        ("production", "rk_live_dummy"),
        ("sandbox", "sk_test_dummy"),
    ],
)
def test_production_settings_start_with_a_key_of_the_deployments_mode(
    environment: str, key: str
) -> None:
    result = _manage(
        {**PRODUCTION_ENV, "VOUCH_ENVIRONMENT": environment, "STRIPE_API_KEY": key}, "check"
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("key", "uses_sandbox", "base"),
    [
        (None, True, "http://127.0.0.1:12111"),
        ("sk_test_51RealTestModeKey", False, "https://api.stripe.com"),
    ],
)
def test_local_runs_use_the_sandbox_unless_a_real_key_is_set(
    tmp_path: Path, key: str | None, uses_sandbox: bool, base: str
) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"STRIPE_API_KEY", "STRIPE_API_BASE", "DATABASE_URL", "CELERY_BROKER_URL"}
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", VOUCH_VAR_DIR=str(tmp_path))
    if key:
        env["STRIPE_API_KEY"] = key
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings as s; "
         "print(s.STRIPE_USES_SANDBOX, s.STRIPE_API_BASE)"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert result.stdout.split() == [str(uses_sandbox), base]


def test_a_local_run_refuses_a_live_key(tmp_path: Path) -> None:
    """`make run` is a development run against the sandbox or Stripe test mode: never live money."""
    base = {k: v for k, v in os.environ.items() if k not in ("STRIPE_API_KEY", "DATABASE_URL")}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={
            **base,
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "VOUCH_VAR_DIR": str(tmp_path),
            "STRIPE_API_KEY": "sk_live_dummy",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "must not move live money" in result.stderr


# --- e-mail (issue 38 item 3) -------------------------------------------------------------------

CONSOLE = "django.core.mail.backends.console.EmailBackend"
FILE = "django.core.mail.backends.filebased.EmailBackend"
SMTP = "django.core.mail.backends.smtp.EmailBackend"


@pytest.mark.parametrize("backend", [None, CONSOLE, FILE])
def test_production_refuses_an_email_backend_that_writes_links_down(backend: str | None) -> None:
    """Issue 38 item 3: the console backend (production's default) printed every password-reset
    link into the web log, and a file backend writes them to disk: refused unless said so."""
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "DJANGO_EMAIL_BACKEND"}
    if backend is not None:
        env["DJANGO_EMAIL_BACKEND"] = backend
    result = _manage(env, "check")
    assert result.returncode != 0
    assert "Set the environment variable DJANGO_EMAIL_BACKEND" in result.stderr
    assert "EMAIL_BACKEND_INSECURE_OK=1" in result.stderr


@pytest.mark.parametrize("backend", [CONSOLE, FILE])
def test_production_takes_a_writing_backend_when_told_explicitly(backend: str) -> None:
    """Issue 38 item 3: a test of the deployed stack reads its links from a mail folder."""
    env = {**PRODUCTION_ENV, "DJANGO_EMAIL_BACKEND": backend, "EMAIL_BACKEND_INSECURE_OK": "1"}
    result = _manage(env, "check")
    assert result.returncode == 0, result.stderr


def test_production_takes_smtp() -> None:
    result = _manage({**PRODUCTION_ENV, "DJANGO_EMAIL_BACKEND": SMTP}, "check")
    assert result.returncode == 0, result.stderr
