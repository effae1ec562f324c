"""Stripe's rate limits as Vouch's budgets (providers/stripe_provider/limits.py, core.budget),
through the real adapter against the sandbox over HTTP, whose limits are set to the same figures:
paced by the budgets, Vouch's calls are never refused; a call with no room sends nothing; a 429
holds off what it names; a not-sent readback is no evidence (docs/decisions/0018)."""

import contextlib
import inspect
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import stripe
from django.db import connections
from django.test import TestCase
from django.utils import timezone

from core.budget import CallBudget, budget_wait, slots_penalize
from core.models import ProviderCallBudget
from providers import Outcome, OutcomeKind, StripeProvider
from providers.stripe_provider import Limits, RetryPolicy, limits_from_settings
from providers.stripe_provider import limits as limits_module
from providers.stripe_provider.limits import ENDPOINTS, LOCAL_OPERATIONS, endpoint_of
from stripe_sandbox.client import SandboxControl
from tests.helpers import paid_charge
from tests.verification.conftest import Refunds
from verification.models import Escalation, VerificationRun
from verification.services import run_attempt, runs_claim_due

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk_test_vouch_tests"


def _provider(sandbox: SandboxControl, limits: Limits | None) -> StripeProvider:
    return StripeProvider(
        api_key=KEY,
        api_base=sandbox.url,
        connect_timeout_s=2,
        read_timeout_s=2,
        retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05),
        limits=limits,
    )


@pytest.fixture
def sdk(sandbox: SandboxControl, settings: Any) -> stripe.StripeClient:
    """The SDK on the sandbox; the app's settings point at the same sandbox."""
    settings.STRIPE_API_BASE = sandbox.url
    return stripe.StripeClient(KEY, base_addresses={"api": sandbox.url}, max_network_retries=0)


@pytest.fixture
def refunds(sdk: stripe.StripeClient) -> Refunds:
    from providers import provider_from_settings

    return Refunds(sdk, provider_from_settings())


@pytest.fixture
def sandbox_limits(sandbox: SandboxControl) -> Iterator[Any]:
    """Set the sandbox's enforced limits for a test; put back what they were after it. The
    budgets' rows start empty and are removed after: slots another test reserved under the same
    names (`stripe:global` at a few a second) would otherwise decide what this one reads."""
    ProviderCallBudget.objects.all().delete()
    before = sandbox.call("GET", "rate-limits")

    def set_limits(**figures: int) -> dict[str, Any]:
        return sandbox.call("POST", "rate-limits", {"enabled": True, **figures})

    yield set_limits
    sandbox.call("POST", "rate-limits", {"enabled": before["enabled"], **before["limits"]})
    ProviderCallBudget.objects.all().delete()


def test_every_operation_of_the_adapter_names_its_endpoint() -> None:
    operations = {
        name
        for name, member in inspect.getmembers(StripeProvider)
        if not name.startswith("_") and inspect.isfunction(member)
    }
    assert operations - LOCAL_OPERATIONS == set(ENDPOINTS)
    assert endpoint_of("list_pages", "charges") == "GET /v1/charges"
    assert endpoint_of("refund_read") == "GET /v1/refunds/{id}"
    limits = Limits(global_rps=25)
    assert [b.name for b in limits.budgets_for("GET /v1/payment_intents/search")] == [
        "stripe:global",
        "stripe:search",
    ]
    assert [b.per_second for b in limits.budgets_for("POST /v1/files")] == [25, 20]


def test_limits_from_settings_follow_the_keys_mode(settings: Any) -> None:
    settings.STRIPE_RATE_LIMITS = "auto"
    settings.STRIPE_GLOBAL_RPS = None
    settings.STRIPE_API_KEY = "sk_test_x"
    assert limits_from_settings(settings) == Limits(global_rps=25)
    settings.STRIPE_API_KEY = "rk_live_x"
    assert limits_from_settings(settings) == Limits(global_rps=100)
    settings.STRIPE_GLOBAL_RPS = 40.0
    assert limits_from_settings(settings) == Limits(global_rps=40)
    settings.STRIPE_RATE_LIMITS = "off"
    assert limits_from_settings(settings) is None
    settings.STRIPE_RATE_LIMITS = "sometimes"
    with pytest.raises(ValueError, match='"auto" or "off"'):
        limits_from_settings(settings)


def test_refund_creations_paced_by_the_budgets_get_no_429(
    sandbox: SandboxControl, sdk: stripe.StripeClient, sandbox_limits: Any
) -> None:
    charges = [paid_charge(sdk, 100_000) for _ in range(4)]
    # The sandbox refuses past 4 refunds a second (8 calls in all); Vouch's budgets are the same.
    sandbox_limits(endpoint_rps=4, global_rps_sandbox=8)
    provider = _provider(sandbox, Limits(global_rps=8, endpoint_rps=4))
    outcomes: list[Outcome] = []

    def refund(charge: str, n: int) -> None:
        try:
            with budget_wait(30):
                for i in range(n):
                    outcomes.append(
                        provider.refund_create(
                            charge=charge,
                            amount_cents=1,
                            idempotency_key=f"erf_rate:{charge}:{i}",
                            metadata={},
                        )
                    )
        finally:
            connections.close_all()

    threads = [threading.Thread(target=refund, args=(charge, 4)) for charge in charges]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(outcomes) == 16
    assert [(o.kind, o.attempts, o.sent) for o in outcomes] == [
        (OutcomeKind.ACCEPTED, 1, True)
    ] * 16
    limiter = sandbox.call("GET", "rate-limits")
    assert limiter["refused"]["total"] == 0
    per_second = limiter["served"]["POST /v1/refunds"]
    assert sum(per_second.values()) == 16
    # Spaced a quarter second apart; a whole calendar second can still count one more, when a
    # slot taken at its very end reaches the sandbox in the next (Stripe's token bucket allows
    # that, and refused none above): never a second's worth more.
    assert max(per_second.values()) <= 5


def test_a_write_with_no_room_sends_nothing(
    sandbox: SandboxControl, sdk: stripe.StripeClient
) -> None:
    charge = paid_charge(sdk)
    provider = _provider(sandbox, Limits(global_rps=25))
    slots_penalize([CallBudget("stripe:POST /v1/refunds", 25)], 60)
    with budget_wait(0.2):
        outcome = provider.refund_create(
            charge=charge, amount_cents=100, idempotency_key="erf_full:leg_1", metadata={}
        )
    assert outcome.not_sent
    assert (outcome.kind, outcome.error_code, outcome.attempts) == (
        OutcomeKind.UNKNOWN,
        "budget_full",
        0,
    )
    assert outcome.idempotency_key == "erf_full:leg_1"
    assert "POST /v1/refunds" in (outcome.error_message or "")
    assert sandbox.state()["charges"][charge]["refunds"] == 0  # Stripe holds no refund
    assert sdk.v1.refunds.list(params={"charge": charge}).data == []


def test_limits_off_write_nothing(sandbox: SandboxControl, sdk: stripe.StripeClient) -> None:
    charge = paid_charge(sdk)
    assert _provider(sandbox, None).charge_read(charge).accepted
    assert not ProviderCallBudget.objects.exists()


def test_a_429_holds_off_the_budget_it_names(
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    sandbox_limits: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    penalized: list[tuple[list[str], float]] = []
    real = limits_module.slots_penalize

    def watched(budgets: Any, seconds: float) -> None:  # the real one, its arguments kept
        penalized.append(([b.name for b in budgets], seconds))
        real(budgets, seconds)

    monkeypatch.setattr(limits_module, "slots_penalize", watched)
    charge = paid_charge(sdk, 100_000)
    sandbox_limits(endpoint_rps=1)  # Stripe's endpoint limit at 1; Vouch's budgets far above it
    provider = _provider(sandbox, Limits(global_rps=1000, endpoint_rps=1000))
    asked_at = time.time()
    done: dict[str, Outcome] = {}

    def second_refund() -> None:
        # The bucket's one token, taken by someone else just before (it may have refilled while
        # a loaded machine started this thread): Vouch's call then finds none, whatever the pace.
        with contextlib.suppress(stripe.RateLimitError):
            sdk.v1.refunds.create(params={"charge": charge, "amount": 1})
        try:
            with budget_wait(10):
                done["second"] = provider.refund_create(
                    charge=charge, amount_cents=1, idempotency_key="erf_429:2", metadata={}
                )
        finally:
            connections.close_all()

    with budget_wait(10):
        first = provider.refund_create(
            charge=charge, amount_cents=1, idempotency_key="erf_429:1", metadata={}
        )
    thread = threading.Thread(target=second_refund)
    thread.start()
    while not ProviderCallBudget.objects.filter(
        name="stripe:POST /v1/refunds", next_slot_at__gte=asked_at + 1.0
    ).exists():
        assert thread.is_alive()
        time.sleep(0.01)
    # The penalty names the refunds' endpoint, not the global budget (an endpoint-rate 429).
    # (The global's row is not compared: the retry then reserves its slot at the penalty's end
    # on both budgets at once, so a read of it races the retry.)
    held = ProviderCallBudget.objects.get(name="stripe:POST /v1/refunds").next_slot_at
    assert held >= asked_at + 1.0
    assert [names for names, _ in penalized] == [["stripe:POST /v1/refunds"]]
    assert penalized[0][1] >= 1.0
    thread.join(timeout=30)
    second = done["second"]
    assert (first.accepted, first.attempts) == (True, 1)
    # Refused once (endpoint-rate), held off by the endpoint's budget, then accepted.
    assert (second.accepted, second.attempts) == (True, 2)
    limiter = sandbox.call("GET", "rate-limits")
    assert set(limiter["refused"]["by_reason"]) == {"endpoint-rate"}


def test_a_not_sent_readback_is_no_evidence(
    refunds: Refunds, settings: Any, sandbox: SandboxControl
) -> None:
    run = refunds.make(refunds.charge())
    settings.STRIPE_RATE_LIMITS = "auto"  # the verifier's provider now takes from the budgets
    slots_penalize([CallBudget("stripe:GET /v1/refunds/{id}", 25)], 60)

    def attempt() -> VerificationRun:
        VerificationRun.objects.filter(pk=run.pk).update(next_attempt_at=timezone.now())
        token = dict(runs_claim_due(limit=10))[run.pk]
        with budget_wait(0.2), TestCase.captureOnCommitCallbacks(execute=True):
            run_attempt(run_id=run.pk, token=token, trigger="poll")
        return VerificationRun.objects.get(pk=run.pk)

    held = attempt()
    observed = {o.channel: o.data for o in held.attempts.get().observations.all()}
    assert observed["refund_readback"] == {"found": False, "error": "budget_full"}
    assert held.verdict == "PENDING"  # no verdict from it, not "not found"
    assert held.next_attempt_at is not None  # read again later
    assert held.next_attempt_at > timezone.now()
    assert not Escalation.objects.exists()

    ProviderCallBudget.objects.all().delete()  # room again
    assert attempt().verdict == "VERIFIED"
