from datetime import timedelta

from verification import clock
from verification.models import ProviderEvent


def events_unprocessed(*, older_than_s: float, limit: int = 500) -> list[int]:
    cutoff = clock.now() - timedelta(seconds=older_than_s)
    return list(
        ProviderEvent.objects.filter(processed_at__isnull=True, received_at__lt=cutoff)
        .order_by("received_at")
        .values_list("pk", flat=True)[:limit]
    )
