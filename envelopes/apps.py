from django.apps import AppConfig


class EnvelopesConfig(AppConfig):
    name = "envelopes"
    verbose_name = "Escrow envelopes"
