"""`make run`: everything embedded, nothing to install or start beside Python."""

import base64
import hashlib
import json
import os
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ops.logs import logging_config

from .base import *
from .base import LOG_LEVEL, VAR_DIR, cache_from_url, env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
# Follows this DEBUG, not base's (computed there before DEBUG is turned on here): `make run` takes
# a client id metadata document served on this machine (docs/getting-started.md).
MCP_CLIENT_DOCUMENT_PRIVATE_OK = env.bool("MCP_CLIENT_DOCUMENT_PRIVATE_OK", default=DEBUG)
SECRET_KEY = env.str("SECRET_KEY", default="local-development-only-not-a-secret-0123456789abcdef")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])

VAR_DIR.mkdir(parents=True, exist_ok=True)

# What `make run` uses, written by it under var/ at each start (core/management/commands/
# run_local.py): the sandbox's address and the receipt key it created and trusts. Any process with
# these settings and this var directory (`manage.py reconcile` typed beside `make run`) uses them
# too; a variable set in the environment wins over each.
LOCAL_SETTINGS_FILE = VAR_DIR / "local-settings.json"


def _make_run_settings() -> dict[str, Any]:
    try:
        written = json.loads(LOCAL_SETTINGS_FILE.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ImproperlyConfigured(
            f"{LOCAL_SETTINGS_FILE} cannot be read ({exc}). Delete it: `make run` writes it again "
            "at its next start."
        ) from exc
    if not isinstance(written, dict):
        raise ImproperlyConfigured(
            f"{LOCAL_SETTINGS_FILE} is not a JSON object. Delete it: `make run` writes it again."
        )
    return written


MAKE_RUN_SETTINGS = _make_run_settings()
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'vouch.sqlite3'}")}
# SQLite (the default) is shared by the web server's threads, the worker's processes, beat and
# the webhooks the sandbox delivers while a request is running. A transaction that reads and then
# writes (a lock, then an update) cannot wait for another writer in SQLite's default DEFERRED
# mode: it fails at once with `database is locked`, whatever the timeout. So every transaction
# takes the write lock when it begins (IMMEDIATE) and waits for it (`timeout`, seconds), and the
# write-ahead log lets readers go on while one writes. No transaction calls the provider, so each
# holds the lock for milliseconds; the timeout is generous for a loaded two-core laptop.
SQLITE_BUSY_TIMEOUT_S = env.float("SQLITE_BUSY_TIMEOUT_S", default=30.0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": SQLITE_BUSY_TIMEOUT_S,
            # WAL is a property of the file (kept once set); NORMAL is the safe pairing with it
            # (a commit can be lost only to a power cut, never corrupt the file).
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

# The cache (login limits, API throttles, sessions) in a folder under var/, shared by the web
# server's threads, the worker's processes and beat with no service to start. CACHE_URL points
# it at Redis instead.
CACHE_URL = env.str("CACHE_URL", default=f"file://{VAR_DIR / 'cache'}")
CACHES = cache_from_url(CACHE_URL, key_prefix=env.str("CACHE_KEY_PREFIX", default="vouch"))

# The embedded broker: kombu's filesystem transport keeps messages as files under var/, so the
# worker and beat need no service. CI and production point CELERY_BROKER_URL at Redis.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _queue_dir = VAR_DIR / "celery" / "queue"
    _processed_dir = VAR_DIR / "celery" / "processed"
    _queue_dir.mkdir(parents=True, exist_ok=True)
    _processed_dir.mkdir(parents=True, exist_ok=True)
    # kombu's filesystem transport, with each message written whole before a worker can see it
    # (core/broker.py: the stock one let a worker read a half-written file, and stop).
    CELERY_BROKER_TRANSPORT = "core.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue_dir),
        "data_folder_out": str(_queue_dir),
        "processed_folder": str(_processed_dir),
        # Broadcast (pidbox) exchanges; kombu's default is ./control in the working directory.
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "store_processed": False,
        # The transport polls the folder, and waits this long whenever the worker's prefetch is
        # full, too: at the default (1 s) the worker takes two tasks a second, far fewer than
        # the webhook events a few fundings bring. A listing of a small folder is cheap.
        "polling_interval": 0.1,
    }

# Stripe: the sandbox (started by `make run`) unless STRIPE_API_KEY names a real test-mode key,
# in which case the app talks to Stripe itself.
SANDBOX_API_KEY = "sk_test_vouch_sandbox"
STRIPE_API_KEY = env.str("STRIPE_API_KEY", default=SANDBOX_API_KEY)
STRIPE_USES_SANDBOX = STRIPE_API_KEY == SANDBOX_API_KEY
if STRIPE_API_KEY.startswith(("sk_live_", "rk_live_")):
    raise ImproperlyConfigured(
        "STRIPE_API_KEY is a live-mode key, and `make run` (local settings) is a development run: "
        "it must not move live money. Unset STRIPE_API_KEY to use the Stripe sandbox, or set it to "
        "a test-mode key (sk_test_…)."
    )
# The sandbox's default address; `make run STRIPE_API_BASE=…` starts it elsewhere, and writes that
# address to var/local-settings.json for the other commands.
SANDBOX_API_BASE = "http://127.0.0.1:12111"
STRIPE_API_BASE = env.str(
    "STRIPE_API_BASE",
    default=(MAKE_RUN_SETTINGS.get("STRIPE_API_BASE") or SANDBOX_API_BASE)
    if STRIPE_USES_SANDBOX
    else "https://api.stripe.com",
)

# Receipts (SPEC §8): a local run works against the sandbox (or Stripe test mode). `make run`
# creates a sandbox receipt key under var/, passes it, trusted, in the environment of its
# processes and writes it to var/local-settings.json, where any other process with this var
# directory finds it. A process with neither signs with a fixed local-development key, which is
# never trusted. A signing key set in the environment wins (with its id and environment).
VOUCH_ENVIRONMENT = env.str(
    "VOUCH_ENVIRONMENT", default=MAKE_RUN_SETTINGS.get("VOUCH_ENVIRONMENT") or "sandbox"
)
# Derived from a published constant: not a secret, and never trusted anywhere.
_LOCAL_DEVELOPMENT_SEED = hashlib.sha256(b"vouch local-development receipt key").digest()
_MAKE_RUN_KEY = (
    MAKE_RUN_SETTINGS
    if MAKE_RUN_SETTINGS.get("RECEIPT_SIGNING_KEY") and not os.environ.get("RECEIPT_SIGNING_KEY")
    else {}
)
RECEIPT_SIGNING_KEY = env.str(
    "RECEIPT_SIGNING_KEY",
    default=_MAKE_RUN_KEY.get("RECEIPT_SIGNING_KEY")
    or base64.b64encode(_LOCAL_DEVELOPMENT_SEED).decode(),
)
RECEIPT_SIGNING_KEY_ID = env.str(
    "RECEIPT_SIGNING_KEY_ID",
    default=_MAKE_RUN_KEY.get("RECEIPT_SIGNING_KEY_ID") or "local-development",
)
RECEIPT_SIGNING_ENVIRONMENT = env.str(
    "RECEIPT_SIGNING_ENVIRONMENT",
    default=_MAKE_RUN_KEY.get("RECEIPT_SIGNING_ENVIRONMENT")
    or ("local-development" if RECEIPT_SIGNING_KEY_ID == "local-development" else "sandbox"),
)
# The keys make run trusts, and those of the environment (which win, key by key).
RECEIPT_TRUSTED_KEYS = {
    **dict(MAKE_RUN_SETTINGS.get("RECEIPT_TRUSTED_KEYS") or {}),
    **env.json("RECEIPT_TRUSTED_KEYS", default={}),
}

# Logs for a person at a terminal (ops/logs.py); LOG_FORMAT=json for the production format.
LOGGING = logging_config(renderer=env.str("LOG_FORMAT", default="console"), level=LOG_LEVEL)
# /metrics for a Prometheus on this machine.
METRICS_ALLOWED_NETWORKS = env.list("METRICS_ALLOWED_NETWORKS", default=["127.0.0.1/32", "::1/128"])

# Credentials printed by `make run` for the demo users (never used outside DEBUG). Staff join the
# `ops` group (every operations permission), so `ops` and `lead` can each approve what the other
# prepared and file it (four eyes). Every demo address is verified: the buyer moves money at once.
VOUCH_DEMO_USERS = {
    "ops": {"password": "vouch-ops-demo", "email": "ops@example.com", "staff": True},
    "lead": {"password": "vouch-lead-demo", "email": "lead@example.com", "staff": True},
    "buyer": {"password": "vouch-buyer-demo", "email": "buyer@example.com", "staff": False},
}
