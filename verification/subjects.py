"""What a verification run is about, told by the apps that start runs (the engine stays generic):
an escalation on a run names its subject — e.g. the refund leg a `stripe.refund.created` run
verifies — and whether that subject is money (SPEC §15.4: money escalations are resolved only by an
adjustment under four eyes)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verification.models import VerificationRun


@dataclass(frozen=True)
class Subject:
    type: str
    id: str
    money: bool


Resolver = Callable[["VerificationRun"], "Subject | None"]
_RESOLVERS: list[Resolver] = []


def register(resolver: Resolver) -> None:
    if resolver not in _RESOLVERS:
        _RESOLVERS.append(resolver)


def subject_of(run: VerificationRun) -> Subject | None:
    """The first registered resolver's answer, or None (a run about nothing money-like)."""
    for resolver in _RESOLVERS:
        subject = resolver(run)
        if subject is not None:
            return subject
    return None
