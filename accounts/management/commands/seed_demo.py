from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.services import demo_users_ensure


class Command(BaseCommand):
    help = "Create the demo ops user and demo buyer of a local run, and print their credentials."

    def handle(self, *args: Any, **options: Any) -> None:
        demo_users = getattr(settings, "VOUCH_DEMO_USERS", None)
        if not settings.DEBUG or not demo_users:
            raise CommandError("Demo users exist only in local runs (config.settings.local).")
        demo_users_ensure(users=demo_users)
        for username, spec in demo_users.items():
            role = "ops staff" if spec["staff"] else "buyer"
            self.stdout.write(f"  {role:<10} username {username:<8} password {spec['password']}")
