from typing import Any

from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Reconciliation"

    def ready(self) -> None:
        from envelopes.signals import adjustment_applied
        from reconciliation import services
        from verification.services import escalation_holder_register

        def on_applied(sender: Any, adjustment: Any, **kwargs: Any) -> None:
            services.discrepancies_on_adjustment_applied(adjustment=adjustment)

        adjustment_applied.connect(
            on_applied, dispatch_uid="reconciliation.on_adjustment_applied", weak=False
        )
        # What rests on a shared escalation: its open discrepancies (issue 37, item 5).
        escalation_holder_register(services.discrepancies_resting_on)
