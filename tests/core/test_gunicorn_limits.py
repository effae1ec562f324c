"""Gunicorn hands long URLs and large headers on to Django (gunicorn.conf.py, which gunicorn reads
from the working directory: production and bench/refund_api.py start it in the repository root),
and Django answers them in the JSON error envelope (core.api.middleware.RequestLimitsMiddleware),
never with gunicorn's HTML 414/431 (issue 12, finding 7)."""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def gunicorn() -> Iterator[int]:
    """gunicorn as production starts it (no -c: ./gunicorn.conf.py is read from the working
    directory), on a free port, with the test settings. The requests below are answered before
    any database access."""
    port = _free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind",
         f"127.0.0.1:{port}", "--workers", "1", "--log-level", "warning"],
        cwd=ROOT, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, "gunicorn exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.2)
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        connection.close()


def _assert_envelope(answer: tuple[int, str, bytes], status: int, code: str) -> None:
    got_status, content_type, body = answer
    assert (got_status, content_type) == (status, "application/json"), body[:300]
    assert json.loads(body)["error"]["code"] == code


@pytest.mark.parametrize("prefix", ["/api/v1/", "/api/"])
def test_a_9_kb_url_is_a_json_414(gunicorn: int, prefix: str) -> None:
    _assert_envelope(_get(gunicorn, f"{prefix}me?q={'a' * 9 * 1024}"), 414, "uri_too_long")
    _assert_envelope(_get(gunicorn, f"{prefix}{'e' * 9 * 1024}"), 414, "uri_too_long")


@pytest.mark.parametrize("prefix", ["/api/v1/", "/api/"])
def test_a_10_kb_header_is_a_json_431(gunicorn: int, prefix: str) -> None:
    answer = _get(gunicorn, f"{prefix}me", {"X-Padding": "a" * 10 * 1024})
    _assert_envelope(answer, 431, "headers_too_large")


def test_too_many_headers_is_a_json_431(gunicorn: int) -> None:
    headers = {f"X-Field-{i}": "x" for i in range(150)}
    _assert_envelope(_get(gunicorn, "/api/v1/me", headers), 431, "headers_too_large")


def test_requests_within_the_limits_reach_the_api(gunicorn: int) -> None:
    status, content_type, body = _get(
        gunicorn, f"/api/v1/me?q={'a' * 4000}", {"X-Padding": "a" * 8000}
    )
    assert status in (401, 403)
    assert content_type == "application/json"
    assert json.loads(body)["error"]["code"] == "not_authenticated"


def test_pages_outside_the_api_keep_plain_errors(gunicorn: int) -> None:
    status, content_type, _ = _get(gunicorn, f"/accounts/login/?q={'a' * 9 * 1024}")
    assert status == 414
    assert not content_type.startswith("application/json")
