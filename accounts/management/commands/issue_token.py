from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accounts.models import User
from accounts.services import api_token_issue


class Command(BaseCommand):
    help = (
        "Issue a personal API token for a user and print it. Only the token is printed, so "
        "scripts can capture it; it is stored hashed and cannot be shown again."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the token is for.")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}. Create one first (createsuperuser).")
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive; activate them first.")
        _, raw = api_token_issue(user=user, name=name)
        self.stdout.write(raw)
