"""A refused admin page is styled like the admin and names the permission it needs; a refused page
elsewhere is a plain styled page (issue 13, config/urls.py handler403)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, Permission
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.urls import reverse

from accounts.models import User
from ops.admin_views import forbidden
from ops.forbidden import refusal_of
from verification.models import Escalation

pytestmark = pytest.mark.django_db


def staff(*codenames: str) -> Client:
    user = User.objects.create_user("vera", "vera@example.com", "vera-pw-123", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


def test_a_staff_user_without_the_view_permission_is_told_which_one() -> None:
    client = staff("view_envelope")
    response = client.get(reverse("admin:receipts_receipt_changelist"))
    assert response.status_code == 403
    page = response.content.decode()
    assert '<code class="vouch-permission">receipts.view_receipt</code>' in page
    # The admin's look: its stylesheet, header and the way back to the console.
    assert "admin/css/base.css" in page
    assert 'id="site-name"' in page
    assert "Vouch operations" in page
    assert f'href="{reverse("admin:index")}"' in page
    # The page one may see still opens.
    assert client.get(reverse("admin:envelopes_envelope_changelist")).status_code == 200


def test_a_custom_admin_view_names_the_permission_its_service_checks() -> None:
    escalation = Escalation.objects.create(verdict="CONTRADICTED", reason="seeded")
    client = staff("view_escalation")
    response = client.get(reverse("admin:verification_escalation_resolve", args=[escalation.pk]))
    assert response.status_code == 403
    assert "verification.resolve_escalation" in response.content.decode()
    assert refusal_of("/admin/disputes/packet/7/approve/").permission == "disputes.approve_packet"
    assert refusal_of("/admin/disputes/packet/7/file/").permission == "disputes.file_packet"
    assert refusal_of("/admin/disputes/dispute/7/evidence/").permission == ("disputes.add_evidence")
    assert refusal_of("/admin/envelopes/envelope/3/change/").permission == "envelopes.view_envelope"
    assert refusal_of("/admin/envelopes/envelope/add/").permission == "envelopes.add_envelope"
    assert refusal_of("/admin/verification/escalation/5/resolve/").permission == (
        "verification.resolve_escalation"
    )
    assert refusal_of("/api/v1/me").admin is False


def test_a_refusal_outside_the_admin_is_a_plain_page() -> None:
    request = RequestFactory().get("/somewhere")
    request.user = AnonymousUser()
    response = forbidden(request, PermissionDenied())
    assert response.status_code == 403
    page = response.content.decode()
    assert "<h1>Forbidden</h1>" in page
    assert "admin/css/base.css" not in page
    assert "<script" not in page


def test_a_read_only_page_says_nobody_does_it_by_hand(db: None) -> None:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-pw-123"))
    response = client.get(reverse("admin:envelopes_envelope_add"))
    assert response.status_code == 403
    page = response.content.decode()
    assert "Nobody does this by hand" in page
    assert "does not have" not in page
