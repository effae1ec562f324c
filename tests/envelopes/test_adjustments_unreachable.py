"""Issue 24, item 11 at the adjustment door: a correction whose provider read gets no answer is
refused (nothing changes), and what the person reads names the URL Vouch tried — so an operator
pointed at the wrong sandbox port sees which address was called."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.models import User
from envelopes.adjustments import adjustment_propose
from envelopes.exceptions import AdjustmentProviderUnreadable
from envelopes.models import Adjustment, LegOutcome, RefundLeg
from stripe_sandbox.client import SandboxControl
from tests.drivers.api import Api
from tests.helpers import free_port

from .test_adjustments_provider_reads import _never_made_refund, later, proposer

pytestmark = pytest.mark.django_db

__all__ = ["proposer"]


def test_a_correction_whose_read_gets_no_answer_names_the_url_it_tried(
    alice: Api, sandbox: SandboxControl, proposer: User, settings: Any
) -> None:
    _, leg = _never_made_refund(alice, sandbox)
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.STRIPE_API_BASE = nowhere
    with later(), pytest.raises(AdjustmentProviderUnreadable) as refused:
        adjustment_propose(actor=proposer, kind="leg_release", reason="x", refund_leg=leg)
    assert f"{nowhere}/v1/" in refused.value.message
    assert "nothing was changed" in refused.value.message
    assert refused.value.details == {"provider_code": "network_error"}
    assert not Adjustment.objects.exists()
    assert RefundLeg.objects.get().outcome == LegOutcome.UNKNOWN
