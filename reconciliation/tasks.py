"""Thin Celery tasks: each runs one reconciliation job (SPEC §15.3) and returns its run's id.
A run already in progress in the lane is not an error: the beat tries again at its next tick."""

import logging

from celery import shared_task

from reconciliation import catch_up as catch_up_job
from reconciliation import engine
from reconciliation.runs import RunInProgress

logger = logging.getLogger("vouch.reconciliation")


@shared_task(name="reconciliation.catch_up")
def catch_up() -> str | None:
    try:
        return catch_up_job.catch_up_run().public_id
    except RunInProgress as exc:
        logger.info("reconciliation.catch_up: %s; not started", exc)
        return None


@shared_task(name="reconciliation.sweep")
def sweep() -> str | None:
    try:
        return engine.reconcile(kind="sweep").public_id
    except RunInProgress as exc:
        logger.info("reconciliation.sweep: %s; not started", exc)
        return None


@shared_task(name="reconciliation.full")
def full() -> str | None:
    try:
        return engine.reconcile(kind="full").public_id
    except RunInProgress as exc:
        logger.info("reconciliation.full: %s; not started", exc)
        return None
