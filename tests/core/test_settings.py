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
    "STRIPE_API_KEY": "sk_test_dummy",
    "STRIPE_WEBHOOK_SECRET": "whsec_dummy",
}


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in PRODUCTION_ENV}
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


def test_production_passes_the_deployment_checklist() -> None:
    result = _manage(PRODUCTION_ENV, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


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
