from django.apps import AppConfig


class RefundsConfig(AppConfig):
    name = "naive.refunds"
