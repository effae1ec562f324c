from django.apps import AppConfig


class EnvelopesConfig(AppConfig):
    name = "envelopes"
    verbose_name = "Escrow envelopes"

    def ready(self) -> None:
        from envelopes import selectors, services
        from verification import events, subjects, verdicts

        # A refund leg's verdict: FAILED (or the `reversed` contradiction) gives the money back.
        verdicts.on_verdict(services.REFUND_CONTRACT, services.refund_leg_on_verdict)
        # A VERIFIED one: its readback's reference at the card network recorded, then followed.
        verdicts.on_verdict(services.REFUND_CONTRACT, services.refund_leg_reference_on_verdict)
        for event_type in ("refund.failed", "refund.updated", "charge.refund.updated"):
            events.register(event_type, services.refund_leg_on_provider_event)
        for event_type in ("payment_intent.succeeded", "payment_intent.payment_failed"):
            events.register(event_type, services.funding_on_provider_event)
        events.register("charge.refunded", services.charge_on_refunded_event)
        subjects.register(selectors.subject_of_run)
