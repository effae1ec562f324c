"""The discrepancy classes (SPEC §15.2), one registry entry each: its severity (and so whether it
is about money, and the time to resolve it), the kind of object it compares, what its rows name
as their subject, and how a run looks at it again when it did not see it (`LookAgain`, a key the
engine's clearing phase maps to its function).

Everything that used to list classes by hand is built from `SPECS`: the severity table
(`SEVERITY`), the classes found over the whole ledger (`WHOLE_LEDGER`), the refund-level money
classes that explain a charge's totals (`REFUND_MONEY`) and the look-again dispatch
(`reconciliation.engine.clearing`). At import, `registry_check` makes sure every
`DiscrepancyClass` has exactly one entry: a class added to the enum and forgotten here fails
there, with its name.

Importable before the apps are ready (no model here): `reconciliation.models` takes
`DiscrepancyClass` and `Severity` from this module."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from django.core.exceptions import ImproperlyConfigured
from django.db import models


class Severity(models.TextChoices):
    MONEY = "money"
    EVIDENCE = "evidence"
    HYGIENE = "hygiene"


class DiscrepancyClass(models.TextChoices):
    CHARGE_MISSING = "charge_missing"
    CHARGE_MISMATCH = "charge_mismatch"
    CHARGE_REFUNDED_MISMATCH = "charge_refunded_mismatch"
    REFUND_MISSING = "refund_missing"
    REFUND_MISMATCH = "refund_mismatch"
    REFUND_STATUS_DRIFT = "refund_status_drift"
    REFUND_FOREIGN = "refund_foreign"
    REFUND_DUPLICATE = "refund_duplicate"
    DISPUTE_UNRECORDED = "dispute_unrecorded"
    DISPUTE_STATUS_DRIFT = "dispute_status_drift"
    FILING_UNCONFIRMED = "filing_unconfirmed"
    # What Stripe withdrew or reinstated for a dispute differs from what the ledger recorded
    # (SPEC §18).
    DISPUTE_FUNDS_MISMATCH = "dispute_funds_mismatch"
    LEG_STUCK = "leg_stuck"
    FUNDING_STUCK = "funding_stuck"
    # A charge carrying Vouch's funding metadata that no funding leg records.
    FUNDING_UNRECORDED = "funding_unrecorded"
    RUN_OVERDUE = "run_overdue"
    LEDGER_BREACH = "ledger_breach"


class Compared(StrEnum):
    """The kind of object a class compares."""

    REFUND = "refund"  # a provider refund against the leg (or adjustment) recording it
    CHARGE = "charge"  # a provider charge against the funding leg recording it
    DISPUTE = "dispute"  # a provider dispute against Vouch's dispute and its filed packet
    LEDGER = "ledger"  # Vouch's own records alone (stuck legs, overdue runs, balances)


class LookAgain(StrEnum):
    """How a run looks again at an unresolved discrepancy it did not see (the clearing phase)."""

    # Its subject's provider object read alone and compared as a listing would have: the
    # object itself, a refund leg's refund as the provider side names it, a funding leg's charge.
    COMPARE = "compare"
    # What a leg records and the provider did not have, read alone again: still missing, or back
    # (and compared); a refund leg released since needs no read.
    READ_AGAIN = "read_again"
    # Found by the phases that look at the whole ledger: not named again by this run means gone.
    LEDGER = "ledger"


@dataclass(frozen=True, kw_only=True)  # an entry names each of its properties
class ClassSpec:
    code: DiscrepancyClass
    severity: Severity
    compares: Compared
    subject_types: tuple[str, ...]  # what its rows name as their subject
    look_again: LookAgain

    @property
    def money(self) -> bool:
        """About money: a new one opens an escalation; a person may not accept it with a note
        (an adjustment a second person approves resolves it)."""
        return self.severity == Severity.MONEY


SPECS = (
    ClassSpec(
        code=DiscrepancyClass.CHARGE_MISSING,
        severity=Severity.MONEY,
        compares=Compared.CHARGE,
        subject_types=("funding_leg",),
        look_again=LookAgain.READ_AGAIN,
    ),
    ClassSpec(
        code=DiscrepancyClass.CHARGE_MISMATCH,
        severity=Severity.EVIDENCE,
        compares=Compared.CHARGE,
        subject_types=("funding_leg",),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.CHARGE_REFUNDED_MISMATCH,
        severity=Severity.MONEY,
        compares=Compared.CHARGE,
        subject_types=("funding_leg",),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.REFUND_MISSING,
        severity=Severity.MONEY,
        compares=Compared.REFUND,
        subject_types=("refund_leg",),
        look_again=LookAgain.READ_AGAIN,
    ),
    ClassSpec(
        code=DiscrepancyClass.REFUND_MISMATCH,
        severity=Severity.MONEY,
        compares=Compared.REFUND,
        subject_types=("refund_leg", "refund"),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.REFUND_STATUS_DRIFT,
        severity=Severity.MONEY,
        compares=Compared.REFUND,
        subject_types=("refund_leg",),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.REFUND_FOREIGN,
        severity=Severity.MONEY,
        compares=Compared.REFUND,
        subject_types=("refund",),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.REFUND_DUPLICATE,
        severity=Severity.MONEY,
        compares=Compared.REFUND,
        subject_types=("refund_leg",),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.DISPUTE_UNRECORDED,
        severity=Severity.EVIDENCE,
        compares=Compared.DISPUTE,
        subject_types=("dispute",),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.DISPUTE_STATUS_DRIFT,
        severity=Severity.EVIDENCE,
        compares=Compared.DISPUTE,
        subject_types=("dispute",),
        look_again=LookAgain.COMPARE,
    ),
    # Found by the listing (no submission shown) and by the stuck phase (a filing in flight).
    ClassSpec(
        code=DiscrepancyClass.FILING_UNCONFIRMED,
        severity=Severity.EVIDENCE,
        compares=Compared.DISPUTE,
        subject_types=("dispute",),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.DISPUTE_FUNDS_MISMATCH,
        severity=Severity.MONEY,
        compares=Compared.DISPUTE,
        subject_types=("dispute",),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.LEG_STUCK,
        severity=Severity.HYGIENE,
        compares=Compared.LEDGER,
        subject_types=("refund_leg",),
        look_again=LookAgain.LEDGER,
    ),
    ClassSpec(
        code=DiscrepancyClass.FUNDING_STUCK,
        severity=Severity.HYGIENE,
        compares=Compared.LEDGER,
        subject_types=("funding_leg",),
        look_again=LookAgain.LEDGER,
    ),
    ClassSpec(
        code=DiscrepancyClass.FUNDING_UNRECORDED,
        severity=Severity.MONEY,
        compares=Compared.CHARGE,
        subject_types=("charge",),
        look_again=LookAgain.COMPARE,
    ),
    ClassSpec(
        code=DiscrepancyClass.RUN_OVERDUE,
        severity=Severity.EVIDENCE,
        compares=Compared.LEDGER,
        subject_types=("verification_run",),
        look_again=LookAgain.LEDGER,
    ),
    ClassSpec(
        code=DiscrepancyClass.LEDGER_BREACH,
        severity=Severity.MONEY,
        compares=Compared.LEDGER,
        subject_types=("envelope",),
        look_again=LookAgain.LEDGER,
    ),
)


def registry_check(
    specs: Iterable[ClassSpec], classes: type[models.TextChoices] = DiscrepancyClass
) -> Mapping[str, ClassSpec]:
    """The registry by class code, once every member of `classes` has exactly one entry and
    every entry names a member. Raises ImproperlyConfigured naming what is missing, doubled or
    unknown."""
    specs = tuple(specs)
    counts = Counter(str(spec.code) for spec in specs)
    members = {str(value) for value in classes.values}
    problems = []
    if missing := sorted(members - set(counts)):
        problems.append(f"no entry for {', '.join(missing)}")
    if doubled := sorted(code for code, n in counts.items() if n > 1):
        problems.append(f"more than one entry for {', '.join(doubled)}")
    if unknown := sorted(set(counts) - members):
        problems.append(
            f"entries for classes {classes.__name__} does not have: {', '.join(unknown)}"
        )
    if problems:
        raise ImproperlyConfigured(f"reconciliation.classes: {'; '.join(problems)}")
    return {str(spec.code): spec for spec in specs}


CLASSES = registry_check(SPECS)
SEVERITY: dict[str, Severity] = {code: spec.severity for code, spec in CLASSES.items()}
# Found by the stuck and ledger phases, which look at everything (not only the window): not seen
# by a run means gone.
WHOLE_LEDGER = frozenset(
    code for code, spec in CLASSES.items() if spec.look_again == LookAgain.LEDGER
)
# Refund-level money findings: a charge with one in a run has its totals explained by it.
REFUND_MONEY = frozenset(
    code for code, spec in CLASSES.items() if spec.money and spec.compares == Compared.REFUND
)
