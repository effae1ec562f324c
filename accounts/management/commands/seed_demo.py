from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.services import OPS_GROUP, demo_users_ensure


class Command(BaseCommand):
    help = (
        "Create the demo users of a local run (ops staff and a buyer, e-mail addresses verified) "
        "and print their credentials."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        demo_users = getattr(settings, "VOUCH_DEMO_USERS", None)
        if not settings.DEBUG or not demo_users:
            raise CommandError("Demo users exist only in local runs (config.settings.local).")
        demo_users_ensure(users=demo_users)
        for username, spec in demo_users.items():
            role = f"ops staff (group {OPS_GROUP})" if spec["staff"] else "buyer"
            self.stdout.write(f"  {role:<22} username {username:<8} password {spec['password']}")
