"""Issue 41 item 5, the reconciliation pages: the discrepancy queue and page, a run's page and
the refusals of their actions say classes, severities, statuses, subjects and run kinds in a
person's words. The codes (`charge_mismatch`, `refund_leg`, `acknowledged`, `sweep`) stay only
in a quiet "details" line, in the CSV and in the filters' query strings."""

from __future__ import annotations

import pytest
from django.urls import reverse

from reconciliation.models import Discrepancy
from tests.drivers.reconciliation import a_run
from tests.reconciliation.test_admin_discrepancy import (
    VIEW,
    WORK,
    action,
    as_,
    messages_of,
    page_of,
    record,
    staff,
)
from tests.verification.test_admin_words_pages import assert_no_codes, prose

pytestmark = pytest.mark.django_db


def a_discrepancy() -> Discrepancy:
    return record(
        a_run(),
        code="charge_mismatch",
        subject_type="funding_leg",
        subject_id="fnd_words",
        summary="Stripe's charge is $5.00; the funding leg records $6.00.",
    )


def test_the_queue_and_a_discrepancy_in_words() -> None:
    discrepancy = a_discrepancy()
    worker = as_(staff("wanda", VIEW, WORK))
    worker.post(action("acknowledge", discrepancy))

    queue = worker.get(reverse("admin:reconciliation_discrepancy_changelist")).content.decode()
    page = worker.get(page_of(discrepancy)).content.decode()

    for html in (queue, page):
        words = prose(html)
        assert "Charge and funding leg differ" in words
        assert "Evidence" in words  # its severity
        assert "Taken by a person" in words
        assert "funding leg" in words
        assert_no_codes(words, "charge_mismatch", "funding_leg", ">acknowledged<")
        assert "charge_mismatch" in html  # as details
    # The filter by class offers the words; its query string keeps the code.
    assert "?class=charge_mismatch" in queue


def test_a_run_page_in_words() -> None:
    discrepancy = a_discrepancy()
    viewer = as_(staff("vic", VIEW, ("reconciliation", "view_run")))

    page = viewer.get(
        reverse("admin:reconciliation_run_change", args=[discrepancy.first_run_id])
    ).content.decode()

    words = prose(page)
    assert "Charge and funding leg differ" in words
    assert "By hand" in words  # a manual run
    assert_no_codes(words, "charge_mismatch", "funding_leg")


def test_a_refusal_is_a_sentence_with_its_code_as_details() -> None:
    discrepancy = record(
        a_run(), code="refund_missing", subject_type="refund_leg", subject_id="rfl_money"
    )
    worker = as_(staff("wanda", VIEW, WORK))

    refused = worker.post(action("accept", discrepancy), {"note": "looks fine"}, follow=True)

    [said] = messages_of(refused)
    assert said.startswith("Not done: ")
    assert "concerns money" in said
    assert said.endswith("(details: validation_error)")
