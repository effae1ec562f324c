"""The one automatic correction for a recorded foreign refund (issue 24, item 4; SPEC §15.4):
callers noticing one failure at the same moment (the webhook, `charge.refunded`, reconciliation)
give it back once — the envelope lock and one release entry per adjustment. A test of its own
(a transactional database) so that the mutation runs of envelopes.adjustments stay fast."""

import threading
from typing import Any

import pytest
import stripe
from django.db import connection

from accounts.models import User
from envelopes import services
from stripe_sandbox.client import SandboxControl

from .conftest import Api
from .test_adjustments_provider_reads import (
    _assert_given_back_once,
    _person,
    _recorded_foreign_refund,
)


@pytest.fixture
def proposer(db: None) -> User:
    return _person("pia", "envelopes.add_adjustment")


@pytest.fixture
def approver(db: None) -> User:
    return _person("aron", "reconciliation.approve_adjustment", "envelopes.add_adjustment")


@pytest.mark.django_db(transaction=True)
def test_concurrent_callers_release_a_failed_foreign_refund_once(
    alice: Api,
    sandbox: SandboxControl,
    sdk: stripe.StripeClient,
    proposer: User,
    approver: User,
) -> None:
    envelope_id, funding, refund_id, adjustment = _recorded_foreign_refund(
        alice, sdk, proposer, approver
    )
    sandbox.set_refund_status(refund_id, "failed")
    failed = sdk.v1.refunds.retrieve(refund_id).to_dict()
    barrier = threading.Barrier(8)
    results: list[Any] = [None] * 8

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = services.foreign_refund_release(
                provider_refund=failed, source=f"caller {index}"
            )
        except BaseException as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results, key=repr) == [False] * 7 + [True], results
    _assert_given_back_once(envelope_id, funding, adjustment)
