"""A receipt's page shows its amount as dollars, the micro-dollars one hover away (issue 27,
item 4), and links what it names: its provider objects to the Dashboard, its run to its page."""

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from accounts.models import User
from tests.receipts.conftest import Shop, charge_receipt

pytestmark = pytest.mark.django_db


def test_a_receipt_shows_its_amount_in_dollars_not_amount_micro(shop: Shop, client: Client) -> None:
    charge_id = shop.fund(20_000_000)
    receipt = charge_receipt(charge_id)
    viewer = User.objects.create_user("vic", "vic@example.com", "pw-vic-123", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_receipt"))
    client.force_login(viewer)

    html = client.get(
        reverse("admin:receipts_receipt_change", args=[quote(receipt.pk)])
    ).content.decode()

    assert "Amount micro" not in html
    assert 'title="20,000,000 micro-dollars">$20.00<' in html
    assert f"https://dashboard.stripe.com/test/payments/{charge_id}" in html
    run_page = reverse(
        "admin:verification_verificationrun_change", args=[receipt.verification_run_id]
    )
    assert f'href="{run_page}"' in html
