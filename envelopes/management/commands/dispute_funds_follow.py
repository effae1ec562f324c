import re
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from core.display import dollars
from envelopes.services.dispute_funds import DisputeUnreadable, dispute_funds_read_and_follow

# A Stripe dispute id (du_…; the sandbox's dp_…): anything else is refused before Stripe is asked.
DISPUTE_ID = re.compile(r"\A(du|dp)_[A-Za-z0-9]{1,100}\Z")


class Command(BaseCommand):
    help = (
        "Read a dispute from Stripe and bring the ledger to the money it shows withdrawn or "
        "reinstated (held, given back, charged back: SPEC §18). The remedy for a "
        "dispute_funds_mismatch whose event never came; safe to run twice."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dispute_id", help="Stripe's dispute id (du_… or dp_…)")

    def handle(self, *args: Any, **options: Any) -> None:
        if not DISPUTE_ID.match(options["dispute_id"]):
            self.stderr.write(
                "Not a dispute id: give Stripe's id of the dispute (du_ or dp_, then letters and "
                "digits), as the discrepancy shows it. Nothing was read or changed."
            )
            sys.exit(2)
        try:
            funds = dispute_funds_read_and_follow(
                dispute_id=options["dispute_id"], source="manage.py dispute_funds_follow"
            )
        except DisputeUnreadable as exc:
            self.stderr.write(str(exc))
            sys.exit(2)
        if funds is None:
            self.stdout.write(
                "Nothing to follow: the dispute is on no charge of Vouch's, or Stripe withdrew "
                "nothing for it (an inquiry)."
            )
            return
        self.stdout.write(
            self.style.SUCCESS(
                f"{funds.provider_dispute_id} on {funds.charge_id} ({funds.envelope.public_id}): "
                f"{funds.status}; held {dollars(funds.held_micro)}, charged back "
                f"{dollars(funds.charged_back_micro)}, exposure {dollars(funds.exposure_micro)}"
            )
        )
