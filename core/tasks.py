from celery import shared_task
from django.conf import settings

from core import services
from core.idempotency import idempotency_prune as prune


@shared_task(name="core.tasks.sessions_prune")
def sessions_prune() -> None:
    services.sessions_prune()


@shared_task(name="core.tasks.idempotency_prune")
def idempotency_prune() -> int:
    return prune(older_than_days=settings.IDEMPOTENCY_KEEP_DAYS)
