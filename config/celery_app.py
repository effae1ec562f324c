"""The Celery application. Tasks are thin: they take ids and call services."""

import os

from celery import Celery
from django_structlog.celery.steps import DjangoStructLogInitStep

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("vouch")
# Each job run logs one line with the request id of the request that enqueued it (ops/logs.py).
app.steps["worker"].add(DjangoStructLogInitStep)
# Every Celery setting is read from Django settings with the CELERY_ prefix.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
