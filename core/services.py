from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from core.models import AuditEvent
from core.periodic import Schedule, all_schedules


def audit_record(
    *,
    actor: AbstractBaseUser | None,
    action: str,
    target_type: str,
    target_id: str,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one audit event. Call it inside the transaction of the change it records, so the
    event exists exactly when the change does. `actor` None means the system itself."""
    return AuditEvent.objects.create(
        actor=actor,  # type: ignore[misc]  # any user model: core knows no app (decision 0008)
        actor_label=actor.get_username() if actor is not None else "system",
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        details=details or {},
    )


@dataclass
class ScheduleInstallReport:
    created: list[str] = field(default_factory=list)
    reset: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def _interval(schedule: Schedule) -> IntervalSchedule:
    interval, _ = IntervalSchedule.objects.get_or_create(
        every=schedule.every_seconds, period=IntervalSchedule.SECONDS
    )
    return interval


def _differs(task: PeriodicTask, schedule: Schedule, interval: IntervalSchedule) -> bool:
    return (
        task.task != schedule.task
        or task.interval_id != interval.id
        or task.crontab_id is not None
        or not task.enabled
        or task.description != schedule.description
    )


@transaction.atomic
def periodic_tasks_install(*, reset: bool = False) -> ScheduleInstallReport:
    """Install every schedule the apps declare (core.periodic) as a django-celery-beat task.

    Idempotent: a schedule already installed is left exactly as it is (ops may have tuned it in
    the admin), so a second run changes nothing. With `reset`, installed schedules that differ
    from their declaration are put back to it."""
    report = ScheduleInstallReport()
    for schedule in all_schedules():
        existing = PeriodicTask.objects.filter(name=schedule.name).first()
        if existing is None:
            PeriodicTask.objects.create(
                name=schedule.name,
                task=schedule.task,
                interval=_interval(schedule),
                description=schedule.description,
            )
            report.created.append(schedule.name)
            continue
        if reset:
            interval = _interval(schedule)
            if _differs(existing, schedule, interval):
                existing.task = schedule.task
                existing.interval = interval
                existing.crontab = None
                existing.enabled = True
                existing.description = schedule.description
                existing.save()
                report.reset.append(schedule.name)
                continue
        report.unchanged.append(schedule.name)
    return report


def sessions_prune() -> None:
    """Delete expired login sessions (a no-op for engines that expire on their own)."""
    engine = import_module(settings.SESSION_ENGINE)
    engine.SessionStore.clear_expired()
