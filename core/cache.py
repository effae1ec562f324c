"""The shared cache's Redis backend (CACHE_URL redis://, config/settings/base.py): Django's own,
with one `redis.Redis` client per connection pool instead of one per call, and a counter that
expires, counted in one round trip (the API throttles' windows, core/api/throttling.py)."""

from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient as DjangoRedisCacheClient
from redis import Redis


class RedisCacheClient(DjangoRedisCacheClient):
    """Django's client builds a `redis.Redis` on every cache call, and building one fills a
    case-insensitive dict of a few hundred response callbacks: several times per request, some 7%
    of a worker's CPU (issue 15). A `redis.Redis` over a pool holds no connection of its own (each
    command checks one out of the pool and returns it) and is thread-safe, so one per pool, made
    on first use, serves every later call. The pools stay Django's (one for writes, one per
    replica for reads)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Redis] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Redis:
        # Django's private pool lookup (absent from django-stubs): it makes each pool once.
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
        client = self._clients.get(id(pool))
        if client is None or client.connection_pool is not pool:
            # Two threads may both get here: each client works, the last one stays.
            client = self._clients[id(pool)] = Redis(connection_pool=pool)
        return client

    def incr_expiring(self, counters: list[tuple[str, int, int]]) -> list[int]:
        """For each (key, delta, timeout): add `delta` to the integer at `key`, made 0 with
        `timeout` seconds to live when absent: `SET key 0 EX timeout NX` and `INCRBY`, every
        counter in one MULTI/EXEC, one round trip. Atomic, so a key never exists without its
        expiry (INCRBY keeps it); a key that exists keeps its own. The new values."""
        pipe = self.get_client(counters[0][0], write=True).pipeline(transaction=True)
        for key, delta, timeout in counters:
            pipe.set(key, 0, ex=timeout, nx=True)
            pipe.incrby(key, delta)
        return [int(value) for value in pipe.execute()[1::2]]


class RedisCache(DjangoRedisCache):
    """Django's `RedisCache` over `RedisCacheClient` above (same keys, values and options)."""

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient

    def incr_expiring(
        self, key: str, delta: int = 1, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> int:
        """`delta` added to the counter at `key` (named as every other key of this cache: prefix,
        version), which is created at 0 to expire in `timeout` seconds if absent; the new value.
        One round trip (unlike `add` then `incr`: EXISTS and INCRBY, three). `timeout` must be
        positive: a counter that never expires, or one deleted at once, is no counter."""
        return self.incr_expiring_many([(key, delta, timeout)], version=version)[0]

    def incr_expiring_many(
        self, counters: list[tuple[str, int, Any]], version: int | None = None
    ) -> list[int]:
        """`incr_expiring` for each (key, delta, timeout), all in one round trip."""
        prepared = []
        for key, delta, timeout in counters:
            backend_timeout = self.get_backend_timeout(timeout)
            if not backend_timeout:
                raise ValueError(f"incr_expiring needs a positive timeout, not {timeout!r}.")
            full_key = self.make_and_validate_key(key, version=version)
            prepared.append((full_key, delta, int(backend_timeout)))
        if not prepared:
            return []
        client: RedisCacheClient = self._cache  # type: ignore[assignment]
        return client.incr_expiring(prepared)
