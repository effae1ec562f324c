"""The admin's home page is the ops console (SPEC §10, issue 13): what needs a person now, each a
count whose link opens a list showing exactly those rows, and two charts of the last 30 days
drawn on the server as inline SVG."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from ops.console import ops_console
from tests.drivers.disputes import Ops, World
from tests.ops.console_seed import Seeded, seed_console
from verification.models import Escalation, Verdict, VerificationRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "root-pw-123"))
    return client


def tile(page: str, key: str) -> tuple[int, str]:
    """The count and the link of one tile of the console."""
    match = re.search(
        rf'id="console-{key}" href="([^"]+)" data-count="(\d+)"', page.replace("&amp;", "&")
    )
    assert match, f"no tile {key}"
    return int(match.group(2)), match.group(1)


def listed(client: Client, url: str) -> set[int]:
    """The primary keys of the rows the admin list at `url` shows (every page of it)."""
    response = client.get(url)
    assert response.status_code == 200, url
    changelist = response.context["cl"]
    assert changelist.result_count == len(changelist.result_list)  # one page holds them all
    return {row.pk for row in changelist.result_list}


def test_every_count_links_to_a_list_of_exactly_those_rows(
    superuser: Client,
    world: World,
    ops: Ops,
) -> None:
    seeded: Seeded = seed_console(world, ops)
    response = superuser.get(reverse("admin:index"))
    assert response.status_code == 200
    page = response.content.decode()

    expected: dict[str, set[int]] = {
        "escalations": set(seeded.escalations_open),
        "disputes": {d.pk for d in seeded.disputes},
        "packets_approval": {p.pk for p in seeded.awaiting_approval},
        "packets_filing": {p.pk for p in seeded.awaiting_filing},
        "stuck_funding": set(seeded.stuck_funding_envelopes),
        "stuck_refund": set(seeded.stuck_refunds),
        "discrepancies_money": set(seeded.discrepancies["money"]),
        "discrepancies_evidence": set(seeded.discrepancies["evidence"]),
        "discrepancies_hygiene": set(seeded.discrepancies["hygiene"]),
    }
    assert [len(rows) for rows in expected.values()] == [3, 3, 2, 1, 1, 1, 1, 1, 2]
    for key, rows in expected.items():
        count, url = tile(page, key)
        assert count == len(rows), key
        assert listed(superuser, url) == rows, key
    # A funding charge pending for minutes is not stuck (but its envelope says it is pending).
    assert seeded.fresh_pending_envelope not in expected["stuck_funding"]

    # The next disputes, deadline first, with their due time and the time left.
    section = page.split('id="vouch-disputes-due"')[1].split("</section>")[0]
    assert section.count('class="vouch-dispute-due"') == 3
    deadlines = sorted(d.response_deadline for d in seeded.disputes if d.response_deadline)
    assert len(deadlines) == 3
    shown = [
        d.provider_dispute_id
        for d in sorted(seeded.disputes, key=lambda d: (d.response_deadline, d.created_at))
    ]
    positions = [section.index(i) for i in shown]
    assert positions == sorted(positions)
    assert timezone.localtime(deadlines[0]).strftime("%Y-%m-%d %H:%M:%S UTC") in section
    assert re.search(r"\d+ d \d+ h|\d+ h \d+ min", section)

    # The charts: every decided run of the seeding (the funding charges' readbacks) is counted on
    # its day, and every open escalation was opened today.
    runs = VerificationRun.objects.exclude(verdict=Verdict.PENDING)
    assert runs.exists()
    today = timezone.localdate().isoformat()
    bar = re.search(rf'<g class="vouch-bar" data-day="{today}">.*?</g>', page, re.S)
    assert bar is not None
    drawn = sum(int(v) for v in re.findall(r'data-value="(\d+)"', bar.group(0)))
    assert drawn == runs.filter(decided_at__date=timezone.localdate()).count()
    opened = re.search(
        rf'class="vouch-point" data-series="opened" data-day="{today}" data-value="(\d+)"', page
    )
    assert opened is not None
    assert int(opened.group(1)) == Escalation.objects.count()
    resolved = re.search(
        rf'class="vouch-point" data-series="resolved" data-day="{today}" data-value="(\d+)"', page
    )
    assert resolved is not None
    assert int(resolved.group(1)) == 1
    # The app list is still there, below the console.
    assert 'id="vouch-all-lists"' in page
    assert reverse("admin:envelopes_envelope_changelist") in page


def test_an_empty_database_shows_zeros_and_empty_charts(superuser: Client) -> None:
    response = superuser.get(reverse("admin:index"))
    assert response.status_code == 200
    page = response.content.decode()
    counts = re.findall(r'id="console-([a-z_]+)" href="[^"]+" data-count="(\d+)"', page)
    assert len(counts) == 9
    assert all(count == "0" for _, count in counts)
    assert "No dispute waits for a response." in page
    # One bar per day (with nothing in it) and one point per day for each line, 30 days.
    assert page.count('class="vouch-bar"') == 30
    assert page.count("<rect") == 0
    assert page.count('class="vouch-point" data-series="opened"') == 30
    assert page.count('class="vouch-point" data-series="resolved"') == 30
    # Drawn here: no script, nothing loaded from elsewhere.
    console = page.split('id="vouch-now"')[1]
    assert "<script" not in console
    assert not re.search(r'(src|href)="https?://(?!dashboard\.stripe\.com)', console)


def _decided(verdict: str, at: Any) -> None:
    with time_machine.travel(at, tick=False):
        VerificationRun.objects.create(
            contract_id="stripe.refund.created",
            contract_version=1,
            operation_id=f"op-{uuid.uuid4().hex}",
            operation_created_at=at,
            verdict=verdict,
            decided_at=at,
            deadline_at=at + timedelta(days=1),
        )


def test_the_charts_put_each_verdict_and_escalation_on_its_day(db: None) -> None:
    now = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)
    _decided("VERIFIED", now)
    _decided("VERIFIED", now)
    _decided("CONTRADICTED", now - timedelta(days=3))
    _decided("FAILED", now - timedelta(days=29))
    _decided("UNVERIFIABLE", now - timedelta(days=30))  # outside the 30 days
    _decided("PENDING", now)  # not decided: never drawn
    with time_machine.travel(now - timedelta(days=3), tick=False):
        escalation = Escalation.objects.create(verdict="CONTRADICTED", reason="r")
    Escalation.objects.filter(pk=escalation.pk).update(resolved_at=now, status="resolved")

    console = ops_console(now=now)
    chart = console.verdicts
    assert len(chart.days) == 30
    assert chart.days[-1] == timezone.localdate(now)
    by_name = {series.name: series.values for series in chart.series}
    assert by_name["VERIFIED"][-1] == 2
    assert by_name["CONTRADICTED"][-4] == 1
    assert by_name["FAILED"][0] == 1
    assert sum(by_name["UNVERIFIABLE"]) == 0
    assert chart.total == 4
    lines = {series.name: series.values for series in console.escalations.series}
    assert lines["opened"][-4] == 1
    assert sum(lines["opened"]) == 1
    assert lines["resolved"][-1] == 1
    assert sum(lines["resolved"]) == 1


def test_the_console_is_for_staff_only(db: None) -> None:
    client = Client()
    assert client.get(reverse("admin:index")).status_code == 302  # to the login
    buyer = User.objects.create_user("bea", "bea@example.com", "bea-pw-123")
    client.force_login(buyer)
    response = client.get(reverse("admin:index"), follow=True)
    assert response.redirect_chain[0][0].startswith(reverse("admin:login"))
    assert response.status_code == 403
    assert "vouch-now" not in response.content.decode()


def test_each_part_of_the_console_shows_only_to_who_may_open_its_list(db: None) -> None:
    user = User.objects.create_user("vera", "vera@example.com", "vera-pw-123", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_envelope", "view_escalation"])
    )
    client = Client()
    client.force_login(user)
    page = client.get(reverse("admin:index")).content.decode()
    shown = set(re.findall(r'id="console-([a-z_]+)"', page))
    assert shown == {"escalations", "stuck_funding"}
    assert 'id="vouch-disputes-due"' not in page
    assert 'id="vouch-discrepancies"' not in page
    assert 'id="chart-escalations"' in page
    assert 'id="chart-verdicts"' not in page
