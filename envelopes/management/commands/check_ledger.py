import sys
from typing import Any

from django.core.management.base import BaseCommand

from envelopes.models import Envelope
from envelopes.selectors import ledger_breaches


class Command(BaseCommand):
    help = (
        "Recompute every envelope's seven balances (held and charged back too) from the journal "
        "and from the legs, "
        "independently of the stored figures, and report each difference. "
        "Exit status 1 on any breach."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        count = Envelope.objects.count()
        breaches = ledger_breaches()
        if not breaches:
            self.stdout.write(self.style.SUCCESS(f"Ledger clean: {count} envelope(s) checked."))
            return
        self.stderr.write(
            f"Ledger breaches in {len({b.envelope for b in breaches})} of {count} envelope(s):"
        )
        for b in breaches:
            self.stderr.write(
                f"  {b.envelope} {b.balance}: stored {b.stored}, "
                f"journal {b.from_journal}, legs {b.from_legs}"
            )
        sys.exit(1)
