"""The shared cache's Redis backend (core/cache.py, issue 15): Django's RedisCache with one
`redis.Redis` client per connection pool, not one per cache call, and still a working cache. Each
test makes its own backend over the test run's Redis database and key prefix, and deletes what it
wrote (never `clear()`: the database is shared)."""

import threading
import time
import uuid
from typing import Any

import pytest
import redis
from django.conf import settings
from django.core.cache import caches

from core.cache import RedisCache


@pytest.fixture
def redis_inits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per `redis.Redis` built from now on (the real constructor runs)."""
    made: list[int] = []
    real_init = redis.Redis.__init__

    def counting_init(self: redis.Redis, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting_init)
    return made


def _backend(location: str | None = None) -> RedisCache:
    params = dict(settings.CACHES["default"])
    params["KEY_PREFIX"] = f"{params.get('KEY_PREFIX', '')}:test-cache:{uuid.uuid4().hex}"
    return RedisCache(location or params["LOCATION"], params)


def test_the_default_cache_is_this_backend() -> None:
    assert settings.CACHES["default"]["BACKEND"] == "core.cache.RedisCache"
    assert isinstance(caches["default"], RedisCache)


def test_one_client_for_every_call_over_one_pool(redis_inits: list[int]) -> None:
    cache = _backend()
    try:
        cache.set("a", {"x": 1}, 30)
        assert cache.get("a") == {"x": 1}
        assert cache.add("a", "other", 30) is False
        assert cache.add("n", 5, 30) is True
        assert cache.incr("n", 2) == 7
        assert cache.get_many(["a", "n", "missing"]) == {"a": {"x": 1}, "n": 7}
        cache.set_many({"b": 1, "c": "two"}, 30)
        assert cache.has_key("c")
        assert cache.touch("b", 60) is True
        assert cache.incr_expiring("w", 3, 30) == 3
        assert cache.delete("a") is True
        assert cache.delete("a") is False
        cache.delete_many(["b", "c", "n", "w"])
        assert cache.get("b") is None
    finally:
        cache.delete_many(["a", "b", "c", "n", "w"])
    # One server: reads and writes share one pool, hence one client for some twenty calls
    # (Django's own client makes one per call).
    assert len(redis_inits) == 1


def test_one_client_per_pool_with_a_replica(redis_inits: list[int]) -> None:
    """With a replica listed, reads take its pool and writes the first's: two pools, two
    clients, however many calls."""
    location = settings.CACHES["default"]["LOCATION"]
    cache = _backend(f"{location},{location}")
    try:
        for i in range(5):
            cache.set(f"k{i}", i, 30)
            assert cache.get(f"k{i}") == i
    finally:
        cache.delete_many([f"k{i}" for i in range(5)])
    assert len(redis_inits) == 2


def test_values_expire_and_missing_counters_refuse_incr() -> None:
    cache = _backend()
    try:
        cache.set("short", "v", 1)
        cache.set("zero", "v", 0)  # Django's contract: a zero timeout stores nothing
        assert cache.add("added", 1, 1) is True
        assert cache.get("short") == "v"
        assert cache.get("zero") is None
        with pytest.raises(ValueError, match="not found"):
            cache.incr("never-set")
        time.sleep(1.2)
        assert cache.get("short") is None
        assert cache.get("added") is None
        assert cache.add("added", 2, 30) is True  # expired: free again
        assert cache.get("added") == 2
    finally:
        cache.delete_many(["short", "zero", "added"])


def test_a_client_is_shared_by_threads_and_counts_every_increment() -> None:
    cache = _backend()
    cache.set("shared", 0, 30)
    try:

        def work() -> None:
            for _ in range(50):
                cache.incr("shared")
                cache.incr_expiring("expiring", 1, 30)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert cache.get("shared") == 400
        assert cache.get("expiring") == 400
    finally:
        cache.delete_many(["shared", "expiring"])


def test_incr_expiring_makes_the_key_with_its_expiry_and_keeps_it() -> None:
    cache = _backend()
    key = cache.make_and_validate_key("counter")
    client = cache._cache.get_client(key, write=True)
    try:
        assert cache.incr_expiring("counter", 2, 100) == 2
        first_ttl = client.ttl(key)
        assert 0 < first_ttl <= 100
        assert cache.incr_expiring("counter", 5, 1000) == 7  # the key keeps its first expiry
        assert 0 < client.ttl(key) <= first_ttl
        assert cache.get("counter") == 7
        for timeout in (None, 0):
            with pytest.raises(ValueError, match="positive timeout"):
                cache.incr_expiring("counter", 1, timeout)
    finally:
        cache.delete("counter")
