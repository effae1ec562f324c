"""`core.links`: an id in text links to its object, whatever app registered its prefix; text
around it stays text, escaped; an id of nothing is not a dead link (issue 27, item 4)."""

import pytest
from django.apps import apps
from django.urls import reverse

from core.links import id_link, link_ids, object_url, registered
from tests.drivers.reconciliation import a_run

pytestmark = pytest.mark.django_db


def test_an_id_in_text_links_to_its_object_and_the_rest_is_escaped() -> None:
    run = a_run()
    html = link_ids(f"<b>Run</b> {run.public_id}: charge ch_3Abc, vouch_leg rfl_nothing000.")

    run_page = reverse("admin:reconciliation_run_change", args=[run.pk])
    assert f'<a class="vouch-mono vouch-id" href="{run_page}">{run.public_id}</a>' in html
    assert "https://dashboard.stripe.com/test/payments/ch_3Abc" in html
    assert "&lt;b&gt;Run&lt;/b&gt;" in html  # never markup from the text
    assert "<b>" not in html
    assert "vouch_leg rfl_nothing000" in html.replace('<span class="vouch-mono">', "").replace(
        "</span>", ""
    )
    assert "href" not in str(id_link("rfl_nothing000"))


def test_an_unknown_prefix_or_a_plain_word_is_left_alone() -> None:
    assert object_url("zzz_123456") == ""
    assert str(link_ids("idempotency_key and snake_case_words")) == (
        "idempotency_key and snake_case_words"
    )
    assert str(link_ids("")) == ""


def test_every_registered_prefix_names_a_model_with_a_page() -> None:
    """Each app's registration names a real model, and one with an admin page (or a page of its
    own): an id never links to a page that does not exist."""
    expected = {"env_", "fnd_", "erf_", "rfl_", "dbt_", "rcpt_", "vrun_", "rec_", "dsc_", "adj_"}
    assert expected | {"dsp_", "pkt_", "evd_", "rrq_"} <= set(registered())
    for prefix, kind in registered().items():
        model = apps.get_model(kind.model)
        assert any(f.name == kind.field for f in model._meta.fields), prefix
        if kind.page is None:
            opts = model._meta
            assert reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=["1"]), prefix
