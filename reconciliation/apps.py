from typing import Any

from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    verbose_name = "Reconciliation"

    def ready(self) -> None:
        from envelopes.signals import adjustment_applied
        from reconciliation import services

        def on_applied(sender: Any, adjustment: Any, **kwargs: Any) -> None:
            services.discrepancies_on_adjustment_applied(adjustment=adjustment)

        adjustment_applied.connect(
            on_applied, dispatch_uid="reconciliation.on_adjustment_applied", weak=False
        )
