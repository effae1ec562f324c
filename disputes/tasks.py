from celery import shared_task

from disputes import reminders, services


@shared_task(name="disputes.resume_filings")
def resume_filings() -> int:
    """Resume filings left `submitting` (same key: the provider replays, never a second one), and
    ask again for `manual` on disputes whose answer to it was lost (same key)."""
    return services.filings_resume() + services.submission_methods_resume()


@shared_task(name="disputes.remind_deadlines")
def remind_deadlines() -> int:
    """Remind ops of disputes due within 72 h and 24 h with no filed response (once each)."""
    return len(reminders.deadline_reminders_send())
