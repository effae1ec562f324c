import pytest
import stripe

from stripe_sandbox.client import SandboxControl

# Short read timeout, as SPEC §12 asks: the sandbox's `timeout` fault then costs little.
READ_TIMEOUT_S = 0.5


@pytest.fixture
def client(sandbox: SandboxControl) -> stripe.StripeClient:
    """The official SDK pointed at the sandbox, with no retries of its own."""
    return stripe.StripeClient(
        "sk_test_vouch_tests",
        base_addresses={"api": sandbox.url, "files": sandbox.url},
        http_client=stripe.RequestsClient(timeout=(2, READ_TIMEOUT_S)),
        max_network_retries=0,
    )
