import pytest
from django.db import DatabaseError, transaction
from django.test import Client

from accounts.models import User
from core.models import AuditEvent
from core.services import audit_record

pytestmark = pytest.mark.django_db


def test_audit_record_stores_actor_action_target_details(staff: User) -> None:
    event = audit_record(
        actor=staff,
        action="packet.approve",
        target_type="packet",
        target_id="pkt_1",
        details={"digest": "abc"},
    )
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.actor, stored.actor_label, stored.action) == (staff, "olga", "packet.approve")
    assert (stored.target_type, stored.target_id, stored.details) == (
        "packet",
        "pkt_1",
        {"digest": "abc"},
    )
    assert stored.created_at is not None


def test_system_actor() -> None:
    event = audit_record(actor=None, action="run.escalate", target_type="run", target_id="7")
    assert (event.actor, event.actor_label) == (None, "system")


def test_model_refuses_to_change_or_delete_an_event(staff: User) -> None:
    event = audit_record(actor=staff, action="debit.add", target_type="envelope", target_id="e")
    event.action = "something.else"
    with pytest.raises(ValueError, match="append-only"):
        event.save()
    with pytest.raises(ValueError, match="append-only"):
        event.delete()
    assert AuditEvent.objects.get(pk=event.pk).action == "debit.add"


def test_database_refuses_to_change_or_delete_an_event(staff: User) -> None:
    event = audit_record(actor=staff, action="debit.add", target_type="envelope", target_id="e")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(action="forged")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).delete()
    assert AuditEvent.objects.get(pk=event.pk).action == "debit.add"


def test_admin_shows_events_read_only() -> None:
    admin = User.objects.create_superuser("root-admin", "r@example.com", "pw-root-admin-1")
    event = audit_record(actor=admin, action="debit.add", target_type="envelope", target_id="e1")
    client = Client()
    client.force_login(admin)
    listing = client.get("/admin/core/auditevent/")
    assert listing.status_code == 200
    assert b"debit.add" in listing.content
    assert client.get("/admin/core/auditevent/add/").status_code == 403
    change = client.post(f"/admin/core/auditevent/{event.pk}/change/", {"action": "forged"})
    assert change.status_code == 403
    assert (
        client.post(f"/admin/core/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert AuditEvent.objects.get(pk=event.pk).action == "debit.add"
