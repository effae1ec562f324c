"""API throttles (issue 12, finding 5): per user, per API token, and stricter on the routes that
move money; over a rate, 429 `rate_limited` with Retry-After in the error envelope, having run
and stored nothing. Counted in the default cache. Rates are per hour here, so that no test
straddles a window's edge."""

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis
import stripe
from django.core.cache import cache, caches
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from accounts.models import User
from accounts.services import api_token_issue
from core.api.throttling import MoneyThrottle, parse_rate, throttle_cache_key, window_count
from core.cache import RedisCache
from core.models import IdempotencyRecord
from envelopes.models import Envelope
from tests.drivers.api import Api

pytestmark = pytest.mark.django_db


def _rates(settings: Any, **rates: str) -> None:
    settings.VOUCH_THROTTLE_RATES = {"user": "", "token": "", "money": "", **rates}


def _forget(settings: Any, scope: str, ident: Any) -> None:
    """The window passes: drop the current count (never cache.clear(): the cache is shared)."""
    _, window_s = parse_rate(settings.VOUCH_THROTTLE_RATES[scope])
    cache.delete(throttle_cache_key(scope, ident, int(time.time() // window_s)))


def _assert_rate_limited(response: Any) -> None:
    assert response.status_code == 429, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["success"] is False
    assert body["error"]["code"] == "rate_limited"
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= 3600
    assert body["error"]["details"] == {"retry_after_s": retry_after}


def test_a_money_route_over_its_rate_is_429_and_changes_nothing(
    settings: Any,
    alice: Api,
    bob: Api,
    sdk: stripe.StripeClient,
) -> None:
    _rates(settings, user="1000/hour", money="2/hour")
    for api in (alice, bob):
        _forget(settings, "money", api.user.pk)
        _forget(settings, "user", api.user.pk)
    envelope = alice.create(10_000_000)["envelope_id"]
    refund = f"/api/v1/escrow/envelopes/{envelope}/refund"
    assert alice.post(refund, {"amount_micro": 1_000_000}, key="r-1").status_code == 200

    refused = alice.post(refund, {"amount_micro": 2_000_000}, key="r-2")
    _assert_rate_limited(refused)
    # Every money route of this user shares the count, on both prefixes.
    _assert_rate_limited(
        alice.post(
            f"/api/escrow/envelopes/{envelope}/top-ups",
            {"amount_micro": 1_000_000, "payment_method": "pm_card_visa"},
        )
    )
    _assert_rate_limited(
        alice.post("/api/v1/escrow/envelopes", {"amount_micro": 1, "payment_method": "pm_x"})
    )
    # Nothing ran, nothing was kept under the key: one refund, at the provider as in the ledger.
    assert not IdempotencyRecord.objects.filter(key="r-2").exists()
    assert len(sdk.refunds.list().data) == 1
    # Reads are not money: the envelope still answers, unchanged.
    state = alice.get(f"/api/v1/escrow/envelopes/{envelope}")
    assert state.status_code == 200
    assert state.json()["data"]["total_refunded_micro"] == 1_000_000
    # Per user: another buyer moves money meanwhile.
    assert bob.create(5_000_000)["total_funded_micro"] == 5_000_000

    # The window passes: the same key runs afresh (the 429 was never stored to be replayed).
    _forget(settings, "money", alice.user.pk)
    retried = alice.post(refund, {"amount_micro": 2_000_000}, key="r-2")
    assert retried.status_code == 200, retried.content
    assert "Idempotent-Replayed" not in retried
    assert retried.json()["data"]["refunded_micro"] == 2_000_000
    assert len(sdk.refunds.list().data) == 2


def test_throttles_count_per_token_and_per_user(settings: Any, db: None) -> None:
    _rates(settings, user="4/hour", token="2/hour", money="1000/hour")
    ann = User.objects.create_user("ann", "ann@example.com", "ann-password-1")
    ben = User.objects.create_user("ben", "ben@example.com", "ben-password-1")
    first, raw_first = api_token_issue(user=ann, name="one")
    second, raw_second = api_token_issue(user=ann, name="two")
    for scope, ident in [("user", ann.pk), ("user", ben.pk), ("token", first.pk),
                         ("token", second.pk)]:  # fmt: skip
        _forget(settings, scope, ident)

    def by_token(raw: str, path: str = "/api/v1/me") -> Any:
        return APIClient().get(path, HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert by_token(raw_first).status_code == 200
    assert by_token(raw_first, "/api/me").status_code == 200
    _assert_rate_limited(by_token(raw_first))  # over the first token's 2 (ann's 3rd: refused
    # requests count too, so hammering does not shorten the wait)
    assert by_token(raw_second).status_code == 200  # another token: ann's 4th request
    _assert_rate_limited(by_token(raw_second))  # over ann's 4 (user), whatever the token
    session = APIClient()
    session.force_login(ann)
    _assert_rate_limited(session.get("/api/v1/me"))  # ... and by session
    other = APIClient()
    other.force_login(ben)
    assert other.get("/api/v1/me").status_code == 200  # another user is not throttled


def test_an_anonymous_or_forbidden_request_is_refused_before_it_counts(
    settings: Any, db: None
) -> None:
    _rates(settings, user="1/hour", money="1/hour")
    cy = User.objects.create_user("cy", "cy@example.com", "cy-password-1")
    _forget(settings, "user", cy.pk)
    _forget(settings, "money", cy.pk)
    client = APIClient()
    client.force_login(cy)
    for _ in range(3):  # not staff: 403 each time, never 429, and nothing counted
        assert client.post("/api/v1/disputes", {}, format="json").status_code == 403
    assert client.get("/api/v1/me").status_code == 200
    assert APIClient().get("/api/v1/me").status_code in (401, 403)


def _api_views() -> list[tuple[str, Any]]:
    found = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                view = getattr(entry.callback, "cls", None)
                if view is not None and (prefix + str(entry.pattern)).startswith("api/v1/"):
                    found.append((prefix + str(entry.pattern), view))

    walk(get_resolver().url_patterns, "")
    return found


def test_every_api_route_that_writes_is_throttled_as_money() -> None:
    views = _api_views()
    writers = [
        (path, view)
        for path, view in views
        if any(hasattr(view, m) for m in ("post", "put", "patch", "delete"))
    ]
    assert len(writers) >= 6
    for path, view in writers:
        counted = [t for c in view.throttle_classes for t in getattr(c, "throttles", (c,))]
        assert MoneyThrottle in counted, path


def _window_key(scope: str, ident: Any, rate: str) -> str:
    _, window_s = parse_rate(rate)
    return throttle_cache_key(scope, ident, int(time.time() // window_s))


def _redis_sends(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every command (or MULTI/EXEC pipeline) sent to Redis from now on, each one round trip."""
    sent: list[bytes] = []
    real_send = redis.connection.AbstractConnection.send_packed_command

    def counting_send(self: Any, command: Any, check_health: bool = True) -> None:
        sent.append(command if isinstance(command, bytes) else b"".join(map(bytes, command)))
        real_send(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting_send)
    return sent


def test_a_window_count_on_redis_is_one_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15: `add` then `incr` (EXISTS, INCRBY) made three round trips per count, for each
    of a money request's throttles; one MULTI/EXEC now, whatever the count."""
    assert isinstance(caches["default"], RedisCache)
    ident = uuid.uuid4().hex
    window_count(scope="warm-up", ident=ident, rate="10/hour")  # the connection is made
    sent = _redis_sends(monkeypatch)
    try:
        assert window_count(scope="trips", ident=ident, rate="2/hour") is None
        assert window_count(scope="trips", ident=ident, rate="2/hour") is None
        wait = window_count(scope="trips", ident=ident, rate="2/hour")
        assert len(sent) == 3
        assert wait is not None
        assert 0 < wait <= 3600
    finally:
        monkeypatch.undo()
        cache.delete_many(
            [_window_key("warm-up", ident, "10/hour"), _window_key("trips", ident, "2/hour")]
        )


def test_a_money_request_counts_its_three_windows_in_one_round_trip(
    settings: Any, alice: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 15: the user, token and money windows of a money request were counted one after
    another (two round trips for a session, three for a token); one MULTI/EXEC now, each window
    still counted, the request refused by the one over its rate."""
    _rates(settings, user="1000/hour", token="1000/hour", money="1/hour")
    envelope_id = alice.create(5_000_000)["envelope_id"]  # the money window's first request
    sent = _redis_sends(monkeypatch)
    response = alice.post(f"/api/v1/escrow/envelopes/{envelope_id}/refund", {})
    monkeypatch.undo()

    _assert_rate_limited(response)
    assert len([command for command in sent if b"throttle:" in command]) == 1
    assert cache.get(_window_key("user", alice.user.pk, "1000/hour")) == 2
    assert cache.get(_window_key("money", alice.user.pk, "1/hour")) == 2
    assert Envelope.objects.get(public_id=envelope_id).total_refunded_micro == 0
    for scope, rate in (("user", "1000/hour"), ("money", "1/hour")):
        cache.delete(_window_key(scope, alice.user.pk, rate))


def test_a_window_counter_on_redis_expires_with_its_window() -> None:
    ident = uuid.uuid4().hex
    key = _window_key("expiry", ident, "5/hour")
    try:
        assert window_count(scope="expiry", ident=ident, rate="5/hour", count=3) is None
        assert cache.get(key) == 3  # the same key the tests delete, prefix and version included
        backend = caches["default"]
        assert isinstance(backend, RedisCache)
        full_key = backend.make_and_validate_key(key)
        ttl = backend._cache.get_client(full_key).ttl(full_key)
        assert 0 < ttl <= 3601  # the window and a second
    finally:
        cache.delete(key)


@pytest.mark.parametrize("backend", ["redis", "locmem", "file"])
def test_a_window_counts_every_request_and_refuses_past_its_rate(
    settings: Any, tmp_path: Path, backend: str
) -> None:
    """The same count on Redis and on the generic path (`add` then `incr`: the file cache of a
    local run, or any other)."""
    if backend == "locmem":
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    elif backend == "file":
        settings.CACHES = {
            "default": {
                "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                "LOCATION": str(tmp_path),
            }
        }
    assert isinstance(caches["default"], RedisCache) is (backend == "redis")
    ident = uuid.uuid4().hex
    key = _window_key("semantics", ident, "3/hour")
    try:
        assert window_count(scope="semantics", ident=ident, rate="3/hour", count=2) is None
        assert window_count(scope="semantics", ident=ident, rate="3/hour") is None
        before = time.time()
        wait = window_count(scope="semantics", ident=ident, rate="3/hour")  # the 4th
        assert wait is not None
        assert 0 < wait <= 3600
        assert before + wait == pytest.approx((int(before // 3600) + 1) * 3600, abs=1)
        assert window_count(scope="semantics", ident=ident, rate="3/hour") is not None
        assert cache.get(key) == 5  # refused requests count too
        # Another ident, or another scope, counts apart.
        assert window_count(scope="semantics", ident=f"{ident}-2", rate="3/hour") is None
        assert window_count(scope="other", ident=ident, rate="3/hour") is None
    finally:
        cache.delete_many(
            [
                key,
                _window_key("semantics", f"{ident}-2", "3/hour"),
                _window_key("other", ident, "3/hour"),
            ]
        )
