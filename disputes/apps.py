from typing import Any

from django.apps import AppConfig
from django.db import transaction


class DisputesConfig(AppConfig):
    name = "disputes"
    verbose_name = "Disputes"

    def ready(self) -> None:
        from disputes import services
        from receipts.signals import receipt_written
        from verification import events, verdicts

        def on_receipt(sender: Any, receipt: Any, **kwargs: Any) -> None:
            # Sent inside the transaction that writes the receipt (itself inside a verdict's):
            # the packets catch up after it commits, and a failure there is logged, never raised
            # into whoever committed it.
            charge_id = str(receipt.charge_id)
            transaction.on_commit(
                lambda: services.packets_catch_up(charge_id=charge_id), robust=True
            )

        # The filing readback's verdict decides the packet: filed, or not.
        for contract_id in services.FILING_CONTRACTS:
            verdicts.on_verdict(contract_id, services.packet_on_verdict)
        receipt_written.connect(on_receipt, dispatch_uid="disputes.packets_catch_up", weak=False)
        for event_type in (
            "charge.dispute.created",
            "charge.dispute.updated",
            "charge.dispute.closed",
            "charge.dispute.funds_withdrawn",
            "charge.dispute.funds_reinstated",
        ):
            events.register(event_type, services.dispute_on_provider_event)
