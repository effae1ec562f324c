from typing import Any

from django.apps import AppConfig


class EnvelopesConfig(AppConfig):
    name = "envelopes"
    verbose_name = "Escrow envelopes"

    def ready(self) -> None:
        from envelopes import selectors, services
        from verification import events, subjects
        from verification.signals import run_decided

        def on_decided(sender: Any, run: Any, **kwargs: Any) -> None:
            services.refund_leg_on_verdict(run=run)

        run_decided.connect(on_decided, dispatch_uid="envelopes.refund_leg_on_verdict", weak=False)
        for event_type in ("refund.failed", "refund.updated", "charge.refund.updated"):
            events.register(event_type, services.refund_leg_on_provider_event)
        for event_type in ("payment_intent.succeeded", "payment_intent.payment_failed"):
            events.register(event_type, services.funding_on_provider_event)
        events.register("charge.refunded", services.charge_on_refunded_event)
        subjects.register(selectors.subject_of_run)
