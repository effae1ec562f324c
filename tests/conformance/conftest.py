import pytest
import stripe

from stripe_sandbox.client import SandboxControl


@pytest.fixture
def stripe_client(sandbox: SandboxControl, monkeypatch: pytest.MonkeyPatch) -> stripe.StripeClient:
    """The official SDK pointed at the sandbox, no retries, and never taken for the adapter: the
    SDK's app info is global, and would put an app's name in this client's User-Agent too."""
    monkeypatch.setattr(stripe, "app_info", None)
    return stripe.StripeClient(
        "sk_test_conformance",
        base_addresses={"api": sandbox.url, "files": sandbox.url},
        http_client=stripe.RequestsClient(timeout=(2, 2)),
        max_network_retries=0,
    )
