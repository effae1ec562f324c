"""The test suite: PostgreSQL always (never a silent fallback to SQLite), Redis as broker."""

import base64
import hashlib
import os
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.core.exceptions import ImproperlyConfigured

from .base import *
from .base import BASE_DIR, cache_from_url, env

DEBUG = False
SECRET_KEY = "test-only-not-a-secret-0123456789abcdefghijklmnopqrstuvwxyz"  # noqa: S105
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]

DATABASES = {
    "default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/vouch"),
}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured(
        "The test suite runs on PostgreSQL only: set DATABASE_URL to a postgres:// URL "
        f"(it names {DATABASES['default']['ENGINE']})."
    )

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/0")


def _run_cache_prefix() -> str:
    """Counters (login limits, API throttles) of this test run only: other runs on this machine
    share the Redis database. Named by the test database and the process that first loads these
    settings, and handed to the processes it starts (live servers, workers) through the
    environment. A gunicorn started outside pytest loads settings in each worker, never in its
    master: its workers take the master's pid, so they count together."""
    if prefix := env.str("CACHE_KEY_PREFIX", default=""):
        return prefix
    owner = os.getppid() if "gunicorn" in sys.argv[0] else os.getpid()
    prefix = f"vouch-test:{DATABASES['default']['NAME']}:{owner}"
    os.environ["CACHE_KEY_PREFIX"] = prefix
    return prefix


CACHE_URL = env.str("CACHE_URL", default="redis://127.0.0.1:6379/1")
CACHES = cache_from_url(CACHE_URL, key_prefix=_run_cache_prefix())
# Short provider timeouts (SPEC §12): the sandbox's `timeout` fault then costs little.
STRIPE_READ_TIMEOUT_S = 0.5
STRIPE_CONNECT_TIMEOUT_S = 2.0
STRIPE_RETRY_BASE_S = 0.02
STRIPE_RETRY_MAX_S = 0.2
# Stripe's rate budgets lifted where speed is not what a test checks; the tests of the budgets
# turn them on (the `settings` fixture, or this variable for the processes they start).
STRIPE_RATE_LIMITS = env.str("STRIPE_RATE_LIMITS", default="off")
# Contracts with short timing, for tests that watch a run to its end.
VERIFICATION_CONTRACT_DIRS = [str(BASE_DIR / "tests" / "verification" / "contracts")]
# Test-only: the name of a crash point (core.crash) at which the process dies (SPEC §3).
VOUCH_CRASH_AT = env.str("VOUCH_CRASH_AT", default="")
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Receipts (SPEC §8): a FIXED sandbox key derived from a constant, so that every process of a test
# run (a Celery worker too) signs with the same key; it is the one trusted key. Tests override
# these settings to sign with keys that are not trusted (another environment, local-development).
VOUCH_ENVIRONMENT = "sandbox"
RECEIPT_SIGNING_KEY = base64.b64encode(
    hashlib.sha256(b"vouch test receipt signing key (sandbox)").digest()
).decode()
RECEIPT_SIGNING_KEY_ID = "test-sandbox-1"
RECEIPT_SIGNING_ENVIRONMENT = "sandbox"
RECEIPT_TRUSTED_KEYS = {
    RECEIPT_SIGNING_KEY_ID: {
        "public_key": base64.b64encode(
            Ed25519PrivateKey.from_private_bytes(base64.b64decode(RECEIPT_SIGNING_KEY))
            .public_key()
            .public_bytes(Encoding.Raw, PublicFormat.Raw)
        ).decode(),
        "environment": "sandbox",
    }
}

# API throttles (core/api/throttling.py) high enough that no test is throttled by accident; the
# throttle tests set low rates with override_settings.
VOUCH_THROTTLE_RATES = {"user": "100000/min", "token": "100000/min", "money": "100000/min"}
# Tests that watch a failure limit set their own (the suite's client address is always 127.0.0.1).
OAUTH_TOKEN_FAILURE_RATE = "100000/min"  # noqa: S105 (a rate)
MCP_BEARER_FAILURE_RATE = "100000/min"
MCP_REGISTRATION_RATE = "100000/min"
MCP_CLIENT_DOCUMENT_PRIVATE_OK = True  # the tests serve documents on 127.0.0.1
