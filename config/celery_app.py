"""The Celery application. Tasks are thin: they take ids and call services."""

import os

from celery import Celery
from django_structlog.celery.steps import DjangoStructLogInitStep
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("vouch")
# Each job run logs one line with the request id of the request that enqueued it (ops/logs.py).
app.steps["worker"].add(DjangoStructLogInitStep)
# Every Celery setting is read from Django settings with the CELERY_ prefix.
app.config_from_object("django.conf:settings", namespace="CELERY")

# The jobs that finish moving money get a queue of their own, beside the default one, so that a
# verification backlog (thousands of polls) can never starve them: a worker started without -Q
# consumes every queue in task_queues and takes from both in turn. Found by bench/soak.py.
MONEY_TASKS = ("envelopes.resume_stranded", "disputes.resume_filings")
MONEY_QUEUE = f"{app.conf.task_default_queue}.money"
app.conf.task_queues = tuple(
    Queue(name, Exchange(name), routing_key=name)
    for name in (app.conf.task_default_queue, MONEY_QUEUE)
)
app.conf.task_routes = {name: {"queue": MONEY_QUEUE} for name in MONEY_TASKS}
app.autodiscover_tasks()
