"""API throttles (DRF), counted in Django's `default` cache so that every worker process shares
one count. Each rate is named in the setting VOUCH_THROTTLE_RATES (`"<n>/<s|min|hour|day>"`; no
rate, or an empty one, turns that throttle off), read on every request. A refused request is
429 `rate_limited` with `Retry-After` (core.api.exception_handler); it runs nothing and stores
nothing under an Idempotency-Key, since throttles are checked before the view runs (after
authentication and permissions, so they never tell whether an id exists).

- `user`: every authenticated request of one user, however authenticated.
- `token`: every request made with one API token (a user's tokens count apart).
- `money`: unsafe requests of one user on the routes that move money or file disputes (views
  list `MONEY_MOVING` as their throttles): creation and top-up, refund, debit, dispute writes."""

import time
from typing import Any

from django.conf import settings
from django.core.cache import caches
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from core.cache import RedisCache

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """`"30/min"` -> (30, 60): requests allowed, and the window in seconds (s, min, hour, day:
    the first letter counts, as in DRF)."""
    num, period = rate.split("/")
    return int(num), _PERIODS[period.strip()[0]]


def window_count(*, scope: str, ident: Any, rate: str, count: int = 1) -> float | None:
    """Count `count` requests of `ident` in `scope`'s fixed window of `rate` (`"<n>/<period>"`),
    in the shared cache; None if the window's count is within the rate, else the seconds to the
    window's end. Refused requests count too. Every per-window limit of Vouch counts here: the
    API throttles, MCP tool calls (agents/mcp/limits.py) and refund requests
    (agents/services.py).

    On Redis (core.cache.RedisCache) one round trip: the counter is made with its expiry and
    incremented in one MULTI/EXEC. Elsewhere (the file cache of a local run) the cache's `add`
    then its atomic `incr`."""
    return window_counts([(scope, ident, rate)], count=count)[0]


def window_counts(windows: list[tuple[str, Any, str]], *, count: int = 1) -> list[float | None]:
    """`window_count` for each (scope, ident, rate), all in one round trip on Redis."""
    now = time.time()
    counters = []
    for scope, ident, rate in windows:
        allowed, window_s = parse_rate(rate)
        window = int(now // window_s)
        counters.append((throttle_cache_key(scope, ident, window), allowed, window, window_s))
    backend = caches["default"]
    if isinstance(backend, RedisCache):
        totals = backend.incr_expiring_many(
            [(key, count, window_s + 1) for key, _, _, window_s in counters]
        )
    else:
        totals = [_count_generic(backend, key, count, window_s) for key, _, _, window_s in counters]
    return [
        None if total <= allowed else (window + 1) * window_s - now
        for total, (_, allowed, window, window_s) in zip(totals, counters, strict=True)
    ]


def _count_generic(backend: Any, key: str, count: int, window_s: int) -> int:
    backend.add(key, 0, timeout=window_s + 1)
    try:
        return int(backend.incr(key, count))
    except ValueError:  # expired between add and incr
        backend.add(key, count, timeout=window_s + 1)
        return count


class _WindowThrottle(BaseThrottle):
    """At most n requests per fixed window of the scope's rate, counted by `window_count` (one
    round trip on Redis, whatever the rate; no list of timestamps that grows with the traffic).
    At a window's edge a client may pass up to 2n in a short span; Retry-After is the time to the
    window's end, when the count starts again. Requests refused count too: hammering while
    refused does not shorten the wait, nor lengthen it."""

    scope = ""
    wait_s: float | None = None

    def ident(self, request: Request) -> Any:
        """What the count is kept for; None: this throttle does not apply."""
        raise NotImplementedError

    def allow_request(self, request: Request, view: Any) -> bool:
        rate: str | None = dict(settings.VOUCH_THROTTLE_RATES).get(self.scope)
        if not rate:
            return True
        ident = self.ident(request)
        if ident is None:
            return True
        self.wait_s = window_count(scope=self.scope, ident=ident, rate=rate)
        return self.wait_s is None

    def wait(self) -> float | None:
        return self.wait_s


def _authenticated_pk(request: Request) -> Any:
    user = request.user
    return user.pk if user and user.is_authenticated else None


class UserThrottle(_WindowThrottle):
    scope = "user"

    def ident(self, request: Request) -> Any:
        return _authenticated_pk(request)  # anonymous: refused by authentication before this


class TokenThrottle(_WindowThrottle):
    scope = "token"

    def ident(self, request: Request) -> Any:
        return getattr(request.auth, "pk", None)  # an ApiToken; None for a session


class MoneyThrottle(_WindowThrottle):
    scope = "money"

    def ident(self, request: Request) -> Any:
        return None if request.method in SAFE_METHODS else _authenticated_pk(request)


class MoneyMovingThrottle(BaseThrottle):
    """`UserThrottle`, `TokenThrottle` and `MoneyThrottle` at once: each counted as on its own,
    in one round trip to the cache (each request of a money route counts in all three that
    apply); refused if any is over its rate, with the longest wait."""

    throttles: tuple[type[_WindowThrottle], ...] = (UserThrottle, TokenThrottle, MoneyThrottle)
    wait_s: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        rates = dict(settings.VOUCH_THROTTLE_RATES)
        windows = []
        for throttle in self.throttles:
            rate = rates.get(throttle.scope)
            ident = throttle().ident(request) if rate else None
            if rate and ident is not None:
                windows.append((throttle.scope, ident, rate))
        waits = [wait for wait in window_counts(windows) if wait is not None] if windows else []
        self.wait_s = max(waits, default=None)
        return self.wait_s is None

    def wait(self) -> float | None:
        return self.wait_s


# The throttles of a view that moves money (its reads count as any other request).
MONEY_MOVING = [MoneyMovingThrottle]


def throttle_cache_key(scope: str, ident: Any, window: int) -> str:
    return f"throttle:{scope}:{ident}:{window}"
