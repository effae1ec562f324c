"""The "Dispute outcomes" console page (SPEC §17, disputes/admin/outcomes.py): the figures per
reason and month with totals and the interval, the same figures as a CSV download, the console's
link to it, and who may see it (staff who may view disputes; no one else)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import unescape

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from accounts.models import User
from disputes.models import Dispute, DisputeSource, FilingStatus, Packet, PacketStatus, Posture
from disputes.outcomes import dispute_outcomes, outcomes_csv
from tests.drivers.disputes import staff_user

PAGE = "/admin/disputes/outcomes/"
CSV = "/admin/disputes/outcomes/csv/"


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def decided(n: int, status: str, day: str, reason: str, amount: int, contested: bool) -> None:
    row = Dispute.objects.create(
        provider_dispute_id=f"dp_page_{n}",
        charge_id=f"ch_page_{n}",
        amount_micro=amount,
        reason=reason,
        provider_status=status,
        decided_at=datetime.fromisoformat(day).replace(tzinfo=UTC),
        source=DisputeSource.STAFF,
    )
    if contested:
        Packet.objects.create(
            dispute=row,
            version=1,
            drafter="test",
            posture=Posture.CONTEST,
            summary="The buyer received the goods.",
            digest="0" * 64,
            status=PacketStatus.READY_FOR_REVIEW,
            filing_status=FilingStatus.FILED,
            filing_key=f"pkt:page:{n}",
        )


@pytest.fixture
def viewer(db: None) -> User:
    return staff_user("vera", "view_dispute")


@pytest.fixture
def history(db: None) -> None:
    decided(1, "won", "2026-10-03", "fraudulent", 40_000_000, True)
    decided(2, "lost", "2026-10-20", "fraudulent", 10_000_000, False)
    decided(3, "lost", "2026-11-01", "fraudulent", 10_000_000, True)
    decided(4, "won", "2026-11-05", "duplicate", 5_000_000, True)


def cells(html: str, reason: str, month: str) -> list[str]:
    """The text of the cells of one row of the table, by its reason and month."""
    row = re.search(
        rf'<tr class="vouch-outcome[^"]*" data-reason="{reason}" data-month="{month}">(.*?)</tr>',
        html,
        re.S,
    )
    assert row is not None, f"no row {reason} {month}"
    found = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(1), re.S)
    return [unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in found]


def test_the_page_shows_each_reason_and_month_with_totals(viewer: User, history: None) -> None:
    response = client_for(viewer).get(reverse("admin-dispute-outcomes"))

    assert response.status_code == 200
    html = response.content.decode()
    assert "<title>Dispute outcomes" in html
    assert cells(html, "duplicate", "2026-11") == [
        "duplicate", "2026-11", "1", "1", "0", "0", "100.0%", "20.7\u2013100.0%",
        "$5.00", "$15.00", "-$10.00",
    ]  # fmt: skip
    assert cells(html, "fraudulent", "2026-10") == [
        "fraudulent", "2026-10", "2", "1", "1", "1", "50.0%", "9.5\u201390.5%",
        "$40.00", "$30.00", "$10.00",
    ]  # fmt: skip
    assert cells(html, "fraudulent", "2026-11") == [
        "fraudulent", "2026-11", "1", "0", "1", "0", "0.0%", "0.0\u201379.3%",
        "$0.00", "$30.00", "-$30.00",
    ]  # fmt: skip
    assert cells(html, "fraudulent", "all") == [
        "fraudulent", "all months", "3", "1", "2", "1", "33.3%", "6.1\u201379.2%",
        "$40.00", "$60.00", "-$20.00",
    ]  # fmt: skip
    assert cells(html, "all", "all") == [
        "All reasons", "all months", "4", "2", "2", "1", "50.0%", "15.0\u201385.0%",
        "$45.00", "$75.00", "-$30.00",
    ]  # fmt: skip
    # Each reason's months, then its total; the overall total last.
    order = re.findall(r'data-reason="([^"]+)" data-month="([^"]+)"', html)
    assert order == [
        ("duplicate", "2026-11"),
        ("duplicate", "all"),
        ("fraudulent", "2026-10"),
        ("fraudulent", "2026-11"),
        ("fraudulent", "all"),
        ("all", "all"),
    ]
    assert 'title="45,000,000 micro-dollars"' in html  # the integer one hover away
    assert f'href="{CSV}"' in html
    assert "Download CSV" in html


def test_the_month_bounds_narrow_the_page_and_its_csv_link(viewer: User, history: None) -> None:
    html = client_for(viewer).get(PAGE, {"from": "2026-11", "to": "2026-11"}).content.decode()

    assert re.findall(r'data-reason="([^"]+)" data-month="([^"]+)"', html) == [
        ("duplicate", "2026-11"),
        ("duplicate", "all"),
        ("fraudulent", "2026-11"),
        ("fraudulent", "all"),
        ("all", "all"),
    ]
    assert f'href="{CSV}?from=2026-11&amp;to=2026-11"' in html
    assert 'value="2026-11"' in html


def test_a_malformed_month_is_refused_with_its_code(viewer: User, history: None) -> None:
    response = client_for(viewer).get(PAGE, {"from": "11/2026"})
    assert response.status_code == 400
    assert "validation_error: A month is written YYYY-MM" in unescape(response.content.decode())
    assert "data-reason" not in response.content.decode()

    response = client_for(viewer).get(CSV, {"to": "2026-13"})
    assert response.status_code == 400
    assert response.content.decode().startswith("validation_error: A month is written YYYY-MM")


def test_nothing_decided_says_so(viewer: User) -> None:
    response = client_for(viewer).get(PAGE)
    assert response.status_code == 200
    assert "No dispute was decided (won or lost) yet." in response.content.decode()
    assert "data-reason" not in response.content.decode()


def test_the_csv_is_the_same_figures_as_an_attachment(viewer: User, history: None) -> None:
    response = client_for(viewer).get(reverse("admin-dispute-outcomes-csv"))

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert re.fullmatch(
        r'attachment; filename="dispute-outcomes-\d{8}T\d{6}Z\.csv"',
        response["Content-Disposition"],
    )
    body = response.content
    assert body == outcomes_csv(dispute_outcomes()).encode()
    assert body.splitlines()[1:3] == [
        b"duplicate,2026-11,1,1,0,0,1.000000,0.206549,1.000000,5.000000,15.000000,-10.000000",
        b"fraudulent,2026-10,2,1,1,1,0.500000,0.094531,0.905469,40.000000,30.000000,10.000000",
    ]
    bounded = client_for(viewer).get(CSV, {"from": "2026-11"}).content
    assert b"2026-10" not in bounded
    assert (
        bounded.splitlines()[-1]
        == b"all,all,2,1,1,0,0.500000,0.094531,0.905469,5.000000,45.000000,-40.000000"
    )


def test_the_console_links_to_the_page_for_who_may_view_disputes(viewer: User) -> None:
    html = client_for(viewer).get(reverse("admin:index")).content.decode()
    assert f'href="{PAGE}" id="console-dispute-outcomes"' in html

    other = staff_user("otto", "view_escalation")
    assert "console-dispute-outcomes" not in client_for(other).get("/admin/").content.decode()


@pytest.mark.parametrize("url", [PAGE, CSV])
def test_staff_who_may_not_view_disputes_are_refused(db: None, url: str) -> None:
    other = staff_user("otto", "view_escalation")
    response = client_for(other).get(url)
    assert response.status_code == 403
    assert "disputes.view_dispute" in response.content.decode()
    assert "dispute-outcomes" not in response.get("Content-Disposition", "")


@pytest.mark.parametrize("url", [PAGE, CSV])
def test_a_person_who_is_not_staff_is_sent_to_log_in(db: None, url: str) -> None:
    buyer = User.objects.create_user("bob", "bob@example.com", "bob-password-1")
    buyer.user_permissions.add(Permission.objects.get(codename="view_dispute"))
    response = client_for(buyer).get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert Client().get(url).status_code == 302
