"""What other apps can listen to. `run_decided` is sent inside the transaction that records the
verdict, so a listener's writes (a release of money) commit or roll back with it."""

from django.dispatch import Signal

run_decided = Signal()  # sender=VerificationRun, run=<the decided run>
