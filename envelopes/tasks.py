from celery import shared_task

from envelopes import services


@shared_task(name="envelopes.resume_stranded")
def resume_stranded() -> int:
    """Resume funding and refund legs left without an answer (same keys: never a second effect)."""
    return services.stranded_resume()


@shared_task(name="envelopes.send_waiting")
def send_waiting() -> int:
    """Send legs that waited for room in Stripe's rate limit, oldest first (same keys)."""
    return services.waiting_send()


@shared_task(name="envelopes.follow_refund_references")
def follow_refund_references() -> int:
    """Read again the refunds whose reference at the card network is still pending (bounded)."""
    return services.refund_references_follow_up()
