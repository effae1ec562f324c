"""Every provider id links to the Stripe Dashboard, on the test or live path by the key's mode."""

import pytest

from core.dashboard import stripe_dashboard_url, stripe_link


@pytest.mark.parametrize(
    ("provider_id", "path"),
    [
        ("ch_123", "payments/ch_123"),
        ("pi_123", "payments/pi_123"),
        ("re_123", "refunds/re_123"),
        ("pyr_123", "refunds/pyr_123"),
        ("dp_123", "disputes/dp_123"),
        ("evt_123", "events/evt_123"),
    ],
)
def test_a_test_key_links_to_the_test_dashboard(settings, provider_id, path):
    settings.STRIPE_API_KEY = "sk_test_abc"
    assert stripe_dashboard_url(provider_id) == f"https://dashboard.stripe.com/test/{path}"


def test_a_live_key_links_to_the_live_dashboard(settings):
    settings.STRIPE_API_KEY = "sk_live_abc"
    assert stripe_dashboard_url("re_9") == "https://dashboard.stripe.com/refunds/re_9"
    settings.STRIPE_API_KEY = "rk_live_abc"
    assert stripe_dashboard_url("ch_9") == "https://dashboard.stripe.com/payments/ch_9"


def test_an_id_that_is_not_stripes_is_text_not_a_link(settings):
    settings.STRIPE_API_KEY = "sk_test_abc"
    assert stripe_dashboard_url("env_123") is None
    assert stripe_dashboard_url("") is None
    assert "href" not in stripe_link("env_<b>")
    assert "&lt;b&gt;" in stripe_link("env_<b>")
    assert 'href="https://dashboard.stripe.com/test/refunds/re_1"' in stripe_link("re_1")
