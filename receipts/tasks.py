import logging

from celery import shared_task

from receipts import keys, services

logger = logging.getLogger("vouch.receipts")


@shared_task(name="receipts.catch_up")
def catch_up() -> int:
    """Write the receipts of VERIFIED runs that have none (idempotent)."""
    if not keys.signing_key_configured():
        logger.error("receipts.catch_up: no RECEIPT_SIGNING_KEY configured; no receipt written")
        return 0
    return services.receipts_catch_up()
