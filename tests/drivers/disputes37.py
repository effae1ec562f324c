"""Issue 37's disputes stories: a refund made in Stripe's Dashboard (through the SDK, not Vouch),
found by a reconciliation run and recorded by a `foreign_refund` adjustment one person proposes and
another approves (four eyes)."""

from __future__ import annotations

from typing import Any

import stripe
from django.contrib.auth.models import Permission

from accounts.models import User
from envelopes.adjustments import adjustment_approve
from envelopes.models import Adjustment
from reconciliation.engine import reconcile
from reconciliation.models import Discrepancy
from reconciliation.services import discrepancy_adjustment_propose
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import World


def person(username: str, *perms: str) -> User:
    """A staff member with these `app.codename` permissions."""
    user = User.objects.create_user(username, f"{username}@example.com", f"pw-{username}-123")
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return User.objects.get(pk=user.pk)


def record_dashboard_refund(
    world: World, sdk: stripe.StripeClient, *, amount_cents: int
) -> Adjustment:
    """Refund `amount_cents` of the world's charge in the Dashboard, then record it as Vouch's
    operators do: a run finds it, one person proposes the adjustment, another approves it."""
    refund = sdk.v1.refunds.create(params={"charge": world.charge_id, "amount": amount_cents})
    reconcile(kind="manual")
    discrepancy = Discrepancy.objects.exclude(status="resolved").get(code="refund_foreign")
    tag = refund.id[-8:]
    adjustment = discrepancy_adjustment_propose(
        discrepancy=discrepancy,
        actor=person(f"pia{tag}", "envelopes.add_adjustment"),
        kind="foreign_refund",
        reason="Made in the Dashboard by support",
        provider_object_id=refund.id,
    )
    adjustment_approve(
        adjustment=adjustment,
        actor=person(f"abe{tag}", "reconciliation.approve_adjustment"),
        confirmed_amount_micro=amount_cents * 10_000,
    )
    adjustment.refresh_from_db()
    assert adjustment.status == "applied"
    return adjustment


class StripeDisputes:
    """Disputes the provider holds, opened at the sandbox on charges of their own (a
    PaymentIntent confirmed through the SDK), each known to a test by a name: a dispute entered
    by staff must be one Stripe shows (SPEC §18)."""

    def __init__(self, sandbox: SandboxControl) -> None:
        self.sandbox = sandbox
        self.sdk = stripe.StripeClient(
            "sk_test_vouch_tests", base_addresses={"api": sandbox.url}, max_network_retries=0
        )
        self.opened: dict[str, tuple[str, str]] = {}  # name -> (dispute id, charge id)

    def open(
        self,
        name: str,
        *,
        amount_cents: int = 500,
        reason: str = "product_not_received",
        **options: Any,
    ) -> tuple[str, str]:
        """The (dispute id, charge id) named `name`, opened at the provider the first time."""
        if name not in self.opened:
            intent = self.sdk.v1.payment_intents.create(
                params={
                    "amount": amount_cents,
                    "currency": "usd",
                    "payment_method": "pm_card_visa",
                    "confirm": True,
                    "automatic_payment_methods": {"enabled": True, "allow_redirects": "never"},
                }
            )
            charge = str(intent.latest_charge)
            opened = self.sandbox.open_dispute(charge, reason=reason, **options)
            self.opened[name] = (opened["id"], charge)
        return self.opened[name]

    def id(self, name: str) -> str:
        return self.opened[name][0]
