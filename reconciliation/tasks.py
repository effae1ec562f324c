"""Thin Celery tasks: each runs one reconciliation job (SPEC §15.3) and returns its run's id.
A sweep or full run that falls due while another run holds the lane is queued and runs right
after it (`reconciliation.engine.reconcile_due`), never dropped. An event catch-up that finds
another catch-up running is not started: the running one reads the events up to its own end,
and the next, ten minutes later, from its cursor."""

import logging

from celery import shared_task

from reconciliation.catch_up import catch_up_run
from reconciliation.engine import reconcile_due, reconcile_queued
from reconciliation.runs import RunInProgress

logger = logging.getLogger("vouch.reconciliation")


@shared_task(name="reconciliation.catch_up")
def catch_up() -> str | None:
    try:
        return catch_up_run().public_id
    except RunInProgress as exc:
        logger.info("reconciliation.catch_up: %s; not started", exc)
        return None


@shared_task(name="reconciliation.sweep")
def sweep() -> list[str]:
    return [run.public_id for run in reconcile_due("sweep")]


@shared_task(name="reconciliation.full")
def full() -> list[str]:
    return [run.public_id for run in reconcile_due("full")]


@shared_task(name="reconciliation.due")
def due() -> list[str]:
    """The runs that fell due while another held the lane, handed on when it ended."""
    return [run.public_id for run in reconcile_queued()]
