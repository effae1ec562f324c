from io import StringIO

import pytest
from django.core.management import call_command
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from config.celery_app import app
from core.periodic import all_schedules

pytestmark = pytest.mark.django_db


def _snapshot() -> list[tuple]:
    return list(
        PeriodicTask.objects.order_by("name").values_list(
            "name", "task", "interval__every", "interval__period", "enabled", "date_changed"
        )
    )


def _run(*args: str) -> str:
    out = StringIO()
    call_command("setup_periodic_tasks", *args, stdout=out)
    return out.getvalue()


def test_installs_every_declared_schedule() -> None:
    output = _run()
    declared = all_schedules()
    app.loader.import_default_modules()  # what a worker does at start: autodiscover the tasks
    assert declared, "at least one schedule is declared"
    installed = {task.name: task for task in PeriodicTask.objects.all()}
    for schedule in declared:
        task = installed[schedule.name]
        assert task.task == schedule.task
        assert task.task in app.tasks, f"{task.task} is not a registered Celery task"
        assert (task.interval.every, task.interval.period) == (
            schedule.every_seconds,
            IntervalSchedule.SECONDS,
        )
        assert task.enabled
    assert f"{len(declared)} installed" in output


def test_running_twice_changes_nothing() -> None:
    _run()
    first, first_update = _snapshot(), PeriodicTasks.last_change()
    output = _run()
    assert _snapshot() == first
    assert PeriodicTasks.last_change() == first_update
    assert IntervalSchedule.objects.count() == len({s.every_seconds for s in all_schedules()})
    assert "0 installed, 0 reset" in output


def test_keeps_an_edit_made_in_the_admin_until_reset() -> None:
    _run()
    name = all_schedules()[0].name
    PeriodicTask.objects.filter(name=name).update(enabled=False)
    _run()
    assert PeriodicTask.objects.get(name=name).enabled is False
    assert "1 reset" in _run("--reset")
    assert PeriodicTask.objects.get(name=name).enabled is True
