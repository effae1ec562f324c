"""The HTTP client under the SDK: sessions that do not re-read the environment on every call,
and a request without an answer named by its method and URL."""

from __future__ import annotations

import urllib.request
from typing import Any

import requests
import stripe


class _NoAnswer(stripe.APIConnectionError):
    """A request that got no answer (the connection refused, a timeout, the connection dropped),
    its message naming the request it was: `no answer from GET http://…/v1/charges/ch_…: …`. An
    operator pointed at the wrong address sees which one was called."""


def _no_answer_reason(cause: BaseException | None, timeout: tuple[float, float]) -> str:
    """What became of a request that got no answer, in a few words."""
    connect_s, read_s = timeout
    if isinstance(cause, requests.exceptions.ConnectTimeout):
        return f"the connection timed out (connect timeout {connect_s:g} s)"
    if isinstance(cause, requests.exceptions.ReadTimeout):
        return f"timed out waiting for the answer (read timeout {read_s:g} s)"
    if isinstance(cause, requests.exceptions.SSLError):
        return f"the TLS connection failed: {cause}"
    text = str(cause) if cause is not None else ""
    if "Connection refused" in text:
        return "connection refused (is the server running, on that port?)"
    if "RemoteDisconnected" in text or "Connection aborted" in text:
        return "the connection was closed without an answer"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "the host name does not resolve"
    return f"{type(cause).__name__}: {text}" if cause is not None else "no answer"


# The adapter identifies itself as Stripe asks integrations to (the SDK's app info, whose format
# this is: https://docs.stripe.com/building-plugins#setappinfo), on its own requests only:
# `stripe.set_app_info` would mark every SDK client of the process. It is also how the sandbox's
# conformance record tells the adapter's requests from anyone else's (SPEC §12.1).
APP_INFO = "Vouch/0.1.0 (https://github.com/vouch/vouch)"


class _RequestsClient(stripe.RequestsClient):
    """The SDK's `requests` client, whose per-thread sessions do not re-read proxy variables and
    ~/.netrc from the environment on every call (a quarter of a call's CPU here). The environment's
    proxy for Stripe, if any, is read once, when the client is made. A request that gets no answer
    raises `_NoAnswer`, naming its method and URL (the SDK's own message names neither). Every
    request's User-Agent ends with `APP_INFO`."""

    def __init__(self, *, timeout: tuple[float, float]) -> None:
        proxy = urllib.request.getproxies().get("https")
        super().__init__(timeout=timeout, proxy=proxy)
        self._timeouts = timeout

    def _request_internal(
        self, method: str, url: str, headers: Any, *args: Any, **kwargs: Any
    ) -> Any:
        headers = dict(headers or {})
        headers["User-Agent"] = f"{headers.get('User-Agent', '')} {APP_INFO}".strip()
        if getattr(self._thread_local, "session", None) is None:
            session = requests.Session()
            session.trust_env = False
            self._thread_local.session = session
        try:
            return super()._request_internal(method, url, headers, *args, **kwargs)
        except stripe.APIConnectionError as exc:
            # The URL without its query (a list's parameters are reported beside it).
            where = f"{method.upper()} {url.split('?', 1)[0]}"
            reason = _no_answer_reason(exc.__cause__, self._timeouts)
            raise _NoAnswer(
                f"no answer from {where}: {reason}", should_retry=exc.should_retry
            ) from exc
