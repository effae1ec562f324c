"""The staff who propose and approve corrections (SPEC §15.4), and the day after: shared by the
adjustment tests and the corrections state machine."""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import time_machine
from django.contrib.auth.models import Group, Permission
from django.utils import timezone

from accounts.models import User

LATER = timedelta(hours=25)  # past the provider's 24 h key life


def person(username: str, *perms: str) -> User:
    """A staff member of the ops group holding `perms` ("app.codename"), read fresh."""
    user = User.objects.create_user(
        username, f"{username}@example.com", "pw-123-abc", is_staff=True
    )
    user.groups.add(Group.objects.get_or_create(name="ops")[0])
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return User.objects.get(pk=user.pk)  # a fresh permission cache


@contextmanager
def later() -> Iterator[None]:
    """A day and an hour on, for Vouch and the in-process sandbox alike."""
    with time_machine.travel(timezone.now() + LATER, tick=True):
        yield
