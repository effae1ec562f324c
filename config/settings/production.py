"""Production: every secret and address comes from the environment, or the process refuses to
start with a message naming the missing variable. The Stripe key's mode must be the deployment's:
live for `production`, test for `sandbox` (receipts record and check it, SPEC §8)."""

from django.core.exceptions import ImproperlyConfigured

from .base import *
from .base import cache_from_url, env, require


def _stripe_key_mode(key: str) -> str:
    """`live` or `test`, from a Stripe secret (`sk_`) or restricted (`rk_`) key's prefix."""
    for prefix in ("sk_", "rk_"):
        for mode in ("live", "test"):
            if key.startswith(f"{prefix}{mode}_"):
                return mode
    raise ImproperlyConfigured(
        "STRIPE_API_KEY must be a Stripe secret key (sk_live_… or sk_test_…) or restricted key "
        "(rk_live_… or rk_test_…); set it to the secret key from the Stripe dashboard."
    )


DEBUG = False
SECRET_KEY = require(
    "SECRET_KEY",
    "a long random string, e.g. from "
    "`python -c 'import secrets; print(secrets.token_urlsafe(64))'`.",
)
ALLOWED_HOSTS = [
    host.strip()
    for host in require(
        "ALLOWED_HOSTS", "a comma-separated list of the host names Vouch serves."
    ).split(",")
    if host.strip()
]
DATABASES = {
    "default": env.db_url_config(
        require("DATABASE_URL", "e.g. postgres://user:password@host:5432/vouch.")
    )
}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# The web tier runs ASGI (gunicorn with uvicorn workers, for /mcp beside Django): there a
# request's database work runs in threads that come and go, and Django's docs advise a pool
# rather than persistent connections. psycopg's pool, one per process (the Celery workers too).
# DATABASE_POOL=false goes back to persistent connections (CONN_MAX_AGE), e.g. behind PgBouncer.
if env.bool("DATABASE_POOL", default=True):
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=10),
        "timeout": env.float("DATABASE_POOL_TIMEOUT_S", default=10.0),
    }
CELERY_BROKER_URL = require("CELERY_BROKER_URL", "e.g. redis://host:6379/0.")
# Redis, shared by every web process: login limits and API throttles are counted there.
CACHE_URL = require("CACHE_URL", "the Redis that login limits count in, e.g. redis://host:6379/1.")
if not CACHE_URL.startswith(("redis://", "rediss://")):
    raise ImproperlyConfigured(
        f"CACHE_URL must be a redis:// or rediss:// URL in production, not {CACHE_URL!r}: login "
        "limits and API throttles must be counted where every web process sees them."
    )
CACHES = cache_from_url(CACHE_URL, key_prefix=env.str("CACHE_KEY_PREFIX", default="vouch"))
# This deployment's environment: `production` moves live money, `sandbox` (a staging deployment)
# runs on Stripe test mode. Receipts are trusted and checked against it (SPEC §8).
VOUCH_ENVIRONMENT = env.str("VOUCH_ENVIRONMENT", default="production")
if VOUCH_ENVIRONMENT not in ("production", "sandbox"):
    raise ImproperlyConfigured(
        f"VOUCH_ENVIRONMENT must be production or sandbox, not {VOUCH_ENVIRONMENT!r}: set "
        "VOUCH_ENVIRONMENT=production against live Stripe, or sandbox against Stripe test mode."
    )
STRIPE_API_KEY = require(
    "STRIPE_API_KEY",
    "the Stripe secret key: sk_live_… when VOUCH_ENVIRONMENT is production (the default), "
    "sk_test_… when it is sandbox.",
)
_KEY_MODE = _stripe_key_mode(STRIPE_API_KEY)
if VOUCH_ENVIRONMENT == "production" and _KEY_MODE != "live":
    raise ImproperlyConfigured(
        "STRIPE_API_KEY is a test-mode key but VOUCH_ENVIRONMENT is production: set "
        "STRIPE_API_KEY to the live secret key (sk_live_…), or set VOUCH_ENVIRONMENT=sandbox for "
        "a deployment against Stripe test mode."
    )
if VOUCH_ENVIRONMENT != "production" and _KEY_MODE != "test":
    raise ImproperlyConfigured(
        f"STRIPE_API_KEY is a live-mode key but VOUCH_ENVIRONMENT is {VOUCH_ENVIRONMENT}: a "
        f"{VOUCH_ENVIRONMENT} deployment must not move live money. Set STRIPE_API_KEY to a "
        "test-mode key (sk_test_…), or set VOUCH_ENVIRONMENT=production."
    )
STRIPE_WEBHOOK_SECRET = require(
    "STRIPE_WEBHOOK_SECRET", "the signing secret of the Stripe webhook endpoint (whsec_…)."
)
STRIPE_WEBHOOK_SECRETS = [s.strip() for s in STRIPE_WEBHOOK_SECRET.split(",") if s.strip()]
STRIPE_API_BASE = env.str("STRIPE_API_BASE", default="https://api.stripe.com")
# Receipts (SPEC §8): a production deployment against live Stripe trusts production keys only.
# The signing key and the trusted public keys come from the environment (see base.py).
RECEIPT_SIGNING_ENVIRONMENT = env.str("RECEIPT_SIGNING_ENVIRONMENT", default=VOUCH_ENVIRONMENT)

# E-mail carries password-reset and confirmation links: a backend that writes them down (the
# console's into the web log, where base.py's default put them; a file's on disk) hands a live
# key to whoever reads the logs (issue 38). Refused unless asked for by name: a test of the
# deployed stack reads its links from a mail folder (docs/operations/settings.md).
_WRITING_EMAIL_BACKENDS = {
    "django.core.mail.backends.console.EmailBackend",
    "django.core.mail.backends.filebased.EmailBackend",
}
if EMAIL_BACKEND in _WRITING_EMAIL_BACKENDS and not env.bool(
    "EMAIL_BACKEND_INSECURE_OK", default=False
):
    raise ImproperlyConfigured(
        f"The e-mail backend {EMAIL_BACKEND} writes every password-reset link down, where anyone "
        "with the logs can use it. Set the environment variable DJANGO_EMAIL_BACKEND to a backend "
        "that sends mail, e.g. django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST, "
        "EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD and EMAIL_USE_TLS, or set "
        "EMAIL_BACKEND_INSECURE_OK=1 to keep it on purpose (a test, never a deployment people use)."
    )

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
# Probes and Prometheus reach a worker directly over HTTP (no proxy to say it was HTTPS): the
# operations endpoints answer there rather than redirect.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
ACCOUNT_EMAIL_VERIFICATION = env.str("ACCOUNT_EMAIL_VERIFICATION", default="mandatory")

# django-oauth-toolkit's W008 (http redirect URIs allowed): kept on purpose for loopback
# callbacks of assistants on the person's own machine (RFC 8252 §7.3); see OAUTH2_PROVIDER.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
# The MCP resource's canonical URL (RFC 8707, RFC 9728): every access token is bound to it, and
# the discovery documents name it. Never taken from the request's Host header in production.
MCP_RESOURCE_URL = require(
    "MCP_RESOURCE_URL",
    "the public URL of the MCP endpoint, e.g. https://vouch.example.com/mcp (tokens are bound "
    "to it).",
)
# A client id URL is never fetched from a private or local address in production.
MCP_CLIENT_DOCUMENT_PRIVATE_OK = env.bool("MCP_CLIENT_DOCUMENT_PRIVATE_OK", default=False)
