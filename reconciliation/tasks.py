"""Thin Celery tasks: each runs one reconciliation job (SPEC §15.3) and returns its run's id.
A run already in progress in the lane is not an error: the beat tries again at its next tick."""

import logging

from celery import shared_task

from reconciliation.catch_up import catch_up_run
from reconciliation.engine import reconcile
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
def sweep() -> str | None:
    try:
        return reconcile(kind="sweep").public_id
    except RunInProgress as exc:
        logger.info("reconciliation.sweep: %s; not started", exc)
        return None


@shared_task(name="reconciliation.full")
def full() -> str | None:
    try:
        return reconcile(kind="full").public_id
    except RunInProgress as exc:
        logger.info("reconciliation.full: %s; not started", exc)
        return None
