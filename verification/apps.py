from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class VerificationConfig(AppConfig):
    name = "verification"
    verbose_name = "Verification"

    def ready(self) -> None:
        # Load every contract now: an invalid one stops startup, naming the file and the field.
        from verification.contracts import registry
        from verification.verifiers import REGISTRY

        for contract in registry().values():
            for index, channel in enumerate(contract.channels):
                if channel.verifier not in REGISTRY:
                    raise ImproperlyConfigured(
                        f"contract {contract.id}.yaml: channels.{index}.verifier: no verifier "
                        f"{channel.verifier!r} (known: {', '.join(sorted(REGISTRY))})"
                    )
