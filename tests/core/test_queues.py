"""The money jobs' own queue: a backlog on the default queue (thousands of verification polls)
must never hold back the jobs that finish moving money (found by bench/soak.py)."""

import pytest

from config.celery_app import MONEY_QUEUE, MONEY_TASKS, app


@pytest.mark.parametrize("task", MONEY_TASKS)
def test_a_money_job_is_sent_to_the_money_queue(task: str) -> None:
    assert app.amqp.router.route({}, task)["queue"].name == MONEY_QUEUE


@pytest.mark.parametrize("task", ["verification.poll", "verification.attempt", "receipts.catch_up"])
def test_other_jobs_stay_on_the_default_queue(task: str) -> None:
    assert app.amqp.router.route({}, task)["queue"].name == app.conf.task_default_queue


def test_a_worker_started_without_q_consumes_both_queues() -> None:
    # `celery worker` with no -Q consumes every queue in task_queues: make run, CI and the soak
    # start it that way, and so does docs/deploy.md's one-worker form for a small machine (its
    # topology runs one worker per queue, `-Q celery.money` and `-Q celery`).
    names = {queue.name for queue in app.conf.task_queues}
    assert names == {app.conf.task_default_queue, MONEY_QUEUE}
    bindings = {queue.name: queue.routing_key for queue in app.conf.task_queues}
    assert bindings[MONEY_QUEUE] != bindings[app.conf.task_default_queue]
