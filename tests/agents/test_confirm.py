"""The refund request confirmation page (SPEC §16): a logged-in owner sees the refund the request
would make now and confirms it; only then does money move, as SPEC §3's refund under the
request's idempotency record. Anyone else gets the same 404 as an unknown id; a changed preview,
an expired or refused request move nothing; a confirmation that died after reserving is finished
by the next one (one refund at the provider); two at once make one refund."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.test import Client
from django.utils import timezone

from accounts.models import User
from agents import services
from agents.models import RefundRequest
from agents.selectors import preview_digest
from agents.services import refund_request_create, refund_request_get
from core.crash import CRASH_EXIT_STATUS
from core.models import AuditEvent, IdempotencyRecord
from envelopes.models import Envelope, RefundLeg, RefundOperation
from envelopes.selectors import ledger_breaches, refund_data
from stripe_sandbox.client import SandboxControl
from tests.crashes import ROOT, database_url
from tests.drivers.api import Api
from tests.helpers import wait_until

pytestmark = pytest.mark.django_db

ORIGIN = "http://testserver"


@pytest.fixture(autouse=True)
def _no_request_limit(settings: Any) -> None:
    settings.MCP_REFUND_REQUEST_RATE = ""


def propose(api: Api, envelope_id: str, amount: Any = None, *, key: str = "k-1") -> str:
    return refund_request_create(
        user=api.user,
        envelope_id=envelope_id,
        amount_micro=amount,
        idempotency_key=key,
        client_id="client-test",
        origin=ORIGIN,
    )["request_id"]


def page_url(request_id: str) -> str:
    return f"/escrow/refund-requests/{request_id}/"


def two_charge_envelope(api: Api) -> str:
    envelope_id = api.create(10_000_000)["envelope_id"]
    api.top_up(envelope_id, 3_000_000)
    return envelope_id


def provider_refunds(sandbox: SandboxControl) -> int:
    return int(sandbox.state()["counts"]["refunds"])


class Browser:
    """A person's browser session on the confirmation page: CSRF enforced, as a browser meets it."""

    def __init__(self, user: User) -> None:
        self.user = user
        self.client = Client(enforce_csrf_checks=True)
        self.client.force_login(user)

    def open(self, request_id: str) -> Any:
        return self.client.get(page_url(request_id))

    def form(self, request_id: str) -> dict[str, str]:
        """The Confirm form's fields, as the page rendered them."""
        html = self.open(request_id).content.decode()
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
        digest = re.search(r'name="preview_digest" value="([^"]*)"', html)
        assert csrf is not None, "the page has no Confirm form"
        assert digest is not None
        return {"csrfmiddlewaretoken": csrf.group(1), "preview_digest": digest.group(1)}

    def confirm(self, request_id: str, form: dict[str, str] | None = None) -> Any:
        """Press Confirm (on the form as rendered now, or on `form` as rendered earlier); the
        page the redirect leads to."""
        return self.client.post(page_url(request_id), form or self.form(request_id), follow=True)


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


# --- who may see it ------------------------------------------------------------------------------


def test_the_page_needs_a_login(alice: Api) -> None:
    request_id = propose(alice, alice.create(5_000_000)["envelope_id"])
    anonymous = Client(enforce_csrf_checks=True)
    for target in (request_id, "rrq_doesnotexist"):
        response = anonymous.get(page_url(target))
        assert response.status_code == 302
        assert response["Location"] == f"/accounts/login/?next={page_url(target)}"


def _without_date(response: Any) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower() != "date"}


def test_anyone_but_the_owner_gets_exactly_the_404_of_an_unknown_id(
    alice: Api, bob: Api, sandbox: SandboxControl
) -> None:
    alices = propose(alice, two_charge_envelope(alice))
    bobs = propose(bob, bob.create(5_000_000)["envelope_id"])
    stranger = Browser(bob.user)
    form = stranger.form(bobs)  # a valid CSRF token of bob's session
    answers = []
    for target in (alices, "rrq_doesnotexist", "rrq_" + "0" * 24):
        got = stranger.open(target)
        posted = stranger.client.post(page_url(target), form)
        answers.append(
            (
                got.status_code,
                got.content,
                _without_date(got),
                posted.status_code,
                posted.content,
                _without_date(posted),
            )
        )
    assert answers[0][0] == answers[0][3] == 404
    assert answers[0] == answers[1] == answers[2]
    assert alices not in answers[0][1].decode()
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == 0
    assert RefundRequest.objects.get(public_id=alices).status == RefundRequest.Status.PENDING


def test_a_confirmation_without_the_csrf_token_is_refused(alice: Api) -> None:
    request_id = propose(alice, alice.create(5_000_000)["envelope_id"])
    owner = Browser(alice.user)
    digest = owner.form(request_id)["preview_digest"]
    response = owner.client.post(page_url(request_id), {"preview_digest": digest})
    assert response.status_code == 403
    assert RefundOperation.objects.count() == 0


# --- what it shows -------------------------------------------------------------------------------


def test_the_page_shows_the_preview_its_expiry_and_a_confirm_form(alice: Api) -> None:
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id, 11_000_005)
    request = RefundRequest.objects.get()
    page = Browser(alice.user).open(request_id)
    assert page.status_code == 200
    body = text(page)
    assert "Confirm a refund" in body
    assert "$11.000005" in body  # what was asked, exactly
    assert "$3.00" in body  # the top-up's leg, first
    assert "$8.00" in body  # then the original's
    assert body.index("$3.00") < body.index("$8.00")
    assert "$11.00" in body  # the total
    assert "$0.000005 stays in the envelope" in body
    assert "waiting for your confirmation" in body
    expires = timezone.localtime(request.expires_at).strftime("%H:%M:%S")
    assert f"Expires at</dt><dd>{timezone.localtime(request.expires_at):%Y-%m-%d %H:%M:%S}" in body
    assert expires in body
    assert 'id="preview-changed"' not in body
    form = Browser(alice.user).form(request_id)
    assert form["preview_digest"] == preview_digest(request.preview)
    assert "Confirm refund of $11.00" in body


# --- confirming ----------------------------------------------------------------------------------


def test_the_page_names_the_assistant_as_registered_and_times_as_everywhere_else(
    alice: Api,
) -> None:
    """The person saw the client's name on the consent page: the confirmation page uses it too
    (not the opaque client id), and shows times in the one format of the site."""
    from tests.agents.oauth import client_register

    application = client_register(name="Alice's desktop assistant")
    envelope_id = two_charge_envelope(alice)
    request_id = refund_request_create(
        user=alice.user,
        envelope_id=envelope_id,
        amount_micro=None,
        idempotency_key="k-named",
        client_id=application.client_id,
        origin=ORIGIN,
    )["request_id"]
    body = text(Browser(alice.user).open(request_id))
    assert "Alice&#x27;s desktop assistant" in body
    assert application.client_id not in body
    expires = RefundRequest.objects.get(public_id=request_id).expires_at
    shown = body.replace("> <", "><")
    assert f"Expires at</dt><dd>{expires:%Y-%m-%d %H:%M:%S} UTC" in shown, shown[
        shown.find("Expires") :
    ][:80]


def test_confirming_runs_the_refund_at_the_provider_under_the_requests_key(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id, key="K")
    owner = Browser(alice.user)
    page = owner.confirm(request_id)
    assert page.status_code == 200
    assert page.redirect_chain == [(page_url(request_id), 302)]
    request = RefundRequest.objects.get()
    operation = RefundOperation.objects.get()
    assert request.status == RefundRequest.Status.CONFIRMED
    assert request.refund == operation
    assert request.confirmed_at is not None
    assert request.confirm_lease_until is None
    assert operation.requested_micro == 13_000_000
    assert sorted(RefundLeg.objects.values_list("amount_micro", flat=True)) == [
        3_000_000,
        10_000_000,
    ]
    assert provider_refunds(sandbox) == 2
    body = text(page)
    assert "Confirmed: the refund went to Stripe" in body
    assert 'data-refund-status="refunded"' in body
    for leg in RefundLeg.objects.all():
        assert leg.provider_refund_id in body
    assert 'name="preview_digest"' not in body  # nothing left to confirm
    assert 'href="/"' in body  # the way back
    # The refund ran under the request's idempotency record (surface mcp), which names it.
    record = IdempotencyRecord.objects.get(key="K")
    assert (record.surface, record.resource) == ("mcp", operation.public_id)
    got = refund_request_get(user=alice.user, request_id=request_id, origin=ORIGIN)
    assert got["status"] == "confirmed"
    assert got["refund"] == refund_data(operation)
    assert got["refund"]["status"] == "refunded"
    event = AuditEvent.objects.get(action="refund_request.confirm")
    assert (event.actor, event.target_id) == (alice.user, request_id)
    assert event.details["refund"] == operation.public_id
    assert event.details["outcome"] == "confirmed"
    # The key stays MCP's: REST refuses it and refunds nothing more.
    rest = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {}, key="K")
    assert rest.status_code == 422
    assert rest.json()["error"]["code"] == "idempotency_key_other_surface"
    assert RefundOperation.objects.count() == 1
    assert provider_refunds(sandbox) == 2
    envelope = Envelope.objects.get(public_id=envelope_id)
    assert (envelope.total_refunded_micro, envelope.unspent_micro) == (13_000_000, 0)
    assert ledger_breaches() == []


def test_confirming_twice_shows_the_refund_and_makes_no_other(
    alice: Api, sandbox: SandboxControl
) -> None:
    request_id = propose(alice, alice.create(5_000_000)["envelope_id"], 2_000_000)
    owner = Browser(alice.user)
    form = owner.form(request_id)
    owner.confirm(request_id, form)
    again = owner.confirm(request_id, form)  # the same form, sent again (a double click)
    assert "This request was confirmed before" in text(again)
    assert RefundOperation.objects.count() == 1
    assert provider_refunds(sandbox) == 1
    assert AuditEvent.objects.filter(action="refund_request.confirm").count() == 1


def test_a_changed_preview_moves_no_money_until_confirmed_again(
    alice: Api, staff_api: Api, sandbox: SandboxControl
) -> None:
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id)  # the whole unspent balance: $13
    owner = Browser(alice.user)
    shown = owner.form(request_id)
    debit = staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {"amount_micro": 4_000_000, "reference": "job-7"},
    )
    assert debit.status_code == 201, debit.content
    page = owner.confirm(request_id, shown)  # confirming what was shown before the debit
    body = text(page)
    assert "Nothing was refunded: the envelope changed" in body
    assert 'id="preview-changed"' in body  # differs from what the assistant was given
    assert "Confirm refund of $9.00" in body
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == 0
    assert RefundRequest.objects.get().status == RefundRequest.Status.PENDING
    confirmed = owner.confirm(request_id)  # what is shown now
    assert "Confirmed" in text(confirmed)
    operation = RefundOperation.objects.get()
    assert operation.requested_micro == 9_000_000
    # Newest first: the $3 top-up whole, then $6 of the original.
    assert sorted(RefundLeg.objects.values_list("amount_micro", flat=True)) == [
        3_000_000,
        6_000_000,
    ]
    assert provider_refunds(sandbox) == 2
    assert ledger_breaches() == []


def test_a_debit_landing_after_the_check_and_before_the_refund_moves_no_money(
    alice: Api, staff_api: Api, sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preview is checked without the envelope's lock; the refund takes the lock after. A
    debit between the two must not turn the confirmed $13 into an unconfirmed $9: the refund
    compares its allocation, under the lock, with the one the person confirmed, and refunds
    nothing if they differ."""
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id)  # the whole unspent balance: $13
    owner = Browser(alice.user)
    shown = owner.form(request_id)
    real_preview_now = services.selectors.preview_now

    debits: list[int] = []

    def preview_then_a_debit(request: RefundRequest) -> dict[str, Any]:
        preview = real_preview_now(request)  # what the person confirmed: matches the digest
        if debits:
            return preview
        debits.append(4_000_000)
        debit = staff_api.post(
            f"/api/v1/escrow/envelopes/{envelope_id}/debits",
            {"amount_micro": 4_000_000, "reference": "job-8"},
        )
        assert debit.status_code == 201, debit.content
        return preview

    monkeypatch.setattr(services.selectors, "preview_now", preview_then_a_debit)
    page = owner.confirm(request_id, shown)
    monkeypatch.setattr(services.selectors, "preview_now", real_preview_now)
    assert "Nothing was refunded: the envelope changed" in text(page)
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == 0
    request = RefundRequest.objects.get()
    assert request.status == RefundRequest.Status.PENDING
    assert request.confirm_lease_until is None  # the next confirmation may go at once
    assert "Confirmed" in text(owner.confirm(request_id))
    assert RefundOperation.objects.get().requested_micro == 9_000_000
    assert provider_refunds(sandbox) == 2
    assert ledger_breaches() == []


def test_an_expired_request_says_so_and_moves_nothing(alice: Api, sandbox: SandboxControl) -> None:
    request_id = propose(alice, alice.create(5_000_000)["envelope_id"])
    request = RefundRequest.objects.get()
    owner = Browser(alice.user)
    with time_machine.travel(request.expires_at - timedelta(seconds=1), tick=False):
        form = owner.form(request_id)  # still open, a second before
        assert "waiting for your confirmation" in text(owner.open(request_id))
    with time_machine.travel(request.expires_at, tick=False):
        page = owner.confirm(request_id, form)
        body = text(page)
        assert "Nothing was refunded: this request has expired" in body
        assert "Expired at" in body
        assert 'name="preview_digest"' not in body
        got = refund_request_get(user=alice.user, request_id=request_id, origin=ORIGIN)
        assert got["status"] == "expired"
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == 0


@pytest.mark.parametrize("cause", ["amount_exceeds_unspent", "nothing_to_refund"])
def test_a_refund_the_envelope_no_longer_allows_refuses_the_request(
    alice: Api, staff_api: Api, sandbox: SandboxControl, cause: str
) -> None:
    envelope_id = alice.create(5_000_000)["envelope_id"]
    request_id = propose(
        alice, envelope_id, 4_000_000 if cause == "amount_exceeds_unspent" else None
    )
    owner = Browser(alice.user)
    form = owner.form(request_id)
    staff_api.post(
        f"/api/v1/escrow/envelopes/{envelope_id}/debits",
        {
            "amount_micro": 5_000_000 if cause == "nothing_to_refund" else 2_000_000,
            "reference": "j",
        },
    )
    shown = text(owner.open(request_id))
    assert "cannot be confirmed as the envelope stands now" in shown
    assert cause in shown
    assert 'name="preview_digest"' not in shown
    page = owner.confirm(request_id, form)
    assert "Nothing was refunded: this request was refused" in text(page)
    assert cause in text(page)
    request = RefundRequest.objects.get()
    assert (request.status, request.refusal_code) == (RefundRequest.Status.REFUSED, cause)
    got = refund_request_get(user=alice.user, request_id=request_id, origin=ORIGIN)
    assert (got["status"], got["refusal_code"]) == ("refused", cause)
    event = AuditEvent.objects.get(action="refund_request.confirm")
    assert event.details == {"outcome": "refused", "code": cause, "envelope": envelope_id}
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == 0


def test_an_owner_whose_address_is_no_longer_verified_is_refused(
    alice: Api, sandbox: SandboxControl
) -> None:
    request_id = propose(alice, alice.create(5_000_000)["envelope_id"])
    owner = Browser(alice.user)
    form = owner.form(request_id)
    alice.user.emailaddress_set.update(verified=False)
    owner.confirm(request_id, form)
    request = RefundRequest.objects.get()
    assert (request.status, request.refusal_code) == ("refused", "email_unverified")
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == 0


# --- a confirmation that died, and two at once ---------------------------------------------------

_SCRIPT = """
import json, sys
import django
django.setup()
from django.test import Client
from accounts.models import User
spec = json.loads(sys.argv[1])
client = Client()
client.force_login(User.objects.get(username=spec["username"]))
response = client.post(spec["path"], {"preview_digest": spec["digest"]})
print(response.status_code)
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "point", ["refund_after_reserve", "refund_after_provider_call", "refund_after_record"]
)
def test_a_confirmation_that_died_is_finished_by_the_next_with_the_same_refund(
    alice: Api, sandbox: SandboxControl, point: str
) -> None:
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id)
    owner = Browser(alice.user)
    digest = owner.form(request_id)["preview_digest"]
    died = subprocess.run(
        [
            sys.executable,
            "-c",
            _SCRIPT,
            json.dumps({"username": "alice", "path": page_url(request_id), "digest": digest}),
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url(),
            "STRIPE_API_BASE": settings.STRIPE_API_BASE,
            "VOUCH_CRASH_AT": point,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == CRASH_EXIT_STATUS, died.stderr[-3000:]
    request = RefundRequest.objects.get()
    operation = RefundOperation.objects.get()  # reserved, and named by the request's record
    assert request.idempotency is not None
    assert request.idempotency.resource == operation.public_id
    assert request.status == RefundRequest.Status.PENDING
    assert request.confirm_lease_until is not None
    # While its lease holds, another confirmation starts nothing.
    page = owner.confirm(request_id)
    assert "being confirmed in another window" in text(page)
    # The lease lapsed (no process renews it): the next confirmation finishes the same refund.
    with time_machine.travel(request.confirm_lease_until + timedelta(seconds=1), tick=True):
        shown = text(owner.open(request_id))
        assert "did not finish" in shown
        page = owner.confirm(request_id)
    assert "Confirmed" in text(page)
    request.refresh_from_db()
    assert request.status == RefundRequest.Status.CONFIRMED
    assert request.refund == RefundOperation.objects.get() == operation
    assert RefundLeg.objects.count() == 2
    assert provider_refunds(sandbox) == 2  # one per leg: never a second refund
    assert refund_data(operation)["status"] == "refunded"
    assert AuditEvent.objects.get(action="refund_request.confirm").details["resumed"] is True
    assert ledger_breaches() == []


@pytest.mark.django_db(transaction=True)
def test_two_confirmations_at_once_make_one_refund(alice: Api, sandbox: SandboxControl) -> None:
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id)
    digest = preview_digest(RefundRequest.objects.get().preview)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def confirm() -> None:
        try:
            barrier.wait(timeout=10)
            outcomes.append(
                services.refund_request_confirm(
                    user=alice.user, request_id=request_id, shown_digest=digest
                ).outcome
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=confirm) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) in (
        ["confirmed", "in_progress"],
        ["already_confirmed", "confirmed"],
    ), outcomes
    assert RefundOperation.objects.count() == 1
    assert provider_refunds(sandbox) == 2
    assert ledger_breaches() == []


@pytest.mark.django_db(transaction=True)
def test_a_confirmation_while_another_is_at_the_provider_starts_nothing(
    alice: Api, sandbox: SandboxControl, settings: Any
) -> None:
    settings.STRIPE_READ_TIMEOUT_S = 5.0  # the slow answer must arrive, not time out
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id)
    digest = preview_digest(RefundRequest.objects.get().preview)
    sandbox.add_fault("/v1/refunds", "delay", method="POST", times=1, delay_ms=1500)
    results: dict[str, Any] = {}

    def first() -> None:
        try:
            results["first"] = services.refund_request_confirm(
                user=alice.user, request_id=request_id, shown_digest=digest
            )
        finally:
            connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    wait_until(
        lambda: IdempotencyRecord.objects.filter(resource__startswith="erf_").exists(),
        what="the first confirmation to reach the provider",
    )
    second = services.refund_request_confirm(
        user=alice.user, request_id=request_id, shown_digest=digest
    )
    thread.join(timeout=30)
    assert second.outcome == "in_progress"
    assert results["first"].outcome == "confirmed"
    assert sandbox.faults()[0]["hits"] == 1
    assert RefundOperation.objects.count() == 1
    assert provider_refunds(sandbox) == 2
    assert ledger_breaches() == []


@pytest.mark.parametrize(
    "digest",
    [None, "", "not-a-digest", "0" * 64, "x" * 100_000],
    ids=["missing", "empty", "wrong-type", "other-digest", "huge"],
)
def test_a_confirm_form_without_the_shown_digest_moves_no_money(
    alice: Api, sandbox: SandboxControl, digest: str | None
) -> None:
    """Bad input to Confirm: a missing, empty, malformed, foreign or huge digest is never the
    refund the person was shown: nothing is refunded and the request stays pending."""
    envelope_id = two_charge_envelope(alice)
    request_id = propose(alice, envelope_id)
    owner = Browser(alice.user)
    form = owner.form(request_id)
    if digest is None:
        del form["preview_digest"]
    else:
        form["preview_digest"] = digest
    page = owner.confirm(request_id, form)
    assert page.status_code == 200
    assert "Nothing was refunded" in text(page)
    assert RefundOperation.objects.count() == 0
    assert provider_refunds(sandbox) == 0
    assert RefundRequest.objects.get().status == RefundRequest.Status.PENDING


@pytest.mark.parametrize("request_id", ["rrq_" + "f" * 5000, "rrq_%00", "rrq_unknown", "1"])
def test_an_impossible_request_id_is_the_plain_404(alice: Api, request_id: str) -> None:
    """A huge, NUL-bearing, unknown or wrong-shaped id in the page's path: the same 404 as any
    unknown request, for reading and for confirming, and nothing changes."""
    owner = Client()  # CSRF is not what is tested here (test_confirm's other tests do)
    owner.force_login(alice.user)
    reference = owner.get(page_url("rrq_00000000000000000000000a"))
    posted = owner.post(page_url(request_id), {"preview_digest": "0" * 64})
    for response in (owner.get(page_url(request_id)), posted):
        assert response.status_code == 404
        if "%00" not in request_id:  # a NUL is refused before any route, site-wide
            assert response.content == reference.content
    assert RefundOperation.objects.count() == 0
