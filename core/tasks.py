from celery import shared_task

from core import services


@shared_task(name="core.tasks.sessions_prune")
def sessions_prune() -> None:
    services.sessions_prune()
