"""Settings of the naive peer: Django's defaults, DRF with session authentication, PostgreSQL.

DATABASE_URL (with `?conn_max_age=N` as Vouch's bench passes it), STRIPE_API_BASE and
STRIPE_API_KEY come from the environment; bench/refund_api.py sets them.
"""

import environ

env = environ.Env()

DEBUG = False
SECRET_KEY = "naive-peer-bench-only-not-a-secret-0123456789abcdefghijklmnop"  # noqa: S105
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "rest_framework",
    "naive.refunds",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
ROOT_URLCONF = "naive.urls"
WSGI_APPLICATION = "naive.wsgi.application"
DATABASES = {"default": env.db("DATABASE_URL")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}

STRIPE_API_BASE = env.str("STRIPE_API_BASE", default="https://api.stripe.com")
STRIPE_API_KEY = env.str("STRIPE_API_KEY", default="sk_test_naive")
