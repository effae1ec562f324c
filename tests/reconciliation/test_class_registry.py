"""The discrepancy classes' registry (reconciliation/classes.py): one entry per class, checked at
import, and the tables built from it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from reconciliation import classes
from reconciliation.classes import (
    CLASSES,
    REFUND_MONEY,
    SEVERITY,
    SPECS,
    WHOLE_LEDGER,
    ClassSpec,
    DiscrepancyClass,
    LookAgain,
    Severity,
    registry_check,
)
from reconciliation.engine.clearing import LOOK_AGAIN
from reconciliation.models import TARGET


def test_every_class_has_exactly_one_entry() -> None:
    codes = [str(spec.code) for spec in SPECS]
    assert sorted(codes) == sorted(DiscrepancyClass.values)
    assert len(set(codes)) == len(codes)
    assert set(CLASSES) == set(DiscrepancyClass.values)


def test_the_check_refuses_a_class_without_an_entry() -> None:
    without = tuple(spec for spec in SPECS if spec.code != DiscrepancyClass.LEDGER_BREACH)
    with pytest.raises(ImproperlyConfigured, match="no entry for ledger_breach"):
        registry_check(without)


def test_the_check_refuses_a_class_added_to_the_enum_and_forgotten_in_the_registry() -> None:
    # every class of today, and one more
    members = [(c.name, c.value) for c in DiscrepancyClass] + [("PAYOUT_MISSING", "payout_missing")]
    Extended: Any = models.TextChoices("Extended", members)

    assert set(Extended.values) - set(DiscrepancyClass.values) == {"payout_missing"}
    with pytest.raises(ImproperlyConfigured, match="no entry for payout_missing"):
        registry_check(SPECS, Extended)


def test_the_check_refuses_a_class_entered_twice() -> None:
    twice = (*SPECS, dataclasses.replace(SPECS[0], severity=Severity.HYGIENE))
    with pytest.raises(ImproperlyConfigured, match=f"more than one entry for {SPECS[0].code}"):
        registry_check(twice)


def test_the_check_refuses_an_entry_for_a_class_the_enum_does_not_have() -> None:
    class Fewer(models.TextChoices):
        LEDGER_BREACH = "ledger_breach"

    only = tuple(spec for spec in SPECS if spec.code == DiscrepancyClass.LEDGER_BREACH)
    assert registry_check(only, Fewer) == {"ledger_breach": only[0]}
    with pytest.raises(ImproperlyConfigured, match="charge_missing"):
        registry_check(SPECS, Fewer)


def test_the_tables_are_built_from_the_registry() -> None:
    assert {str(spec.code): spec.severity for spec in SPECS} == SEVERITY
    assert all(severity in TARGET for severity in SEVERITY.values())
    assert {
        DiscrepancyClass.LEG_STUCK,
        DiscrepancyClass.FUNDING_STUCK,
        DiscrepancyClass.RUN_OVERDUE,
        DiscrepancyClass.LEDGER_BREACH,
    } == WHOLE_LEDGER
    assert {
        DiscrepancyClass.REFUND_MISSING,
        DiscrepancyClass.REFUND_MISMATCH,
        DiscrepancyClass.REFUND_STATUS_DRIFT,
        DiscrepancyClass.REFUND_FOREIGN,
        DiscrepancyClass.REFUND_DUPLICATE,
    } == REFUND_MONEY
    money = {code for code, spec in CLASSES.items() if spec.money}
    assert money == {code for code, severity in SEVERITY.items() if severity == Severity.MONEY}


def test_every_way_of_looking_again_has_its_function() -> None:
    assert set(LOOK_AGAIN) == set(LookAgain)
    assert {spec.look_again for spec in SPECS} <= set(LOOK_AGAIN)


def test_an_entry_is_frozen() -> None:
    spec: ClassSpec = classes.CLASSES["refund_missing"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.severity = Severity.HYGIENE  # type: ignore[misc]


def test_the_check_names_every_problem_at_once_in_one_message() -> None:
    """Missing, doubled and unknown entries, two of each, in one sentence a person can act on."""
    codes = sorted(str(c) for c in DiscrepancyClass)
    missing, doubled, unknown = codes[:2], codes[2:4], codes[4:6]
    Fewer: Any = models.TextChoices("Fewer", [(c.upper(), c) for c in codes if c not in unknown])
    specs = [spec for spec in SPECS if str(spec.code) not in missing]
    specs += [spec for spec in SPECS if str(spec.code) in doubled]

    with pytest.raises(ImproperlyConfigured) as refused:
        registry_check(specs, Fewer)

    assert str(refused.value) == (
        f"reconciliation.classes: no entry for {missing[0]}, {missing[1]}; "
        f"more than one entry for {doubled[0]}, {doubled[1]}; "
        f"entries for classes Fewer does not have: {unknown[0]}, {unknown[1]}"
    )
