from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Q

from disputes.demo import DAYS_BACK, DemoRefused, demo_ce3, demo_lines


class Command(BaseCommand):
    help = (
        "Under `make run` (the Stripe sandbox only): give a buyer a fraud dispute whose packet "
        "qualifies for Visa Compelling Evidence 3.0, without moving any clock. Seeds two earlier "
        f"payments on the buyer's demo card (pm_card_visa) {DAYS_BACK} days back at the sandbox, "
        "records them as the buyer's envelopes with signed charge receipts dated by the "
        "sandbox's own `created`, funds a new envelope now on the same card, opens a fraud "
        "dispute on it (Visa 10.4, card not present) and prints the packet's admin page. Run it "
        "beside `make run`, from the repository's root: "
        "`.venv/bin/python manage.py demo_ce3 --buyer buyer@example.com`. Running it again shows "
        "what it made. Refused on a real Stripe key. Docs: docs/disputes.md, 'Seeing a "
        "qualified CE 3.0 packet under make run'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--buyer",
            default="buyer@example.com",
            help="the buyer's e-mail address or username (default: make run's demo buyer)",
        )
        parser.add_argument(
            "--ip",
            default="127.0.0.1",
            help="the IP address the three payments share (a CE 3.0 data element)",
        )
        parser.add_argument(
            "--base-url",
            default="http://127.0.0.1:8000",
            help="where Vouch is served, for the printed admin link",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["buyer"]
        buyer = get_user_model().objects.filter(Q(email__iexact=name) | Q(username=name)).first()
        if buyer is None:
            raise CommandError(
                f"No user {name!r} (by e-mail or username). `make run` makes the demo buyer "
                "(buyer@example.com)."
            )
        try:
            result = demo_ce3(buyer=buyer, ip=options["ip"])
        except DemoRefused as exc:
            raise CommandError(exc.message) from exc
        for line in demo_lines(result, options["base_url"]):
            self.stdout.write(line)
