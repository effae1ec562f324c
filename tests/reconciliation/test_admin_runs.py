"""Reconciliation runs in the admin (SPEC §15.5): the list (kind, status, window, duration, what
was compared, provider calls, discrepancy totals, the report's SHA-256) and a run's page: its
window and times, objects compared by kind, counts by class, the provider pages it read with their
SHA-256, the discrepancies it opened, and its signed report."""

from __future__ import annotations

import hashlib
import zlib
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from accounts.models import User
from reconciliation.models import Observation, Run
from reconciliation.runs import run_finish
from reconciliation.services import Finding, discrepancy_record

pytestmark = pytest.mark.django_db

STARTED = datetime(2030, 1, 2, 3, 0, tzinfo=UTC)
REPORT_SHA = hashlib.sha256(b"report").hexdigest()


def viewer(*codenames: str) -> Client:
    user = User.objects.create_user("vic", "vic@example.com", "pw-123-abc", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="reconciliation", codename=codename)
        )
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def run() -> Run:
    run = Run.objects.create(
        kind="sweep",
        lane="objects",
        status="completed",
        window_start=STARTED - timedelta(days=7),
        window_end=STARTED,
        started_at=STARTED,
        heartbeat_at=STARTED + timedelta(minutes=3),
        finished_at=STARTED + timedelta(minutes=3, seconds=20),
        compared={"refunds": 120, "charges": 80, "disputes": 3},
        provider_calls=7,
        pages=3,
        expected=2,
        corrected=1,
        report={"window": ["2029-12-26", "2030-01-02"], "agreed": 201, "open": ["dsc_x"]},
        report_sha256=REPORT_SHA,
        report_signature="sig-base64url-abc",
        report_key_id="vouch-test-2030",
    )
    for number in range(3):
        Observation.objects.create(
            run=run,
            kind="refunds",
            request={"path": "/v1/refunds", "params": {"limit": 100, "page": number}},
            data={"object": "list", "data": [{"id": f"re_{number}"}]},
            sha256=hashlib.sha256(f"page {number}".encode()).hexdigest(),
            observed_at=STARTED + timedelta(seconds=number),
        )
    return run


def test_the_list_shows_what_each_run_did(run: Run) -> None:
    run.opened = {"refund_foreign": 1, "leg_stuck": 2}
    run.still_open = {"refund_foreign": 1, "leg_stuck": 1, "charge_mismatch": 4}
    run.cleared = {"charge_mismatch": 3}
    run.save()
    response = viewer("view_run").get(reverse("admin:reconciliation_run_changelist"))
    assert response.status_code == 200
    html = response.content.decode()
    assert run.public_id in html
    assert "2030-01-02 03:00:00 UTC" in html  # started, one format with its time zone
    assert "2029-12-26 03:00:00 UTC" in html  # the window's start
    assert "3 min 20 s" in html  # duration
    cells = {
        name: html.split(f'class="field-{name}">', 1)[1].split("</td>", 1)[0]
        for name in ("compared_total", "provider_calls", "opened_total", "still_open_total")
    }
    assert cells == {
        "compared_total": "203",
        "provider_calls": "7",
        "opened_total": "3",
        "still_open_total": "6",
    }
    assert f"{REPORT_SHA[:12]}…" in html


def test_the_run_page(run: Run) -> None:
    finding = Finding(
        code="refund_foreign",
        subject_type="refund",
        subject_id="re_foreign1",
        summary="A refund nobody here made.",
        amount_micro=500_000,
    )
    opened, _ = discrepancy_record(run=run, finding=finding)
    discrepancy_record(
        run=run,
        finding=Finding(
            code="leg_stuck", subject_type="refund_leg", subject_id="rfl_1", summary="stuck"
        ),
    )
    run.cleared = {"charge_mismatch": 2}
    run.still_open = {"refund_foreign": 1, "leg_stuck": 1}
    run.save()
    response = viewer("view_run").get(reverse("admin:reconciliation_run_change", args=[run.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    # Window, times, calls, expected and corrected.
    for text in (
        "2029-12-26 03:00:00 UTC → 2030-01-02 03:00:00 UTC",
        "3 min 20 s",
        "7 (3 pages stored)",
        "Expected",
        "Corrected",
    ):
        assert text in html, text
    # Compared by kind, and the total.
    assert '<td>refunds</td><td class="vouch-num">120</td>' in html
    assert '<td>Total</td><td class="vouch-num">203</td>' in html
    # Counts by class: money first.
    classes = html.split('id="run-classes"', 1)[1].split("</table>", 1)[0]
    assert classes.index("refund_foreign") < classes.index("charge_mismatch")
    assert classes.index("charge_mismatch") < classes.index("leg_stuck")
    row = classes.split('<span class="vouch-mono">refund_foreign</span>)</span></td>', 1)[1]
    row = row.split("</tr>", 1)[0]
    assert [c.split(">")[-1] for c in row.split("</td>")[:5]] == ["Money", "1", "0", "0", "1"]
    assert "Refund made outside Vouch" in classes  # the class in words, its code as details
    # The pages it read, each with its SHA-256, and the discrepancies it opened.
    for observation in run.observations.all():
        assert observation.sha256 in html
        assert reverse("admin:reconciliation_observation_change", args=[observation.pk]) in html
    assert reverse("admin:reconciliation_discrepancy_change", args=[opened.pk]) in html
    # The report, its SHA-256, signature and key id.
    assert REPORT_SHA in html
    assert "sig-base64url-abc" in html
    assert "vouch-test-2030" in html
    assert "&quot;agreed&quot;: 201" in html
    assert "203 objects compared" in html


def test_an_observation_page_shows_the_data_as_received(run: Run) -> None:
    observation = run.observations.first()
    assert observation is not None
    response = viewer("view_observation").get(
        reverse("admin:reconciliation_observation_change", args=[observation.pk])
    )
    html = response.content.decode()
    assert observation.sha256 in html
    assert "re_0" in html
    assert reverse("admin:reconciliation_run_change", args=[run.pk]) in html


def test_an_observation_stored_as_bytes_is_shown_decompressed_and_checked_against_its_sha256(
    run: Run,
) -> None:
    body = b'{"object": "list", "data": [{"id": "re_kept", "amount": 150}], "has_more": false}'
    kept = Observation.objects.create(
        run=run,
        kind="refunds",
        request={"path": "/v1/refunds", "params": {"limit": 100}},
        body=zlib.compress(body, 1),
        body_length=len(body),
        sha256=hashlib.sha256(body).hexdigest(),
        observed_at=STARTED,
    )
    client = viewer("view_observation")
    url = reverse("admin:reconciliation_observation_change", args=[kept.pk])
    html = client.get(url).content.decode()
    assert kept.sha256 in html
    assert "re_kept" in html  # the page, decompressed
    integrity = html.split('id="observation-integrity"', 1)[1].split("</td>", 1)[0]
    assert "match the SHA-256" in integrity
    assert "NOT" not in integrity
    assert f"{len(body)} bytes" in integrity

    # Bytes that no longer hash to the recorded SHA-256 are called out.
    Observation.objects.filter(pk=kept.pk).update(body=zlib.compress(body.replace(b"150", b"151")))
    integrity = client.get(url).content.decode().split('id="observation-integrity"', 1)[1]
    assert "do NOT match the SHA-256" in integrity.split("</td>", 1)[0]

    # One stored as parsed JSON, before bytes were kept, says the hash cannot be checked.
    legacy = run.observations.filter(body=None).first()
    assert legacy is not None
    html = client.get(
        reverse("admin:reconciliation_observation_change", args=[legacy.pk])
    ).content.decode()
    integrity = html.split('id="observation-integrity"', 1)[1].split("</td>", 1)[0]
    assert "cannot be checked" in integrity
    assert "re_0" in html or "re_1" in html or "re_2" in html


def test_runs_need_the_view_permission(run: Run) -> None:
    client = viewer("view_discrepancy")
    assert client.get(reverse("admin:reconciliation_run_changelist")).status_code == 403
    assert client.get(reverse("admin:reconciliation_run_change", args=[run.pk])).status_code == 403


def test_all_pages_of_a_run_are_listed_from_its_page(run: Run) -> None:
    response = viewer("view_observation").get(
        reverse("admin:reconciliation_observation_changelist") + f"?run__id__exact={run.pk}"
    )
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == 3


def test_the_run_page_checks_the_report_now(run: Run) -> None:
    client = viewer("view_run")
    page = reverse("admin:reconciliation_run_change", args=[run.pk])
    check = client.get(page).content.decode().split('id="report-check">', 1)[1]
    assert check.startswith('<span class="vouch-badge vouch-bad">✗ not verified</span>')
    assert "does not hash to its stored SHA-256" in check.split("</td>", 1)[0]
    finished = run_finish(run)
    assert finished.report_signature
    check = client.get(page).content.decode().split('id="report-check">', 1)[1]
    assert check.startswith('<span class="vouch-badge vouch-good">✓ verified</span>')
    assert finished.report_sha256 in client.get(page).content.decode()
