"""Issue 24 (every provider error names what it tried): a `charge.dispute.*` event whose dispute
cannot be read raises, so the event is retried, with a message that carries the provider's own
message (which, for a network error, names the URL tried), not its code alone."""

from __future__ import annotations

import pytest

from disputes import services
from providers import provider_from_settings
from stripe_sandbox.client import SandboxControl
from tests.drivers.disputes import World

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_dispute_event_whose_read_fails_says_the_providers_message(
    world: World, stripe_at_sandbox: SandboxControl
) -> None:
    world.fund()
    dispute_id = world.dispute(reason="fraudulent").provider_dispute_id
    stripe_at_sandbox.add_fault(
        f"/v1/disputes/{dispute_id}", "refuse", method="GET", error_code="resource_missing"
    )
    read = provider_from_settings().dispute_read(dispute_id)
    assert read.refused
    assert read.error_message
    event = {"type": "charge.dispute.updated", "data": {"object": {"id": dispute_id}}}
    with pytest.raises(RuntimeError) as failed:
        services.dispute_on_provider_event(event=event)
    assert f"dispute {dispute_id} could not be read: resource_missing" in str(failed.value)
    assert read.error_message in str(failed.value)
