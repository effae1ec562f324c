"""The Celery application. Tasks are thin: they take ids and call services."""

import os
from typing import Any

from celery import Celery, Task
from django_structlog.celery.steps import DjangoStructLogInitStep
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")


class SingleRunTask(Task):
    """Every task: a message sent by a beat tick (config/beat.py) holds its job's slot while it runs
    and frees it when it ends, however it ends (core.ticks); a tick's message that came after its
    slot was taken again does nothing. Any other message runs as it is."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = self.request
        if not request.called_directly and not request.is_eager:
            # A worker's task has no one waiting on it: its provider calls may wait longer for
            # room in Stripe's rate budgets than a web request's (core.budget). Set per task, not
            # per process, so every pool (prefork, solo, threads, a test's in-process worker)
            # gets it and nothing outside a task does.
            from django.conf import settings

            from core.budget import budget_wait

            with budget_wait(settings.STRIPE_BUDGET_WORKER_WAIT_S):
                return self._run_claimed(*args, **kwargs)
        return self._run_claimed(*args, **kwargs)

    def _run_claimed(self, *args: Any, **kwargs: Any) -> Any:
        from core import ticks  # the app registry is ready only once a worker runs tasks

        request = self.request
        claim = ticks.claim_from_headers(
            {header: getattr(request, header, None) for header in ticks.HEADERS}
            if getattr(request, ticks.SLOT_HEADER, None)
            else request.headers
        )
        if claim is None:
            return super().__call__(*args, **kwargs)
        if not ticks.tick_started(claim):
            return None
        try:
            return super().__call__(*args, **kwargs)
        finally:
            ticks.tick_done(claim)
            follow = getattr(self, "after_run", None)
            if follow is not None:  # e.g. the events' drain looks once more (no lost wake-up)
                follow()


app = Celery("vouch", task_cls=SingleRunTask)
# Each job run logs one line with the request id of the request that enqueued it (ops/logs.py).
app.steps["worker"].add(DjangoStructLogInitStep)
# Every Celery setting is read from Django settings with the CELERY_ prefix.
app.config_from_object("django.conf:settings", namespace="CELERY")

# The jobs that finish moving money get a queue of their own, beside the default one, so that a
# verification backlog (thousands of polls) can never starve them: a worker started without -Q
# consumes every queue in task_queues and takes from both in turn. Found by bench/soak.py.
MONEY_TASKS = ("envelopes.resume_stranded", "disputes.resume_filings", "envelopes.send_waiting")
MONEY_QUEUE = f"{app.conf.task_default_queue}.money"
# The money queue first: a worker on both (started without -Q) asks Redis for money work before
# anything else (CELERY_BROKER_TRANSPORT_OPTIONS' queue_order_strategy "priority").
app.conf.task_queues = tuple(
    Queue(name, Exchange(name), routing_key=name)
    for name in (MONEY_QUEUE, app.conf.task_default_queue)
)
app.conf.task_routes = {name: {"queue": MONEY_QUEUE} for name in MONEY_TASKS}
app.autodiscover_tasks()
