"""A receipt is written once (SPEC §8): the model refuses an update and a delete, and so does the
database itself, whatever path a change takes."""

import pytest
from django.db import DatabaseError, connection, transaction

from receipts.exceptions import ReceiptImmutable
from receipts.models import Receipt

from .conftest import Shop, charge_receipt

pytestmark = pytest.mark.django_db


def test_the_model_refuses_to_change_or_delete_a_receipt(shop: Shop) -> None:
    receipt = charge_receipt(shop.fund())
    original = (receipt.amount_micro, receipt.canonical)
    receipt.amount_micro = 1
    with pytest.raises(ReceiptImmutable, match="immutable"):
        receipt.save()
    with pytest.raises(ReceiptImmutable):
        receipt.save(update_fields=["amount_micro"])
    with pytest.raises(ReceiptImmutable):
        receipt.delete()
    with pytest.raises(ReceiptImmutable):
        Receipt.objects.filter(pk=receipt.pk).update(amount_micro=1)
    with pytest.raises(ReceiptImmutable):
        Receipt.objects.filter(pk=receipt.pk).delete()
    fresh = Receipt.objects.get(pk=receipt.pk)
    assert (fresh.amount_micro, fresh.canonical) == original


def test_the_database_refuses_update_and_delete(shop: Shop) -> None:
    receipt = charge_receipt(shop.fund())
    statements = [
        ("UPDATE receipts_receipt SET amount_micro = 1 WHERE id = %s", [receipt.pk]),
        ("DELETE FROM receipts_receipt WHERE id = %s", [receipt.pk]),
    ]
    for sql, params in statements:
        # Each in its own savepoint: the refusal rolls it back and the test database lives on.
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql, params)
    fresh = Receipt.objects.get(pk=receipt.pk)
    assert fresh.amount_micro == receipt.amount_micro
    assert Receipt.objects.count() == 1
