"""Migrate the peer's database and seed it: `python -m naive.seed N` (PYTHONPATH=bench/peers,
DJANGO_SETTINGS_MODULE=naive.settings, the sandbox up). Per client a user logged in (a session,
as a browser's login leaves) and one funding row whose charge is made in the sandbox through the
SDK, as the app would have at funding time. Prints the session ids as JSON."""

import json
import sys

import django

CHARGE_CENTS = 500_000  # $5,000.00: far more 1-cent refunds than a run makes


def main() -> None:
    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from naive.refunds.models import Funding
    from naive.refunds.views import client as stripe_client

    call_command("migrate", verbosity=0)
    sessions = []
    for number in range(int(sys.argv[1])):
        user = User.objects.create_user(username=f"naive_buyer_{number}", password=None)
        intent = stripe_client.v1.payment_intents.create(
            params={
                "amount": CHARGE_CENTS,
                "currency": "usd",
                "payment_method": "pm_card_visa",
                "confirm": True,
                # A server-side card confirmation, as Stripe takes it at the pinned version.
                "allowed_payment_method_types": ["card"],
            }
        )
        charge = intent.latest_charge
        charge_id = charge if isinstance(charge, str) else str(charge.id)
        Funding.objects.create(user=user, charge_id=charge_id, amount=CHARGE_CENTS)
        browser = Client()
        browser.force_login(user)
        sessions.append(browser.cookies["sessionid"].value)
    print(json.dumps(sessions))


if __name__ == "__main__":
    main()
