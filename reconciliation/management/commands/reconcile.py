"""`manage.py reconcile`: one reconciliation run by hand (SPEC §15.3), or the check of a stored
run's signed report. Parsing and rendering only: the run is reconciliation.engine's."""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from reconciliation.engine import ReconciliationIncomplete, reconcile
from reconciliation.models import Run, RunKind
from reconciliation.runs import RunInProgress, report_verify
from verification import clock

_RELATIVE = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# Exit status 1 says "a discrepancy is open" (SPEC §15.3); a dry run opens none, so what it would
# open is said in its last line, not in its status (issue 41: it exited 1 with nothing open).
# a window the command cannot read is a run that was not done, 2, like one that could not complete.
NOT_RUN = 2
DISCREPANCIES_PAGE = "/admin/reconciliation/discrepancy/"


def parse_moment(text: str, *, now: datetime) -> datetime:
    """`7d`, `12h`, `30m` (that long before now) or an ISO-8601 date or time (UTC if no zone)."""
    relative = _RELATIVE.match(text.strip())
    if relative:
        return now - timedelta(**{_UNITS[relative.group(2)]: int(relative.group(1))})
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"{text!r} is neither a duration (7d, 12h, 30m) nor an ISO-8601 time "
            "(2026-11-01 or 2026-11-01T12:00:00Z).",
            returncode=NOT_RUN,
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _exact(moment: datetime) -> str:
    """A moment as ISO-8601 to the microsecond (UTC, `Z`): what --since and --until read back
    exactly."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _discrepancies(n: int) -> str:
    return f"{n} discrepanc{'y' if n == 1 else 'ies'}"


def exit_status(run: Run) -> tuple[int, str]:
    """A completed run's exit status and why: 1 when a discrepancy is open at its end (SPEC §15.3),
    else 0; a dry run's last line also says what a real run would open."""
    still_open = sum(run.still_open.values())
    found = sum(run.opened.values()) if run.dry_run else 0
    if still_open:
        why = f"{_discrepancies(still_open)} open, for a person ({DISCREPANCIES_PAGE})."
        if run.dry_run:
            why += (
                f" This dry run found {_discrepancies(found)} a real run would open or see "
                "again, and changed nothing."
                if found
                else " This dry run found nothing more and changed nothing."
            )
        return 1, why
    if found:
        return 0, (
            f"nothing is open, but a real run would open {_discrepancies(found)} for a person "
            "(this dry run changed nothing)."
        )
    if run.dry_run:
        return 0, "nothing needs a person. This dry run found nothing and changed nothing."
    return 0, "nothing needs a person."


@dataclass
class _Progress:
    compared: int = 0
    phase: str = ""
    line: float = 0.0


class Command(BaseCommand):
    help = (
        "Compare the ledger with the provider over a window of provider `created` times (the "
        "last 7 days by default): refunds, charges, disputes, stuck legs and the ledger itself. "
        "Exit status 0 when no discrepancy is open at the end of the run; 1 when one is (a dry "
        "run opens none: its last line says what a real run would open); "
        "2 when the run could not complete or was not started (another run holds the lane, or a "
        "window it cannot read). With --verify-report RUN, check that run's signed report "
        "instead (1: it does not verify)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since",
            default=None,
            help="7d, 12h, … or ISO-8601 (default 7d). Without --since and --until, a run of the "
            "same mode that could not complete is taken up with its own window.",
        )
        parser.add_argument("--until", default=None, help="ISO-8601 or 1h, … (default: now)")
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Compare and say what a real run would do, changing nothing: it opens, updates "
            "or clears no discrepancy and releases no refund leg (the table's 'would open'). It "
            "records the run (marked dry), the provider's answers it read and its signed report, "
            "so that it can resume and its report can be checked with --verify-report.",
        )
        parser.add_argument("--verify-report", metavar="RUN", help="A run's public id (rec_…).")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verify_report"]:
            self._verify(options["verify_report"])
            return
        now = clock.now()
        since = parse_moment(options["since"], now=now) if options["since"] else None
        until = parse_moment(options["until"], now=now) if options["until"] else None
        if since is not None or until is not None:  # a window asked for: fixed now
            until = until or now
            since = since or until - timedelta(days=7)
            if since >= until:
                raise CommandError(
                    f"--since ({since:%Y-%m-%dT%H:%M:%SZ}) must be before --until.",
                    returncode=NOT_RUN,
                )
        interactive = self.stdout.isatty()
        bar = tqdm(
            total=None,
            unit=" objects",
            disable=not interactive,
            file=cast(TextIO, self.stdout._out),
            dynamic_ncols=True,
        )
        started = time.monotonic()
        last = _Progress()

        def progress(run: Run) -> None:
            compared = sum(run.compared.values())
            phase = str((run.checkpoint or {}).get("phase", ""))
            bar.update(compared - last.compared)
            bar.set_postfix_str(f"{phase}, {run.provider_calls} provider calls")
            last.compared = compared
            if not interactive and (phase != last.phase or time.monotonic() - last.line >= 10):
                self.stdout.write(
                    f"{time.monotonic() - started:7.1f}s {phase:<10} {compared} compared, "
                    f"{run.provider_calls} provider calls, {run.pages} pages"
                )
                last.line = time.monotonic()
            last.phase = phase

        def announce(run: Run) -> None:
            # The window the run uses: its own, fixed when it was created (a resumed run's).
            self.stdout.write(
                f"Reconciling {run.window_start:%Y-%m-%dT%H:%M:%SZ} .. "
                f"{run.window_end:%Y-%m-%dT%H:%M:%SZ}" + (" (dry run)" if run.dry_run else "")
            )
            if run.resumed:
                self.stdout.write(
                    f"Resuming run {run.public_id} from its checkpoint, with the window and mode "
                    "it was started with."
                )

        try:
            run = reconcile(
                kind=RunKind.MANUAL,
                since=since,
                until=until,
                dry_run=options["dry_run"],
                progress=progress,
                started=announce,
            )
        except RunInProgress as exc:
            bar.close()
            self.stderr.write(
                f"Not started: {exc}. Wait for it to finish (or, if its process died, for its "
                "heartbeat to expire: the next run resumes it)."
            )
            sys.exit(2)
        except ReconciliationIncomplete as exc:
            bar.close()
            failed = exc.run
            flags = f"--since {_exact(failed.window_start)} --until {_exact(failed.window_end)}" + (
                " --dry-run" if failed.dry_run else ""
            )
            self.stderr.write(
                f"{exc}. It resumes from the run's checkpoint, with its own window and mode, "
                f"when asked for with the same flags: `manage.py reconcile {flags}` (or, if this "
                "command was given no --since or --until, the same command again)."
            )
            sys.exit(2)
        bar.close()
        self._summary(run, time.monotonic() - started)
        status, why = exit_status(run)
        self.stdout.write(f"Exit status {status}: {why}")
        sys.exit(status)

    def _summary(self, run: Run, elapsed: float) -> None:
        compared = sum(run.compared.values())
        self.stdout.write(
            f"Run {run.public_id}: {compared} objects compared "
            f"({', '.join(f'{n} {k}s' for k, n in sorted(run.compared.items())) or 'none'}), "
            f"{run.provider_calls} provider calls, {run.pages} pages, {run.expected} in flight "
            f"(expected), {run.corrected} corrected, in {elapsed:.1f}s."
        )
        classes = sorted(set(run.opened) | set(run.seen) | set(run.cleared) | set(run.still_open))
        if not classes:
            self.stdout.write(
                self.style.SUCCESS("No discrepancy: the ledger and the provider agree.")
            )
        else:
            opened = "would open" if run.dry_run else "opened"
            header = f"{'class':<26} {opened:>10} {'seen again':>10} {'cleared':>8} {'open':>6}"
            self.stdout.write(header)
            self.stdout.write("-" * len(header))
            for code in classes:
                self.stdout.write(
                    f"{code:<26} {run.opened.get(code, 0):>10} {run.seen.get(code, 0):>10} "
                    f"{run.cleared.get(code, 0):>8} {run.still_open.get(code, 0):>6}"
                )
        self.stdout.write(f"Report SHA-256 {run.report_sha256}")

    def _verify(self, public_id: str) -> None:
        run = Run.objects.filter(public_id=public_id).first()
        if run is None:
            raise CommandError(f"No reconciliation run {public_id}.")
        check = report_verify(run)
        if check.ok:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Report of {run.public_id} verifies: SHA-256 {run.report_sha256}, signed by "
                    f"{run.report_key_id}."
                )
            )
            return
        self.stderr.write(f"Report of {run.public_id} does NOT verify: {check.problem}.")
        sys.exit(1)
