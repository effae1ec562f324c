from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.services import OPS_GROUP, demo_users_ensure, local_site_set


class Command(BaseCommand):
    help = (
        "Create the demo users of a local run (ops staff and a buyer, e-mail addresses verified) "
        "and print their credentials; with --domain, give the Site that address."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--domain",
            help="The address this local run serves at (`127.0.0.1:8000`), given to the Site "
            "that sign-up and password e-mails speak for.",
        )

    def handle(self, *args: Any, domain: str | None = None, **options: Any) -> None:
        demo_users = getattr(settings, "VOUCH_DEMO_USERS", None)
        if not settings.DEBUG or not demo_users:
            raise CommandError("Demo users exist only in local runs (config.settings.local).")
        demo_users_ensure(users=demo_users)
        if domain:
            local_site_set(domain=domain)
        for username, spec in demo_users.items():
            role = f"ops staff (group {OPS_GROUP})" if spec["staff"] else "buyer"
            self.stdout.write(f"  {role:<22} username {username:<8} password {spec['password']}")
