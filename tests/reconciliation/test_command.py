"""`manage.py reconcile` (SPEC §15.3, §15.5), run as the operator runs it: a process of its own on
the test database and the sandbox, so its exit statuses are real — 0 when nothing needs a person,
1 when a discrepancy is open (a dry run that would open one exits 0 and says so), 2 when the run
could not complete or another run holds the lane. Its windows, its dry run (records its run and
report, opens and releases nothing, says what it would open), its output
(plain lines when not on a terminal, a bar on one, the summary by class) and the check of a
stored run's signed report."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from core.models import AuditEvent
from envelopes.models import FundingLeg, RefundLeg
from receipts import keys
from reconciliation.models import Discrepancy, Observation, Run
from stripe_sandbox.client import SandboxControl
from tests.conftest import ROOT, _database_url
from tests.drivers.api import Api
from verification.models import Escalation

# The command runs in a process of its own: it must see what the test wrote (committed).
pytestmark = pytest.mark.django_db(transaction=True)

PLAIN_LINE = re.compile(
    r"^ *\d+\.\ds (refunds|charges|disputes|vouch_side|stuck|ledger|clear) +\d+ compared, "
    r"\d+ provider calls, \d+ pages$"
)


def command_env(sandbox: SandboxControl, **extra: str) -> dict[str, str]:
    """The environment a worker of the test suite gets (tests/conftest.py): the test database,
    the test settings, the sandbox."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": _database_url(),
        "STRIPE_API_BASE": sandbox.url,
        **extra,
    }


def reconcile_command(
    sandbox: SandboxControl, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python manage.py reconcile ARGS` in a process of its own, its output captured (a pipe: not
    a terminal)."""
    return subprocess.run(
        [sys.executable, "manage.py", "reconcile", *args],
        cwd=ROOT,
        env={**command_env(sandbox), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def funded(buyer: Api, amount_micro: int = 10_000_000) -> FundingLeg:
    data = buyer.create(amount_micro)
    return FundingLeg.objects.get(envelope__public_id=data["envelope_id"], sequence=1)


def refunded(buyer: Api, funding: FundingLeg, amount_micro: int) -> RefundLeg:
    response = buyer.post(
        f"/api/v1/escrow/envelopes/{funding.envelope.public_id}/refund",
        {"amount_micro": amount_micro},
    )
    assert response.status_code == 200, response.content
    return RefundLeg.objects.get(operation__public_id=response.json()["data"]["refund_id"])


def table(stdout: str) -> dict[str, list[int]]:
    """The summary table: class -> [opened, seen again, cleared, open]."""
    rows = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) == 5 and cells[0].islower() and all(c.isdigit() for c in cells[1:]):
            rows[cells[0]] = [int(c) for c in cells[1:]]
    return rows


# --- exit statuses -------------------------------------------------------------------------------


def test_exit_status_0_when_nothing_is_open(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    funding = funded(alice)
    refunded(alice, funding, 2_000_000)
    done = reconcile_command(stripe_at_sandbox)
    assert done.returncode == 0, done.stderr
    assert "No discrepancy: the ledger and the provider agree." in done.stdout
    run = Run.objects.get()
    assert (run.kind, run.status, run.compared) == (
        "manual",
        "completed",
        {"refund": 1, "charge": 1},
    )
    assert f"Run {run.public_id}: 2 objects compared (1 charges, 1 refunds)" in done.stdout
    assert f"Report SHA-256 {run.report_sha256}" in done.stdout
    assert done.stdout.splitlines()[-1] == "Exit status 0: nothing needs a person."


def test_exit_status_1_when_a_discrepancy_is_open_with_the_summary_by_class(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funding = funded(alice)
    stripe_at_sandbox.tamper(funding.charge_id, amount=999)
    first = reconcile_command(stripe_at_sandbox)
    assert first.returncode == 1, first.stderr
    header = next(line for line in first.stdout.splitlines() if line.startswith("class"))
    assert header.split() == ["class", "opened", "seen", "again", "cleared", "open"]
    assert table(first.stdout) == {"charge_mismatch": [1, 0, 0, 1]}

    second = reconcile_command(stripe_at_sandbox)  # still open: seen again, still exit 1
    assert second.returncode == 1, second.stderr
    assert table(second.stdout) == {"charge_mismatch": [0, 1, 0, 1]}

    stripe_at_sandbox.tamper(funding.charge_id, amount=1_000)
    third = reconcile_command(stripe_at_sandbox)  # repaired: cleared, nothing open
    assert third.returncode == 0, third.stderr
    assert table(third.stdout) == {"charge_mismatch": [0, 0, 1, 0]}
    assert Discrepancy.objects.get().resolution == "cleared"


def test_exit_status_2_when_the_provider_cannot_be_read(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funded(alice)
    stripe_at_sandbox.add_fault("/v1/charges", "server_error", method="GET")
    done = reconcile_command(stripe_at_sandbox)
    assert done.returncode == 2, (done.stdout, done.stderr)
    run = Run.objects.get()
    assert run.status == "failed"
    assert "could not complete" in done.stderr
    assert run.public_id in done.stderr
    assert "resumes from the run's checkpoint" in done.stderr
    assert run.checkpoint == {"phase": "refunds", "done": True}


def test_exit_status_2_when_another_run_holds_the_lane(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    now = timezone.now()
    alive = Run.objects.create(
        kind="sweep",
        lane="objects",
        window_start=now - timedelta(days=7),
        window_end=now,
        started_at=now,
        heartbeat_at=now,
    )
    done = reconcile_command(stripe_at_sandbox)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"Not started: run {alive.public_id} (sweep) is in progress" in done.stderr
    assert Run.objects.count() == 1
    assert Observation.objects.count() == 0  # it read nothing


# --- windows -------------------------------------------------------------------------------------


def run_in_process(**options: Any) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("reconcile", stdout=out, stderr=io.StringIO(), **options)
    return int(exited.value.code or 0), out.getvalue()


def test_since_a_duration(alice: Api) -> None:
    funded(alice)
    before = timezone.now()
    status, _ = run_in_process(since="3d")
    run = Run.objects.get()
    assert status == 0
    assert before <= run.window_end <= timezone.now()
    assert run.window_end - run.window_start == timedelta(days=3)
    assert run.compared == {"charge": 1}


def test_since_and_until_as_iso_8601(alice: Api) -> None:
    funded(alice)
    status, out = run_in_process(since="2026-01-02", until="2026-01-05T12:30:00Z")
    run = Run.objects.get()
    assert status == 0
    assert (run.window_start, run.window_end) == (
        datetime(2026, 1, 2, tzinfo=UTC),
        datetime(2026, 1, 5, 12, 30, tzinfo=UTC),
    )
    assert "Reconciling 2026-01-02T00:00:00Z .. 2026-01-05T12:30:00Z" in out
    assert run.compared == {}  # today's charge is not in that window


def test_until_a_duration_ends_the_window_before_now(alice: Api) -> None:
    funded(alice)
    run_in_process(since="2d", until="1h")
    run = Run.objects.get()
    assert timezone.now() - run.window_end >= timedelta(hours=1)
    assert run.window_end - run.window_start == timedelta(days=2) - timedelta(hours=1)
    assert run.compared == {}  # the charge made just now is after the window


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"since": "yesterday"}, "'yesterday' is neither a duration (7d, 12h, 30m) nor an ISO"),
        ({"since": "7x"}, "'7x' is neither a duration"),
        ({"until": "2026-13-01"}, "'2026-13-01' is neither a duration"),
        ({"since": "1h", "until": "2h"}, "must be before --until"),
        ({"verify_report": "rec_nosuchrun"}, "No reconciliation run rec_nosuchrun."),
    ],
)
def test_bad_values_are_a_clear_command_error(options: dict[str, str], says: str) -> None:
    with pytest.raises(CommandError, match=re.escape(says)):
        call_command("reconcile", stdout=io.StringIO(), **options)
    assert Run.objects.count() == 0


def test_a_bad_value_is_not_mistaken_for_open_discrepancies(
    stripe_at_sandbox: SandboxControl,
) -> None:
    """Exit status 1 means "discrepancies are open": a value the command cannot read must not
    say so. It is 2, as for any run that could not be done, with the reason on stderr."""
    done = reconcile_command(stripe_at_sandbox, "--since", "yesterday")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "'yesterday' is neither a duration" in done.stderr
    assert Run.objects.count() == 0


# --- the dry run ---------------------------------------------------------------------------------


def test_dry_run_opens_nothing_releases_nothing_and_says_what_it_would_open(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    tampered = funded(alice)
    stripe_at_sandbox.tamper(tampered.charge_id, amount=999)
    leg = refunded(alice, funded(alice), 2_000_000)
    stripe_at_sandbox.set_refund_status(leg.provider_refund_id, "failed")

    dry = reconcile_command(stripe_at_sandbox, "--dry-run")
    # Issue 41: it would open one, but nothing is open: 0, and the last line says what it found.
    assert dry.returncode == 0, dry.stderr
    assert "(dry run)" in dry.stdout.splitlines()[0]
    header = next(line for line in dry.stdout.splitlines() if line.startswith("class"))
    assert "would open" in header
    # The failed refund's leg would be released, so its charge's total agrees: only the tamper.
    assert table(dry.stdout) == {"charge_mismatch": [1, 0, 0, 0]}
    assert "1 corrected" in dry.stdout
    assert dry.stdout.splitlines()[-1] == (
        "Exit status 0: nothing is open, but a real run would open 1 discrepancy for a person "
        "(this dry run changed nothing)."
    )
    run = Run.objects.get()
    assert (run.dry_run, run.status, run.opened, run.corrected) == (
        True,
        "completed",
        {"charge_mismatch": 1},
        1,
    )
    assert Discrepancy.objects.count() == 0
    assert Escalation.objects.count() == 0
    assert not AuditEvent.objects.filter(action__startswith="discrepancy.").exists()
    leg.refresh_from_db()
    assert not leg.released  # released by nothing but a real run

    real = reconcile_command(stripe_at_sandbox)
    assert real.returncode == 1, real.stderr
    assert real.stdout.splitlines()[-1] == (
        "Exit status 1: 1 discrepancy open, for a person (/admin/reconciliation/discrepancy/)."
    )
    leg.refresh_from_db()
    assert leg.released
    assert list(Discrepancy.objects.values_list("code", "subject_id")) == [
        ("charge_mismatch", tampered.public_id)
    ]


def test_the_help_says_what_a_dry_run_records_and_what_each_exit_status_means() -> None:
    """Issue 41: the help said a dry run would "record and change nothing"; it records its run,
    the provider's answers it read and a signed report, and changes no money or discrepancy."""
    from reconciliation.management.commands.reconcile import Command

    text = " ".join(Command().create_parser("manage.py", "reconcile").format_help().split())
    assert "record and change nothing" not in text
    assert "opens, updates or clears no discrepancy and releases no refund" in text
    assert "records the run (marked dry), the provider's answers it read" in text
    assert "its signed report" in text
    assert "0 when no discrepancy is open at the end of the run; 1 when one is" in text
    assert "its last line says what a real run would open" in text


def test_a_dry_run_exits_1_while_a_discrepancy_is_open_even_when_it_finds_nothing(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    """A dry run over a window holding nothing still says that a discrepancy waits for a person,
    as a real run does (it exited 0, its table showing the open one)."""
    funding = funded(alice)
    stripe_at_sandbox.tamper(funding.charge_id, amount=999)
    assert reconcile_command(stripe_at_sandbox).returncode == 1
    dry = reconcile_command(
        stripe_at_sandbox, "--dry-run", "--since", "2020-01-01", "--until", "2020-01-02"
    )
    assert dry.returncode == 1, dry.stdout
    assert table(dry.stdout) == {"charge_mismatch": [0, 0, 0, 1]}
    assert dry.stdout.splitlines()[-1] == (
        "Exit status 1: 1 discrepancy open, for a person (/admin/reconciliation/discrepancy/). "
        "This dry run found nothing more and changed nothing."
    )


def test_a_dry_run_that_finds_nothing_with_nothing_open_exits_0(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funded(alice)
    dry = reconcile_command(stripe_at_sandbox, "--dry-run")
    assert dry.returncode == 0, dry.stdout
    assert dry.stdout.splitlines()[-1] == (
        "Exit status 0: nothing needs a person. This dry run found nothing and changed nothing."
    )


# --- output --------------------------------------------------------------------------------------


def test_plain_lines_when_stdout_is_not_a_terminal(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funded(alice)
    done = reconcile_command(stripe_at_sandbox)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    progress = [line for line in lines if PLAIN_LINE.match(line)]
    phases = [line.split()[1] for line in progress]
    assert phases[:3] == ["refunds", "charges", "disputes"], done.stdout
    assert "clear" in phases
    assert "\r" not in done.stdout  # no bar redrawn in place
    assert "objects/s" not in done.stdout
    assert "objects [" not in done.stdout


def test_a_progress_bar_on_a_terminal(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    funded(alice)
    leader, follower = pty.openpty()
    # A terminal 120 columns wide (a new pseudo-terminal has no size: a bar fits in 0 columns).
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "manage.py", "reconcile"],
        cwd=ROOT,
        env=command_env(stripe_at_sandbox),
        stdout=follower,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal's other end is closed: the process is done
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else ""
    text = shown.decode(errors="replace")
    assert "\r" in text.replace("\r\n", "\n")  # a bar redrawn in place
    assert re.search(r"1 objects? \[", text), text
    assert "provider calls" in text
    assert not any(PLAIN_LINE.match(line.strip("\r")) for line in text.splitlines())
    assert "No discrepancy" in text


# --- the signed report ---------------------------------------------------------------------------


def completed_run(buyer: Api, sandbox: SandboxControl) -> Run:
    funded(buyer)
    done = reconcile_command(sandbox)
    assert done.returncode == 0, done.stderr
    return Run.objects.get()


def test_verify_report_of_a_completed_run(alice: Api, stripe_at_sandbox: SandboxControl) -> None:
    run = completed_run(alice, stripe_at_sandbox)
    done = reconcile_command(stripe_at_sandbox, "--verify-report", run.public_id)
    assert done.returncode == 0, done.stderr
    assert (
        f"Report of {run.public_id} verifies: SHA-256 {run.report_sha256}, signed by "
        f"{run.report_key_id}." in done.stdout
    )
    assert run.report["compared_total"] == 1
    assert run.report["open_discrepancies"] == []


def test_verify_report_fails_when_the_stored_report_was_altered(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    run = completed_run(alice, stripe_at_sandbox)
    altered = {**run.report, "compared_total": 1_000}
    Run.objects.filter(pk=run.pk).update(report=altered)
    done = reconcile_command(stripe_at_sandbox, "--verify-report", run.public_id)
    assert done.returncode == 1, done.stdout
    assert (
        f"Report of {run.public_id} does NOT verify: the report does not hash to its stored "
        "SHA-256." in done.stderr
    )


def test_verify_report_fails_when_the_signature_was_changed(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    run = completed_run(alice, stripe_at_sandbox)
    # A genuine signature by the same key, of other bytes.
    Run.objects.filter(pk=run.pk).update(
        report_signature=keys.signing_key().sign(b"another report")
    )
    done = reconcile_command(stripe_at_sandbox, "--verify-report", run.public_id)
    assert done.returncode == 1, done.stdout
    assert "does NOT verify: the signature does not verify: bad_signature." in done.stderr

    Run.objects.filter(pk=run.pk).update(
        report_signature=run.report_signature, report_key_id="someone-elses-key"
    )
    done = reconcile_command(stripe_at_sandbox, "--verify-report", run.public_id)
    assert done.returncode == 1, done.stdout
    assert "the signature does not verify: unknown_key." in done.stderr


def test_verify_report_of_a_run_that_did_not_complete(
    alice: Api, stripe_at_sandbox: SandboxControl
) -> None:
    funded(alice)
    stripe_at_sandbox.add_fault("/v1/charges", "server_error", method="GET")
    assert reconcile_command(stripe_at_sandbox).returncode == 2
    run = Run.objects.get()
    done = reconcile_command(stripe_at_sandbox, "--verify-report", run.public_id)
    assert done.returncode == 1, done.stdout
    assert "does NOT verify: the run has no report (it did not complete)." in done.stderr
