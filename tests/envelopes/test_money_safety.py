"""Money safety on PostgreSQL against the sandbox (SPEC §3, §14; acceptance 5): concurrency,
injected provider faults, a crash between the provider call and the record."""

import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import stripe
from django.core.management import call_command
from django.db import connection

from accounts.models import User
from envelopes import services
from envelopes.exceptions import (
    AmountExceedsUnspent,
    CardDeclined,
    InvalidAmount,
    NothingToRefund,
    ProviderUnavailable,
)
from envelopes.models import (
    MICRO_PER_CENT,
    Envelope,
    FundingLeg,
    LegOutcome,
    RefundLeg,
    RefundOperation,
)
from envelopes.selectors import ledger_breaches
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api

ROOT = Path(__file__).resolve().parents[2]


def assert_ledger_matches_the_provider(sandbox: SandboxControl) -> None:
    """check_ledger is clean and, per funding charge, what the ledger says is refunded equals what
    the sandbox holds."""
    assert ledger_breaches() == []
    charges = sandbox.state()["charges"]
    for funding in FundingLeg.objects.filter(status="succeeded"):
        held = charges[funding.charge_id]["amount_refunded"] * 10_000
        ours = funding.refunded_micro + sum(
            leg.amount_micro
            for leg in RefundLeg.objects.filter(funding_leg=funding, outcome=LegOutcome.UNKNOWN)
        )
        assert held == funding.refunded_micro or (held <= ours), (
            funding.charge_id,
            held,
            funding.refunded_micro,
        )
        assert held == funding.refunded_micro, (funding.charge_id, held, funding.refunded_micro)


def _funded(user: User, *amounts: int) -> Envelope:
    result = services.envelope_create(
        owner=user, amount_micro=amounts[0], payment_method="pm_card_visa"
    )
    for amount in amounts[1:]:
        services.envelope_top_up(
            envelope=result.envelope, amount_micro=amount, payment_method="pm_card_visa"
        )
    return Envelope.objects.get(pk=result.envelope.pk)


def _run_threads(count: int, work: Any) -> list[Any]:
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return results


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_refunds_never_exceed_the_unspent_balance(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope = _funded(alice.user, 10_000_000, 3_000_000, 2_000_000)
    # 50 x $0.70 asks for $35.00 of a $15.00 envelope; each spans legs at some point.
    results = _run_threads(
        50,
        lambda i: services.envelope_refund(
            envelope=envelope, actor=alice.user, amount_micro=700_000
        ),
    )
    succeeded = [r for r in results if isinstance(r, RefundOperation)]
    refused = [r for r in results if isinstance(r, AmountExceedsUnspent | NothingToRefund)]
    assert len(succeeded) + len(refused) == 50, [r for r in results if r not in succeeded + refused]
    assert len(succeeded) == 21  # $14.70 of $15.00; the 22nd would exceed what is left
    envelope.refresh_from_db()
    assert envelope.total_refunded_micro == 21 * 700_000
    assert envelope.unspent_micro == 300_000
    assert RefundLeg.objects.values("operation").distinct().count() == 21
    assert RefundLeg.objects.count() > 21  # some refunds spanned two funding legs
    assert_ledger_matches_the_provider(sandbox)


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_refunds_with_one_key_make_one_provider_refund_per_leg(
    alice: Api, sandbox: SandboxControl
) -> None:
    envelope = _funded(alice.user, 10_000_000, 3_000_000, 2_000_000)
    sandbox.add_fault(
        "/v1/refunds", "delay", method="POST", delay_ms=200
    )  # keep the first one running
    apis = [Api(alice.user) for _ in range(20)]
    responses = _run_threads(
        20,
        lambda i: apis[i].post(
            f"/api/v1/escrow/envelopes/{envelope.public_id}/refund", {}, key="one-key"
        ),
    )
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {200, 409}
    assert statuses.count(200) >= 1
    assert RefundOperation.objects.count() == 1
    legs = RefundLeg.objects.count()
    assert legs == 3
    assert sandbox.state()["counts"]["refunds"] == legs
    for r in responses:
        if r.status_code == 409:
            assert r.json()["error"]["code"] == "idempotency_key_in_use"
    replay = apis[0].post(
        f"/api/v1/escrow/envelopes/{envelope.public_id}/refund", {}, key="one-key"
    )
    assert replay["Idempotent-Replayed"] == "true"
    assert sandbox.state()["counts"]["refunds"] == legs
    assert_ledger_matches_the_provider(sandbox)


@pytest.mark.django_db(transaction=True)
def test_two_hundred_random_operations_under_provider_faults(
    alice: Api, staff_api: Api, sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    rng = random.Random(20261129)
    # About 20% of provider writes hit a fault (the first matching rule strikes).
    for route in ("/v1/refunds", "/v1/payment_intents"):
        sandbox.add_fault(route, "apply_then_drop", method="POST", probability=0.13)
        sandbox.add_fault(route, "server_error", method="POST", probability=0.05)
        sandbox.add_fault(route, "timeout", method="POST", probability=0.05, delay_ms=600)
    envelopes: list[Envelope] = []
    for step in range(200):
        choice = rng.random()
        try:
            if choice < 0.15 or not envelopes:
                amount = rng.randrange(100, 2_000) * 10_000
                result = services.envelope_create(
                    owner=alice.user, amount_micro=amount, payment_method="pm_card_visa"
                )
                envelopes.append(result.envelope)
            elif choice < 0.3:
                services.envelope_top_up(
                    envelope=rng.choice(envelopes),
                    amount_micro=rng.randrange(100, 1_000) * 10_000,
                    payment_method="pm_card_visa",
                )
            elif choice < 0.4:
                envelope = rng.choice(envelopes)
                envelope.refresh_from_db()
                if envelope.unspent_micro > 0:
                    services.debit_add(
                        envelope=envelope,
                        amount_micro=rng.randrange(1, envelope.unspent_micro + 1),
                        reference=f"job_{step}",
                        actor=staff_api.user,
                    )
            else:
                envelope = rng.choice(envelopes)
                envelope.refresh_from_db()
                amount = (
                    None
                    if rng.random() < 0.5
                    else rng.randrange(1, max(envelope.unspent_micro, 1) + 1)
                )
                try:
                    services.envelope_refund(
                        envelope=envelope, actor=alice.user, amount_micro=amount
                    )
                except InvalidAmount:  # less than a cent asked for: refused, nothing moved
                    assert amount is not None
                    assert amount < MICRO_PER_CENT, amount
        except (AmountExceedsUnspent, NothingToRefund, CardDeclined, ProviderUnavailable):
            pass
        assert ledger_breaches() == [], f"after step {step}"
    hits: dict[tuple[str, str], int] = {}
    for fault in sandbox.state()["faults"]:
        hits[(fault["path"], fault["kind"])] = fault["hits"]
    sandbox.clear_faults()
    for _ in range(3):  # the scheduled job resumes whatever is left unknown or pending
        services.stranded_resume(older_than_s=-1)
    assert not RefundLeg.objects.filter(
        outcome__in=[LegOutcome.RESERVED, LegOutcome.UNKNOWN]
    ).exists()
    assert not FundingLeg.objects.filter(status="pending").exists()
    assert_ledger_matches_the_provider(sandbox)
    assert hits[("/v1/refunds", "apply_then_drop")] >= 10, hits
    assert all(count > 0 for count in hits.values()), hits
    assert RefundLeg.objects.filter(outcome=LegOutcome.ACCEPTED).count() >= 30
    call_command("check_ledger")


def _crash_in_a_subprocess(envelope_id: str, username: str, point: str) -> int:
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": (
            f"postgres://{db['USER'] or 'postgres'}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
        ),
        "STRIPE_API_BASE": __import__("django.conf").conf.settings.STRIPE_API_BASE,
        "VOUCH_CRASH_AT": point,
    }
    code = (
        "import django; django.setup()\n"
        "from accounts.models import User\n"
        "from envelopes.models import Envelope\n"
        "from envelopes.services import envelope_refund\n"
        f"envelope_refund(envelope=Envelope.objects.get(public_id={envelope_id!r}), "
        f"actor=User.objects.get(username={username!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, timeout=120).returncode


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("point", ["refund_after_provider_call", "refund_after_reserve"])
def test_a_crash_resumes_without_a_second_refund(
    alice: Api, sandbox: SandboxControl, point: str
) -> None:
    envelope = _funded(alice.user, 10_000_000, 3_000_000)
    assert _crash_in_a_subprocess(envelope.public_id, "alice", point) == 86
    leg = RefundLeg.objects.get(sequence=1)
    assert leg.outcome == LegOutcome.RESERVED  # nothing recorded: the process died
    sent = 1 if point == "refund_after_provider_call" else 0
    assert sandbox.state()["counts"]["refunds"] == sent
    assert ledger_breaches() == []  # the money is reserved, the ledger still adds up
    services.stranded_resume(older_than_s=-1)  # a fresh process: the scheduled job
    assert set(RefundLeg.objects.values_list("outcome", flat=True)) == {LegOutcome.ACCEPTED}
    assert sandbox.state()["counts"]["refunds"] == RefundLeg.objects.count() == 2
    envelope.refresh_from_db()
    assert (envelope.total_refunded_micro, envelope.unspent_micro, envelope.reserved_micro) == (
        13_000_000,
        0,
        0,
    )
    assert_ledger_matches_the_provider(sandbox)
