"""Production: every secret and address comes from the environment, or the process refuses to
start with a message naming the missing variable."""

from .base import *
from .base import env, require

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
CELERY_BROKER_URL = require("CELERY_BROKER_URL", "e.g. redis://host:6379/0.")
STRIPE_API_KEY = require("STRIPE_API_KEY", "the Stripe secret key (sk_live_… or sk_test_…).")
STRIPE_WEBHOOK_SECRET = require(
    "STRIPE_WEBHOOK_SECRET", "the signing secret of the Stripe webhook endpoint (whsec_…)."
)
STRIPE_WEBHOOK_SECRETS = [s.strip() for s in STRIPE_WEBHOOK_SECRET.split(",") if s.strip()]
STRIPE_API_BASE = env.str("STRIPE_API_BASE", default="https://api.stripe.com")
# Receipts (SPEC §8): a production deployment against live Stripe trusts production keys only.
# The signing key and the trusted public keys come from the environment (see base.py).
VOUCH_ENVIRONMENT = env.str("VOUCH_ENVIRONMENT", default="production")
RECEIPT_SIGNING_ENVIRONMENT = env.str("RECEIPT_SIGNING_ENVIRONMENT", default=VOUCH_ENVIRONMENT)

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
ACCOUNT_EMAIL_VERIFICATION = env.str("ACCOUNT_EMAIL_VERIFICATION", default="mandatory")
