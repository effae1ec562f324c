from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from core.services import periodic_tasks_install


class Command(BaseCommand):
    help = (
        "Install every schedule the apps declare as a django-celery-beat periodic task. "
        "Idempotent: schedules already installed are left as they are (use --reset to restore "
        "their declared defaults)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--reset", action="store_true", help="Restore installed schedules to their defaults."
        )

    def handle(self, *args: Any, reset: bool, **options: Any) -> None:
        report = periodic_tasks_install(reset=reset)
        for name in report.created:
            self.stdout.write(f"installed  {name}")
        for name in report.reset:
            self.stdout.write(f"reset      {name}")
        for name in report.unchanged:
            self.stdout.write(f"unchanged  {name}")
        self.stdout.write(
            self.style.SUCCESS(
                f"{len(report.created)} installed, {len(report.reset)} reset, "
                f"{len(report.unchanged)} unchanged."
            )
        )
