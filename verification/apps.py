from django.apps import AppConfig


class VerificationConfig(AppConfig):
    name = "verification"
    verbose_name = "Verification"

    def ready(self) -> None:
        # Load every contract now: an invalid one (its shape, or what it asks the verifiers to
        # read: provider, verifier, resource) stops startup, naming the file and the field.
        from verification.contracts import registry

        registry()
