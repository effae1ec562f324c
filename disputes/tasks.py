from celery import shared_task

from disputes import services


@shared_task(name="disputes.resume_filings")
def resume_filings() -> int:
    """Resume filings left `submitting` (same key: the provider replays, never a second one)."""
    return services.filings_resume()
