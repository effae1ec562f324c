"""Settings shared by every environment. Each value that differs between machines is read
from the environment (django-environ); local.py, test.py and production.py set the defaults
that suit them."""

import logging
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from ops.logs import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()

# Writable state of a local run (the embedded database, the embedded broker's folders).
VAR_DIR = Path(env.str("VOUCH_VAR_DIR", default=str(BASE_DIR / "var")))


def require(name: str, hint: str) -> str:
    """Read a required environment variable, or stop with a message naming it."""
    value = env.str(name, default="")
    if not value:
        raise ImproperlyConfigured(f"Set the environment variable {name}: {hint}")
    return value


# --- Django core ---------------------------------------------------------------------------

DEBUG = env.bool("DJANGO_DEBUG", default=False)
TIME_ZONE = "UTC"
USE_TZ = True
LANGUAGE_CODE = "en-us"
USE_I18N = False
# One date and time format, with the time zone, on every page (`2026-12-01 06:30:00 UTC`): Django
# 5 always applies the locale's formats over DATETIME_FORMAT, so they are set in config/formats/.
FORMAT_MODULE_PATH = ["config.formats"]
SITE_ID = 1
# The Site (django.contrib.sites) that allauth's e-mails speak for ("Hello from Vouch!"), named
# by accounts/migrations/0003_site_name.py; SITE_DOMAIN empty: the first of ALLOWED_HOSTS.
# `make run` gives it the address it serves at. Once named, the admin's Sites page changes it.
SITE_NAME = env.str("SITE_NAME", default="Vouch")
SITE_DOMAIN = env.str("SITE_DOMAIN", default="")
ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.sites",
    "allauth",
    "allauth.account",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "core",
    "accounts",
    "envelopes",
    "verification",
    "receipts",
    "disputes",
    "reconciliation",
    "django_structlog",
    "ops",
    "agents.apps.OAuthProviderConfig",  # django-oauth-toolkit, its admin section named
    "agents",
]

MIDDLEWARE = [
    "core.timing.ServerTimingMiddleware",
    # One log line per request (ops/logs.py): request id (handed on to the Celery tasks the request
    # enqueues), user, route, status, duration and the time spent waiting for the provider.
    "django_structlog.middlewares.RequestMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "core.api.middleware.RequestLimitsMiddleware",
    "core.api.middleware.ApiJsonErrorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    # A long-lived first-party device cookie, a data element of funding (Visa CE 3.0, SPEC §17).
    "core.middleware_device.DeviceCookieMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# accounts.backends.AccountBackend authenticates as allauth's and loads a session's user with
# whether its e-mail is verified, in one query; new sessions name it. The two after it load the
# sessions made before it (a session names its backend: one not listed here is logged out).
AUTHENTICATION_BACKENDS = [
    "accounts.backends.AccountBackend",
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]

# Sessions read through the shared cache (below; written through to the database): one query
# fewer on every authenticated request.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

EMAIL_BACKEND = env.str(
    "DJANGO_EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend"
)
# The file backend's folder (a test of the deployed stack reads its links there).
EMAIL_FILE_PATH = env.str("EMAIL_FILE_PATH", default="") or None
# SMTP (django.core.mail.backends.smtp.EmailBackend), what production sends with.
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
DEFAULT_FROM_EMAIL = env.str("DJANGO_DEFAULT_FROM_EMAIL", default="Vouch <vouch@localhost>")

# Transactions live in services (STYLE.md): never wrap a request, which would put provider
# calls inside a transaction.
ATOMIC_REQUESTS = False

# --- Cache: one for every process of a deployment ---------------------------------------------

# Login limits (allauth), API throttles (DRF) and sessions count in the `default` cache, so it must
# be shared by every process: with a per-process cache (Django's default) each gunicorn worker
# would count on its own. CACHE_URL is redis://host:6379/<db> (or rediss://) for Redis, or
# file:///<folder> for a folder on this machine. Never call cache.clear(): on Redis it empties the
# whole database, other runs' keys with it.


def cache_from_url(url: str, *, key_prefix: str) -> dict[str, dict[str, Any]]:
    """The CACHES setting for a CACHE_URL, or stop with a message naming it."""
    scheme = urlsplit(url).scheme
    if scheme in ("redis", "rediss"):
        backend: dict[str, Any] = {
            "BACKEND": "core.cache.RedisCache",  # Django's, one client per pool (issue 15)
            "LOCATION": url,
        }
    elif scheme == "file":
        backend = {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": unquote(urlsplit(url).path),
            # Past MAX_ENTRIES the file cache drops a third of its entries, counters with them.
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    else:
        raise ImproperlyConfigured(
            f"CACHE_URL must be a redis://, rediss:// or file:/// URL, not {url!r}: e.g. "
            "redis://127.0.0.1:6379/1."
        )
    return {"default": {**backend, "KEY_PREFIX": key_prefix}}


CACHE_URL = env.str("CACHE_URL", default="redis://127.0.0.1:6379/1")
CACHES = cache_from_url(CACHE_URL, key_prefix=env.str("CACHE_KEY_PREFIX", default="vouch"))

# --- Authentication (django-allauth) -------------------------------------------------------

LOGIN_REDIRECT_URL = "/"
ACCOUNT_LOGOUT_REDIRECT_URL = "/accounts/login/"
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["username*", "email*", "password1*", "password2*"]
# "optional": a new buyer can sign in at once, but moves no money until the address is confirmed
# (the money routes answer 403 `email_unverified`, accounts/api/permissions.py).
ACCOUNT_EMAIL_VERIFICATION = env.str("ACCOUNT_EMAIL_VERIFICATION", default="optional")
ACCOUNT_EMAIL_SUBJECT_PREFIX = "[Vouch] "
# Sign-up makes buyers only (accounts/adapter.py: never staff, superuser or a group member);
# VOUCH_BUYER_SIGNUP=false closes it.
ACCOUNT_ADAPTER = "accounts.adapter.AccountAdapter"
VOUCH_BUYER_SIGNUP = env.bool("VOUCH_BUYER_SIGNUP", default=True)
# allauth's limits (its defaults, named here), counted in the shared cache. `login_failed`: after 5
# failures for one login name in 5 minutes (or 10 from one address in a minute) even the right
# password is refused until the window has passed. The admin has no login form of its own
# (`/admin/login/` sends to allauth's, accounts/views.py), so these hold for staff too.
ACCOUNT_RATE_LIMITS = {"login": "30/m/ip", "login_failed": "10/m/ip,5/5m/key"}
# The client address the per-address limits count (allauth's, and core/client_address.py's for
# /o/token/, /o/register/, /mcp): behind N reverse proxies, the N-th address from the right of
# X-Forwarded-For. 0 (no proxy): the connection's address.
ALLAUTH_TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)

# --- API (Django REST framework, SPEC §13) -------------------------------------------------

REST_FRAMEWORK = {
    # Bearer first: its WWW-Authenticate header makes an anonymous caller's answer a 401.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerTokenAuthentication",
        "accounts.authentication.CsrfSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's JSON parser with two more refusals: a body over DATA_UPLOAD_MAX_MEMORY_SIZE (413)
    # and JSON nested deeper than core.api.parsing.MAX_JSON_DEPTH (400).
    "DEFAULT_PARSER_CLASSES": ["core.api.parsing.JSONParser"],
    "EXCEPTION_HANDLER": "core.api.exception_handler.api_exception_handler",
    # Rates: VOUCH_THROTTLE_RATES below. Money-moving views add core.api.throttling.MoneyThrottle.
    "DEFAULT_THROTTLE_CLASSES": [
        "core.api.throttling.UserThrottle",
        "core.api.throttling.TokenThrottle",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# Django's bounds on a request (core.api.middleware.RequestLimitsMiddleware): 414 `uri_too_long`,
# 431 `headers_too_large` in the error envelope under /api/. gunicorn's own limits
# (gunicorn.conf.py) are looser, so that it hands such requests on rather than answer in HTML.
REQUEST_MAX_URL_BYTES = 8192
REQUEST_MAX_HEADERS = 100
REQUEST_MAX_HEADER_BYTES = 8190

# API throttles (core/api/throttling.py), counted in the `default` cache (shared by every worker):
# "<n>/<s|min|hour|day>" per fixed window; an empty rate turns one off. `user`: every request of
# one user; `token`: every request with one API token; `money`: the unsafe requests of one user on
# the routes that move money or file disputes (creation, top-up, refund, debit, dispute writes).
# Over a rate: 429 `rate_limited` with Retry-After.
VOUCH_THROTTLE_RATES = {
    "user": env.str("VOUCH_THROTTLE_USER", default="600/min"),
    "token": env.str("VOUCH_THROTTLE_TOKEN", default="300/min"),
    "money": env.str("VOUCH_THROTTLE_MONEY", default="30/min"),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Vouch API",
    "DESCRIPTION": (
        "Escrow envelopes and their refunds, for buyers and operations staff. Every amount is "
        "an integer number of micro-dollars (`_micro`, 1 USD = 1,000,000) with a `_usd` twin "
        "for reading. Every route is also served at the unversioned `/api/` alias. Success: "
        '`{"success": true, "data": ...}`; error: `{"success": false, "error": {"code", '
        '"message", "details"}}` with a stable `code`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "PREPROCESSING_HOOKS": ["core.api.schema.versioned_routes_only"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api.schema.document_common_responses",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    # Two choice sets share the field name `kind` (a funding leg's, a dispute evidence's).
    "ENUM_NAME_OVERRIDES": {
        "EvidenceKindEnum": ["delivery", "consent", "communication", "policy", "other"],
        # A refund's status, in the refund resource and in the answer that made it.
        "RefundStatusEnum": ["refunded", "partially_refunded", "failed", "pending"],
    },
}

# --- Celery (config/celery_app.py) ---------------------------------------------------------

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/0")
# Redis: BRPOP over the consumed queues in their order (the money queue first, config/celery_app.py)
# instead of kombu's round robin, so a worker on both queues serves money work before polling.
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"queue_order_strategy": "priority"}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = TIME_ZONE
# django-celery-beat's database scheduler, sending a periodic job's tick only when no run of it
# is queued or running (config/beat.py, core/ticks.py; SPEC §11).
CELERY_BEAT_SCHEDULER = "config.beat:SingleRunScheduler"
# A tick's message that waits longer than this is taken for lost: the next tick sends another
# (and the late one, if it comes, does not run).
PERIODIC_QUEUED_HOLD_S = env.float("PERIODIC_QUEUED_HOLD_S", default=120.0)
# A started run holds its slot for its interval, within these bounds (core.ticks.run_lease_s).
PERIODIC_RUN_LEASE_MIN_S = env.float("PERIODIC_RUN_LEASE_MIN_S", default=60.0)
PERIODIC_RUN_LEASE_MAX_S = env.float("PERIODIC_RUN_LEASE_MAX_S", default=3600.0)
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- Stripe (reached only through the provider adapter) ------------------------------------

STRIPE_API_KEY = env.str("STRIPE_API_KEY", default="sk_test_vouch_sandbox")
STRIPE_API_BASE = env.str("STRIPE_API_BASE", default="http://127.0.0.1:12111")
STRIPE_WEBHOOK_SECRET = env.str("STRIPE_WEBHOOK_SECRET", default="whsec_vouch_sandbox")
# Rotation: every secret listed here verifies (the current one first).
STRIPE_WEBHOOK_SECRETS = [s.strip() for s in STRIPE_WEBHOOK_SECRET.split(",") if s.strip()]
STRIPE_WEBHOOK_TOLERANCE_S = env.int("STRIPE_WEBHOOK_TOLERANCE_S", default=300)
STRIPE_CONNECT_TIMEOUT_S = env.float("STRIPE_CONNECT_TIMEOUT_S", default=5.0)
STRIPE_READ_TIMEOUT_S = env.float("STRIPE_READ_TIMEOUT_S", default=30.0)
STRIPE_MAX_ATTEMPTS = env.int("STRIPE_MAX_ATTEMPTS", default=3)
STRIPE_RETRY_BASE_S = env.float("STRIPE_RETRY_BASE_S", default=0.5)
STRIPE_RETRY_MAX_S = env.float("STRIPE_RETRY_MAX_S", default=8.0)

# Stripe's rate limits (https://docs.stripe.com/rate-limits), one budget per limit shared by every
# process through the database (core.budget; docs/decisions/0018-one-budget-per-stripe-limit.md).
# "auto": every call takes a slot of the global limit (from the key's mode: live 100 a second,
# test 25; STRIPE_GLOBAL_RPS overrides) and of its endpoint's (25; Files 20; Search 20), money
# first. "off": no budget, nothing written (a test suite; never against Stripe).
STRIPE_RATE_LIMITS = env.str("STRIPE_RATE_LIMITS", default="auto")
# Empty: from the key's mode.
STRIPE_GLOBAL_RPS = float(env.str("STRIPE_GLOBAL_RPS", default="") or 0) or None
STRIPE_ENDPOINT_RPS = env.float("STRIPE_ENDPOINT_RPS", default=25.0)
STRIPE_FILES_RPS = env.float("STRIPE_FILES_RPS", default=20.0)
STRIPE_SEARCH_RPS = env.float("STRIPE_SEARCH_RPS", default=20.0)
# Slots are (1 + margin) / limit apart: 99.5% of each limit. Stripe's limiter is a token bucket
# holding a second's worth (stripe.com/blog/rate-limiters), so a process that wakes a little late
# never crosses it; a backlog drains at the limit (a refund's wait is backlog / limit, issue 40).
STRIPE_BUDGET_MARGIN = env.float("STRIPE_BUDGET_MARGIN", default=0.005)
# How long a call may wait for room before it is not sent: a web request (a buyer waiting), and a
# Celery task (config/celery_app.py), which has no one waiting on it.
STRIPE_BUDGET_WAIT_S = env.float("STRIPE_BUDGET_WAIT_S", default=0.1)
STRIPE_BUDGET_WORKER_WAIT_S = env.float("STRIPE_BUDGET_WORKER_WAIT_S", default=30.0)
# Readbacks and reconciliation only take room money leaves free: they wait this long for it (in a
# worker or a command), then count as a read without an answer and are tried again, so a worker
# process is never held for long while a backlog of refunds drains (issue 40).
STRIPE_BUDGET_LANE_WAIT_S = env.float("STRIPE_BUDGET_LANE_WAIT_S", default=5.0)

# --- Idempotency (SPEC §4) ---------------------------------------------------------------------

# A running request's lease (core.idempotency.lease_for): Vouch's own work around the calls, plus
# the provider adapter's whole retry budget (the function named here) for each call it is about to
# make; a worker renews it before each further call. About two minutes for a one-leg refund with
# the defaults above (3 attempts of 5 + 30 s, and 2 waits of at most 10 s, plus 10 s).
IDEMPOTENCY_LEASE_MARGIN_S = env.float("IDEMPOTENCY_LEASE_MARGIN_S", default=10.0)
IDEMPOTENCY_PROVIDER_BUDGET = "providers.stripe_provider.retry_budget_from_settings"
IDEMPOTENCY_KEEP_DAYS = env.int("IDEMPOTENCY_KEEP_DAYS", default=30)

# --- Verification (SPEC §6) -------------------------------------------------------------------

VERIFICATION_POLL_EVERY_S = env.int("VERIFICATION_POLL_EVERY_S", default=2)
# The poll claims at most this many due runs at a time, and sends an attempt only while fewer
# than VERIFICATION_IN_FLIGHT_MAX are queued or running: the queue never holds a backlog of
# attempts (SPEC §11). About 4 per worker process consuming the default queue.
VERIFICATION_BATCH_SIZE = env.int("VERIFICATION_BATCH_SIZE", default=100)
VERIFICATION_IN_FLIGHT_MAX = env.int("VERIFICATION_IN_FLIGHT_MAX", default=8)
# One run of the stored events' drain (verification.process_events) stops after this long and
# sends the next one, so its slot's lease (PERIODIC_RUN_LEASE_MIN_S) never runs out under it.
VERIFICATION_EVENT_DRAIN_S = env.float("VERIFICATION_EVENT_DRAIN_S", default=20.0)
VERIFICATION_LEASE_S = env.float("VERIFICATION_LEASE_S", default=300.0)
# An attempt sent longer ago than this no longer counts against VERIFICATION_IN_FLIGHT_MAX (its
# run stays leased): one lost with a killed worker gives its room back after this, not after the
# lease. About the longest one attempt may take (a provider read with the adapter's whole retry
# budget, under two minutes with the defaults above); an attempt still queued past it lets the
# poll send at most VERIFICATION_IN_FLIGHT_MAX more per window. At or above the lease: no effect.
VERIFICATION_IN_FLIGHT_WINDOW_S = env.float("VERIFICATION_IN_FLIGHT_WINDOW_S", default=120.0)
VERIFICATION_CLOCK_SKEW_S = env.float("VERIFICATION_CLOCK_SKEW_S", default=2.0)
VERIFICATION_EVENT_RETRY_AFTER_S = 30
VERIFICATION_EVENT_KEEP_DAYS = env.int("VERIFICATION_EVENT_KEEP_DAYS", default=30)
# A stored event whose processing fails is tried again after min(base * 2^(k-1), max) seconds,
# at most MAX_ATTEMPTS times in all (defaults: about two hours), then given up: its error kept,
# an escalation opened, and the event pruned like any processed one.
VERIFICATION_EVENT_MAX_ATTEMPTS = env.int("VERIFICATION_EVENT_MAX_ATTEMPTS", default=8)
VERIFICATION_EVENT_RETRY_BASE_S = env.float("VERIFICATION_EVENT_RETRY_BASE_S", default=60.0)
VERIFICATION_EVENT_RETRY_MAX_S = env.float("VERIFICATION_EVENT_RETRY_MAX_S", default=3600.0)
# A cap of verification's own on its readbacks a second, all processes together, on top of
# Stripe's limits (core.budget; 0: none). None by default: readbacks already take only room that
# money and people leave, within each endpoint's 25 a second.
VERIFICATION_MAX_RPS = env.float("VERIFICATION_MAX_RPS", default=0.0)
# Further folders of contract files (tests add contracts with short timing).
VERIFICATION_CONTRACT_DIRS: list[str] = []

# Reconciliation (SPEC §15): what Vouch itself has in flight is expected for GRACE after it
# started; legs and fundings pending longer than STUCK_AFTER are stuck.
RECONCILIATION_GRACE_S = env.int("RECONCILIATION_GRACE_S", default=600)
RECONCILIATION_STUCK_AFTER_S = env.int("RECONCILIATION_STUCK_AFTER_S", default=3600)
RECONCILIATION_FILING_STUCK_AFTER_S = env.int("RECONCILIATION_FILING_STUCK_AFTER_S", default=3600)
# A running run whose heartbeat is older than this died: the next run of its lane resumes it.
RECONCILIATION_HEARTBEAT_TIMEOUT_S = env.int("RECONCILIATION_HEARTBEAT_TIMEOUT_S", default=300)
RECONCILIATION_EVENT_OVERLAP_S = 600
# A cap of reconciliation's own on its provider calls a second, all runs and workers together, on
# top of Stripe's limits, where it takes only idle room (core.budget; 0: none): a fifth of
# Stripe's live limit.
RECONCILIATION_MAX_RPS = env.float("RECONCILIATION_MAX_RPS", default=20.0)

# --- Receipts (SPEC §8; receipts/keys.py) -----------------------------------------------------

# This deployment's environment: it trusts receipt keys of this environment only.
VOUCH_ENVIRONMENT = env.str("VOUCH_ENVIRONMENT", default="production")
# The Ed25519 key receipts are signed with: base64 of the 32-byte seed, the id the signature
# names, and the key's environment (`production`, `sandbox`, `local-development`). Without a key
# no receipt is written (and the log says so); `manage.py receipt_keygen` makes one.
RECEIPT_SIGNING_KEY = env.str("RECEIPT_SIGNING_KEY", default="")
RECEIPT_SIGNING_KEY_ID = env.str("RECEIPT_SIGNING_KEY_ID", default="")
RECEIPT_SIGNING_ENVIRONMENT = env.str("RECEIPT_SIGNING_ENVIRONMENT", default=VOUCH_ENVIRONMENT)
# The public keys receipts are verified with (JSON in the environment):
# {"<key id>": {"public_key": "<base64 of the raw 32 bytes>", "environment": "production"}}.
# Trust comes only from here, never from what a receipt says about itself.
RECEIPT_TRUSTED_KEYS: dict[str, dict[str, str]] = env.json("RECEIPT_TRUSTED_KEYS", default={})

# --- Logging -------------------------------------------------------------------------------

# Structured (ops/logs.py): one JSON object a line here, human-readable under `make run`
# (local.py). django-structlog adds the request's context to every line and hands its request id
# to the Celery tasks it enqueues; the start lines are DEBUG, so a request and a job run each
# write one line at INFO (`request_finished`, `task_succeeded` / `task_failed`).
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = logging_config(renderer="json", level=LOG_LEVEL)
DJANGO_STRUCTLOG_CELERY_ENABLED = True
# The request line's `ip` is the connection's address (REMOTE_ADDR, as ops/access.py reads it),
# bound by ops.logs.request_started: django-ipware would prefer an X-Forwarded-For a client can
# set, and folding every header of every request was a few percent of a refund's CPU (issue 15).
DJANGO_STRUCTLOG_IP_LOGGING_ENABLED = False
DJANGO_STRUCTLOG_STATUS_START_LOG_LEVEL = logging.DEBUG
DJANGO_STRUCTLOG_CELERY_TASK_START_LOG_LEVEL = logging.DEBUG

# --- Operations endpoints (ops/) ----------------------------------------------------------------

# /metrics answers a caller with `Authorization: Bearer <METRICS_TOKEN>` or one connecting from a
# network listed in METRICS_ALLOWED_NETWORKS (comma-separated CIDRs); with neither set it is 404.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_ALLOWED_NETWORKS = env.list("METRICS_ALLOWED_NETWORKS", default=[])
# A scrape's database statements are cancelled past this (PostgreSQL's statement_timeout).
METRICS_DATABASE_TIMEOUT_S = env.float("METRICS_DATABASE_TIMEOUT_S", default=5.0)
# /readyz: how long the broker may take to accept a connection.
READYZ_TIMEOUT_S = env.float("READYZ_TIMEOUT_S", default=2.0)

# --- Disputes (SPEC §9; disputes/drafting.py) ----------------------------------------------------
# The class that drafts a packet's posture; every draft goes through deterministic finalization.
DISPUTES_DRAFTER = env.str("DISPUTES_DRAFTER", default="disputes.drafting.RuleDrafter")
# Stripe's limits on one dispute's evidence, checked before a packet is approved (pre-flight):
# every text field together, any one long text field, and the evidence files together (bytes).
DISPUTES_EVIDENCE_TEXT_MAX_CHARS = env.int("DISPUTES_EVIDENCE_TEXT_MAX_CHARS", default=150_000)
DISPUTES_EVIDENCE_FIELD_MAX_CHARS = env.int("DISPUTES_EVIDENCE_FIELD_MAX_CHARS", default=20_000)
DISPUTES_EVIDENCE_FILES_MAX_BYTES = env.int("DISPUTES_EVIDENCE_FILES_MAX_BYTES", default=4_500_000)
# Deadline reminders (disputes.remind_deadlines): hours before `due_by`, and addresses mailed
# besides the ops group's staff (comma-separated).
DISPUTES_REMINDER_HOURS = env.list("DISPUTES_REMINDER_HOURS", cast=int, default=[72, 24])
DISPUTES_REMINDER_EMAILS = env.list("DISPUTES_REMINDER_EMAILS", default=[])
# What fighting a dispute costs (SPEC §17; disputes/fees.py), per currency, in integer
# micro-dollars (Stripe US pricing): `dispute_fee` is charged when any dispute opens, whatever
# happens; `lost_dispute_fee` (the countering fee) is kept when a contested dispute is lost;
# `visa_compliance_fee` (the network's) is kept when a contested Visa compliance dispute is lost,
# `mastercard_compliance_fee` likewise for Mastercard (Stripe: 500 USD, refunded if won;
# https://docs.stripe.com/disputes/api/mastercard-compliance).
DISPUTE_FEES = {
    "usd": {
        "dispute_fee": 15_000_000,
        "lost_dispute_fee": 15_000_000,
        "visa_compliance_fee": 500_000_000,
        "mastercard_compliance_fee": 500_000_000,
    },
}

# --- Files (evidence files: disputes/) ---------------------------------------------------------
# Stored through Django's storage API. Never served as public media: the admin streams an evidence
# file to whoever may read disputes.
MEDIA_ROOT = env.str("MEDIA_ROOT", default=str(VAR_DIR / "media"))
MEDIA_URL = "/media/"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- The agent surface: MCP and OAuth 2.1 (SPEC §16; agents/) -----------------------------------

# django-oauth-toolkit: Vouch is its own authorization server. Code + PKCE (S256) only, access
# tokens at most an hour, refresh tokens rotated, tokens bound to the /mcp resource (RFC 8707).
AGENT_SCOPES = {
    "escrow:read": "See your envelopes, their balances and your refunds.",
    "escrow:refund_request": "Propose a refund of an envelope's unspent money, which you then "
    "confirm yourself in the browser before any money moves.",
    "ops:read": "Staff only: read escalations, disputes, evidence packets and discrepancies.",
}
# The OAuth server's routes read by programs, not people: a request refused before any view
# (core.api.middleware: a URL too long, a NUL in the query) is answered there in OAuth's JSON
# error shape (RFC 6749 §5.2), as their views answer.
OAUTH_JSON_PATHS = ["/o/token/", "/o/register/", "/o/revoke_token/", "/.well-known/oauth-"]
# Named (with its default) so that a migration of ours may point at it: agents.RedeemedCode.
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER = {
    "SCOPES": AGENT_SCOPES,
    "DEFAULT_SCOPES": ["escrow:read"],
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": env.int("OAUTH_ACCESS_TOKEN_SECONDS", default=3600),
    "REFRESH_TOKEN_EXPIRE_SECONDS": env.int("OAUTH_REFRESH_TOKEN_SECONDS", default=30 * 86400),
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    # RFC 9700 (the OAuth 2.0 security BCP), every recommendation django-oauth-toolkit gates: no
    # implicit or password grant, no `plain` PKCE, tokens only in the Authorization header, `iss`
    # in the authorization response, tokens stored as SHA-256 checksums only.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    # `http` stays allowed for redirect URIs: an assistant on the person's own machine receives
    # the code on a loopback address (RFC 8252 §7.3), which has no certificate. The gate stays
    # off, so --deploy warns (W008); production silences that one warning, for this reason.
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    # The authorization code grant (PKCE S256 only) and refresh, nothing else: no implicit,
    # password, client-credentials or device grant is even routed (agents/oauth/server.py); only
    # applications registered for the code grant, http redirect URIs only on loopback
    # (agents/oauth/validators.py).
    "OAUTH2_SERVER_CLASS": "agents.oauth.server.VouchOAuthServer",
    "OAUTH2_VALIDATOR_CLASS": "agents.oauth.validators.VouchOAuth2Validator",
}
if not 0 < OAUTH2_PROVIDER["ACCESS_TOKEN_EXPIRE_SECONDS"] <= 3600:
    raise ImproperlyConfigured(
        "OAUTH_ACCESS_TOKEN_SECONDS must be from 1 to 3600: an access token of the MCP server "
        "lives at most an hour (SPEC §16); refresh tokens keep a client connected."
    )
# MCP tool calls per access token (a fixed window, counted in the shared cache) and refund
# requests per buyer; "<n>/<s|min|hour|day>", empty turns one off.
MCP_TOOL_CALL_RATE = env.str("MCP_TOOL_CALL_RATE", default="120/min")
MCP_REFUND_REQUEST_RATE = env.str("MCP_REFUND_REQUEST_RATE", default="10/hour")
# GET /mcp streams (agents/mcp/asgi.py): each ends after MCP_STREAM_MAX_S seconds (the client
# opens another), and a person holds at most MCP_STREAMS_PER_PERSON at once per server process
# (the next is 429 with Retry-After). They hold no request thread, so they never starve POSTs.
MCP_STREAM_MAX_S = env.float("MCP_STREAM_MAX_S", default=300.0)
MCP_STREAMS_PER_PERSON = env.int("MCP_STREAMS_PER_PERSON", default=2)
# Failed credentials per client address, client id (10x) and token fingerprint
# (agents/oauth/limits.py): token requests refused at /o/token/, bearer tokens refused at /mcp.
# Over a limit, failing requests are 429 to the window's end; a valid credential never is.
OAUTH_TOKEN_FAILURE_RATE = env.str("OAUTH_TOKEN_FAILURE_RATE", default="20/min")
MCP_BEARER_FAILURE_RATE = env.str("MCP_BEARER_FAILURE_RATE", default="20/min")
# RFC 7591: generic MCP hosts register themselves as public clients (agents/oauth/registration.py),
# at most MCP_REGISTRATION_RATE per client per address (10x per address); one unused for
# MCP_DYNAMIC_CLIENT_UNUSED_DAYS is removed. MCP_DYNAMIC_REGISTRATION=false: only staff register
# clients (in the admin).
MCP_DYNAMIC_REGISTRATION = env.bool("MCP_DYNAMIC_REGISTRATION", default=True)
MCP_REGISTRATION_RATE = env.str("MCP_REGISTRATION_RATE", default="20/hour")
MCP_DYNAMIC_CLIENT_UNUSED_DAYS = env.int("MCP_DYNAMIC_CLIENT_UNUSED_DAYS", default=30)
# Client ID Metadata Documents (agents/oauth/client_documents.py): a client id that is an https
# URL is fetched (bounded, cached) for the client's metadata. Never a private or local address,
# except with MCP_CLIENT_DOCUMENT_PRIVATE_OK (DEBUG and tests). MCP_CLIENT_DOCUMENT_CA: a CA
# bundle to trust instead of the system's (tests).
MCP_CLIENT_ID_DOCUMENTS = env.bool("MCP_CLIENT_ID_DOCUMENTS", default=True)
# One deadline for the whole fetch (connect, TLS and every read), not a timeout per read.
MCP_CLIENT_DOCUMENT_TIMEOUT_S = env.float("MCP_CLIENT_DOCUMENT_TIMEOUT_S", default=3.0)
MCP_CLIENT_DOCUMENT_MAX_BYTES = env.int("MCP_CLIENT_DOCUMENT_MAX_BYTES", default=16384)
MCP_CLIENT_DOCUMENT_CACHE_S = env.int("MCP_CLIENT_DOCUMENT_CACHE_S", default=300)
MCP_CLIENT_DOCUMENT_PRIVATE_OK = env.bool("MCP_CLIENT_DOCUMENT_PRIVATE_OK", default=DEBUG)
MCP_CLIENT_DOCUMENT_CA = env.str("MCP_CLIENT_DOCUMENT_CA", default="")
# At most this many fetches at once per process (agents/oauth/document_fetch.py): one more is
# refused straight away ("try again"), so slow documents never hold more than these workers.
MCP_CLIENT_DOCUMENT_FETCHES = env.int("MCP_CLIENT_DOCUMENT_FETCHES", default=4)
# How long a refund request waits for its owner's confirmation.
REFUND_REQUEST_TTL_S = env.int("REFUND_REQUEST_TTL_S", default=15 * 60)
