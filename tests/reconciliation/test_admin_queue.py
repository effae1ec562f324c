"""The discrepancy queue in the admin (SPEC §15.4, §15.5): open (and acknowledged) first, then
money, evidence, hygiene, then the oldest first; the time left to each one's target, overdue ones
marked in words and counted at the top; filters; the CSV export of the queue as filtered; and the
standard 403 for staff without the view permission."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from accounts.models import User
from reconciliation.models import Discrepancy, Run
from reconciliation.services import (
    Finding,
    discrepancy_accept,
    discrepancy_acknowledge,
    discrepancy_clear,
    discrepancy_record,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2030, 3, 14, 12, 0, tzinfo=UTC)
QUEUE = reverse("admin:reconciliation_discrepancy_changelist")
EXPORT = reverse("admin:reconciliation_discrepancy_export")


@pytest.fixture(autouse=True)
def at_now() -> Iterator[None]:
    """The queue is read at NOW (time left depends on it); logins happen then too."""
    with time_machine.travel(NOW, tick=False):
        yield


def staff(username: str, *perms: tuple[str, str]) -> User:
    user = User.objects.create_user(
        username, f"{username}@example.com", "pw-123-abc", is_staff=True
    )
    for app, codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return User.objects.get(pk=user.pk)


def as_(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def a_run(at: datetime | None = None) -> Run:
    moment = at or NOW
    return Run.objects.create(
        kind="manual",
        lane="objects",
        window_start=moment - timedelta(days=7),
        window_end=moment,
        started_at=moment,
        heartbeat_at=moment,
        status="completed",
    )


def found(
    run: Run,
    code: str,
    subject_id: str,
    *,
    at: datetime | None = None,
    subject_type: str = "charge",
    **fields: Any,
) -> Discrepancy:
    """`discrepancy_record` as a run would call it, at `at`."""
    fields.setdefault("summary", f"{code} on {subject_id}")
    with time_machine.travel(at, tick=False) if at is not None else nullcontext():
        discrepancy, created = discrepancy_record(
            run=run,
            finding=Finding(code=code, subject_type=subject_type, subject_id=subject_id, **fields),
        )
    assert created
    return discrepancy


@pytest.fixture
def queue() -> dict[str, Discrepancy]:
    """Six discrepancies, one of each kind of place in the queue, as of NOW."""
    worker = staff("wanda", ("reconciliation", "work_discrepancy"))
    run = a_run(NOW - timedelta(days=30))
    made = {
        "money_open": found(
            run, "refund_missing", "rfl_open", at=NOW - timedelta(hours=1), amount_micro=2_500_000
        ),
        "money_acknowledged": found(
            run,
            "charge_refunded_mismatch",
            "ch_ack",
            at=NOW - timedelta(hours=30),
            amount_micro=1_234_567,
            charge_id="ch_ack",
            envelope_public_id="env_ack",
        ),
        "evidence_open": found(
            run,
            "dispute_status_drift",
            "dp_open",
            at=NOW - timedelta(days=2),
            subject_type="dispute",
        ),
        "hygiene_open": found(
            run, "leg_stuck", "rfl_stuck", at=NOW - timedelta(days=10), subject_type="refund_leg"
        ),
        "money_cleared": found(run, "refund_foreign", "re_gone", at=NOW - timedelta(days=20)),
        "evidence_accepted": found(
            run, "charge_mismatch", "ch_accepted", at=NOW - timedelta(days=15)
        ),
    }
    with time_machine.travel(NOW - timedelta(minutes=30), tick=False):
        discrepancy_acknowledge(discrepancy=made["money_acknowledged"], actor=worker)
        discrepancy_clear(
            discrepancy=made["money_cleared"], run=run, observation=None, why="gone at the provider"
        )
        discrepancy_accept(
            discrepancy=made["evidence_accepted"], actor=worker, note="metadata only"
        )
    return {name: Discrepancy.objects.get(pk=d.pk) for name, d in made.items()}


@pytest.fixture
def viewer() -> Client:
    return as_(staff("vic", ("reconciliation", "view_discrepancy")))


def listed(response: Any) -> list[str]:
    assert response.status_code == 200, response.content[:500]
    return [d.public_id for d in response.context["cl"].result_list]


def names(queue: dict[str, Discrepancy], *keys: str) -> list[str]:
    return [queue[k].public_id for k in keys]


def test_open_first_then_by_severity_then_oldest(
    queue: dict[str, Discrepancy], viewer: Client
) -> None:
    with time_machine.travel(NOW, tick=False):
        response = viewer.get(QUEUE)
    expected = names(
        queue,
        "money_acknowledged",
        "money_open",
        "evidence_open",
        "hygiene_open",
        "money_cleared",
        "evidence_accepted",
    )
    assert listed(response) == expected
    html = response.content.decode()
    positions = [html.index(public_id) for public_id in expected]
    assert positions == sorted(positions)  # the page shows them in that order too


def test_time_left_and_overdue_ones_stand_out_and_are_counted(
    queue: dict[str, Discrepancy], viewer: Client
) -> None:
    with time_machine.travel(NOW, tick=False):
        html = viewer.get(QUEUE).content.decode()
    assert "23 h left" in html  # money, first seen an hour ago: 24 h target
    assert "1 d left" in html  # evidence, two days ago: 72 h target
    assert '<span class="vouch-overdue"' in html
    assert "⚠ overdue by 6 h" in html  # money, acknowledged, 30 h ago
    assert "⚠ overdue by 3 d" in html  # hygiene, 10 days ago: 7 days target
    assert html.count('class="vouch-overdue"') == 2  # resolved ones have no target left
    assert "2 discrepancies are overdue" in html
    assert "$1.234567" in html  # amounts in dollars, exact
    assert "$2.50" in html
    with time_machine.travel(NOW - timedelta(days=20), tick=False):
        assert "No discrepancy is overdue" in viewer.get(QUEUE).content.decode()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status__exact=open", ["money_open", "evidence_open", "hygiene_open"]),
        ("status__exact=acknowledged", ["money_acknowledged"]),
        ("status__exact=resolved", ["money_cleared", "evidence_accepted"]),
        ("severity__exact=money", ["money_acknowledged", "money_open", "money_cleared"]),
        ("severity__exact=evidence", ["evidence_open", "evidence_accepted"]),
        ("class=leg_stuck", ["hygiene_open"]),
        ("class=refund_foreign&status__exact=resolved", ["money_cleared"]),
        ("target=overdue", ["money_acknowledged", "hygiene_open"]),
        ("target=within", ["money_open", "evidence_open"]),
        ("severity__exact=money&target=overdue", ["money_acknowledged"]),
    ],
)
def test_filters(
    queue: dict[str, Discrepancy], viewer: Client, query: str, expected: list[str]
) -> None:
    with time_machine.travel(NOW, tick=False):
        assert listed(viewer.get(f"{QUEUE}?{query}")) == names(queue, *expected)


def rows_of(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="discrepancies-')
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


def test_csv_export_of_the_queue_as_filtered(queue: dict[str, Discrepancy], viewer: Client) -> None:
    with time_machine.travel(NOW, tick=False):
        page = viewer.get(f"{QUEUE}?severity__exact=money")
        assert f'href="{EXPORT}?severity__exact=money"' in page.content.decode()
        rows = rows_of(viewer.get(f"{EXPORT}?severity__exact=money"))
        everything = rows_of(viewer.get(EXPORT))
    assert [r["public_id"] for r in rows] == names(
        queue, "money_acknowledged", "money_open", "money_cleared"
    )
    assert list(rows[0]) == [
        "public_id",
        "class",
        "severity",
        "status",
        "resolution",
        "subject_type",
        "subject_id",
        "charge_id",
        "envelope",
        "amount_micro",
        "summary",
        "first_seen_at",
        "last_seen_at",
        "seen_count",
        "due_at",
        "overdue",
    ]
    acknowledged = rows[0]
    assert acknowledged == {
        "public_id": queue["money_acknowledged"].public_id,
        "class": "charge_refunded_mismatch",
        "severity": "money",
        "status": "acknowledged",
        "resolution": "",
        "subject_type": "charge",
        "subject_id": "ch_ack",
        "charge_id": "ch_ack",
        "envelope": "env_ack",
        "amount_micro": "1234567",
        "summary": "charge_refunded_mismatch on ch_ack",
        "first_seen_at": "2030-03-13T06:00:00Z",
        "last_seen_at": "2030-03-13T06:00:00Z",
        "seen_count": "1",
        "due_at": "2030-03-14T06:00:00Z",
        "overdue": "yes",
    }
    assert (rows[1]["overdue"], rows[1]["amount_micro"]) == ("no", "2500000")
    cleared = rows[2]
    assert (cleared["status"], cleared["resolution"], cleared["overdue"]) == (
        "resolved",
        "cleared",
        "no",  # past its target, but resolved
    )
    assert [r["public_id"] for r in everything] == listed(viewer.get(QUEUE))


def test_csv_keeps_provider_text_from_running_as_a_formula(viewer: Client) -> None:
    found(a_run(), "charge_mismatch", "=HYPERLINK(1)", summary="+1 differs")
    (row,) = rows_of(viewer.get(EXPORT))
    assert (row["subject_id"], row["summary"]) == ("'=HYPERLINK(1)", "'+1 differs")


def test_a_bad_filter_is_the_admin_s_error_page_not_a_crash(viewer: Client) -> None:
    response = viewer.get(f"{EXPORT}?nonsense__exact=1")
    assert response.status_code == 302
    assert response["Location"].endswith("?e=1")


def test_staff_without_the_view_permission_get_403(queue: dict[str, Discrepancy]) -> None:
    nobody = as_(staff("nina", ("reconciliation", "work_discrepancy")))
    one = queue["evidence_open"]
    assert nobody.get(QUEUE).status_code == 403
    assert nobody.get(EXPORT).status_code == 403
    change = reverse("admin:reconciliation_discrepancy_change", args=[one.pk])
    assert nobody.get(change).status_code == 403
    for action in ("acknowledge", "accept", "propose"):
        url = reverse(f"admin:reconciliation_discrepancy_{action}", args=[one.pk])
        assert nobody.post(url, {"note": "x"}).status_code == 403, action
    assert Discrepancy.objects.get(pk=one.pk).status == "open"


def test_the_admin_adds_and_changes_nothing_by_hand(
    queue: dict[str, Discrepancy], viewer: Client
) -> None:
    superuser = User.objects.create_superuser("root", "root@example.com", "pw-123-abc")
    client = as_(superuser)
    assert client.get(reverse("admin:reconciliation_discrepancy_add")).status_code == 403
    one = queue["money_open"]
    delete = reverse("admin:reconciliation_discrepancy_delete", args=[one.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert Discrepancy.objects.filter(pk=one.pk).exists()
