"""core.budget at its edges (issue 40's mutation run, bench/MUTATION.md): the names a budget
takes, which rates limit, what a penalty of nothing writes, and what a take answers."""

import time

import pytest

from core.budget import CallBudget, Priority, budget_from_settings, slots_penalize, slots_take
from core.models import ProviderCallBudget


def test_a_budgets_name_is_one_to_its_columns_length() -> None:
    limit = ProviderCallBudget._meta.get_field("name").max_length
    assert limit
    assert CallBudget("n" * limit, 1).name == "n" * limit  # the longest name fits
    for name in ("", "n" * (limit + 1)):
        with pytest.raises(ValueError, match=f"1 to {limit} characters"):
            CallBudget(name, 1)


def test_any_positive_rate_limits_and_none_else_does() -> None:
    assert CallBudget("test-half", 0.5).limited  # one call every two seconds is a limit
    assert not CallBudget("test-none", 0).limited
    assert not CallBudget("test-negative", -1).limited


def test_an_unknown_lane_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"\(known: reconciliation, verification\)"):
        budget_from_settings("payments")


@pytest.mark.django_db(transaction=True)
def test_a_penalty_of_no_time_writes_nothing() -> None:
    slots_penalize([CallBudget("test-no-penalty", 10)], 0)
    assert not ProviderCallBudget.objects.filter(name="test-no-penalty").exists()


@pytest.mark.django_db(transaction=True)
def test_a_take_answers_the_seconds_it_waited() -> None:
    budget = CallBudget("test-answers", 2)  # a slot every half second
    first = budget.take(wait_s=5)
    second = budget.take(wait_s=5)
    assert first is not None
    assert 0 <= first < 0.25  # the budget was free
    assert second is not None
    assert 0.3 < second < 1.5  # the next slot was half a second after the first


@pytest.mark.django_db(transaction=True)
def test_one_penalty_holds_every_budget_it_names() -> None:
    budgets = [CallBudget("test-held-a", 10), CallBudget("test-held-b", 10)]
    slots_penalize(budgets, 3)
    held = dict(ProviderCallBudget.objects.values_list("name", "next_slot_at"))
    now = time.time()
    assert held["test-held-a"] > now + 2
    assert held["test-held-b"] > now + 2


@pytest.mark.django_db(transaction=True)
def test_a_slot_just_past_the_wait_is_not_taken() -> None:
    budget = CallBudget("test-just-past", 10)
    slots_penalize([budget], 0.6)  # the next slot is 0.6 s away
    asked = time.monotonic()
    assert slots_take([budget], priority=Priority.MONEY, wait_s=0.3) is None
    assert time.monotonic() - asked < 0.5  # answered at once, not after waiting for the slot
