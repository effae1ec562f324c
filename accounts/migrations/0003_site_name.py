"""Issue 41: the sign-up e-mail said "Hello from example.com", the Site django.contrib.sites makes
when there is none. The Site is named Vouch (SITE_NAME) at SITE_DOMAIN, or the first host of
ALLOWED_HOSTS. It runs before the sites app's post_migrate handler, which then finds a Site and
adds none. A Site someone already named (not Django's placeholder) is kept."""

from typing import Any

from django.conf import settings
from django.db import migrations

DJANGO_PLACEHOLDER = "example.com"


def site_domain() -> str:
    """SITE_DOMAIN, or the first of ALLOWED_HOSTS that names one host (not `*`; `.vouch.io`
    read as `vouch.io`), or `localhost`."""
    if settings.SITE_DOMAIN:
        return str(settings.SITE_DOMAIN)
    for host in settings.ALLOWED_HOSTS:
        if host and host != "*":
            return str(host).lstrip(".")
    return "localhost"


def site_name(apps: Any, schema_editor: Any) -> None:
    site_model = apps.get_model("sites", "Site")
    site = site_model.objects.filter(pk=settings.SITE_ID).first()
    if site is not None and DJANGO_PLACEHOLDER not in (site.name, site.domain):
        return
    site_model.objects.update_or_create(
        pk=settings.SITE_ID, defaults={"name": settings.SITE_NAME, "domain": site_domain()}
    )


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_search_indexes"),
        ("sites", "0002_alter_domain_unique"),
    ]

    operations = [migrations.RunPython(site_name, migrations.RunPython.noop)]
