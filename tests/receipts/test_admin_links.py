"""A receipt's admin link names the receipt it was made for, whatever its hash: the admin reads
`_22`…`_26` and `_40` in a key as quoted characters, so an unquoted `rcpt_22…` (about one receipt
in 40) opened no page (found in CI: 302 to the admin's home)."""

import pytest
from django.contrib.admin.utils import unquote
from django.urls import resolve

from disputes.admin.common import receipt_url


@pytest.mark.parametrize("receipt_id", ["rcpt_22ab", "rcpt_40ff", "rcpt_5fab", "rcpt_d7"])
def test_a_receipt_link_resolves_to_that_receipt(receipt_id: str) -> None:
    match = resolve(receipt_url(receipt_id))
    assert match.url_name == "receipts_receipt_change"
    assert unquote(match.kwargs["object_id"]) == receipt_id
