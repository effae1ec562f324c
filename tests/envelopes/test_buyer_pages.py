"""The buyer's own pages (SPEC §10.1, issue 27): their envelopes, one envelope with each leg's state
in words, and the refund form (dollars or everything, the LIFO preview, one key per form), against
the sandbox over HTTP. Owner only: another buyer's envelope is the same 404 as a missing one."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import pytest
from allauth.account.models import EmailAddress
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from core.api.throttling import throttle_cache_key
from core.idempotency import body_digest
from core.models import IdempotencyRecord
from envelopes.models import Envelope, RefundOperation
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db

KEY = re.compile(r'name="key" value="([^"]+)"')
EXPECTED = re.compile(r'name="expected" value="([^"]+)"')


def _page(api: Api, path: str) -> Any:
    return api.client.get(path)


def _text(response: Any) -> str:
    """The page's text, tags dropped and spaces folded (what a reader sees)."""
    page = response.content.decode()
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)).replace(" :", ":"))


def _post(api: Api, path: str, data: dict[str, str]) -> Any:
    return api.client.post(path, {"csrfmiddlewaretoken": api.csrf, **data})


def _form_key(api: Api, envelope_id: str) -> str:
    response = _page(api, f"/escrow/envelopes/{envelope_id}/refund/")
    assert response.status_code == 200
    return KEY.search(response.content.decode()).group(1)


def _preview(api: Api, envelope_id: str, key: str, amount: str | None) -> Any:
    data = {"key": key, "step": "preview", "choice": "everything"}
    if amount is not None:
        data.update(choice="amount", amount=amount)
    return _post(api, f"/escrow/envelopes/{envelope_id}/refund/", data)


def _confirm(api: Api, envelope_id: str, key: str, amount: str | None, expected: str) -> Any:
    data = {"key": key, "step": "confirm", "choice": "everything", "expected": expected}
    if amount is not None:
        data.update(choice="amount", amount=amount)
    return _post(api, f"/escrow/envelopes/{envelope_id}/refund/", data)


def _previewed(api: Api, envelope_id: str, amount: str | None) -> tuple[str, str, Any]:
    key = _form_key(api, envelope_id)
    preview = _preview(api, envelope_id, key, amount)
    assert preview.status_code == 200, preview.content
    expected = html.unescape(EXPECTED.search(preview.content.decode()).group(1))
    return key, expected, preview


def _fund(alice: Api) -> str:
    envelope_id = alice.create(10_000_000)["envelope_id"]  # $10.00
    alice.top_up(envelope_id, 3_000_000)  # $3.00
    return envelope_id


def test_signed_out_the_pages_ask_to_sign_in(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    for path in [
        "/escrow/envelopes/",
        f"/escrow/envelopes/{envelope_id}/",
        f"/escrow/envelopes/{envelope_id}/refund/",
    ]:
        response = Client().get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_the_list_shows_each_envelope_newest_first_with_its_balances_in_dollars(
    alice: Api, bob: Api, staff_api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = alice.create(5_000_000)["envelope_id"]
    second = alice.create(2_500_000)["envelope_id"]
    third = alice.create(1_000_000)["envelope_id"]
    staff_api.post(
        f"/api/v1/escrow/envelopes/{second}/debits", {"amount_micro": 1_250_000, "reference": "j1"}
    )
    bobs = bob.create(1_000_000)["envelope_id"]

    page = _page(alice, "/escrow/envelopes/").content.decode()
    ids = re.findall(r'data-envelope="(env_[0-9a-f]+)"', page)
    assert ids == [third, second, first]
    assert bobs not in page
    row = page[page.index(f'data-envelope="{second}"') :].split("</tr>")[0]
    cells = re.findall(r"\$[0-9,]+\.[0-9]{2}", row)
    assert cells == ["$2.50", "$1.25", "$0.00", "$1.25"]  # funded, debited, refunded, unspent
    assert "Stripe.js" in page  # funding stays API-only, and the page says so
    assert 'href="/escrow/assistants/"' in page
    assert 'href="/api/v1/docs/"' in page

    monkeypatch.setattr("envelopes.selectors.buyer.ENVELOPES_PER_PAGE", 2)
    one = _page(alice, "/escrow/envelopes/").content.decode()
    two = _page(alice, "/escrow/envelopes/?page=2").content.decode()
    assert re.findall(r'data-envelope="(env_[0-9a-f]+)"', one) == [third, second]
    assert re.findall(r'data-envelope="(env_[0-9a-f]+)"', two) == [first]
    assert "Page 1 of 2" in one
    assert 'href="?page=2"' in one
    assert 'href="?page=1"' in two


def test_the_envelope_page_shows_legs_debits_and_a_refund_in_words(
    alice: Api, staff_api: Api, sandbox: SandboxControl
) -> None:
    envelope_id = _fund(alice)
    staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": 1_000_000, "reference": "claim-42"},
    )
    charges = {
        leg["sequence"]: leg["charge"]
        for leg in alice.get(f"/api/v1/escrow/envelopes/{envelope_id}").json()["data"][
            "funding_legs"
        ]
    }
    sandbox.open_dispute(charges[2], reason="fraudulent")  # the top-up's refund will be refused
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    assert response.json()["data"]["status"] == "partially_refunded"

    page = _page(alice, f"/escrow/envelopes/{envelope_id}/")
    assert page.status_code == 200
    text = _text(page)
    source = page.content.decode()
    assert charges[1] in source
    assert charges[2] in source
    assert "original payment" in text
    assert "top-up #1" in text
    assert "claim-42" in text
    assert "$1.00" in text  # the debit
    # $12.00 of unspent money: $3.00 asked of the disputed top-up (refused, back), $9.00 of the
    # original (accepted).
    assert "Refused by Stripe: the payment is disputed" in text
    assert "The money is back in your envelope." in text
    assert 'data-leg-state="refused"' in source
    assert re.search(r'data-leg-state="(on_its_way|confirmed)"', source)
    assert 'data-refund-status="partially_refunded"' in source
    assert re.search(r'data-balance="unspent">\s*<strong><span[^>]*>\$3\.00<', source)
    assert re.search(r'data-balance="refunded">\s*<span[^>]*>\$9\.00<', source)


def test_another_buyers_envelope_is_the_same_404_as_a_missing_one(alice: Api, bob: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    missing = "env_000000000000000000000000"
    for suffix in ["", "refund/"]:
        theirs = _page(bob, f"/escrow/envelopes/{envelope_id}/{suffix}")
        nothing = _page(bob, f"/escrow/envelopes/{missing}/{suffix}")
        assert theirs.status_code == nothing.status_code == 404
        assert theirs.content == nothing.content
        assert envelope_id not in theirs.content.decode()
    # Posting the refund form at another buyer's envelope refunds nothing, and says nothing more.
    bob_key = _form_key(bob, bob.create(1_000_000)["envelope_id"])
    theirs = _confirm(bob, envelope_id, bob_key, None, "")
    nothing = _confirm(bob, missing, bob_key, None, "")
    assert theirs.status_code == nothing.status_code == 404
    assert theirs.content == nothing.content
    assert RefundOperation.objects.count() == 0
    assert _page(bob, "/escrow/envelopes/%00/").status_code == 404


def test_refund_part_then_the_rest_through_the_form(alice: Api, sandbox: SandboxControl) -> None:
    envelope_id = _fund(alice)
    # $4.00: last in, first out, so the $3.00 top-up first, then $1.00 of the original.
    key, expected, preview = _previewed(alice, envelope_id, "4")
    text = _text(preview)
    assert "Total refunded $4.00" in text
    assert text.index("top-up #1") < text.index("original payment")
    assert 'id="preview-total">$4.00<' in preview.content.decode()
    assert RefundOperation.objects.count() == 0  # a preview moves nothing

    done = _confirm(alice, envelope_id, key, "4", expected)
    assert done.status_code == 302
    refund = RefundOperation.objects.get()
    assert done["Location"] == f"/escrow/envelopes/{envelope_id}/#refund-{refund.public_id}"
    assert refund.requested_micro == 4_000_000
    page = alice.client.get(done["Location"])
    assert "Refund of $4.00 sent" in _text(page)
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 9_000_000

    # The rest: "everything unspent", on a new form (a new key).
    key2, expected2, preview2 = _previewed(alice, envelope_id, None)
    assert key2 != key
    assert 'id="preview-total">$9.00<' in preview2.content.decode()
    assert _confirm(alice, envelope_id, key2, None, expected2).status_code == 302
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert envelope.unspent_micro == 0
    assert envelope.total_refunded_micro == 13_000_000
    assert sandbox.state()["counts"]["refunds"] == 3  # $3 + $1, then $9
    assert ledger_breaches() == []
    # Nothing is left: the envelope page offers no refund, and the form says why.
    assert "Nothing to refund" in _text(_page(alice, f"/escrow/envelopes/{envelope_id}/"))
    assert "Nothing to refund" in _text(_page(alice, f"/escrow/envelopes/{envelope_id}/refund/"))


def test_a_form_sent_twice_refunds_once(alice: Api, sandbox: SandboxControl) -> None:
    envelope_id = _fund(alice)
    key, expected, _ = _previewed(alice, envelope_id, "2.50")
    first = _confirm(alice, envelope_id, key, "2.50", expected)
    second = _confirm(alice, envelope_id, key, "2.50", expected)
    assert first.status_code == second.status_code == 302
    assert first["Location"] == second["Location"]  # the same refund
    assert RefundOperation.objects.count() == 1
    assert sandbox.state()["counts"]["refunds"] == 1
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 10_500_000
    page = _text(alice.client.get(second["Location"]))
    assert "This form was sent already; nothing was refunded twice." in page


@pytest.mark.parametrize(
    ("amount", "words"),
    [
        ("ten", "Enter the amount in dollars, as a number such as 12.50."),
        ("0", "A refund is at least one cent ($0.01)."),
        ("0.001", "A refund is at least one cent ($0.01)."),
        ("1.234", "Enter whole cents: at most two digits after the decimal point."),
        ("-5", "Enter the amount in dollars, as a number such as 12.50."),
        ("1e3", "Enter the amount in dollars, as a number such as 12.50."),
        ("99999999", "A refund is at most $5,000.00."),
        ("13.01", "That is more than the envelope's unspent balance ($13.00)."),
    ],
)
def test_every_refusal_of_the_amount_is_said_in_words(alice: Api, amount: str, words: str) -> None:
    envelope_id = _fund(alice)
    key = _form_key(alice, envelope_id)
    for response in [
        _preview(alice, envelope_id, key, amount),
        _confirm(alice, envelope_id, key, amount, ""),
    ]:
        assert response.status_code == 422
        assert words in _text(response)
        assert 'role="alert"' in response.content.decode()
        assert f'value="{key}"' in response.content.decode()  # the same form, corrected
    assert RefundOperation.objects.count() == 0


def test_a_change_between_preview_and_confirm_refunds_nothing_and_shows_the_new_preview(
    alice: Api, staff_api: Api, sandbox: SandboxControl
) -> None:
    envelope_id = _fund(alice)
    key, expected, _ = _previewed(alice, envelope_id, None)  # everything: $13.00
    staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": 2_000_000, "reference": "late-claim"},
    )
    response = _confirm(alice, envelope_id, key, None, expected)
    assert response.status_code == 422
    text = _text(response)
    assert "Nothing was refunded: the envelope changed since the preview was shown" in text
    assert 'id="preview-total">$11.00<' in response.content.decode()
    assert RefundOperation.objects.count() == 0
    assert sandbox.state()["counts"]["refunds"] == 0
    # Confirming the new preview, on the same form, refunds.
    fresh = html.unescape(EXPECTED.search(response.content.decode()).group(1))
    assert _confirm(alice, envelope_id, key, None, fresh).status_code == 302
    assert RefundOperation.objects.get().requested_micro == 11_000_000


def test_nothing_to_refund_and_an_unverified_address_are_said_in_words(alice: Api) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    key, expected, _ = _previewed(alice, envelope_id, None)
    assert _confirm(alice, envelope_id, key, None, expected).status_code == 302
    # A form left open in another tab, previewed again now that nothing is left.
    again = _preview(alice, envelope_id, "an-old-form", None)
    assert again.status_code == 422
    assert "Nothing can be refunded: the envelope has no unspent money" in _text(again)

    other = alice.create(2_000_000)["envelope_id"]
    EmailAddress.objects.filter(user=alice.user).update(verified=False)
    refused = _preview(alice, other, _form_key(alice, other), None)
    assert refused.status_code == 422
    assert "moving money needs a verified e-mail address" in _text(refused)
    assert RefundOperation.objects.filter(envelope__public_id=other).count() == 0


def test_a_form_without_its_key_refunds_nothing(alice: Api) -> None:
    envelope_id = _fund(alice)
    _, expected, _ = _previewed(alice, envelope_id, None)
    response = _confirm(alice, envelope_id, "", None, expected)
    assert response.status_code == 422
    assert "the form was incomplete" in _text(response)
    assert RefundOperation.objects.count() == 0


def test_the_form_needs_its_csrf_token(alice: Api) -> None:
    envelope_id = _fund(alice)
    key, expected, _ = _previewed(alice, envelope_id, None)
    response = alice.client.post(
        f"/escrow/envelopes/{envelope_id}/refund/",
        {"key": key, "step": "confirm", "choice": "everything", "expected": expected},
    )
    assert response.status_code == 403
    assert RefundOperation.objects.count() == 0


def test_the_site_has_an_icon(db: None) -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert b"<svg" in response.content
    assert '<link rel="icon" href="/favicon.ico"' in Client().get("/").content.decode()


def test_a_second_sending_while_the_first_is_at_stripe_refunds_nothing(alice: Api) -> None:
    """The first sending of the form still holds its key (its lease is live): the second is told
    so and sent to the envelope, where the first's refund appears; it refunds nothing itself."""
    envelope_id = _fund(alice)
    key, expected, _ = _previewed(alice, envelope_id, None)
    IdempotencyRecord.objects.create(
        user=alice.user,
        key=key,
        operation=f"envelope.refund:{envelope_id}",
        surface="web",
        request_digest=body_digest({"amount_micro": None, "expected": expected}),
        lease_until=timezone.now() + timedelta(minutes=5),
    )
    response = _confirm(alice, envelope_id, key, None, expected)
    assert response.status_code == 302
    assert response["Location"] == f"/escrow/envelopes/{envelope_id}/"
    page = _text(alice.client.get(response["Location"]))
    assert "This form was sent twice: the first is still at Stripe, and only it refunds." in page
    assert RefundOperation.objects.count() == 0
    assert Envelope.objects.get(public_id=envelope_id).unspent_micro == 13_000_000


def test_the_refund_form_counts_in_the_money_limit_the_api_counts_in(
    alice: Api, sandbox: SandboxControl, settings: Any
) -> None:
    """The form moves money as the REST refund does, so it counts in the same per-person `money`
    window (VOUCH_THROTTLE_RATES): over it, the page says when to try again and refunds nothing."""

    envelope_id = _fund(alice)
    settings.VOUCH_THROTTLE_RATES = {**settings.VOUCH_THROTTLE_RATES, "money": "1/hour"}
    user_pk = Envelope.objects.get(public_id=envelope_id).owner_id
    window = int(timezone.now().timestamp() // 3600)
    cache.delete(throttle_cache_key("money", user_pk, window))  # never cache.clear(): shared
    key, expected, _ = _previewed(alice, envelope_id, "1.00")
    assert _confirm(alice, envelope_id, key, "1.00", expected).status_code == 302
    key, expected, _ = _previewed(alice, envelope_id, "2.00")
    refused = _confirm(alice, envelope_id, key, "2.00", expected)
    assert refused.status_code == 429
    assert "Nothing was refunded: too many refunds in a short time" in _text(refused)
    assert RefundOperation.objects.count() == 1
    assert sandbox.state()["counts"]["refunds"] == 1
    cache.delete(throttle_cache_key("money", user_pk, window))
