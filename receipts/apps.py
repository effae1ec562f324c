import logging
from typing import Any

from django.apps import AppConfig
from django.db import transaction

logger = logging.getLogger("vouch.receipts")


class ReceiptsConfig(AppConfig):
    name = "receipts"
    verbose_name = "Receipts"

    def ready(self) -> None:
        from django.core import checks

        from envelopes.signals import refund_leg_reference_known, refund_leg_released
        from receipts import services
        from receipts.checks import receipt_keys_check
        from receipts.exceptions import ReceiptKeyMissing
        from verification import verdicts

        checks.register(receipt_keys_check, "receipts")

        # Both are called inside the transaction of a verdict or a release of money. A
        # receipt that cannot be written must never undo either: it is written in a savepoint,
        # and a failure is logged (the `receipts.catch_up` job writes it later).
        def guarded(what: str, write: Any) -> None:
            try:
                with transaction.atomic():
                    write()
            except ReceiptKeyMissing as exc:
                logger.error("receipt for %s not written: %s", what, exc)
            except Exception:
                logger.exception("receipt for %s not written", what)

        def on_decided(*, run: Any) -> None:
            guarded(f"run {run.public_id}", lambda: services.receipt_on_run_decided(run=run))

        def on_released(
            sender: Any, leg: Any, reason: str, provider_refund: Any = None, **kwargs: Any
        ) -> None:
            guarded(
                f"the release of {leg.public_id}",
                lambda: services.receipt_on_refund_leg_released(
                    leg=leg, reason=reason, provider_refund=provider_refund
                ),
            )

        # Every verdict: receipt_on_run_decided picks the VERIFIED runs of receipt contracts.
        verdicts.on_every_verdict(on_decided)
        refund_leg_released.connect(
            on_released, dispatch_uid="receipts.on_refund_leg_released", weak=False
        )

        def on_reference(sender: Any, leg: Any, **kwargs: Any) -> None:
            guarded(
                f"the reference of {leg.public_id}",
                lambda: services.receipt_reference_write(leg=leg),
            )

        refund_leg_reference_known.connect(
            on_reference, dispatch_uid="receipts.on_refund_leg_reference_known", weak=False
        )
