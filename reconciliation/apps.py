from typing import Any

from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Reconciliation"

    def ready(self) -> None:
        from envelopes.selectors.buyer import under_review_register
        from envelopes.signals import adjustment_applied
        from reconciliation import events as refund_events
        from reconciliation import services
        from verification import events
        from verification.services import escalation_holder_register

        def on_applied(sender: Any, adjustment: Any, **kwargs: Any) -> None:
            services.discrepancies_on_adjustment_applied(adjustment=adjustment)

        adjustment_applied.connect(
            on_applied, dispatch_uid="reconciliation.on_adjustment_applied", weak=False
        )
        # What rests on a shared escalation: its open discrepancies (issue 37, item 5).
        escalation_holder_register(services.discrepancies_resting_on)
        # A refund made in the Dashboard is compared when its event comes (issue 37, item 8),
        # and the buyer is told the money is under review while its discrepancy is open.
        for event_type in refund_events.EVENT_TYPES:
            events.register(event_type, refund_events.charge_on_refund_event)
        under_review_register(refund_events.foreign_refunds_under_review)
