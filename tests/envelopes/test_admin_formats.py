"""The envelope's pages read money as dollars, the micro-dollars one hover away and beside, and
link every id they show to its object (issue 27, item 4)."""

import pytest
from django.test import Client
from django.urls import reverse

from envelopes.models import Envelope, RefundLeg
from tests.envelopes.test_admin import envelope, superuser  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def test_the_envelope_page_reads_dollars_first_and_links_its_ids(
    superuser: Client,  # noqa: F811
    envelope: Envelope,  # noqa: F811
) -> None:
    html = superuser.get(
        reverse("admin:envelopes_envelope_change", args=[envelope.pk])
    ).content.decode()

    # Funded $15.00: dollars first, the micro-dollars in its title and beside it.
    assert 'title="15,000,000 micro-dollars">$15.00</span>' in html
    # The journal's "for" column links each leg to its row.
    leg = RefundLeg.objects.filter(operation__envelope=envelope).order_by("sequence").first()
    assert leg is not None
    refund_page = reverse("admin:envelopes_refundoperation_change", args=[leg.operation_id])
    journal = html[html.index('id="envelope-journal"') :]
    assert f'href="{refund_page}#leg-{leg.public_id}"' in journal
    # A refund leg's verification run is linked by its id.
    run = leg.verification_run
    assert run is not None
    run_page = reverse("admin:verification_verificationrun_change", args=[run.pk])
    assert f'href="{run_page}">{run.public_id}</a>' in html


def test_the_refund_page_reads_dollars_and_links_its_envelope(
    superuser: Client,  # noqa: F811
    envelope: Envelope,  # noqa: F811
) -> None:
    operation = envelope.refunds.get()
    html = superuser.get(
        reverse("admin:envelopes_refundoperation_change", args=[operation.pk])
    ).content.decode()

    requested = f"{operation.requested_micro:,}"
    assert f'title="{requested} micro-dollars">' in html
    assert f"{requested} micro (" not in html  # micro-dollars first, dollars in brackets: gone
    envelope_page = reverse("admin:envelopes_envelope_change", args=[envelope.pk])
    assert f'href="{envelope_page}">{envelope.public_id}</a>' in html
