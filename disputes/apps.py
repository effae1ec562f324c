from typing import Any

from django.apps import AppConfig


class DisputesConfig(AppConfig):
    name = "disputes"
    verbose_name = "Disputes"

    def ready(self) -> None:
        from disputes import services
        from verification import events
        from verification.signals import run_decided

        def on_decided(sender: Any, run: Any, **kwargs: Any) -> None:
            services.packet_on_verdict(run=run)

        run_decided.connect(on_decided, dispatch_uid="disputes.packet_on_verdict", weak=False)
        for event_type in (
            "charge.dispute.created",
            "charge.dispute.updated",
            "charge.dispute.closed",
        ):
            events.register(event_type, services.dispute_on_provider_event)
