"""The scheduled resumption of legs left without an answer (a crash, a timeout)."""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta

from envelopes.models import (
    FundingLeg,
    FundingStatus,
    RefundLeg,
)
from envelopes.services.funding import FUNDING_REFUSALS, funding_send
from envelopes.services.refunds import _OPEN, refund_leg_send
from verification import clock
from verification.selectors import escalated_subjects

logger = logging.getLogger("vouch.envelopes")


def stranded_resume(*, older_than_s: float = 60.0, limit: int = 100) -> int:
    """The scheduled job: resume funding legs and refund legs left without an answer (a crash, a
    timeout), oldest first. Each resumption repeats the provider call with the same key (or,
    past the key's life, looks the object up), never a new one. A leg a person is already
    looking at (an open escalation) is left to them; a leg whose resumption fails is logged and
    the others go on, so one leg can never starve the rest."""
    cutoff = clock.now() - timedelta(seconds=older_than_s)
    escalated = escalated_subjects()
    done = 0
    fundings = (
        FundingLeg.objects.select_related("envelope")
        # A leg waiting for room in Stripe's rate limit is sent by envelopes.send_waiting.
        .filter(status=FundingStatus.PENDING, created_at__lt=cutoff, deferred_at__isnull=True)
        .exclude(public_id__in=escalated.get("funding_leg", []))
        .order_by("created_at", "id")
    )
    for funding in fundings[:limit]:
        try:
            # A decline is recorded (the pending leg is gone): nothing else to do here.
            with contextlib.suppress(*FUNDING_REFUSALS):
                funding_send(leg=funding)
        except Exception:
            logger.exception("resuming funding leg %s failed", funding.public_id)
        done += 1
    legs = (
        RefundLeg.objects.select_related("funding_leg", "operation__envelope")
        .filter(outcome__in=_OPEN, reserved_at__lt=cutoff, deferred_at__isnull=True)
        .exclude(public_id__in=escalated.get("refund_leg", []))
        .order_by("reserved_at", "id")
    )
    for leg in legs[:limit]:
        try:
            refund_leg_send(leg=leg)
        except Exception:
            logger.exception("resuming refund leg %s failed", leg.public_id)
        done += 1
    return done
