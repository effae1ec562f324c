"""The schedules Vouch's beat runs. Each app declares its own in `<app>/schedules.py` as a list
`SCHEDULES`; `manage.py setup_periodic_tasks` installs them all in django-celery-beat."""

from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec

from django.apps import apps


@dataclass(frozen=True)
class Schedule:
    name: str
    task: str
    every_seconds: int
    description: str


def all_schedules() -> list[Schedule]:
    found: list[Schedule] = []
    for app_config in apps.get_app_configs():
        module_name = f"{app_config.name}.schedules"
        if find_spec(module_name) is None:
            continue
        found.extend(import_module(module_name).SCHEDULES)
    names = [schedule.name for schedule in found]
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise ValueError(f"Two schedules share a name: {sorted(duplicates)}")
    return found
