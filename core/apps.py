from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Vouch core"

    def ready(self) -> None:
        # Registers the OpenAPI extensions (authentication schemes) with drf-spectacular.
        from core.api import schema  # noqa: F401
